"""Validation rounds (semantics §9): the list, and a reviewer's kick."""

from ninja import Query, Router, Schema, Status
from pydantic import Field

from lifecycle.cursor import MAX_CURSOR
from replay.reads import rounds_page
from replay.reviewer import round_kick

from .protocol import ERRORS, READ, REVIEW, request_actor
from .schemas import KickOut, RoundPageOut, Text

router = Router(tags=["rounds"])
MAX_PAGE = 500


class RoundQuery(Schema):
    cursor: Text | None = Field(None, max_length=MAX_CURSOR)
    limit: int = Field(50, ge=1, le=MAX_PAGE)


@router.get(
    "/rounds",
    operation_id="listRounds",
    auth=READ,
    response={200: RoundPageOut, **ERRORS},
    summary="Validation rounds, newest first (semantics §9)",
)
def get_rounds(request, query: Query[RoundQuery]):
    items, next_cursor = rounds_page(position=query.cursor, limit=query.limit)
    return {"items": items, "next_cursor": next_cursor}


@router.post(
    "/rounds",
    operation_id="kickRound",
    auth=REVIEW,
    response={202: KickOut, **ERRORS},
    summary="Kick a validation round (reviewer); never waits for it",
)
def post_round(request):
    return Status(202, round_kick(actor=request_actor(request), via="api"))
