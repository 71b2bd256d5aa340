"""The HTTP API for agents and tools, mounted under /api/v1.

Each handler makes one call into the domain layer (corpus, intake, services, scopes, packs,
selectors) and maps its exceptions to JSON errors `{"detail", "errors": [{"loc", "msg"}]}`.
Bad input is never a 500. There is no endpoint that promotes a rule and no input carries a
rule state: only the engine promotes (semantics §3).
"""

import base64
import binascii
import json
from datetime import datetime
from functools import partial

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db.models import Q
from django.http import Http404, HttpResponse
from django.utils.dateparse import parse_datetime
from ninja import NinjaAPI, Query, Router, Schema, Status
from ninja.errors import AuthenticationError, HttpError, ValidationError
from pydantic import Field

from lifecycle.journal import EventType
from lifecycle.journal import write as journal_write
from lifecycle.selectors import rules as selectors
from lifecycle.selectors.gate import gate_both
from lifecycle.services.candidates import candidates_record
from lifecycle.services.corpus import import_corpus
from lifecycle.services.packs import (
    AGENT_FILE_FORMATS,
    PACK_FORMATS,
    InvalidSelection,
    PackRejected,
    export_agent_files,
    export_pack,
    import_pack,
    preview_pack,
)
from lifecycle.services.rules import RuleNotFound, rule_requeue, rule_retire_by_reviewer
from lifecycle.validation import ImportRejected, InvalidRule, numbered, read_jsonl
from replay.intake import reports_ingest
from replay.kick import kick_round, kicks_deferred
from replay.models import ValidationRound

from .auth import READ, REVIEW, WRITE, Forbidden, request_actor
from .models import JournalEvent, Rule
from .schemas import (
    JSONL_TYPES,
    CandidateIn,
    CandidatesOut,
    ErrorOut,
    EventPageOut,
    ImportOut,
    KickOut,
    PackImportOut,
    PackPreviewOut,
    ReportIn,
    RetireIn,
    RetireOut,
    RoundPageOut,
    RuleDetailOut,
    RuleId,
    RuleOut,
    RulePageOut,
    ScopeFileOut,
    ScopeName,
    Text,
    ToolReadOut,
    TrajectoryIn,
)
from .scopes import render_scope, rule_as_dict, rule_tool_read
from .states import NotAllowed, WrongState

router = Router()

ERRORS = {code: ErrorOut for code in (400, 401, 403, 404, 409, 413, 415, 422)}
MAX_PAGE = 500
# A cursor is a short position (a time and an id); anything longer is not one of ours.
MAX_CURSOR = 200
PACK_CONTENT_TYPES = {
    "yaml": "application/yaml",
    "json": "application/json",
    "agents_md": "text/markdown",
    "claude_md": "text/markdown",
    "cursor_mdc": "text/markdown",
}


class ApiError(Exception):
    def __init__(self, status: int, detail: str, errors: list[dict] | None = None):
        super().__init__(detail)
        self.status, self.detail, self.errors = status, detail, errors or []


# ---- request bodies -----------------------------------------------------------------------


def _batch_body(item_schema, what: str) -> dict:
    """OpenAPI for a body that is one item, a JSON array of items, or JSON Lines."""
    item = item_schema.model_json_schema()
    return {
        "requestBody": {
            "required": True,
            "description": f"one {what}, a JSON array of them, or JSON Lines (one a line). "
            "All or nothing: any bad item and nothing is written; each error names its item "
            "as ['line', n, field], counted from 1.",
            "content": {
                "application/json": {"schema": {"anyOf": [item, {"type": "array", "items": item}]}},
                **{t: {"schema": {"type": "string"}} for t in JSONL_TYPES},
            },
        }
    }


def _body(request) -> bytes:
    body = request.body
    if b"\x00" in body or b"\\u0000" in body:
        raise ApiError(422, "NUL characters are not allowed", [_item(["body"], "contains NUL")])
    return body


def _is_jsonl(request) -> bool:
    return request.content_type in JSONL_TYPES


