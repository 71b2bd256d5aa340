"""Reads for the journal page and its exports (semantics §10).

The journal grows without bound (a million events is normal), so the page never counts and never
offsets: it pages by keyset on (at, id) — the order of the `journal_at` index — with a cursor
naming the last event shown. Exports stream the same filtered events oldest first.
"""

import csv
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils.dateparse import parse_date, parse_datetime

from lifecycle.validation import FilterError

from ..journal import EventType
from ..models import JournalEvent

# The journal filter vocabulary. Every key is optional; an empty value means "any".
#   type    an event type, exact (e.g. rule_retired); KNOWN_TYPES are offered, others allowed
#   rule    a rule id, exact
#   round   a round number
#   actor   an actor name, exact (engine, an agent token's name, a reviewer's username)
#   since   an ISO date or date-time (UTC when no offset): events at or after it
#   until   an ISO date or date-time: events before it (a bare date includes that whole day)
JOURNAL_FILTER_KEYS = ("type", "rule", "round", "actor", "since", "until")
KNOWN_TYPES = tuple(EventType.values)
PAGE_SIZE = 50
_DATE = re.compile(r"^\d{4}-\d\d-\d\d$")
_TYPE = re.compile(r"^[a-z][a-z0-9_.]{0,63}$")
_CURSOR = re.compile(r"^(?P<at>\d{4}-\d\d-\d\dT[\d:.]+(?:[+-]\d\d:\d\d|Z))~(?P<id>\d{1,19})$")
MAX_VALUE_LENGTH = 150


def _moment(raw: str, *, key: str, end_of_day: bool) -> datetime | None:
    if not raw:
        return None
    moment = None
    try:
        if _DATE.match(raw):
            day = parse_date(raw)
            # A bare `until` date means "up to the end of that day": the next day, exclusive.
            moment = datetime.fromordinal(day.toordinal() + end_of_day)
        else:
            moment = parse_datetime(raw)
    except (ValueError, OverflowError):
        moment = None
    if moment is None:
        raise FilterError(
            f"{key} must be an ISO date or date-time such as 2026-11-03 or "
            f"2026-11-03T09:00:00Z (got {raw!r})",
            field=key,
        )
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def clean_journal_filters(params) -> dict:
    """The filters a caller gave, stripped and checked (unknown keys ignored). `since_at`,
    `until_at` and `round_id` hold the parsed values. Raises FilterError for a bad value."""
    cleaned = {key: (params.get(key) or "").strip() for key in JOURNAL_FILTER_KEYS}
    for key in ("type", "rule", "actor"):
        if len(cleaned[key]) > MAX_VALUE_LENGTH:
            raise FilterError(f"{key} is longer than {MAX_VALUE_LENGTH} characters", field=key)
    if cleaned["type"] and not _TYPE.match(cleaned["type"]):
        raise FilterError(
            f"type must be an event type such as rule_retired (got {cleaned['type']!r})",
            field="type",
        )
    cleaned["round_id"] = None
    if cleaned["round"]:
        if not cleaned["round"].isdigit() or len(cleaned["round"]) > 18:
            raise FilterError(
                f"round must be a round number (got {cleaned['round']!r})", field="round"
            )
        cleaned["round_id"] = int(cleaned["round"])
    cleaned["since_at"] = _moment(cleaned["since"], key="since", end_of_day=False)
    cleaned["until_at"] = _moment(cleaned["until"], key="until", end_of_day=True)
    if cleaned["since_at"] and cleaned["until_at"] and cleaned["since_at"] >= cleaned["until_at"]:
        raise FilterError("since must be before until", field="since")
    return cleaned


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


def encode_cursor(event: JournalEvent) -> str:
    return f"{event.at.astimezone(UTC).isoformat()}~{event.pk}"


def decode_cursor(raw: str, *, key: str) -> tuple[datetime, int]:
    match = _CURSOR.match(raw or "")
    try:
        moment = parse_datetime(match["at"]) if match else None
    except ValueError:
        moment = None
    if moment is None:
        raise FilterError(f"{key} is not a journal position (follow the page links)", field=key)
    return moment, int(match["id"])


@dataclass
class JournalPage:
    """One page of events, newest first, and the cursors of its neighbours (None at an end)."""

    events: list[JournalEvent]
    older: str | None
    newer: str | None


def journal_page(
    events: QuerySet[JournalEvent],
    *,
    before: str = "",
    after: str = "",
    size: int = PAGE_SIZE,
) -> JournalPage:
    """A page of `events` newest first: the newest page, the page just older than `before`, or
    the page just newer than `after`. One query; the (at, id) keyset keeps it an index range
    scan whatever the depth, where an OFFSET would read every skipped row. The redundant
    `at <=` / `at >=` bound is what the planner can start the range from: PostgreSQL does not
    derive one from the OR."""
    if before and after:
        raise FilterError("give either before or after, not both", field="before")
    if after:
        at, pk = decode_cursor(after, key="after")
        rows = list(
            events.filter(Q(at__gt=at) | Q(at=at, pk__gt=pk), at__gte=at).order_by("at", "id")[
                : size + 1
            ]
        )
        has_more_newer = len(rows) > size
        page = list(reversed(rows[:size]))
        return JournalPage(
            events=page,
            older=encode_cursor(page[-1]) if page else None,
            newer=encode_cursor(page[0]) if page and has_more_newer else None,
        )
    newest = events
    if before:
        at, pk = decode_cursor(before, key="before")
        newest = events.filter(Q(at__lt=at) | Q(at=at, pk__lt=pk), at__lte=at)
    rows = list(newest.order_by("-at", "-id")[: size + 1])
    page = rows[:size]
    return JournalPage(
        events=page,
        older=encode_cursor(page[-1]) if len(rows) > size else None,
        newer=encode_cursor(page[0]) if page and before else None,
    )


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
