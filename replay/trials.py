"""Forward-trial counts for the rounds (semantics §8): how many sessions each candidate's
trial enrolled and how many of them breached. Enrolment itself is written by report intake
(`lifecycle.services.enrolment`)."""

from collections.abc import Iterable

from django.db.models import Count, Q

from lifecycle.models import TrialEnrolment

from .engine import Trial


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
