"""Forward-trial enrolment and counts (semantics §8).

A report costs the same with a hundred candidates in force or ten thousand: each rule keeps the
number of sessions enrolled in its trial (`Rule.trial_sessions`, kept by database triggers),
so enrolment reads only the candidates still short of sessions, through a partial index, and
the session's earlier enrolments, through the session index. On PostgreSQL that is ONE
statement per session (for a report alone, terms of the one statement that takes the report
in: `enrol_terms`, replay/intake.py); SQLite, which has no writing WITH, takes two.

`enrol_report` is the rule itself as a plain function over plain data; the SQL path is tested
against it on generated report sequences.
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models import Count, Q

from lifecycle.atoms import family_notice_atoms, notice_metric
from lifecycle.metrics import load_registry
from lifecycle.models import Report, Rule, RuleState, TrialEnrolment

from .engine import Trial


def notice_metrics(notices: Iterable[str]) -> list[str]:
    """The metrics a session's notices are on, once each."""
    return sorted({metric for metric in map(notice_metric, notices) if metric})


def _hit_names(notices: Iterable[str], registry) -> list[str]:
    """Every metric name (with its aliases) a session's notices hit: a rule whose metric is
    among them showed its target condition (semantics §8)."""
    names: set[str] = set()
    for metric in notice_metrics(notices):
        names |= registry.family(metric)
    return sorted(names)


def _in(column: str, values: list[str]) -> tuple[str, list]:
    if not values:
        return "1 = 0", []
    return f"{column} IN ({', '.join(['%s'] * len(values))})", list(values)


Enrolments = dict[tuple[str, str], tuple[bool, bool]]


def enrol_report(
    enrolments: Mapping[tuple[str, str], tuple[bool, bool]],
    *,
    candidates: Mapping[str, frozenset[str]],
    session_id: str,
    notices: Iterable[str],
    rules_read: Iterable[str],
    min_sessions: int,
) -> Enrolments:
    """The enrolment rule of semantics §8 for one report, over plain data.

    `enrolments` maps (rule id, session id) to (breached, read the candidate); `candidates`
    maps each candidate in force to its metric family (empty for a rule with no metric).
    Every report, healthy or not, enrols its session in each candidate's trial while fewer
    than `min_sessions` distinct sessions are enrolled, recording whether it showed the target
    condition (a notice on the family; any notice for a rule with no metric); a session
    already enrolled can still flip to breached, or to having read the candidate."""
    notices, read = set(notices), set(rules_read)
    enrolled = Counter(rule_id for rule_id, _ in enrolments)
    out = dict(enrolments)
    for rule_id, family in candidates.items():
        shows = bool(family_notice_atoms(family) & notices) if family else bool(notices)
        key = (rule_id, session_id)
        if key in out:
            breached, was_read = out[key]
            out[key] = (breached or shows, was_read or rule_id in read)
        elif enrolled[rule_id] < min_sessions:
            out[key] = (shows, rule_id in read)
    return out


def _sessions(reports: list[Report]) -> dict[str, dict]:
    """The reports' sessions in the order of their first report, each with every notice and
    every rule read over its reports of the batch."""
    sessions: dict[str, dict] = {}
    for report in sorted(reports, key=lambda r: (r.at, r.pk or 0)):
        entry = sessions.setdefault(report.session_id, {"notices": set(), "read": set()})
        entry["notices"].update(report.notices)
        entry["read"].update(report.rules_read)
    return sessions


def trial_enrol(*, reports: list[Report], now: datetime) -> int:
    """Enrol the reports' sessions in the trials of the candidates in force; returns the rows
    inserted. Runs inside the transaction that stored the reports.

    A session enrols while fewer than `rule_trial_min_sessions` are enrolled; an enrolled
    session can still flip to breached (or to having read the candidate) on a later report.
    Per session, the flips and the enrolments are one statement on PostgreSQL: the flips start
    from the session's own enrolments, the enrolments from the open trials; neither reads a
    candidate whose trial is full."""
    sessions = _sessions(reports)
    if not sessions:
        return 0
    registry = load_registry()
    needed = settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS
    inserted = 0
    with connection.cursor() as cursor:
        for session_id, entry in sessions.items():
            statements = _enrol_statements(
                session_id,
                hit=_hit_names(entry["notices"], registry),
                any_notice=bool(entry["notices"]),
                read=sorted(entry["read"]),
                now=now,
                needed=needed,
            )
            for sql, params in statements:
                cursor.execute(sql, params)
            inserted += max(cursor.rowcount, 0)
    return inserted