def _json_items(request) -> list:
    if request.content_type not in ("application/json", ""):
        raise ApiError(415, f"send application/json or JSON Lines ({', '.join(JSONL_TYPES)})", [])
    try:
        data = json.loads(_body(request) or b"null")
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}") from None
    if data is None:
        raise ApiError(400, "the body is empty")
    return data if isinstance(data, list) else [data]


def _rows(request):
    """Numbered items of a batch body, as the intake functions take them."""
    if _is_jsonl(request):
        return list(read_jsonl(_body(request).splitlines()))
    return numbered(_json_items(request))


# ---- outputs ------------------------------------------------------------------------------


def rule_out(rule: Rule) -> dict:
    return {
        **rule_as_dict(rule),
        "tags": rule.tags,
        "pending_reason": rule.pending_reason or None,
        "pending_text": rule.pending_text,
        "replay_attempts": rule.replay_attempts,
        "last_validator": rule.last_validator or None,
        "verdict_reason": rule.verdict_reason,
        "author": rule.author,
        "author_kind": rule.author_kind,
        "source_case": rule.source_case or None,
        "source_notice": rule.source_notice or None,
        "provenance": rule.provenance,
        "baseline": {
            "rate": rule.baseline_rate,
            "sessions": rule.baseline_sessions,
            "hits": rule.baseline_hits,
        },
        "recorded_at": rule.recorded_at,
        "decided_at": rule.decided_at,
        "replaces": rule.replaces_id,
        "duplicate_of": rule.duplicate_of_id,
    }


def event_out(event: JournalEvent) -> dict:
    return {
        "id": event.id,
        "type": event.type,
        "at": event.at,
        "rule": event.rule_id,
        "round": event.round_id,
        "actor": event.actor,
        "evidence": event.evidence,
    }


def _rule_or_404(rule_id: str) -> Rule:
    rule = Rule.objects.filter(pk=rule_id).first()
    if rule is None:
        raise RuleNotFound(rule_id)
    return rule


# ---- cursors: opaque keyset positions ------------------------------------------------------


def encode_cursor(values: list) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


def decode_cursor(raw: str, size: int) -> list:
    try:
        values = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        values = None
    if not isinstance(values, list) or len(values) != size:
        raise ApiError(400, "invalid cursor", [{"loc": ["query", "cursor"], "msg": "invalid"}])
    return values


def _cursor_time(raw) -> datetime:
    when = parse_datetime(raw) if isinstance(raw, str) else None
    if when is None:
        raise ApiError(400, "invalid cursor", [{"loc": ["query", "cursor"], "msg": "invalid"}])
    return when


def _page(rows: list, limit: int, key) -> tuple[list, str | None]:
    """rows holds up to limit + 1 items: the extra one only says there is a next page."""
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, encode_cursor(key(rows[-1]))


# ---- corpus, reports, candidates -----------------------------------------------------------


@router.post(
    "/trajectories",
    operation_id="importTrajectories",
    auth=WRITE,
    response={200: ImportOut, **ERRORS},
    openapi_extra=_batch_body(TrajectoryIn, "trajectory (semantics §2)"),
    summary="Import corpus trajectories (import_corpus semantics)",
    tags=["corpus"],
)
def post_trajectories(request, replace: bool = False):
    """Atomic and idempotent (semantics §2): same ids with the same content change nothing; changed
    content is a conflict unless `replace=true`. A JSON Lines body is read as a stream, line by
    line as the import goes, so a corpus of any size goes in with flat memory (the request
    body limit applies to each line of it, and to a JSON body as a whole)."""
    if _is_jsonl(request):
        lines = _streamed_lines(request)
    else:
        lines = [json.dumps(item) for item in _json_items(request)]
    result = import_corpus(lines, replace=replace, actor=request_actor(request), keep_ids=True)
    return {**result.as_dict(), "ids": result.ids}


