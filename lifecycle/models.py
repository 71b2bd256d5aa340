"""The domain model (semantics §1–§5, §10). Integrity lives in database constraints, not in save()."""

from django.conf import settings
from django.db import models
from django.db.models import Q


class MetricDefinition(models.Model):
    """The metric registry of semantics §1: data seeded from settings, not names scattered in code."""

    name = models.CharField(max_length=64, primary_key=True)
    tier = models.PositiveSmallIntegerField()
    higher_is_better = models.BooleanField(default=True)
    # The family is the metric plus its aliases (semantics §1).
    aliases = models.JSONField(default=list, blank=True)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["tier", "name"]
        constraints = [
            models.CheckConstraint(condition=Q(tier__lte=3), name="metric_tier_0_to_3"),
        ]

    def __str__(self) -> str:
        return f"{self.name} (tier {self.tier})"


class TrajectoryKind(models.TextChoices):
    FAILURE = "failure"
    SUCCESS = "success"
    NEAR_MISS = "near_miss"


class Trajectory(models.Model):
    """One recorded agent session on one task (a *case*, semantics §1–§2)."""

    id = models.CharField(max_length=128, primary_key=True)
    kind = models.CharField(max_length=16, choices=TrajectoryKind.choices)
    task = models.TextField()
    steps = models.JSONField(default=list)
    outcome = models.JSONField(null=True, blank=True)
    metrics = models.JSONField(default=dict)
    signature = models.JSONField(default=list)
    notices = models.JSONField(default=list, blank=True)
    session_id = models.CharField(max_length=128, blank=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    corpus = models.CharField(max_length=128, blank=True, db_index=True)
    # First-class on purpose: dropping it at parse is the defect this product exists to avoid.
    expected_rule = models.JSONField(null=True, blank=True)
    replayable = models.BooleanField(default=True)
    replay_input = models.JSONField(null=True, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    # sha256 of the canonical JSON of the imported line: re-imports compare it (semantics §2).
    content_hash = models.CharField(max_length=64)
    imported_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        indexes = [
            # Replay case selection: newest replayable cases of a kind first (semantics §7.1–§7.2).
            models.Index(
                fields=["kind", "replayable", "-started_at", "id"], name="traj_kind_newest"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["failure", "success", "near_miss"]), name="traj_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def has_expected_rule(self) -> bool:
        return bool(self.expected_rule)


class TrajectoryAtom(models.Model):
    """One signature or notice atom of a trajectory, so matching (semantics §11) is an indexed lookup
    by atom instead of a scan of every stored signature."""

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="atoms")
    atom = models.CharField(max_length=255)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["atom", "trajectory"], name="traj_atom_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.trajectory_id} {self.atom}"


class Report(models.Model):
    """One live session report (semantics §2): feeds forward trials and new candidates' baselines."""

    session_id = models.CharField(max_length=128)
    at = models.DateTimeField()
    notices = models.JSONField(default=list, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    rules_read = models.JSONField(default=list, blank=True)
    # Derived once at ingest so the baseline window (semantics §8) is an indexed slice.
    has_notice = models.BooleanField(default=False)
    content_hash = models.CharField(max_length=64)
    received_at = models.DateTimeField()

    class Meta:
        ordering = ["at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["session_id", "at"], name="report_session_at_unique"),
        ]
        indexes = [
            models.Index(fields=["has_notice", "-at", "-id"], name="report_notice_window"),
            models.Index(fields=["session_id", "at"], name="report_session"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} @ {self.at:%Y-%m-%d %H:%M:%S}"


class RuleState(models.TextChoices):
    CANDIDATE = "candidate"
    ACTIVE = "active"
    RETIRED = "retired"


class PendingReason(models.TextChoices):
    """The closed set of semantics §10. Empty means "not yet attempted"."""

    TRIAL_IN_PROGRESS = "trial_in_progress", "forward trial in progress: waiting for sessions"
    NO_MATCHING_REPLAYABLE_CASE = (
        "no_matching_replayable_case",
        "no replayable failing case matches its signature",
    )
    REPLAY_INCONCLUSIVE = (
        "replay_inconclusive",
        "replay inconclusive: the backend failed, timed out or scored no shared metric",
    )
    CANDIDATE_NOT_EXERCISED = (
        "candidate_not_exercised",
        "not exercised: the replayed agent never read the candidate",
    )
    ENV_WAIT_TIMEOUT = (
        "env_wait_timeout",
        "the replay environment never signalled that execution started",
    )
    ROUND_BUDGET_EXHAUSTED = (
        "round_budget_exhausted",
        "the round's time budget ran out before this candidate; the trial cannot decide yet",
    )


class AuthorKind(models.TextChoices):
    AGENT = "agent"
    EXTRACTOR = "extractor"
    PACK = "pack"
    REVIEWER = "reviewer"
    IMPORT = "import"


class Rule(models.Model):
    """A standing rule or a candidate for one (semantics §1, §3). Its text is immutable: editing
    records a new candidate whose `replaces` points at the old one."""

    id = models.CharField(max_length=64, primary_key=True)
    trigger = models.TextField()
    directive = models.TextField()
    scope = models.CharField(max_length=128, default="global")
    metric = models.CharField(max_length=64, blank=True)
    signature = models.JSONField(default=list, blank=True)
    tags = models.JSONField(default=list, blank=True)
    state = models.CharField(max_length=16, choices=RuleState.choices, default=RuleState.CANDIDATE)

    author = models.CharField(max_length=150)
    author_kind = models.CharField(max_length=16, choices=AuthorKind.choices)
    source_case = models.CharField(max_length=128, blank=True)
    source_notice = models.CharField(max_length=255, blank=True)
    # Anything else about where it came from: pack name/version and the evidence a pack
    # carried (shown, never trusted — semantics §13), an extractor's inputs, ...
    provenance = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64)

    recorded_at = models.DateTimeField()
    replaces = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="replaced_by"
    )
    duplicate_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="probable_duplicates"
    )
    # Extraction accuracy (semantics §12): the comparator's scores of this rule against its
    # source case's expected rule, computed after commit (lifecycle.tasks) so pages read it
    # instead of running the comparator. None when there is no expected rule to compare with.
    comparison = models.JSONField(null=True, blank=True, default=None)

    # Forward-trial baseline, captured when the candidate is recorded (semantics §8).
    baseline_rate = models.FloatField(default=1.0)
    baseline_sessions = models.PositiveIntegerField(default=0)
    baseline_hits = models.PositiveIntegerField(default=0)

    # Sessions enrolled in its forward trial (semantics §8). Kept by database triggers on the
    # enrolment table (migration 0010), whoever writes enrolments, so a report finds the trials
    # still short of sessions through `rule_open_trials` instead of counting every candidate's
    # enrolments. (On SQLite a table rebuilt by a later migration loses its triggers: such a
    # migration must create them again.)
    trial_sessions = models.PositiveIntegerField(default=0)

    replay_attempts = models.PositiveIntegerField(default=0)
    pending_reason = models.CharField(
        max_length=40, choices=PendingReason.choices, blank=True, default=""
    )
    # Set on the first validation attempt: "no verdict yet" vs "never attempted" (semantics §10).
    first_attempted_at = models.DateTimeField(null=True, blank=True)
    last_validator = models.CharField(max_length=16, blank=True)
    verdict_reason = models.TextField(blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["recorded_at", "id"]
        indexes = [
            models.Index(fields=["state", "recorded_at", "id"], name="rule_state_queue"),
            # The rules table's default order (newest first) without sorting every rule.
            models.Index(fields=["recorded_at", "id"], name="rule_recorded"),
            models.Index(fields=["scope", "state"], name="rule_scope_state"),
            models.Index(fields=["content_hash"], name="rule_content_hash"),
            # The candidates whose trials may still need sessions, and only them (semantics §8).
            models.Index(
                fields=["trial_sessions"],
                condition=Q(state="candidate"),
                name="rule_open_trials",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["candidate", "active", "retired"]), name="rule_state_valid"
            ),
            # Only a candidate can be waiting for a verdict.
            models.CheckConstraint(
                condition=Q(pending_reason="") | Q(state="candidate"),
                name="rule_pending_only_candidate",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id}: {self.trigger}"

    @property
    def is_candidate(self) -> bool:
        return self.state == RuleState.CANDIDATE

    @property
    def pending_text(self) -> str:
        """The pending reason in words; "not yet attempted" is distinct from "no verdict yet"."""
        if self.state != RuleState.CANDIDATE:
            return ""
        # The paired design says what it still needs, e.g. "effect +0.21 [−0.10, +0.52];
        # needs more samples: 4 of 8 repeats per case" (semantics §17.3); §7's own reason only
        # repeats the code ("replay inconclusive: …"), so there the label says more.
        paired_words = self.verdict_reason and not self.verdict_reason.startswith(
            "replay inconclusive"
        )
        if self.pending_reason == PendingReason.REPLAY_INCONCLUSIVE and paired_words:
            return f"replay inconclusive: {self.verdict_reason}"
        # A randomized trial says where its arms stand (semantics §20.4): "treatment 31
        # sessions, 6 breached; control 29, 14 breached; effect −0.27 [−0.52, +0.02]; …".
        if self.pending_reason == PendingReason.TRIAL_IN_PROGRESS and (
            self.verdict_reason.startswith("treatment ")
        ):
            return f"forward trial in progress: {self.verdict_reason}"
        if self.pending_reason:
            return PendingReason(self.pending_reason).label
        if self.first_attempted_at is None:
            return "not yet attempted"
        return "no verdict yet"


class DuplicateKey(models.Model):
    """What the duplicate check looks a candidate's possible copies up by
    (lifecycle/services/duplicates.py, docs/matching.md "Probable duplicates"): one row per
    (rule, key), written when the rule is recorded. A key is a signature atom the rule holds
    (`a:`), its most specific atom (`k:`), a notice it fires on when it has no failure-mode
    atom (`n:`), or a word of its text (`w:`). Derived data: the rule's row says what is true."""

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="+", db_index=False)
    scope = models.CharField(max_length=128)
    key = models.CharField(max_length=260)

    class Meta:
        indexes = [
            # A block: the rules of a scope holding any of a few keys.
            models.Index(fields=["scope", "key", "rule"], name="duplicatekey_block"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["rule", "key"], name="duplicatekey_rule_key"),
        ]

    def __str__(self) -> str:
        return f"{self.rule_id} {self.key}"


class TrialEnrolment(models.Model):
    """A session enrolled in a candidate's forward trial (semantics §8)."""

    # No index of its own: enrolment_unique leads with the rule. One index fewer to write per
    # row matters, as every report enrols its session in every candidate's trial.
    rule = models.ForeignKey(
        Rule, on_delete=models.CASCADE, related_name="enrolments", db_index=False
    )
    session_id = models.CharField(max_length=128)
    breached = models.BooleanField(default=False)
    # Did the session read the candidate through the rule tool? Shown beside the trial (§5).
    read_candidate = models.BooleanField(default=False)
    enrolled_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["rule", "session_id"], name="enrolment_unique"),
        ]
        # A later report of the session flips its enrolments (semantics §8): found by session, so
        # the cost does not grow with every trial ever run.
        indexes = [models.Index(fields=["session_id"], name="enrolment_session")]

    def __str__(self) -> str:
        return f"{self.rule_id} ← {self.session_id}"


