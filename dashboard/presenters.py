"""Reads shaped for the dashboard's pages that lifecycle's selectors do not give yet.

The journal page walks the journal by keyset on (at, id) with the project's one cursor format
(cauterweb/api/cursor.py), so a journal position means the same on a page and in the API. It
belongs beside the journal selectors in lifecycle and moves there with them."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from cauterweb.api import cursor
from lifecycle.models import JournalEvent
from lifecycle.validation import FilterError

JOURNAL_PAGE_SIZE = 50


@dataclass
class JournalPage:
    """One page of events, newest first, and the cursors of its neighbours (None at an end)."""

    events: list[JournalEvent]
    older: str | None
    newer: str | None


def _position(raw: str, *, key: str) -> tuple[datetime, int]:
    try:
        return cursor.decode_cursor(raw, (datetime, int))
    except cursor.InvalidCursor:
        message = f"{key} is not a journal position (follow the page links)"
        raise FilterError(message, field=key) from None


def _cursor(event: JournalEvent) -> str:
    return cursor.encode_cursor(event.at, event.pk)


def journal_page(
    events: QuerySet[JournalEvent],
    *,
    before: str = "",
    after: str = "",
    size: int = JOURNAL_PAGE_SIZE,
) -> JournalPage:
    """A page of `events` newest first: the newest page, the page just older than `before`, or
    the page just newer than `after`. One query, an index range scan whatever the depth, where
    an OFFSET would read every skipped row."""
    if before and after:
        raise FilterError("give either before or after, not both", field="before")
    fields = ("at", "id")
    if after:
        position = _position(after, key="after")
        newer = cursor.after(events, fields=fields, position=position, descending=False)
        rows = list(newer.order_by("at", "id")[: size + 1])
        page = list(reversed(rows[:size]))
        return JournalPage(
            events=page,
            older=_cursor(page[-1]) if page else None,
            newer=_cursor(page[0]) if page and len(rows) > size else None,
        )
    if before:
        position = _position(before, key="before")
        events = cursor.after(events, fields=fields, position=position, descending=True)
    rows = list(events.order_by("-at", "-id")[: size + 1])
    page = rows[:size]
    return JournalPage(
        events=page,
        older=_cursor(page[-1]) if len(rows) > size else None,
        newer=_cursor(page[0]) if page and before else None,
    )
