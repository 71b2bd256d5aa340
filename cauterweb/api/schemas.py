"""The shapes of the API, as published in its OpenAPI schema.

There is no `state` in any input: a rule's state changes only through the engine's verdicts
and a reviewer's retire/re-queue endpoints, never by writing a field (semantics §3).
"""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

from lifecycle import limits


class Schema(BaseModel):
    """Plain pydantic: every output here is built from dicts, so ninja's ORM-aware Schema (a
    validator wrapped around every nested object) would only cost time — 60 ms on a page of
    100 rules."""


# Text PostgreSQL can store: a NUL character is a 422 here, not a database error later.
NO_NUL = r"^[^\x00]*$"
Text = Annotated[str, StringConstraints(pattern=NO_NUL)]
RuleId = Annotated[str, StringConstraints(min_length=1, max_length=limits.RULE_ID, pattern=NO_NUL)]
ScopeName = Annotated[str, StringConstraints(min_length=1, max_length=limits.SCOPE, pattern=NO_NUL)]

# ---- errors -------------------------------------------------------------------------------


class ErrorItem(Schema):
    loc: list[str | int] = Field(description="path to the value at fault, e.g. ['line', 3, 'at']")
    msg: str


class ErrorOut(Schema):
    detail: str
    errors: list[ErrorItem] = Field(default_factory=list)


# ---- input bodies ----------------------------------------------------------------------------
# Every body is a model of `lifecycle.inputs` (the batch lines, a reviewer's retire and review
# actions), checked by `lifecycle.validation`: the API publishes the models the intake code
# validates with, so the command line, the dashboard and the API agree.

JSONL_TYPES = ("application/x-ndjson", "application/jsonl")


# ---- outputs ------------------------------------------------------------------------------


class ImportOut(Schema):
    created: int
    unchanged: int
    updated: int
    ids: list[str]


class BaselineOut(Schema):
    rate: float
    sessions: int
    hits: int


class RuleOut(Schema):
    id: str
    trigger: str
    directive: str
    scope: str
    metric: str | None
    signature: list[str]
    tags: list[str]
    state: Literal["candidate", "active", "retired"]
    pending_reason: str | None = Field(description="semantics §10; null when not waiting")
    pending_text: str = Field(description="'not yet attempted' differs from 'no verdict yet'")
    replay_attempts: int
    last_validator: str | None
    verdict_reason: str
    author: str
    author_kind: str
    source_case: str | None
    source_notice: str | None
    provenance: dict[str, Any]
    baseline: BaselineOut
    recorded_at: datetime
    decided_at: datetime | None
    replaces: str | None
    duplicate_of: str | None


class CandidatesOut(ImportOut):
    candidates: list[RuleOut]


class RulePageOut(Schema):
    items: list[RuleOut]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page")


class EventOut(Schema):
    id: int
    type: str
    at: datetime
    rule: str | None
    round: int | None
    actor: str
    evidence: dict[str, Any]


class EventPageOut(Schema):
    items: list[EventOut]
    next_cursor: str | None


class TrialOut(Schema):
    enrolled: int
    breached: int
    read_candidate: int = Field(
        description="enrolled sessions that read the candidate (semantics §5)"
    )
    needed: int
    baseline_rate: float
    baseline_sessions: int
    trial_rate: float | None
    verdict: dict[str, Any] | None


class RuleDetailOut(Schema):
    rule: RuleOut
    trial: TrialOut
    randomized_trial: dict[str, Any] | None = Field(
        description="the randomized forward trial (semantics §20.5): per arm the sessions, "
        "breaches, rate and mean of the deciding metric; the effect (treatment − control) "
        "with its always-valid bounds, the p-values, sessions spent, allocation, and `path`, "
        "the interval after each session; null under the baseline design"
    )
    evidence: dict[str, Any] | None = Field(
        description="the evidence of the event that decided the rule, if any"
    )
    extraction: dict[str, Any] | None = Field(
        description="extraction accuracy as GET /rules/{rule_id}/extraction reports it, led by "
        "score and verdict; null when the rule has no stored comparison (semantics §12)"
    )
    journal: list[EventOut] = Field(
        description="the rule's newest events, oldest first; all of them: GET /journal?rule=…"
    )
    journal_truncated: bool = Field(description="older events exist beyond `journal`")


class RetireOut(Schema):
    changed: bool = Field(description="false when the rule was already retired")
    rule: RuleOut


class RoundOut(Schema):
    id: int
    status: str
    started_at: datetime
    finished_at: datetime | None
    queue: list[str]
    budget_s: float
    replay_wired: bool
    summary: dict[str, Any]
    error: str
    kicked_by: str


class RoundPageOut(Schema):
    items: list[RoundOut]
    next_cursor: str | None


class KickOut(Schema):
    queued: bool
    detail: str


class ToolRuleOut(Schema):
    id: str
    trigger: str
    directive: str
    scope: str
    metric: str | None
    signature: list[str]
    state: Literal["candidate", "active"]


class ToolReadOut(Schema):
    scope: str
    session: str | None = Field(description="the session the read was recorded against")
    rules: list[ToolRuleOut] = Field(
        description="active rules (narrowed by the query), then the scope's candidates this "
        "session is served: all of them under the baseline trial design, those of its "
        "treatment arms under randomized (none without a session)"
    )


class ScopeFileOut(Schema):
    scope: str
    text: str


class PackImportOut(Schema):
    created: int
    unchanged: int
    updated: int
    rules: list[str]


class PackPreviewOut(Schema):
    name: str
    version: str
    pack_version: Any
    checksum: str
    ok: bool
    rules: list[dict[str, Any]]
    errors: list[ErrorItem]


# ---- the review queue (docs/dashboard.md) --------------------------------------------------


class ReviewItemOut(Schema):
    id: int
    kind: str
    kind_text: str
    rule: str | None
    other_rule: str | None
    pack: int | None
    scope: str
    evidence: dict[str, Any]
    opened_at: datetime
    closed_at: datetime | None
    closed_by: str
    resolution: str
    actions: list[str]


class ReviewPageOut(Schema):
    items: list[ReviewItemOut]
    next_cursor: str | None


class ReviewCountsOut(Schema):
    inconclusive: int
    extraction: int
    duplicate: int
    harm: int
    pack: int
    total: int


class StagedPackOut(Schema):
    id: int
    name: str
    version: str
    checksum: str
    rules: int
    new_rules: int
    status: str
    staged_by: str
    staged_at: datetime
