"""Reads for the journal page and its exports (semantics §10).

The journal grows without bound (a million events is normal), so the page never counts and never
offsets: it pages by keyset on (at, id) — the order of the `journal_at` index — with a cursor
naming the last event shown. Exports stream the same filtered events oldest first.
"""

import csv
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast

from lifecycle.validation import FilterError

from .. import cursor
from ..journal import EventType
from ..models import JournalEvent

# The journal filter vocabulary (checked by the dashboard's JournalFilterForm, which gives the
# parsed `round_id`, `since_at` and `until_at`). Every key is optional; empty means "any".
#   type    an event type, exact (e.g. rule_retired); KNOWN_TYPES are offered, others allowed
#   rule    a rule id, exact
#   round   a round number
#   actor   an actor name, exact (engine, an agent token's name, a reviewer's username)
#   since   an ISO date or date-time (UTC when no offset): events at or after it
#   until   an ISO date or date-time: events before it (a bare date includes that whole day)
KNOWN_TYPES = tuple(EventType.values)
PAGE_SIZE = 50


def journal_events(*, filters: dict) -> QuerySet[JournalEvent]:
    """The events matching cleaned `filters`, unordered (callers order by (at, id))."""
    events = JournalEvent.objects.all()
    if filters["type"]:
        events = events.filter(type=filters["type"])
    if filters["rule"]:
        events = events.filter(rule_id=filters["rule"])
    if filters["round_id"] is not None:
        events = events.filter(round_id=filters["round_id"])
    if filters["actor"]:
        events = events.filter(actor=filters["actor"])
    if filters["since_at"]:
        events = events.filter(at__gte=filters["since_at"])
    if filters["until_at"]:
        events = events.filter(at__lt=filters["until_at"])
    return events


# --- Keyset pagination ------------------------------------------------------------------------


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
    size: int = PAGE_SIZE,
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


def journal_feed(
    *, filters: dict, position: str | None, limit: int
) -> tuple[list[JournalEvent], str | None]:
    """(events, next cursor) of the journal oldest first, as a reader catching up walks it:
    `filters` are field lookups (rule_id, type, round_id, actor); raises InvalidCursor."""
    events = JournalEvent.objects.order_by("at", "id").filter(**filters)
    if position:
        events = cursor.after(
            events,
            fields=("at", "id"),
            position=cursor.decode_cursor(position, (datetime, int)),
            descending=False,
        )
    return cursor.page(list(events[: limit + 1]), limit, lambda e: (e.at, e.id))


# --- Export -----------------------------------------------------------------------------------

EXPORT_FIELDS = ("id", "type", "at", "rule", "round", "actor", "evidence")
# Spreadsheet programs run a cell that starts with one of these as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def export_rows(events: QuerySet[JournalEvent]) -> Iterator[dict]:
    """Every filtered event oldest first, in the `journal --json` shape plus the event id, read
    in chunks so memory stays flat. `evidence` is the database's JSON text, copied into the
    export as is: decoding and re-encoding it would cost most of an export's time."""
    rows = (
        events.order_by("at", "id")
        .annotate(evidence_text=Cast("evidence", output_field=TextField()))
        .values_list("id", "type", "at", "rule_id", "round_id", "actor", "evidence_text")
    )
    for pk, type_, at, rule_id, round_id, actor, evidence in rows.iterator(chunk_size=2000):
        yield {
            "id": pk,
            "type": type_,
            "at": at.astimezone(UTC).isoformat(),
            "rule": rule_id,
            "round": round_id,
            "actor": actor,
            "evidence": evidence or "null",
        }


def jsonl_lines(rows: Iterable[dict]) -> Iterator[str]:
    for row in rows:
        evidence = row.pop("evidence")
        head = json.dumps(row, ensure_ascii=False, sort_keys=True)
        yield f'{head[:-1]}, "evidence": {evidence}}}\n'


def _csv_cell(value) -> str:
    if value is None:
        return ""
    text = str(value)
    # Neutralise formulas (CSV injection): an agent names its own token, so actor is untrusted.
    return "'" + text if text.startswith(_FORMULA_START) else text


class _Line:
    """A file-like sink that hands back what csv.writer wrote."""

    def write(self, text: str) -> str:
        return text


def csv_lines(rows: Iterable[dict]) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield writer.writerow(EXPORT_FIELDS)
    for row in rows:
        yield writer.writerow([_csv_cell(row[f]) for f in EXPORT_FIELDS])


def journal_rows(
    *, rule: str | None = None, type: str | None = None, round_id: int | None = None
) -> list[dict]:
    """The `journal` command's rows (semantics §10, §15): every event oldest first, optionally
    of one rule, type or round, in chunks so memory stays flat while reading."""
    events = JournalEvent.objects.order_by("at", "id")
    if rule:
        events = events.filter(rule_id=rule)
    if type:
        events = events.filter(type=type)
    if round_id is not None:
        events = events.filter(round_id=round_id)
    return [
        {
            "type": e.type,
            "at": e.at.isoformat(),
            "rule": e.rule_id,
            "round": e.round_id,
            "actor": e.actor,
            "evidence": e.evidence,
        }
        for e in events.iterator(chunk_size=2000)
    ]