# A literal, not a parameter: SQLite uses the partial index rule_open_trials only when the
# query's condition visibly implies the index's.
CANDIDATE = f"'{RuleState.CANDIDATE.value}'"


def _enrol_statements(session_id: str, *, hit, any_notice, read, now, needed) -> list:
    """[(sql, params)]: the flips of the session's earlier enrolments (when the report can flip
    anything), then the enrolment in the open trials; one statement where the database can
    write in a WITH."""
    mine, flip, insert = enrol_terms(
        session_id,
        hit=_in("r.metric", hit),
        any_notice=any_notice,
        read=read,
        now=now,
        needed=needed,
    )
    if flip is None:
        return [insert]
    if connection.vendor == "postgresql":
        return [
            (
                f"WITH mine AS MATERIALIZED ({mine[0]}), flipped AS ({flip[0]}) {insert[0]}",
                [*mine[1], *flip[1], *insert[1]],
            )
        ]
    return [(f"WITH mine AS ({mine[0]}) {flip[0]}", [*mine[1], *flip[1]]), insert]


def enrol_terms(
    session_id: str,
    *,
    hit: tuple[str, list],
    any_notice: bool,
    read: list[str],
    now: datetime,
    needed: int,
    only_if: str = "TRUE",
) -> tuple:
    """The enrolment of one session as three (sql, params): `mine`, the session's enrolments
    (a term named mine); the flips of those (an UPDATE reading mine; None when the report can
    flip nothing); and the enrolment in the open trials (an INSERT). `hit` is a condition on
    `r.metric`, true when the session's notices hit the rule's metric family; `only_if`, a
    condition both writes also need (the report was stored)."""
    enrolment, rule = TrialEnrolment._meta.db_table, Rule._meta.db_table
    hit_sql, hit_params = hit
    read_sql, read_params = _in("r.id", read)
    breach = f"CASE WHEN r.metric = '' THEN %s ELSE ({hit_sql}) END"
    breach_params = [any_notice, *hit_params]
    insert = (
        f"INSERT INTO {enrolment} "
        "(rule_id, session_id, breached, read_candidate, enrolled_at, updated_at) "
        f"SELECT r.id, %s, {breach}, ({read_sql}), %s, %s FROM {rule} r "
        f"WHERE r.state = {CANDIDATE} AND r.trial_sessions < %s AND {only_if} "
        "ON CONFLICT (rule_id, session_id) DO NOTHING"
    )
    insert_params = [session_id, *breach_params, *read_params, now, now, needed]
    # The session's enrolments are found first (materialised), so the planner cannot start
    # from the candidates and probe each one.
    mine = (f"SELECT id, rule_id FROM {enrolment} WHERE session_id = %s", [session_id])
    if not any_notice and not read:
        return mine, None, (insert, insert_params)
    flip = (
        f"UPDATE {enrolment} SET breached = {enrolment}.breached OR {breach}, "
        f"read_candidate = {enrolment}.read_candidate OR ({read_sql}), updated_at = %s "
        f"FROM mine JOIN {rule} r ON r.id = mine.rule_id "
        f"WHERE {enrolment}.id = mine.id AND r.state = {CANDIDATE} AND {only_if} "
        f"AND ((NOT {enrolment}.breached AND {breach}) "
        f"OR (NOT {enrolment}.read_candidate AND ({read_sql})))"
    )
    flip_params = [*breach_params, *read_params, now, *breach_params, *read_params]
    return mine, (flip, flip_params), (insert, insert_params)


def trial_counts(rule_ids: Iterable[str] | None = None) -> dict[str, tuple[int, int]]:
    """rule id → (enrolled, breached), in one grouped query."""
    rows = TrialEnrolment.objects.all()
    if rule_ids is not None:
        rows = rows.filter(rule_id__in=list(rule_ids))
    return {
        rid: (n, b)
        for rid, n, b in rows.values("rule_id")
        .annotate(n=Count("id"), b=Count("id", filter=Q(breached=True)))
        .values_list("rule_id", "n", "b")
    }


def trial_of(rule_id: str, baseline_rate: float, counts: dict) -> Trial:
    enrolled, breached = counts.get(rule_id, (0, 0))
    return Trial(enrolled=enrolled, breached=breached, baseline_rate=baseline_rate)
