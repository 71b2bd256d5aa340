"""The review queue over HTTP (docs/dashboard.md, docs/api.md): what needs a human, its
counts, one action per call, the labelled pairs the answers made, and packs sent to wait for
a reviewer. Reading takes any token (or a dashboard session); acting takes a reviewer's."""

import json

from django.http import StreamingHttpResponse
from ninja import Query, Router, Schema
from pydantic import Field

from lifecycle import limits
from lifecycle.cursor import MAX_CURSOR
from lifecycle.inputs import ReviewActionIn
from lifecycle.selectors import review as selectors
from lifecycle.services.packs import pack_stage
from lifecycle.services.review import review_resolve

from . import protocol
from .presenters import review_item_out, staged_pack_out
from .protocol import ERRORS, READ, REVIEW, WRITE, ApiError, request_actor
from .schemas import (
    ReviewCountsOut,
    ReviewItemOut,
    ReviewPageOut,
    StagedPackOut,
    Text,
)

router = Router(tags=["review"])
MAX_PAGE = 500


class ReviewQuery(Schema):
    kind: Text | None = Field(None, max_length=16)
    scope: Text | None = Field(None, max_length=limits.SCOPE)
    cursor: Text | None = Field(None, max_length=MAX_CURSOR)
    limit: int = Field(100, ge=1, le=MAX_PAGE)


@router.get(
    "/review",
    operation_id="listReview",
    auth=READ,
    response={200: ReviewPageOut, **ERRORS},
    summary="Open review items, oldest first, each with the actions its kind offers",
)
def get_review(request, query: Query[ReviewQuery]):
    items, next_cursor = selectors.review_page(
        filters={"kind": query.kind, "scope": query.scope},
        position=query.cursor,
        limit=query.limit,
    )
    return {"items": [review_item_out(i) for i in items], "next_cursor": next_cursor}


@router.get(
    "/review/counts",
    operation_id="reviewCounts",
    auth=READ,
    response={200: ReviewCountsOut, **ERRORS},
    summary="Open review items per kind",
)
def get_review_counts(request):
    counts = selectors.review_counts()
    return {**counts, "total": sum(counts.values())}


@router.get(
    "/review/extraction-labels",
    operation_id="extractionLabels",
    auth=READ,
    response=ERRORS,
    summary="The reviewers' answers about extractions as labelled pairs (JSON Lines)",
    openapi_extra={
        "responses": {
            "200": {
                "description": "one labelled pair a line: expected, extracted, label, …",
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
            }
        }
    },
)
def get_extraction_labels(request):
    lines = (json.dumps(row, ensure_ascii=False) + "\n" for row in selectors.extraction_labels())
    return StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")


@router.post(
    "/review/{int:item_id}",
    operation_id="resolveReviewItem",
    auth=REVIEW,
    response={200: ReviewItemOut, **ERRORS},
    summary="Resolve an open review item with one of its actions (reviewer)",
)
def post_review(request, item_id: int, body: ReviewActionIn):
    item = review_resolve(
        item_id=item_id,
        action=body.action,
        actor=request_actor(request),
        reason=body.reason,
        keep=body.keep,
    )
    return review_item_out(item)


@router.post(
    "/packs/staged",
    operation_id="stagePack",
    auth=WRITE,
    response={200: StagedPackOut, **ERRORS},
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
    summary="Send a pack to wait in the review queue for a reviewer to import (any token)",
)
def post_staged_pack(request):
    try:
        text = protocol.raw_body(request).decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the pack is not valid UTF-8") from None
    return staged_pack_out(pack_stage(text, actor=request_actor(request)))
