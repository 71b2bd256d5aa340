"""The one writer of the append-only journal (semantics §10).

Every event is written here, by the function that makes the change it records and inside the
same transaction, so a change and its event commit or roll back together. `write` appends one
event; `write_many` appends a batch (COPY on PostgreSQL, see `lifecycle.bulk`), for rounds and
report batches that write hundreds of events at once. Event types are `EventType` members,
never string literals.
"""

import json
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from django.db import models
from django.utils import timezone

from . import outbox, review_items
from .bulk import insert_rows
from .models import JournalEvent
from .states import Actor


class EventType(models.TextChoices):
    RULE_ADDED = "rule_added"
    RULE_PROMOTED = "rule_promoted"
    RULE_RETIRED = "rule_retired"
    RULE_RETIRED_BY_REVIEWER = "rule_retired_by_reviewer"
    RULE_DUPLICATE_SUSPECTED = "rule_duplicate_suspected"
    VALIDATION_ROUND_STARTED = "validation_round_started"
    VALIDATION_CANDIDATE_STARTED = "validation_candidate_started"
    VALIDATION_REPLAY_CASE = "validation_replay_case"
    VALIDATION_VERDICT = "validation_verdict"
    VALIDATION_ROUND_FINISHED = "validation_round_finished"
    VALIDATION_FALLBACK_ANNOUNCED = "validation_fallback_announced"
    VALIDATION_KICK_FAILED = "validation_kick_failed"
    ROUND_KICKED = "round_kicked"
    REPORT_RECEIVED = "report_received"
    CORPUS_IMPORTED = "corpus_imported"
    PACK_IMPORTED = "pack_imported"
    PACK_STAGED = "pack_staged"
    PACK_REJECTED = "pack_rejected"
    RULE_DUPLICATE_DISMISSED = "rule_duplicate_dismissed"
    EXTRACTION_LABELLED = "extraction_labelled"
    REVIEW_DISMISSED = "review_dismissed"
    WEBHOOK_CHANGED = "webhook_changed"
    TOKEN_CREATED = "token_created"
    TOKEN_REVOKED = "token_revoked"


# A rule's state changes, in the order a reader meets them on its page.
TRANSITION_TYPES = (
    EventType.RULE_ADDED,
    EventType.RULE_PROMOTED,
    EventType.RULE_RETIRED,
    EventType.RULE_RETIRED_BY_REVIEWER,
)
# The events the review queue and the notifications follow (lifecycle/review_items.py,
# lifecycle/outbox.py); any other event costs them nothing.
REACTIVE_TYPES = frozenset(
    {
        "rule_added",
        "rule_promoted",
        "rule_retired",
        "rule_retired_by_reviewer",
        "rule_duplicate_suspected",
        "validation_verdict",
        "validation_round_finished",
        "validation_kick_failed",
        "pack_staged",
    }
)
# The events that decided a rule: an engine verdict or a reviewer's retirement.
DECISION_TYPES = (
    EventType.RULE_PROMOTED,
    EventType.RULE_RETIRED,
    EventType.RULE_RETIRED_BY_REVIEWER,
)


class Event(NamedTuple):
    """An event not written yet: the columns of its row. A round builds thousands a second;
    a model instance for each cost more than writing it."""

    type: str
    at: datetime
    rule_id: str | None
    round_id: int | None
    actor: str
    evidence: dict


def event(
    *,
    type: EventType,
    actor: Actor | str,
    rule_id: str | None = None,
    round_id: int | None = None,
    evidence: dict | None = None,
    at: datetime | None = None,
) -> Event:
    """An event to append with `write_many`."""
    return Event(
        type=EventType(type).value,
        at=at or timezone.now(),
        rule_id=rule_id,
        round_id=round_id,
        actor=actor.name if isinstance(actor, Actor) else actor,
        evidence=evidence or {},
    )


def write(
    *,
    type: EventType,
    actor: Actor | str,
    rule_id: str | None = None,
    round_id: int | None = None,
    evidence: dict | None = None,
    at: datetime | None = None,
) -> JournalEvent:
    """Append one event. Call it inside the transaction of the change it records."""
    row = JournalEvent(
        **event(
            type=type, actor=actor, rule_id=rule_id, round_id=round_id, evidence=evidence, at=at
        )._asdict()
    )
    row.save(force_insert=True)
    _react([row])
    return row


def write_many(events: Sequence[Event]) -> None:
    """Append a batch of events built by `event`, in as few statements as the database allows.
    Their ids are not read back."""
    insert_rows(JournalEvent, Event._fields, events)
    _react(events)


def _react(events: Sequence) -> None:
    """What follows from these events in their own transaction: the review queue's items and
    the notifications' deliveries. Here, in the one writer, so no change can forget them."""
    if not any(e.type in REACTIVE_TYPES for e in events):
        return
    now = timezone.now()
    review_items.project(events, now=now)
    outbox.notify_events(events, now=now)


def insert_rows_sql(
    *, source: str, type: EventType, actor: Actor | str, at: datetime, evidence: dict
) -> tuple[str, list]:
    """An INSERT of one event for each row of `source` (a term of the same WITH), for a change
    written as one PostgreSQL statement: the change and its event commit together, and no
    event is written when the change wrote nothing. (sql, params). Only for event types
    nothing reacts to: this path does not pass through `_react`."""
    if EventType(type).value in REACTIVE_TYPES:
        raise ValueError(f"{type} events must be written through write or write_many")
    table = JournalEvent._meta.db_table
    sql = (
        f"INSERT INTO {table} (type, at, rule_id, round_id, actor, evidence) "
        f"SELECT %s, %s, NULL, NULL, %s, %s::jsonb FROM {source}"
    )
    actor = actor.name if isinstance(actor, Actor) else actor
    return sql, [EventType(type).value, at, actor, json.dumps(evidence)]
