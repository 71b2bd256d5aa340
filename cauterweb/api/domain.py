"""Domain steps the API handlers used to do themselves (transactions, journal writes, keyset
queries, pack-format dispatch). Each handler makes one call here or into lifecycle/replay; these
functions belong in lifecycle's services and selectors and move there when those packages
exist."""

from datetime import datetime

from django.db import transaction

from lifecycle.journal import EventType
from lifecycle.journal import write as journal_write
from lifecycle.models import JournalEvent
from lifecycle.selectors import rules as selectors
from lifecycle.services.corpus import import_corpus
from lifecycle.services.packs import (
    AGENT_FILE_FORMATS,
    PACK_FORMATS,
    InvalidSelection,
    export_agent_files,
    export_pack,
)
from lifecycle.states import Actor
from replay.kick import kick_round
from replay.models import ValidationRound

from . import cursor
from .presenters import event_out, rule_or_404, rule_out

ROUND_FIELDS = (
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


def import_trajectories(lines: list, *, replace: bool, actor: Actor) -> dict:
    """import_corpus is shared with the command line; over the API every write is journaled
    with the token that made it, in the same transaction."""
    with transaction.atomic():
        result = import_corpus(lines, replace=replace)
        if result.created or result.updated:
            journal_write(
                type=EventType.CORPUS_IMPORTED,
                actor=actor,
                evidence={**result.as_dict(), "replace": replace},
            )
    return {**result.as_dict(), "ids": result.ids}


def round_kick(*, actor: Actor) -> dict:
    """A kick changes no rule, but someone asked for it: the journal says who and when."""
    kicked = kick_round(reason=f"api:{actor.name}")
    journal_write(type=EventType.ROUND_KICKED, actor=actor, evidence=kicked)
    return kicked


def pack_text(*, scopes: list[str] | None, states: list[str] | None, fmt: str) -> str:
    """One export: a pack of the selected rules, or one scope's agent file."""
    if fmt in AGENT_FILE_FORMATS:
        if not scopes or len(scopes) != 1:
            raise InvalidSelection(f"format {fmt} needs exactly one scope", field="scope")
        return export_agent_files(scope=scopes[0], fmt=fmt)
    if fmt in PACK_FORMATS:
        return export_pack(scopes=scopes or None, states=states or ["active"], fmt=fmt)
    formats = ", ".join((*PACK_FORMATS, *AGENT_FILE_FORMATS))
    raise InvalidSelection(f"format must be one of {formats}", field="format")


def rules_page(*, filters: dict, order: str, position: str | None, limit: int) -> tuple:
    """(rules, next cursor) of the rules list, keyset-paged on (recorded_at, id)."""
    rules = selectors.rule_list(filters={**filters, "sort": order})
    if position:
        rules = cursor.after(
            rules,
            fields=("recorded_at", "id"),
            position=cursor.decode_cursor(position, (datetime, str)),
            descending=order.startswith("-"),
        )
    return cursor.page(list(rules[: limit + 1]), limit, lambda r: (r.recorded_at, r.id))


def journal_page(*, filters: dict, position: str | None, limit: int) -> tuple:
    """(events, next cursor) of the journal, oldest first, keyset-paged on (at, id)."""
    events = JournalEvent.objects.order_by("at", "id").filter(**filters)
    if position:
        events = cursor.after(
            events,
            fields=("at", "id"),
            position=cursor.decode_cursor(position, (datetime, int)),
            descending=False,
        )
    return cursor.page(list(events[: limit + 1]), limit, lambda e: (e.at, e.id))


def rounds_page(*, position: str | None, limit: int) -> tuple[list[dict], str | None]:
    """(rounds, next cursor), newest first."""
    rounds = ValidationRound.objects.order_by("-id")
    if position:
        (before,) = cursor.decode_cursor(position, (int,))
        rounds = rounds.filter(id__lt=before)
    rows, next_cursor = cursor.page(list(rounds[: limit + 1]), limit, lambda r: (r.id,))
    return [{f: getattr(r, f) for f in ROUND_FIELDS} for r in rows], next_cursor


def rule_detail(rule_id: str) -> dict:
    """A rule with its trial, the evidence that decided it, and its newest journal events."""
    rule = rule_or_404(rule_id)
    events, older = selectors.rule_events(rule)
    decided_by = selectors.rule_decision_event(rule)
    return {
        "rule": rule_out(rule),
        "trial": vars(selectors.trial_panel(rule, decided_by)),
        "evidence": decided_by.evidence if decided_by else None,
        "journal": [event_out(e) for e in events],
        "journal_truncated": older,
    }
