"""Reads for the rounds pages and the charts (semantics §9, §10, §18): a fixed number of
queries each."""

from dataclasses import dataclass

from django.core.paginator import Paginator
from django.db.models import Count, Max, QuerySet
from django.db.models.fields.json import KT

from lifecycle.journal import EventType
from lifecycle.models import JournalEvent

from .models import RoundStatus, ValidationRound

# The charts look at recent history: enough to see a distribution, bounded so the page stays
# fast on a journal of millions of events.
CHART_CASE_LIMIT = 5000
CHART_ROUND_LIMIT = 50


def round_list() -> QuerySet[ValidationRound]:
    return ValidationRound.objects.order_by("-id")


@dataclass
class QueueRow:
    position: int
    rule_id: str
    validator: str
    replay_attempts: int | None
    budget_exhausted: bool
    outcome: str
    reason: str
    pending_reason: str


def queue_rows(queue: list[str], events: list[JournalEvent], *, start: int = 1) -> list[QueueRow]:
    """One row per queued candidate in the round's order (semantics §9.2), with the validator it got
    and its verdict (semantics §10); a candidate not reached yet has neither."""
    started = {
        e.rule_id: e.evidence for e in events if e.type == EventType.VALIDATION_CANDIDATE_STARTED
    }
    verdicts = {e.rule_id: e.evidence for e in events if e.type == EventType.VALIDATION_VERDICT}
    rows = []
    for position, rule_id in enumerate(queue, start=start):
        begun = started.get(rule_id, {})
        verdict = verdicts.get(rule_id, {})
        rows.append(
            QueueRow(
                position=position,
                rule_id=rule_id,
                validator=verdict.get("validator") or begun.get("validator", ""),
                replay_attempts=begun.get("replay_attempts"),
                budget_exhausted=bool(
                    verdict.get("round_budget_exhausted") or begun.get("round_budget_exhausted")
                ),
                outcome=verdict.get("outcome", ""),
                reason=verdict.get("reason", ""),
                pending_reason=verdict.get("pending_reason") or "",
            )
        )
    return rows


QUEUE_PAGE_SIZE = 100


def round_detail(vround: ValidationRound, *, page: str | int | None = None) -> dict:
    """A round's bookkeeping and one page of its queue with each candidate's validator and
    verdict, read from the journal events of that page's candidates only."""
    queue_page = Paginator(vround.queue, QUEUE_PAGE_SIZE).get_page(page)
    events = list(
        JournalEvent.objects.filter(
            round_id=vround.id,
            type__in=(EventType.VALIDATION_CANDIDATE_STARTED, EventType.VALIDATION_VERDICT),
            rule_id__in=list(queue_page.object_list),
        ).only("type", "rule_id", "evidence")
    )
    previous = (
        ValidationRound.objects.filter(id__lt=vround.id).order_by("-id").only("id", "queue").first()
    )
    return {
        "round": vround,
        "page": queue_page,
        "queue": queue_rows(list(queue_page.object_list), events, start=queue_page.start_index()),
        "previous": previous,
        "previous_first": previous.queue[0] if previous and previous.queue else None,
        "running": vround.status == RoundStatus.RUNNING,
    }


def round_progress(vround: ValidationRound) -> dict:
    """What a live page polls (semantics §18): candidates in the queue, verdicts written,
    candidates not reached yet, replays dispatched, and replays queued / running / done per
    candidate in flight — as of the round's latest write, refreshed at least every second
    while it waits on replays."""
    progress = vround.progress or {}
    return {
        "round": vround.pk,
        "running": vround.status == RoundStatus.RUNNING,
        "candidates": progress.get("candidates", len(vround.queue)),
        "written": progress.get("written", 0),
        "waiting": progress.get("waiting", len(vround.queue)),
        "replays": progress.get("replays", 0),
        "in_flight": progress.get("in_flight", {}),
    }


def last_rounds(*, limit: int = 5) -> list[ValidationRound]:
    return list(ValidationRound.objects.order_by("-id")[:limit])


def replay_case_evidence(*, limit: int = CHART_CASE_LIMIT) -> list[dict]:
    """The evidence of the latest `validation_replay_case` events (semantics §10)."""
    return list(
        JournalEvent.objects.filter(type=EventType.VALIDATION_REPLAY_CASE)
        .order_by("-at", "-id")
        .values_list("evidence", flat=True)[:limit]
    )


def verdict_counts(*, rounds: int = CHART_ROUND_LIMIT) -> list[tuple[int, str, int]]:
    """(round id, outcome, count) of the `validation_verdict` events of the latest rounds."""
    newest = JournalEvent.objects.filter(type=EventType.VALIDATION_VERDICT).aggregate(
        m=Max("round_id")
    )["m"]
    if newest is None:
        return []
    return list(
        JournalEvent.objects.filter(type=EventType.VALIDATION_VERDICT, round_id__gt=newest - rounds)
        .values_list("round_id", KT("evidence__outcome"))
        .annotate(n=Count("id"))
        .order_by("round_id")
    )
