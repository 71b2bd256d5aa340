"""Matching by signature, not prose (semantics §11).

`rule_matches` is the one match decision: replay case selection, the corpus gate, the corpus
page and the rule tool all ask it (or `matching_trajectories`, its indexed twin for stored
trajectories, which must agree with it on every input — tests/services/test_matching.py checks that
exhaustively).

- Failure-mode match: every failure-mode atom of the rule (`tool:`, `action:`, `error:`, any
  non-notice key) is among the trajectory's atoms.
- Notice fallback, only for a rule without failure-mode atoms: the trajectory's notice atoms
  intersect the rule's notice atoms plus breach/stall/regression on its declared metric family.
- A rule with neither matches nothing: an empty rule is not a rule that fires everywhere.

Words never enter into it: `action:git.push` + `error:non_fast_forward` does not match a
successful `git status` run however much prose the two share.
"""

from collections.abc import Iterable, Sequence

from django.db import connection
from django.db.models import F, QuerySet

from . import atoms as atom_lib
from .metrics import Registry, load_registry
from .models import Rule, Trajectory, TrajectoryAtom


def notice_targets(
    *, rule_signature: Iterable[str], rule_metric: str, family: frozenset[str]
) -> frozenset[str]:
    """The notice atoms a rule without failure-mode atoms fires on: its own notice atoms plus
    any of breach:/stall:/regression: on its declared metric's family."""
    family = family or (frozenset({rule_metric}) if rule_metric else frozenset())
    return atom_lib.notice_atoms(rule_signature) | atom_lib.family_notice_atoms(family)


def rule_matches(
    *,
    rule_signature: list[str],
    rule_metric: str,
    trajectory_atoms: Iterable[str],
    family: frozenset[str],
) -> bool:
    """Does a rule fire on a trajectory whose atoms (signature ∪ notices) are given? semantics §11.

    `family` is the declared metric's family (the metric plus its aliases); when empty and a
    metric is declared, the metric alone is its family."""
    present = frozenset(trajectory_atoms)
    failure_mode = atom_lib.failure_mode_atoms(rule_signature)
    if failure_mode:
        return failure_mode <= present
    targets = notice_targets(rule_signature=rule_signature, rule_metric=rule_metric, family=family)
    return bool(targets & atom_lib.notice_atoms(present))


def rule_family(rule: Rule, registry: Registry | None = None) -> frozenset[str]:
    """The rule's declared metric family (empty without a metric)."""
    if not rule.metric:
        return frozenset()
    return (registry if registry is not None else load_registry()).family(rule.metric)


def rule_matches_atoms(
    rule: Rule, trajectory_atoms: Iterable[str], *, family: frozenset[str]
) -> bool:
    """`rule_matches` for a stored rule."""
    return rule_matches(
        rule_signature=list(rule.signature),
        rule_metric=rule.metric,
        trajectory_atoms=trajectory_atoms,
        family=family,
    )


def matching_trajectories(
    rule: Rule,
    *,
    kinds: Iterable[str] | None = None,
    replayable: bool | None = None,
    registry: Registry | None = None,
) -> QuerySet[Trajectory]:
    """The stored trajectories `rule_matches` says the rule fires on, as one indexed query.

    A failure-mode match is an intersection of per-atom posting lists. On PostgreSQL that is
    `signature @> '[atoms]'` on the GIN index of migration 0003 (failure-mode atoms only ever
    live in the signature: notices are notice atoms); elsewhere each atom is one semi-join on
    the (atom, trajectory) index of TrajectoryAtom. The notice fallback is one `atom IN (…)`
    semi-join on TrajectoryAtom everywhere, since notices live in two fields.

    Unordered on purpose: the model's default ordering by id would force PostgreSQL into a
    merge join along the whole primary key; callers order for their purpose (replay: newest
    first)."""
    failure_mode = sorted(atom_lib.failure_mode_atoms(rule.signature))
    trajectories = Trajectory.objects.order_by()
    if failure_mode and connection.vendor == "postgresql":
        trajectories = trajectories.filter(signature__contains=failure_mode)
    elif failure_mode:
        for atom in failure_mode:
            trajectories = trajectories.filter(
                pk__in=TrajectoryAtom.objects.filter(atom=atom).values("trajectory_id")
            )
    else:
        targets = notice_targets(
            rule_signature=rule.signature,
            rule_metric=rule.metric,
            family=rule_family(rule, registry),
        )
        if not targets:
            return Trajectory.objects.none()
        trajectories = trajectories.filter(
            pk__in=TrajectoryAtom.objects.filter(atom__in=sorted(targets)).values("trajectory_id")
        )
    if kinds is not None:
        trajectories = trajectories.filter(kind__in=list(kinds))
    if replayable is not None:
        trajectories = trajectories.filter(replayable=replayable)
    return trajectories


UNION_BATCH = 200

# Newest first, as replay selects cases (semantics §7.1); an undated trajectory comes last.
NEWEST_FIRST = (F("started_at").desc(nulls_last=True), "-id")


def newest_matching_ids(
    rules: Sequence[Rule],
    *,
    kinds: Iterable[str] | None = None,
    replayable: bool | None = None,
    limit: int,
    registry: Registry | None = None,
) -> dict[str, list[str]]:
    """rule id → the ids of its `limit` newest matching trajectories, for many rules at once:
    each rule's own `matching_trajectories` query, newest first and limited, sent together as
    one UNION ALL statement (per `UNION_BATCH` rules). Same answer as asking rule by rule, one
    round trip instead of one per rule. A rule's ids come back in no particular order."""
    found: dict[str, list[str]] = {rule.id: [] for rule in rules}
    if limit <= 0:
        return found
    registry = registry or load_registry()
    kinds = list(kinds) if kinds is not None else None
    # SQLite allows 500 terms in a compound SELECT.
    for start in range(0, len(rules), UNION_BATCH):
        parts, params = [], []
        for rule in rules[start : start + UNION_BATCH]:
            query = matching_trajectories(
                rule, kinds=kinds, replayable=replayable, registry=registry
            )
            if query.query.is_empty():
                continue
            newest = query.order_by(*NEWEST_FIRST).values_list("id")[:limit]
            sql, query_params = newest.query.sql_with_params()
            parts.append(f"SELECT %s, q.id FROM ({sql}) q")
            params += [rule.id, *query_params]
        if not parts:
            continue
        with connection.cursor() as cursor:
            cursor.execute(" UNION ALL ".join(parts), params)
            for rule_id, trajectory_id in cursor.fetchall():
                found[rule_id].append(trajectory_id)
    return found