class TrialArm(models.TextChoices):
    TREATMENT = "treatment"
    CONTROL = "control"


class Exposure(models.Model):
    """A session assigned to an arm of a candidate's randomized forward trial (semantics §20.1),
    recorded once, when the session first reads the candidate's scope; then its outcome, from
    the session's reports (§20.3)."""

    # No index of its own: exposure_unique leads with the rule.
    rule = models.ForeignKey(
        Rule, on_delete=models.CASCADE, related_name="exposures", db_index=False
    )
    session_id = models.CharField(max_length=128)
    arm = models.CharField(max_length=16, choices=TrialArm.choices)
    exposed_at = models.DateTimeField()
    # When the session's first report reached this exposure: the order the trial saw its
    # outcomes in. Null: no report yet, not in the trial's counts.
    reported_at = models.DateTimeField(null=True, blank=True)
    # Did the session show the candidate's target condition (a later report can still flip it)?
    breached = models.BooleanField(default=False)
    # The deciding metric's value in the session's latest report that carried it.
    value = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["rule", "session_id"], name="exposure_unique"),
            models.CheckConstraint(
                condition=Q(arm__in=["treatment", "control"]), name="exposure_arm_valid"
            ),
        ]
        # A report updates its own session's exposures: found by session, so the cost does not
        # grow with how many candidates are in force.
        indexes = [models.Index(fields=["session_id"], name="exposure_session")]

    def __str__(self) -> str:
        return f"{self.rule_id} ← {self.session_id} ({self.arm})"


