"""Forward-trial baseline (semantics §8) as a pure function over plain data."""

from collections.abc import Iterable

from .atoms import family_notice_atoms


def baseline(
    reports: Iterable[tuple[str, list[str]]], family: frozenset[str] | set[str]
) -> tuple[float, int, int]:
    """(rate, sessions, hits) over reports that carried any notice.

    `reports` are (session_id, notices) of the last `baseline_window` such reports. The rate is
    the fraction of distinct sessions whose notices hit the metric family; for a rule with no
    metric (empty family) any notice hits. With no such history the baseline is 1.0 (semantics §8):
    a new kind of rule cannot promote on an imagined improvement over nothing.
    """
    hit_atoms = family_notice_atoms(family)
    sessions: set[str] = set()
    hits: set[str] = set()
    for session_id, notices in reports:
        if not notices:
            continue
        sessions.add(session_id)
        if not family or hit_atoms.intersection(notices):
            hits.add(session_id)
    if not sessions:
        return 1.0, 0, 0
    return len(hits) / len(sessions), len(sessions), len(hits)
