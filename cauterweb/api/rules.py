"""Rules: the list, one rule with its evidence, a reviewer's retire and re-queue, and the two
reports on a rule. No endpoint promotes: only the engine does, on evidence (semantics §3).

A rule id may hold `/` (any non-empty text of up to 64 characters is an id), so `rule_id` is a
`path` parameter. The routes with a suffix are declared first so that `/rules/a/b/gate` is the
gate of `a/b`; an id whose last segment is itself `retire`, `requeue`, `gate` or `extraction` is
read through `GET /rules/{rule_id}` only when no such suffix applies."""

from ninja import Query, Router, Schema
from pydantic import Field

from lifecycle.cursor import MAX_CURSOR
from lifecycle.inputs import RetireIn
from lifecycle.selectors import rules as selectors
from lifecycle.selectors.gate import gate_both
from lifecycle.services.rules import rule_requeue, rule_retire_by_reviewer

from .presenters import rule_detail_out, rule_out
from .protocol import ERRORS, READ, REVIEW, ApiError, request_actor
from .schemas import (
    RetireOut,
    RuleDetailOut,
    RuleId,
    RuleOut,
    RulePageOut,
    Text,
)

router = Router(tags=["rules"])
MAX_PAGE = 500


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
)
def get_rules(request, query: Query[RuleQuery]):
    rows, next_cursor = selectors.rules_page(
        filters=query.dict(exclude={"order", "cursor", "limit"}, exclude_none=True),
        order=query.order,
        position=query.cursor,
        limit=query.limit,
    )
    return {"items": [rule_out(r) for r in rows], "next_cursor": next_cursor}


@router.post(
    "/rules/{path:rule_id}/retire",
    operation_id="retireRule",
    auth=REVIEW,
    response={200: RetireOut, **ERRORS},
    summary="Retire a rule by hand (reviewer; reason required, journaled)",
)
def post_retire(request, rule_id: RuleId, body: RetireIn):
    changed = rule_retire_by_reviewer(
        rule_id=rule_id, actor=request_actor(request), reason=body.reason
    )
    return {"changed": changed, "rule": rule_out(selectors.rule_get(rule_id))}


@router.post(
    "/rules/{path:rule_id}/requeue",
    operation_id="requeueRule",
    auth=REVIEW,
    response={200: RuleOut, **ERRORS},
    summary="Re-queue a retired rule as a new candidate version (reviewer)",
)
def post_requeue(request, rule_id: RuleId):
    return rule_out(rule_requeue(rule_id=rule_id, actor=request_actor(request)).version)


@router.get(
    "/rules/{path:rule_id}/gate",
    operation_id="gateReport",
    auth=READ,
    response={200: dict, **ERRORS},
    summary="The corpus gate with both matchers, side by side (semantics §11)",
    tags=["reports on a rule"],
)
def get_gate(request, rule_id: RuleId):
    return gate_both(selectors.rule_get(rule_id))


@router.get(
    "/rules/{path:rule_id}/extraction",
    operation_id="extractionReport",
    auth=READ,
    response={200: dict, **ERRORS},
    summary="Extraction accuracy against the source case's expected rule (semantics §12)",
    description="Led by `score`, the probability that the extracted rule is the expected "
    "rule, and the `verdict` read from it (`match`, `partial`, `miss`, or `uncertain` where the "
    "comparator is not sure: a reviewer decides, semantics §12.3); `components` holds the semantic similarity, "
    "signature agreement and token-F1, each labelled with its one-line meaning (components "
    "only: none decides). `calibrated` is false for a rule scored by the earlier comparator. "
    "A separate number from replay fidelity: never combined with it. 404 when the rule's "
    "source case carries no expected_rule.",
    tags=["reports on a rule"],
)
def get_extraction(request, rule_id: RuleId):
    # Imported here, not at start-up: extraction scoring loads the embedding model.
    from lifecycle.selectors.extraction import extraction_for_rule

    report = selectors.extraction_report(extraction_for_rule(selectors.rule_get(rule_id)))
    if report is None:
        raise ApiError(404, f"rule {rule_id}'s source case has no expected_rule to score against")
    return report


@router.get(
    "/rules/{path:rule_id}",
    operation_id="getRule",
    auth=READ,
    response={200: RuleDetailOut, **ERRORS},
    summary="A rule with its trial, the evidence that decided it, and its journal",
)
def get_rule(request, rule_id: RuleId):
    rule = selectors.rule_get(rule_id)
    return rule_detail_out(rule, selectors.rule_evidence(rule))