class RuleRead(models.Model):
    """One rule returned by the rule tool to one session (semantics §5): recorded per read."""

    session_id = models.CharField(max_length=128)
    # No index of its own: `ruleread_rule_at` leads with the rule, and a round writes
    # thousands of reads a second (each index is one more insert per row).
    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="reads", db_index=False)
    at = models.DateTimeField()
    # "api" (a live agent), "report" (declared in a report's rules_read) or "replay".
    via = models.CharField(max_length=16, default="api")

    class Meta:
        indexes = [
            models.Index(fields=["session_id", "rule"], name="ruleread_session_rule"),
            models.Index(fields=["rule", "at"], name="ruleread_rule_at"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} read {self.rule_id}"


class JournalQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise JournalIsAppendOnly("journal events cannot be updated")

    def delete(self):
        raise JournalIsAppendOnly("journal events cannot be deleted")

    def bulk_update(self, objs, fields, batch_size=None):
        raise JournalIsAppendOnly("journal events cannot be updated")


class JournalIsAppendOnly(Exception):
    pass


class JournalEvent(models.Model):
    """An append-only journal event (semantics §10). The ORM refuses updates and deletes; on
    PostgreSQL a trigger refuses them too (migration 0002)."""

    type = models.CharField(max_length=64)
    at = models.DateTimeField()
    # No index of its own: `journal_rule_at` leads with the rule, and a round writes six
    # events a candidate (each index is one more insert per row).
    rule = models.ForeignKey(
        Rule,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="events",
        db_index=False,
    )
    # A plain number, not a foreign key: lifecycle must not depend on the replay app.
    round_id = models.PositiveIntegerField(null=True, blank=True)
    actor = models.CharField(max_length=150)
    evidence = models.JSONField(default=dict, blank=True)

    objects = JournalQuerySet.as_manager()

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            models.Index(fields=["rule", "at", "id"], name="journal_rule_at"),
            models.Index(fields=["type", "at"], name="journal_type_at"),
            models.Index(fields=["round_id", "at", "id"], name="journal_round"),
            models.Index(fields=["at", "id"], name="journal_at"),
        ]
        constraints = [
            # Exactly one engine verdict per rule, even if two workers race (semantics §3).
            models.UniqueConstraint(
                fields=["rule"],
                condition=Q(type__in=["rule_promoted", "rule_retired"]),
                name="journal_one_verdict_per_rule",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.type} {self.rule_id or ''}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise JournalIsAppendOnly("journal events cannot be updated")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise JournalIsAppendOnly("journal events cannot be deleted")


class TokenRole(models.TextChoices):
    AGENT = "agent"
    REVIEWER = "reviewer"


class ApiToken(models.Model):
    """An API token. Only its SHA-256 is stored; the clear value is shown once."""

    name = models.CharField(max_length=150, unique=True)
    role = models.CharField(max_length=16, choices=TokenRole.choices)
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.role})"


