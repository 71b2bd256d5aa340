"""The journal over HTTP (semantics §10): every event, oldest first, cursor-paginated."""

from ninja import Query, Router, Schema
from pydantic import Field

from lifecycle.cursor import MAX_CURSOR
from lifecycle.selectors.journal import journal_feed

from .presenters import event_out
from .protocol import ERRORS, READ
from .schemas import EventPageOut, Text

router = Router(tags=["journal"])
MAX_PAGE = 500


class JournalQuery(Schema):
    rule: Text | None = None
    type: Text | None = Field(None, max_length=64)
    round: int | None = Field(None, ge=0)
    actor: Text | None = Field(None, max_length=150)
    cursor: Text | None = Field(None, max_length=MAX_CURSOR)
    limit: int = Field(100, ge=1, le=MAX_PAGE)

    def filters(self) -> dict:
        given = {"rule_id": self.rule, "type": self.type, "actor": self.actor}
        given = {key: value for key, value in given.items() if value}
        if self.round is not None:
            given["round_id"] = self.round
        return given


@router.get(
    "/journal",
    operation_id="listJournal",
    auth=READ,
    response={200: EventPageOut, **ERRORS},
    summary="Journal events, oldest first, cursor-paginated (semantics §10)",
)
def get_journal(request, query: Query[JournalQuery]):
    rows, next_cursor = journal_feed(
        filters=query.filters(), position=query.cursor, limit=query.limit
    )
    return {"items": [event_out(e) for e in rows], "next_cursor": next_cursor}
