"""Reads of the review queue (docs/dashboard.md, "The review queue"): its open items with what
a reviewer needs to decide each, their counts for the navigation, and the labelled pairs the
reviewers' answers became. A fixed number of queries each, whatever the queue's length."""

from collections.abc import Iterator
from datetime import UTC, datetime

from django.db.models import Count, QuerySet

from .. import cursor
from ..journal import EventType
from ..models import JournalEvent, ReviewItem, ReviewKind
from ..validation import FilterError

# The queue's filter vocabulary: `kind` (a ReviewKind value) and `scope` (exact); empty: any.
REVIEW_FILTER_KEYS = ("kind", "scope")


def clean_review_filters(filters: dict) -> dict:
    cleaned = {key: (filters.get(key) or "").strip() for key in REVIEW_FILTER_KEYS}
    if cleaned["kind"] and cleaned["kind"] not in ReviewKind.values:
        allowed = ", ".join(ReviewKind.values)
        raise FilterError(f"kind must be one of {allowed} (got {cleaned['kind']!r})", field="kind")
    if len(cleaned["scope"]) > 128:
        raise FilterError("scope is longer than 128 characters", field="scope")
    return cleaned


def review_items(*, filters: dict) -> QuerySet[ReviewItem]:
    """The open items `filters` select, oldest first, with their rules and packs (one query
    for a page of them). Raises FilterError."""
    f = clean_review_filters(filters)
    items = ReviewItem.objects.filter(closed_at__isnull=True)
    if f["kind"]:
        items = items.filter(kind=f["kind"])
    if f["scope"]:
        items = items.filter(scope=f["scope"])
    return items.select_related("rule", "other_rule", "pack").order_by("opened_at", "id")


def review_counts() -> dict[str, int]:
    """Open items per kind, every kind present (one query, on the open items' index)."""
    rows = (
        ReviewItem.objects.filter(closed_at__isnull=True)
        .values_list("kind")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {kind: 0 for kind in ReviewKind.values} | dict(rows)


def review_scopes() -> list[str]:
    """The scopes the open items are in, for the filter menu."""
    return list(
        ReviewItem.objects.filter(closed_at__isnull=True)
        .exclude(scope="")
        .order_by("scope")
        .values_list("scope", flat=True)
        .distinct()
    )


def review_page(
    *, filters: dict, position: str | None, limit: int
) -> tuple[list[ReviewItem], str | None]:
    """(items, next cursor) for the API, keyset-paged on (opened_at, id)."""
    items = review_items(filters=filters)
    if position:
        items = cursor.after(
            items,
            fields=("opened_at", "id"),
            position=cursor.decode_cursor(position, (datetime, int)),
            descending=False,
        )
    return cursor.page(list(items[: limit + 1]), limit, lambda i: (i.opened_at, i.id))


def review_item_get(item_id: int) -> ReviewItem | None:
    return (
        ReviewItem.objects.select_related("rule", "other_rule", "pack").filter(pk=item_id).first()
    )


def decisions_of(items: list[ReviewItem]) -> dict[str, JournalEvent]:
    """The engine's retirement of each harm item's rule, whose evidence heads the item."""
    ids = [i.rule_id for i in items if i.kind == ReviewKind.HARM and i.rule_id]
    if not ids:
        return {}
    events = JournalEvent.objects.filter(rule_id__in=ids, type=EventType.RULE_RETIRED)
    return {e.rule_id: e for e in events}


def extraction_labels() -> Iterator[dict]:
    """Every labelled pair the reviewers' answers made (semantics §12), in the shape of the
    comparator's labelled data (`expected`, `extracted`, `label`, `domain`, `split`, `kind`,
    `category`), a later answer about a rule replacing an earlier one; oldest first."""
    latest: dict[str, JournalEvent] = {}
    events = JournalEvent.objects.filter(type=EventType.EXTRACTION_LABELLED).order_by("at", "id")
    for event in events.iterator(chunk_size=2000):
        latest.pop(event.rule_id, None)
        latest[event.rule_id] = event
    for rule_id, event in latest.items():
        evidence = event.evidence
        yield {
            "expected": evidence.get("expected"),
            "extracted": evidence.get("extracted"),
            "label": int(evidence.get("label", 0)),
            "kind": "review",
            "domain": evidence.get("scope") or "global",
            "split": "review",
            "category": "uncategorised",
            "rule": rule_id,
            "labelled_by": event.actor,
            "labelled_at": event.at.astimezone(UTC).isoformat(),
        }
