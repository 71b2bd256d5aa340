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

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder or 'nobody'}"


class ReplaySession(models.Model):
    """One case replayed through the HTTP backend (semantics §14): the harness reaches the rule tool
    and the started signal from another process, so the signal has to land somewhere shared."""

    id = models.CharField(max_length=160, primary_key=True)
    rule = models.ForeignKey("lifecycle.Rule", on_delete=models.CASCADE, related_name="+")
    case_id = models.CharField(max_length=128)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.id
