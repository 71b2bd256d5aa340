"""Forward-trial evidence for the rounds: each candidate's trial as the engine decides it.

Under the `randomized` design (semantics §20) a trial is the candidate's exposed sessions with
an outcome, counted per arm (`replay.engine.randomized`); under `baseline` (§8) the sessions
enrolled and how many of them breached, against the candidate's baseline. Both are written by
report intake (`lifecycle.services.reports`); one grouped query reads a round's worth.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Avg, Count, Q

from lifecycle.models import Exposure, TrialEnrolment

from .engine import Trial
from .engine.randomized import Arm, Design, RandomizedTrial, interval_path


@dataclass(frozen=True)
class TrialCounts:
    """A round's trial counts: per rule, (enrolled, breached) under baseline; per rule and arm,
    (sessions, breached, sessions with a value, mean value) and the unreported exposures
    under randomized."""

    design: Design | None
    counts: dict = field(default_factory=dict)
    unreported: dict = field(default_factory=dict)


def trial_design() -> Design | None:
    """The randomized design of the settings, or None under the baseline design."""
    if settings.CAUTERWEB_TRIAL_DESIGN != "randomized":
        return None
    return Design(
        alpha=settings.CAUTERWEB_TRIAL_ALPHA,
        allocation=settings.CAUTERWEB_TRIAL_ALLOCATION,
        max_sessions=settings.CAUTERWEB_TRIAL_MAX_SESSIONS,
        margin=settings.CAUTERWEB_RULE_PROMOTE_MARGIN,
    )


def trial_counts(rule_ids: Iterable[str] | None = None) -> TrialCounts:
    """The trials of `rule_ids` (every rule when None), in one grouped query."""
    design = trial_design()
    model = TrialEnrolment if design is None else Exposure
    rows = model.objects.all()
    if rule_ids is not None:
        rows = rows.filter(rule_id__in=list(rule_ids))
    breached = Count("id", filter=Q(breached=True))
    if design is None:
        grouped = rows.values("rule_id").annotate(n=Count("id"), b=breached)
        return TrialCounts(
            None, {r: (n, b) for r, n, b in grouped.values_list("rule_id", "n", "b")}
        )
    reported = Q(reported_at__isnull=False)
    grouped = rows.values("rule_id", "arm").annotate(
        n=Count("id", filter=reported),
        b=Count("id", filter=reported & Q(breached=True)),
        v=Count("value", filter=reported),
        mean=Avg("value", filter=reported),
        waiting=Count("id", filter=Q(reported_at__isnull=True)),
    )
    counts, unreported = {}, {}
    for rule_id, arm, n, b, v, mean, waiting in grouped.values_list(
        "rule_id", "arm", "n", "b", "v", "mean", "waiting"
    ):
        counts[(rule_id, arm)] = Arm(n, b, v, mean)
        unreported[rule_id] = unreported.get(rule_id, 0) + waiting
    return TrialCounts(design, counts, unreported)


def trial_of(rule_id: str, baseline_rate: float, counts: TrialCounts) -> Trial | RandomizedTrial:
    if counts.design is None:
        enrolled, breached = counts.counts.get(rule_id, (0, 0))
        return Trial(enrolled=enrolled, breached=breached, baseline_rate=baseline_rate)
    empty = Arm(0, 0)
    return RandomizedTrial(
        treatment=counts.counts.get((rule_id, "treatment"), empty),
        control=counts.counts.get((rule_id, "control"), empty),
        design=counts.design,
        unreported=counts.unreported.get(rule_id, 0),
    )


def sessions_needed(trial: Trial | RandomizedTrial, *, min_sessions: int) -> int:
    """What `validation_candidate_started` says a trial needs: §8's sessions to decide, or
    §20's cap (a sequential trial may decide well before it)."""
    return trial.design.max_sessions if isinstance(trial, RandomizedTrial) else min_sessions


def rule_trial(rule_id: str) -> dict | None:
    """A rule's randomized trial as the API and the rule page show it (semantics §20.5): its
    evidence now, and the effect's interval after each session, recomputed from the outcomes
    in the order the trial saw them. None under the baseline design for a rule that was never
    in a randomized trial. One query."""
    rows = list(
        Exposure.objects.filter(rule_id=rule_id)
        .order_by("reported_at", "id")
        .values_list("arm", "reported_at", "breached", "value")
    )
    design = trial_design()
    if not rows and design is None:
        return None
    design = design or Design()
    outcomes = [(arm, breached) for arm, reported_at, breached, _ in rows if reported_at]
    trial = RandomizedTrial(
        treatment=_arm([r for r in rows if r[0] == "treatment" and r[1]]),
        control=_arm([r for r in rows if r[0] == "control" and r[1]]),
        design=design,
        unreported=sum(1 for r in rows if not r[1]),
    )
    return {**trial.evidence(), "path": interval_path(outcomes, design)}


def _arm(rows: list[tuple]) -> Arm:
    values = [value for *_, value in rows if value is not None]
    mean = sum(values) / len(values) if values else None
    return Arm(len(rows), sum(1 for r in rows if r[2]), len(values), mean)
