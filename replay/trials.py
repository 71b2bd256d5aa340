"""Forward-trial enrolment and counts (SPEC §8), set-based so a report costs the same with one
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
    among them showed its target condition (SPEC §8)."""
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
    to having read the candidate) on a later report. Per session: one INSERT … SELECT over the
    candidates and at most two UPDATEs, whatever the number of candidates in force."""
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
            _flip(session_id, hit=hit, any_notice=any_notice, read=read, now=now)
    return inserted


def _flip(session_id: str, *, hit: list[str], any_notice: bool, read: list[str], now) -> None:
    """A session enrolled earlier that now breached, or read the candidate."""
    enrolled = TrialEnrolment.objects.filter(session_id=session_id, rule__state=RuleState.CANDIDATE)
    if any_notice:
        target = Q(rule__metric__in=hit) | Q(rule__metric="")
        enrolled.filter(target, breached=False).update(breached=True, updated_at=now)
    if read:
        enrolled.filter(rule_id__in=read, read_candidate=False).update(
            read_candidate=True, updated_at=now
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