def _streamed_lines(request):
    """The body's lines, read from the request stream (never the whole body at once). A line
    with a NUL character is a line error of the import, like any line it cannot store."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    for number, line in enumerate(iter(partial(request.readline, limit + 1), b""), start=1):
        if len(line) > limit:
            raise ApiError(
                413,
                f"line {number} is longer than the limit of {limit} bytes",
                [_item(["line", number], "too long")],
            )
        yield line


@router.post(
    "/reports",
    operation_id="postReports",
    auth=WRITE,
    response={200: ImportOut, **ERRORS},
    openapi_extra=_batch_body(ReportIn, "session report (semantics §2)"),
    summary="Post live session reports; a validation round is kicked",
    tags=["reports"],
)
def post_reports(request):
    result = reports_ingest(_rows(request), actor=request_actor(request).name)
    return {**result.as_dict(), "ids": result.ids}


@router.post(
    "/candidates",
    operation_id="recordCandidates",
    auth=WRITE,
    response={200: CandidatesOut, **ERRORS},
    openapi_extra=_batch_body(CandidateIn, "candidate rule (semantics §3)"),
    summary="Record candidate rules; each is returned with its forward-trial baseline",
    tags=["rules"],
)
def post_candidates(request):
    rows = _rows(request)
    # One round after the batch, not one per candidate (semantics §9.1).
    with kicks_deferred():
        result, rules = candidates_record(rows, actor=request_actor(request))
    return {
        **result.as_dict(),
        "ids": result.ids,
        "candidates": [rule_out(r) for r in rules],
    }


# ---- rules -------------------------------------------------------------------------------


class RuleQuery(Schema):
    state: Text | None = None
    scope: Text | None = None
    validator: Text | None = None
    pending_reason: Text | None = None
    metric: Text | None = None
    has_ground_truth: Text | None = None
    q: Text | None = Field(None, max_length=selectors.MAX_QUERY_LENGTH)
    order: str = Field("recorded", pattern="^-?recorded$", description="recorded or -recorded")
    cursor: Text | None = Field(None, max_length=MAX_CURSOR)
    limit: int = Field(100, ge=1, le=MAX_PAGE)


@router.get(
    "/rules",
    operation_id="listRules",
    auth=READ,
    response={200: RulePageOut, **ERRORS},
    summary="List rules with the dashboard's filters, cursor-paginated",
    tags=["rules"],
)
def get_rules(request, query: Query[RuleQuery]):
    filters = query.dict(exclude={"order", "cursor", "limit"}, exclude_none=True)
    rules = selectors.rule_list(filters={**filters, "sort": query.order})
    if query.cursor:
        at_raw, rule_id = decode_cursor(query.cursor, 2)
        at = _cursor_time(at_raw)
        if query.order.startswith("-"):
            rules = rules.filter(
                Q(recorded_at__lt=at) | Q(recorded_at=at, id__lt=rule_id), recorded_at__lte=at
            )
        else:
            rules = rules.filter(
                Q(recorded_at__gt=at) | Q(recorded_at=at, id__gt=rule_id), recorded_at__gte=at
            )
    rows, next_cursor = _page(
        list(rules[: query.limit + 1]),
        query.limit,
        lambda r: [r.recorded_at.isoformat(), r.id],
    )
    return {"items": [rule_out(r) for r in rows], "next_cursor": next_cursor}


@router.get(
    "/rules/{rule_id}",
    operation_id="getRule",
    auth=READ,
    response={200: RuleDetailOut, **ERRORS},
    summary="A rule with its trial, the evidence that decided it, and its journal",
    tags=["rules"],
)
def get_rule(request, rule_id: RuleId):
    rule = _rule_or_404(rule_id)
    events, older = selectors.rule_events(rule)
    decided_by = selectors.rule_decision_event(rule)
    return {
        "rule": rule_out(rule),
        "trial": vars(selectors.trial_panel(rule, decided_by)),
        "evidence": decided_by.evidence if decided_by else None,
        "journal": [event_out(e) for e in events],
        "journal_truncated": older,
    }


@router.post(
    "/rules/{rule_id}/retire",
    operation_id="retireRule",
    auth=REVIEW,
    response={200: RetireOut, **ERRORS},
    summary="Retire a rule by hand (reviewer; reason required, journaled)",
    tags=["rules"],
)
def post_retire(request, rule_id: RuleId, body: RetireIn):
    changed = rule_retire_by_reviewer(
        rule_id=rule_id, actor=request_actor(request), reason=body.reason
    )
    return {"changed": changed, "rule": rule_out(_rule_or_404(rule_id))}


@router.post(
    "/rules/{rule_id}/requeue",
    operation_id="requeueRule",
    auth=REVIEW,
    response={200: RuleOut, **ERRORS},
    summary="Re-queue a retired rule as a new candidate version (reviewer)",
    tags=["rules"],
)
def post_requeue(request, rule_id: RuleId):
    with kicks_deferred():
        version = rule_requeue(rule_id=rule_id, actor=request_actor(request))
    return rule_out(version)


@router.get(
    "/rules/{rule_id}/gate",
    operation_id="gateReport",
    auth=READ,
    response={200: dict, **ERRORS},
    summary="The corpus gate with both matchers, side by side (semantics §11)",
    tags=["reports on a rule"],
)
def get_gate(request, rule_id: RuleId):
    return gate_both(_rule_or_404(rule_id))


@router.get(
    "/rules/{rule_id}/extraction",
    operation_id="extractionReport",
    auth=READ,
    response={200: dict, **ERRORS},
    summary="Extraction accuracy against the source case's expected rule (semantics §12)",
    description="A separate number from replay fidelity: never combined with it. 404 when the "
    "rule's source case carries no expected_rule.",
    tags=["reports on a rule"],
)
def get_extraction(request, rule_id: RuleId):
    from lifecycle.selectors.extraction import extraction_for_rule

    report = extraction_for_rule(_rule_or_404(rule_id))
    if report is None:
        raise ApiError(404, f"rule {rule_id}'s source case has no expected_rule to score against")
    return report


# ---- journal and rounds --------------------------------------------------------------------


class JournalQuery(Schema):
    rule: Text | None = None
    type: Text | None = Field(None, max_length=64)
    round: int | None = Field(None, ge=0)
    actor: Text | None = Field(None, max_length=150)
    cursor: Text | None = Field(None, max_length=MAX_CURSOR)
    limit: int = Field(100, ge=1, le=MAX_PAGE)


@router.get(
    "/journal",
    operation_id="listJournal",
    auth=READ,
    response={200: EventPageOut, **ERRORS},
    summary="Journal events, oldest first, cursor-paginated (semantics §10)",
    tags=["journal"],
)
def get_journal(request, query: Query[JournalQuery]):
    events = JournalEvent.objects.order_by("at", "id")
    if query.rule:
        events = events.filter(rule_id=query.rule)
    if query.type:
        events = events.filter(type=query.type)
    if query.round is not None:
        events = events.filter(round_id=query.round)
    if query.actor:
        events = events.filter(actor=query.actor)
    if query.cursor:
        at_raw, event_id = decode_cursor(query.cursor, 2)
        if not isinstance(event_id, int):
            raise ApiError(400, "invalid cursor", [{"loc": ["query", "cursor"], "msg": "invalid"}])
        at = _cursor_time(at_raw)
        # The plain lower bound lets the planner range-scan the (at, id) index; the OR alone
        # makes it filter from the oldest event on.
        events = events.filter(Q(at__gt=at) | Q(at=at, id__gt=event_id), at__gte=at)
    rows, next_cursor = _page(
        list(events[: query.limit + 1]), query.limit, lambda e: [e.at.isoformat(), e.id]
    )
    return {"items": [event_out(e) for e in rows], "next_cursor": next_cursor}


class RoundQuery(Schema):
    cursor: Text | None = Field(None, max_length=MAX_CURSOR)
    limit: int = Field(50, ge=1, le=MAX_PAGE)


@router.get(
    "/rounds",
    operation_id="listRounds",
    auth=READ,
    response={200: RoundPageOut, **ERRORS},
    summary="Validation rounds, newest first (semantics §9)",
    tags=["rounds"],
)
def get_rounds(request, query: Query[RoundQuery]):
    rounds = ValidationRound.objects.order_by("-id")
    if query.cursor:
        (before,) = decode_cursor(query.cursor, 1)
        if not isinstance(before, int):
            raise ApiError(400, "invalid cursor", [{"loc": ["query", "cursor"], "msg": "invalid"}])
        rounds = rounds.filter(id__lt=before)
    rows, next_cursor = _page(list(rounds[: query.limit + 1]), query.limit, lambda r: [r.id])
    items = [
        {
            field: getattr(r, field)
            for field in (
                "id",
                "status",
                "started_at",
                "finished_at",
                "queue",
                "budget_s",
                "replay_wired",
                "summary",
                "error",
                "kicked_by",
            )
        }
        for r in rows
    ]
    return {"items": items, "next_cursor": next_cursor}


@router.post(
    "/rounds",
    operation_id="kickRound",
    auth=REVIEW,
    response={202: KickOut, **ERRORS},
    summary="Kick a validation round (reviewer); never waits for it",
    tags=["rounds"],
)
def post_round(request):
    actor = request_actor(request)
    kicked = kick_round(reason=f"api:{actor.name}")
    # A kick changes no rule, but a reviewer asked for it: the journal says who and when.
    journal_write(type=EventType.ROUND_KICKED, actor=actor, evidence=kicked)
    return Status(202, kicked)


# ---- the rule tool and scope files (semantics §4, §5) -------------------------------------------


class ToolQuery(Schema):
    session: Text | None = Field(None, min_length=1, max_length=128)
    query: Text | None = Field(None, max_length=2000)


@router.get(
    "/scopes/{scope}/rules",
    operation_id="ruleTool",
    auth=READ,
    response={200: ToolReadOut, **ERRORS},
    summary="The rule tool: active rules (narrowed by query) and always every candidate",
    description="Each read is recorded against `session` (semantics §5). Pass the agent's session "
    "id so a candidate's trial can tell whether the session read it.",
    tags=["rule tool"],
)
def get_scope_rules(
    request,
    scope: ScopeName,
    params: Query[ToolQuery],
):
    rules = rule_tool_read(scope=scope, session_id=params.session or "", query=params.query)
    return {"scope": scope, "session": params.session, "rules": rules}


@router.get(
    "/scopes/{scope}",
    operation_id="scopeFile",
    auth=READ,
    response={200: ScopeFileOut, **ERRORS},
    summary="The rendered scope file: active rules, then the provisional ones (semantics §4)",
    tags=["rule tool"],
)
def get_scope(request, scope: ScopeName):
    return {"scope": scope, "text": render_scope(scope)}


# ---- packs (semantics §13) ----------------------------------------------------------------------


class PackQuery(Schema):
    scope: list[Text] | None = Field(None, description="repeatable; default: every scope")
    state: list[Text] | None = Field(None, description="repeatable; default: active")
    format: Text = Field("yaml", description="yaml, json, agents_md, claude_md or cursor_mdc")


@router.get(
    "/packs",
    operation_id="exportPack",
    auth=REVIEW,
    response=ERRORS,
    summary="Export a rule pack, or one scope's active rules as an agent file (reviewer)",
    openapi_extra={
        "responses": {
            "200": {
                "description": "the pack (YAML/JSON) or the agent file (Markdown)",
                "content": {
                    # A pack is a document (pack_version, rules, checksum); an agent file is text.
                    "application/yaml": {"schema": {"type": "object"}},
                    "application/json": {"schema": {"type": "object"}},
                    "text/markdown": {"schema": {"type": "string"}},
                },
            }
        }
    },
    tags=["packs"],
)
def get_pack(
    request,
    params: Query[PackQuery],
):
    scope, state, format = params.scope, params.state, params.format
    if format in AGENT_FILE_FORMATS:
        if not scope or len(scope) != 1:
            raise InvalidSelection(f"format {format} needs exactly one scope", field="scope")
        text = export_agent_files(scope=scope[0], fmt=format)
    elif format in PACK_FORMATS:
        text = export_pack(scopes=scope, states=state or ["active"], fmt=format)
    else:
        formats = ", ".join((*PACK_FORMATS, *AGENT_FILE_FORMATS))
        raise InvalidSelection(f"format must be one of {formats}", field="format")
    return HttpResponse(text, content_type=f"{PACK_CONTENT_TYPES[format]}; charset=utf-8")


@router.post(
    "/packs",
    operation_id="importPack",
    auth=REVIEW,
    response={200: PackImportOut | PackPreviewOut, **ERRORS},
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "a pack as exported (YAML or JSON), sent as is",
            "content": {
                "application/yaml": {"schema": {"type": "string"}},
                "application/json": {"schema": {"type": "object"}},
            },
        }
    },
    summary="Import a rule pack as candidates (reviewer); dry_run=true only previews",
    tags=["packs"],
)
def post_pack(request, dry_run: bool = False):
    try:
        text = _body(request).decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the pack is not valid UTF-8") from None
    if dry_run:
        return preview_pack(text).as_dict()
    with kicks_deferred():
        return import_pack(text, actor=request_actor(request))


# ---- errors -------------------------------------------------------------------------------


def _respond(api: NinjaAPI, request, status: int, detail: str, errors=()) -> HttpResponse:
    return api.create_response(request, {"detail": detail, "errors": list(errors)}, status=status)


def _item(loc, msg) -> dict:
    return {"loc": list(loc), "msg": str(msg)}


HANDLERS = {
    ApiError: lambda exc: (exc.status, exc.detail, exc.errors),
    AuthenticationError: lambda exc: (
        401,
        "a valid API token is required: 'Authorization: Bearer <token>'",
        [],
    ),
    HttpError: lambda exc: (exc.status_code, str(exc), []),
    ValidationError: lambda exc: (
        422,
        "invalid request",
        [_item(e.get("loc", ()), e.get("msg", "")) for e in exc.errors],
    ),
    Forbidden: lambda exc: (403, str(exc), []),
    NotAllowed: lambda exc: (403, str(exc), []),
    WrongState: lambda exc: (409, str(exc), []),
    RuleNotFound: lambda exc: (404, f"no rule {exc}", []),
    Http404: lambda exc: (404, "not found", []),
    ImportRejected: lambda exc: (
        422,
        f"{len(exc.errors)} error(s), nothing written",
        [_item(["line", e.line, *([e.field] if e.field else [])], e.message) for e in exc.errors],
    ),
    InvalidRule: lambda exc: (422, str(exc), [_item(["body", exc.field], exc)]),
    selectors.FilterError: lambda exc: (422, str(exc), [_item(["query", exc.field], exc)]),
    InvalidSelection: lambda exc: (422, str(exc), [_item(["query", exc.field], exc)]),
    PackRejected: lambda exc: (
        422,
        f"{len(exc.errors)} error(s), nothing imported",
        [_item(["pack", *e.loc], e.msg) for e in exc.errors],
    ),
    RequestDataTooBig: lambda exc: (413, "the request body is larger than the limit", []),
}


def _handle(request, exc, *, api: NinjaAPI, describe) -> HttpResponse:
    status, detail, errors = describe(exc)
    response = _respond(api, request, status, detail, errors)
    if status == 401:
        response["WWW-Authenticate"] = "Bearer"
    return response


def install(api: NinjaAPI) -> None:
    """Mount the router and make every error of the API speak the same JSON."""
    api.add_router("/", router)
    for exc_class, describe in HANDLERS.items():
        api.add_exception_handler(exc_class, partial(_handle, api=api, describe=describe))
