"""Forward-trial enrolment and counts (SPEC §8), set-based so a report costs the same with one
candidate in force or a thousand: one grouped count, one bulk insert, one UPDATE per kind of
flip — never a query per candidate."""

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.db.models import Count, Q

from lifecycle.atoms import family_notice_atoms
from lifecycle.metrics import load_registry
from lifecycle.models import Report, Rule, RuleState, TrialEnrolment

from .engine import Trial


def _hits(notices: Iterable[str], targets: frozenset[str]) -> bool:
    """Did the session show the rule's target condition? No metric: any notice (SPEC §8)."""
    notices = set(notices)
    return bool(notices & targets) if targets else bool(notices)


def trial_enrol(*, reports: list[Report], now: datetime) -> int:
    """Enrol the reports' sessions in every candidate's trial; returns rows inserted.

    Runs inside the transaction that stored the reports. A session enrols while fewer than
    `rule_trial_min_sessions` are enrolled; an enrolled session can still flip to breached (or
    to having read the candidate) on a later report."""
    if not reports:
        return 0
    sessions: dict[str, dict] = {}
    for report in sorted(reports, key=lambda r: (r.at, r.pk or 0)):
        entry = sessions.setdefault(report.session_id, {"notices": set(), "read": set()})
        entry["notices"].update(report.notices)
        entry["read"].update(report.rules_read)
    candidates = list(Rule.objects.filter(state=RuleState.CANDIDATE).values_list("id", "metric"))
    if not candidates:
        return 0
    registry = load_registry()
    targets = {rid: family_notice_atoms(registry.family(metric)) for rid, metric in candidates}
    # Filtered by rule id, so the (rule, session) index serves both lookups and the trials of
    # long-decided rules are never read: the cost follows the candidates, not the history.
    rule_ids = [rid for rid, _ in candidates]
    enrolled = dict(
        TrialEnrolment.objects.filter(rule_id__in=rule_ids)
        .values("rule_id")
        .annotate(n=Count("id"))
        .values_list("rule_id", "n")
    )
    already = set(
        TrialEnrolment.objects.filter(
            rule_id__in=rule_ids, session_id__in=list(sessions)
        ).values_list("rule_id", "session_id")
    )
    needed = settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS
    rows = []
    for rule_id, _ in candidates:
        room = needed - enrolled.get(rule_id, 0)
        for session_id, entry in sessions.items():
            if room <= 0:
                break
            if (rule_id, session_id) in already:
                continue
            rows.append(
                TrialEnrolment(
                    rule_id=rule_id,
                    session_id=session_id,
                    breached=_hits(entry["notices"], targets[rule_id]),
                    read_candidate=rule_id in entry["read"],
                    enrolled_at=now,
                    updated_at=now,
                )
            )
            room -= 1
    TrialEnrolment.objects.bulk_create(rows, ignore_conflicts=True, batch_size=2000)
    _flip(already, sessions, targets, now)
    return len(rows)


def _flip(already: set, sessions: dict, targets: dict, now: datetime) -> None:
    """Sessions enrolled earlier that now breached, or read the candidate: one UPDATE each."""
    breached: dict[str, set[str]] = defaultdict(set)
    read: dict[str, set[str]] = defaultdict(set)
    for rule_id, session_id in already:
        entry = sessions[session_id]
        if _hits(entry["notices"], targets.get(rule_id, frozenset())):
            breached[session_id].add(rule_id)
        if rule_id in entry["read"]:
            read[session_id].add(rule_id)
    for flag, pairs in (("breached", breached), ("read_candidate", read)):
        if not pairs:
            continue
        where = Q()
        for session_id, rule_ids in pairs.items():
            where |= Q(session_id=session_id, rule_id__in=sorted(rule_ids))
        TrialEnrolment.objects.filter(where, **{flag: False}).update(**{flag: True}, updated_at=now)


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