class PackStatus(models.TextChoices):
    WAITING = "waiting"
    IMPORTED = "imported"
    REJECTED = "rejected"


class StagedPack(models.Model):
    """A rule pack sent for a reviewer to import (semantics §13): kept as sent, with what its
    validation said when it arrived, until a reviewer imports or rejects it."""

    name = models.CharField(max_length=100, blank=True)
    version = models.CharField(max_length=40, blank=True)
    checksum = models.CharField(max_length=80, blank=True)
    text = models.TextField()
    rules = models.PositiveIntegerField(default=0)
    new_rules = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)
    staged_by = models.CharField(max_length=150)
    staged_at = models.DateTimeField()
    status = models.CharField(max_length=16, choices=PackStatus.choices, default=PackStatus.WAITING)
    decided_by = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-staged_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name}@{self.version} ({self.status})"


class ReviewKind(models.TextChoices):
    """What can need a human (docs/dashboard.md, "The review queue")."""

    INCONCLUSIVE = "inconclusive", "undecided after its replay budget"
    EXTRACTION = "extraction", "extraction the comparator is unsure of"
    DUPLICATE = "duplicate", "suspected duplicate"
    HARM = "harm", "retired by a harm guardrail"
    PACK = "pack", "pack waiting for import"


class ReviewItem(models.Model):
    """One thing in the review queue. Opened in the transaction of the event that calls for
    it (lifecycle/review_items.py, from the one journal writer), closed by a reviewer's action or by
    the change that makes it moot; never opened twice for the same thing (`key`)."""

    key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=16, choices=ReviewKind.choices)
    rule = models.ForeignKey(
        Rule, null=True, blank=True, on_delete=models.CASCADE, related_name="review_items"
    )
    other_rule = models.ForeignKey(
        Rule, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    pack = models.ForeignKey(
        StagedPack, null=True, blank=True, on_delete=models.CASCADE, related_name="review_items"
    )
    scope = models.CharField(max_length=128, blank=True)
    # What opened it, as it was then (the comparator's scores, the harm that retired a rule).
    evidence = models.JSONField(default=dict, blank=True)
    opened_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.CharField(max_length=150, blank=True)
    resolution = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["opened_at", "id"]
        indexes = [
            # The queue and the navigation's counts read open items only.
            models.Index(
                fields=["kind", "scope", "opened_at"],
                condition=Q(closed_at__isnull=True),
                name="review_open",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["inconclusive", "extraction", "duplicate", "harm", "pack"]),
                name="review_kind_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def is_open(self) -> bool:
        return self.closed_at is None


class WebhookFormat(models.TextChoices):
    JSON = "json", "JSON (signed)"
    SLACK = "slack", 'Slack-compatible ({"text": …})'


class WebhookEndpoint(models.Model):
    """Where notifications go (docs/webhooks.md): the topics it wants, the body's format and
    the secret its deliveries are signed with."""

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=100)
    format = models.CharField(
        max_length=16, choices=WebhookFormat.choices, default=WebhookFormat.JSON
    )
    topics = models.JSONField(default=list)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField()
    created_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    SENDING = "sending"
    DELIVERED = "delivered"
    FAILED = "failed"


class WebhookDelivery(models.Model):
    """One notification to one endpoint (the outbox): written in the transaction of the event
    it announces, sent after commit by a Celery task, retried with back-off. Its id travels in
    every attempt (`X-CauterWeb-Delivery`) so a receiver can drop a repeat."""

    id = models.UUIDField(primary_key=True)
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    topic = models.CharField(max_length=32)
    event_type = models.CharField(max_length=64, blank=True)
    rule_id = models.CharField(max_length=64, blank=True)
    payload = models.JSONField(default=dict)
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # A sender that died mid-attempt gives the delivery back when this passes.
    lease_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # Each attempt: {at, code, error, ms}, oldest first.
    log = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["endpoint", "-created_at"], name="delivery_log"),
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status__in=["pending", "sending"]),
                name="delivery_due",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.topic} → {self.endpoint_id} ({self.status})"
