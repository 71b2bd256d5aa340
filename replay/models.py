"""Validation rounds (semantics §9). What a round decided lives in the journal (semantics §10); this
table holds the round's own bookkeeping: its queue, budget, status and summary."""

from django.db import models


class RoundStatus(models.TextChoices):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"


class ValidationRound(models.Model):
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=RoundStatus.choices, default=RoundStatus.RUNNING
    )
    # Rule ids in the order this round takes them (semantics §9.2 rotation).
    queue = models.JSONField(default=list)
    budget_s = models.FloatField(default=0.0)
    replay_wired = models.BooleanField(default=False)
    # decided, pending, promoted, retired, budget_exhausted, elapsed_s (semantics §10).
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    kicked_by = models.CharField(max_length=64, blank=True)
    # Replays queued / running / done per candidate in flight, for the live page (§18).
    progress = models.JSONField(default=dict, blank=True)
    # host:pid of the worker running it, so an operator (or a fault test) can find it.
    worker = models.CharField(max_length=128, blank=True)
    # The round lock's fencing token while it ran, and when its heartbeat last renewed the
    # lock (docs/semantics.md#s9-1-lease): a round reaped as dead says when its worker stopped.
    fence = models.BigIntegerField(null=True, blank=True)
    lease_renewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["status", "-id"], name="round_status")]

    def __str__(self) -> str:
        return f"round {self.id} ({self.status})"


class EngineLock(models.Model):
    """The database flavour of the single-flight round lock (semantics §9.1), used when the broker
    is not Redis. Claimed by a conditional UPDATE; expires if its holder dies."""

    name = models.CharField(max_length=64, primary_key=True)
    holder = models.CharField(max_length=128, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    # The fencing token (docs/semantics.md#s9-1-lease): one more at every acquisition, in
    # either flavour. A round writes only while the row still carries its own number, so a
    # holder that lost its lease (paused, partitioned, or its Redis restarted) writes nothing.
    fence = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder or 'nobody'}"


class ReplayStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


class ReplaySession(models.Model):
    """One replay that runs outside the round's own process: a Celery replay task (semantics
    §18) or a remote HTTP harness (semantics §14). The task finds its work here by id and
    leaves its result here; the harness reaches the rule tool and the started signal through
    `token`, the replay's own unguessable capability, so its reads land under this replay and
    nowhere else."""

    id = models.CharField(max_length=255, primary_key=True)
    rule = models.ForeignKey("lifecycle.Rule", on_delete=models.CASCADE, related_name="+")
    case_id = models.CharField(max_length=128)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    round_id = models.PositiveIntegerField(null=True, blank=True)
    kind = models.CharField(max_length=16, blank=True)  # "failing" | "win"
    arm = models.CharField(max_length=16, blank=True)  # "treatment" | "control"
    repeat = models.PositiveIntegerField(default=0)
    token = models.CharField(max_length=64, unique=True, null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=ReplayStatus.choices, default=ReplayStatus.QUEUED
    )
    result = models.JSONField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A replay task's lease (docs/semantics.md#s18-lease): each claim counts one attempt and
    # holds the replay until `lease_expires_at`, pushed out by the worker's heartbeat while
    # the harness runs. Only the attempt holding the lease may store the result.
    attempts = models.PositiveSmallIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=128, blank=True)

    class Meta:
        indexes = [models.Index(fields=["round_id", "status"], name="replaysession_round")]

    def __str__(self) -> str:
        return self.id


class Arm(models.TextChoices):
    TREATMENT = "treatment"
    CONTROL = "control"


class SampleOutcome(models.TextChoices):
    """A replay's outcome (semantics §7.5); only `scored` samples enter the statistics."""

    SCORED = "scored"
    CANDIDATE_NOT_EXERCISED = "candidate_not_exercised"
    INCONCLUSIVE = "inconclusive"
    ENV_WAIT_TIMEOUT = "env_wait_timeout"


class ReplaySample(models.Model):
    """One replay of one case in one arm under the paired design (semantics §17.3), under the
    active rule set of the candidate's scope it ran with (`active_set`, its version:
    docs/semantics.md#s21-1).

    Samples accumulate across rounds up to `replay_max_repeats` per (rule, case, arm); every
    attempt takes a repeat, scored or not, so a flaky case cannot be replayed forever. A
    treatment replay is its rule's own, numbered per (rule, case). A control replay hides the
    candidate, so it is shared (docs/semantics.md#s21-2): stored once per (case, active set,
    repeat), under the rule it was first replayed for, and used by every candidate of that
    active set replaying the case. Each unique constraint is also the index its arm is read
    through."""

    rule = models.ForeignKey(
        "lifecycle.Rule", on_delete=models.CASCADE, related_name="replay_samples"
    )
    case = models.ForeignKey(
        "lifecycle.Trajectory", on_delete=models.CASCADE, related_name="replay_samples"
    )
    arm = models.CharField(max_length=16, choices=Arm.choices)
    repeat = models.PositiveSmallIntegerField()  # 0-based per (rule, case, arm)
    round = models.ForeignKey(
        ValidationRound, on_delete=models.SET_NULL, null=True, blank=True, related_name="samples"
    )
    outcome = models.CharField(max_length=32, choices=SampleOutcome.choices)
    # The replayed last trace's metrics, tiers 0–2, as measured (not negated).
    metrics = models.JSONField(default=dict, blank=True)
    candidate_read = models.BooleanField(default=False)
    replay_session = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField()
    # The version of the candidate's scope's active rule set (replay.cases.Actives.version);
    # samples stored before strata existed have "legacy:<rule id>": their own stratum.
    active_set = models.CharField(max_length=80, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "case", "repeat"],
                condition=models.Q(arm="treatment"),
                name="replay_treatment_once",
            ),
            models.UniqueConstraint(
                fields=["case", "active_set", "repeat"],
                condition=models.Q(arm="control"),
                name="replay_control_once",
            ),
            models.CheckConstraint(
                condition=models.Q(arm__in=Arm.values), name="replay_sample_arm"
            ),
            models.CheckConstraint(
                condition=models.Q(outcome__in=SampleOutcome.values),
                name="replay_sample_outcome",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.rule_id} {self.case_id} {self.arm} #{self.repeat} ({self.outcome})"
