"""Forward-trial enrolment and counts (semantics §8), set-based so a report costs the same with one
candidate in force or a thousand: the database enrols every candidate in one statement per
session — never a query, or a Python object, per candidate."""

from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models import Count, Q

from lifecycle.atoms import notice_metric
from lifecycle.metrics import load_registry
from lifecycle.models import Report, Rule, RuleState, TrialEnrolment

from .engine import Trial


def _hit_names(notices: Iterable[str], registry) -> list[str]:
    """Every metric name (with its aliases) a session's notices hit: a rule whose metric is
    among them showed its target condition (semantics §8)."""
    names: set[str] = set()
    for atom in notices:
        metric = notice_metric(atom)
        if metric:
            names |= registry.family(metric)
    return sorted(names)


def _in(column: str, values: list[str]) -> tuple[str, list]:
    if not values:
        return "1 = 0", []
    return f"{column} IN ({', '.join(['%s'] * len(values))})", list(values)


def trial_enrol(*, reports: list[Report], now: datetime) -> int:
    """Enrol the reports' sessions in every candidate's trial; returns rows inserted.

    Runs inside the transaction that stored the reports. A session enrols while fewer than
    `rule_trial_min_sessions` are enrolled; an enrolled session can still flip to breached (or
    to having read the candidate) on a later report. Per session: at most two UPDATEs and one
    INSERT … SELECT over the candidates, whatever the number of candidates in force. The flips
    come first, so they touch only the enrolments of the session's earlier reports (through
    the session index), not the ones this report is about to insert, already right."""
    sessions: dict[str, dict] = {}
    for report in sorted(reports, key=lambda r: (r.at, r.pk or 0)):
        entry = sessions.setdefault(report.session_id, {"notices": set(), "read": set()})
        entry["notices"].update(report.notices)
        entry["read"].update(report.rules_read)
    if not sessions:
        return 0
    registry = load_registry()
    needed = settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS
    enrolment, rule = TrialEnrolment._meta.db_table, Rule._meta.db_table
    inserted = 0
    with connection.cursor() as cursor:
        for session_id, entry in sessions.items():
            hit = _hit_names(entry["notices"], registry)
            read = sorted(entry["read"])
            any_notice = bool(entry["notices"])
            _flip(cursor, session_id, hit=hit, any_notice=any_notice, read=read, now=now)
            hit_sql, hit_params = _in("r.metric", hit)
            read_sql, read_params = _in("r.id", read)
            cursor.execute(
                f"INSERT INTO {enrolment} "
                "(rule_id, session_id, breached, read_candidate, enrolled_at, updated_at) "
                f"SELECT r.id, %s, CASE WHEN r.metric = '' THEN %s ELSE ({hit_sql}) END, "
                f"({read_sql}), %s, %s FROM {rule} r WHERE r.state = %s "
                f"AND (SELECT COUNT(*) FROM {enrolment} e WHERE e.rule_id = r.id) < %s "
                "ON CONFLICT (rule_id, session_id) DO NOTHING",
                [
                    session_id,
                    any_notice,
                    *hit_params,
                    *read_params,
                    now,
                    now,
                    RuleState.CANDIDATE,
                    needed,
                ],
            )
            inserted += max(cursor.rowcount, 0)
    return inserted


def _flip(cursor, session_id: str, *, hit: list[str], any_notice: bool, read: list[str], now):
    """The session's earlier enrolments in trials still running that now breached, or read
    the candidate: one UPDATE, which starts from the session's own enrolments (materialised,
    so the planner cannot start from the candidates and probe each one)."""
    if not any_notice and not read:
        return
    enrolment, rule = TrialEnrolment._meta.db_table, Rule._meta.db_table
    materialized = "MATERIALIZED" if connection.vendor == "postgresql" else ""
    hit_sql, hit_params = _in("r.metric", hit)
    read_sql, read_params = _in("r.id", read)
    breach = f"(%s AND (r.metric = '' OR {hit_sql}))"
    cursor.execute(
        f"WITH mine AS {materialized} "
        f"(SELECT id, rule_id FROM {enrolment} WHERE session_id = %s) "
        f"UPDATE {enrolment} SET breached = {enrolment}.breached OR {breach}, "
        f"read_candidate = {enrolment}.read_candidate OR ({read_sql}), updated_at = %s "
        f"FROM mine JOIN {rule} r ON r.id = mine.rule_id "
        f"WHERE {enrolment}.id = mine.id AND r.state = %s "
        f"AND ((NOT {enrolment}.breached AND {breach}) "
        f"OR (NOT {enrolment}.read_candidate AND ({read_sql})))",
        [
            session_id,
            any_notice,
            *hit_params,
            *read_params,
            now,
            RuleState.CANDIDATE,
            any_notice,
            *hit_params,
            *read_params,
        ],
    )


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
