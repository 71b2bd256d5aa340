"""Outgoing notifications (docs/webhooks.md): the outbox half, written with the change.

The journal writer hands every batch of events here, in the transaction of the change: each
event that is a notification topic becomes one `WebhookDelivery` row per active endpoint that
subscribes to it, and the rows are handed to Celery when the transaction commits. Nothing is
sent from inside the transaction, and a change that rolls back leaves no delivery behind; a
broker that is down leaves the rows for the sweep (lifecycle/services/webhooks.py).

Topics: `promote` (rule_promoted), `retire` (rule_retired, rule_retired_by_reviewer),
`needs_review` (an item opened in the review queue, lifecycle/review_items.py) and `round_failed`
(a round that finished with errors, or a kick the broker refused). `test` is the dashboard's
test button's own.

The signature is HMAC-SHA256 with the endpoint's secret over `<timestamp>.<body>` (the
`X-CauterWeb-Timestamp` header, seconds since the epoch, then a dot, then the exact bytes of
the body), sent as `X-CauterWeb-Signature: sha256=<hex>`.
"""

import hashlib
import hmac
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings

from .follow_ups import webhook_deliver_on_commit
from .models import DeliveryStatus, ReviewItem, Rule, WebhookDelivery, WebhookEndpoint

PROMOTE, RETIRE, NEEDS_REVIEW, ROUND_FAILED, TEST = (
    "promote",
    "retire",
    "needs_review",
    "round_failed",
    "test",
)
TOPICS = (PROMOTE, RETIRE, NEEDS_REVIEW, ROUND_FAILED)
TOPIC_WORDS = {
    PROMOTE: "a rule is promoted",
    RETIRE: "a rule is retired (by the engine or a reviewer)",
    NEEDS_REVIEW: "something enters the review queue",
    ROUND_FAILED: "a validation round fails, or cannot be started",
    TEST: "the test button",
}
SIGNATURE_HEADER = "X-CauterWeb-Signature"
TIMESTAMP_HEADER = "X-CauterWeb-Timestamp"
DELIVERY_HEADER = "X-CauterWeb-Delivery"
TOPIC_HEADER = "X-CauterWeb-Topic"


@dataclass(frozen=True)
class Notice:
    """What one notification says, before it is addressed to an endpoint."""

    topic: str
    event_type: str
    at: datetime
    actor: str
    rule_id: str | None = None
    round_id: int | None = None
    summary: str = ""
    extra: dict = field(default_factory=dict)


def topic_of(event) -> str | None:
    """The topic an event is, if any. Pure."""
    evidence = event.evidence or {}
    if event.type == "rule_promoted":
        return PROMOTE
    if event.type in ("rule_retired", "rule_retired_by_reviewer"):
        return RETIRE
    if event.type == "validation_round_finished" and evidence.get("errors"):
        return ROUND_FAILED
    if event.type == "validation_kick_failed":
        return ROUND_FAILED
    return None


def _summary(event, topic: str) -> str:
    evidence = event.evidence or {}
    reason = evidence.get("reason", "")
    if topic == PROMOTE:
        return f"{event.rule_id} promoted by {event.actor}: {reason}"
    if topic == RETIRE:
        return f"{event.rule_id} retired by {event.actor}: {reason}"
    if event.type == "validation_kick_failed":
        return f"a validation round could not be started: {evidence.get('error', '')}"
    errors = "; ".join(str(e.get("error", "")) for e in evidence.get("errors") or [])
    return f"validation round {event.round_id} finished with errors: {errors}"


def notices_of(events: Sequence) -> list[Notice]:
    """The notifications these journal events are. Pure."""
    out = []
    for event in events:
        topic = topic_of(event)
        if topic is None:
            continue
        extra = {}
        if topic == ROUND_FAILED:
            extra = {"errors": (event.evidence or {}).get("errors") or []}
        out.append(
            Notice(
                topic=topic,
                event_type=event.type,
                at=event.at,
                actor=event.actor,
                rule_id=event.rule_id,
                round_id=event.round_id,
                summary=_summary(event, topic),
                extra=extra,
            )
        )
    return out


def review_notices(items: Sequence[ReviewItem], *, now: datetime) -> list[Notice]:
    return [
        Notice(
            topic=NEEDS_REVIEW,
            event_type="review_item_opened",
            at=now,
            actor="engine",
            rule_id=item.rule_id,
            summary=f"needs review: {item.get_kind_display()}"
            + (f" — {item.rule_id}" if item.rule_id else "")
            + (f" and {item.other_rule_id}" if item.other_rule_id else ""),
            extra={"review": {"kind": item.kind, "key": item.key, "scope": item.scope}},
        )
        for item in items
    ]


def notify_events(events: Sequence, *, now: datetime) -> list[WebhookDelivery]:
    notices = notices_of(events)
    return enqueue(notices, now=now) if notices else []


def notify_review(items: Sequence[ReviewItem], *, now: datetime) -> list[WebhookDelivery]:
    return enqueue(review_notices(items, now=now), now=now) if items else []


def rule_url(rule_id: str) -> str:
    """The rule's page, for a reader of the notification. Resolved by name at run time: the
    lifecycle imports nothing of the dashboard."""
    from django.urls import reverse

    return settings.CAUTERWEB_PUBLIC_URL.rstrip("/") + reverse("rule-detail", args=[rule_id])


def body(delivery_id: uuid.UUID, notice: Notice, rule: dict | None, fmt: str) -> dict:
    """The JSON body of one delivery, in the endpoint's format. Pure but for the URL."""
    url = rule_url(notice.rule_id) if notice.rule_id else settings.CAUTERWEB_PUBLIC_URL
    if fmt == "slack":
        link = f"<{url}|{notice.rule_id}>" if notice.rule_id else "CauterWeb"
        text = notice.summary.replace(notice.rule_id or "\0", link, 1)
        return {"text": text if notice.rule_id else f"{link}: {notice.summary}"}
    return {
        "id": str(delivery_id),
        "topic": notice.topic,
        "event": {
            "type": notice.event_type,
            "at": notice.at.isoformat(),
            "rule": notice.rule_id,
            "round": notice.round_id,
            "actor": notice.actor,
        },
        "rule": rule,
        "summary": notice.summary,
        "url": url,
        **notice.extra,
    }


def _rules(notices: Sequence[Notice]) -> dict[str, dict]:
    ids = {n.rule_id for n in notices if n.rule_id}
    if not ids:
        return {}
    rows = Rule.objects.filter(pk__in=ids).values("id", "trigger", "directive", "scope", "state")
    return {r["id"]: r for r in rows}


def enqueue(
    notices: Sequence[Notice], *, now: datetime, to: WebhookEndpoint | None = None
) -> list[WebhookDelivery]:
    """One delivery per (notice, active endpoint subscribed to its topic) — or, `to` one
    endpoint whatever it subscribes to (the test button) — written now and sent once the
    transaction commits. One query when no endpoint wants any of them."""
    if to is not None:
        endpoints = [to]
    else:
        topics = {n.topic for n in notices}
        active = WebhookEndpoint.objects.filter(active=True).only("id", "topics", "format")
        endpoints = [e for e in active if topics & set(e.topics)]
    if not endpoints:
        return []
    rules = _rules(notices)
    deliveries = []
    for notice in notices:
        for endpoint in endpoints:
            if to is None and notice.topic not in endpoint.topics:
                continue
            delivery_id = uuid.uuid4()
            deliveries.append(
                WebhookDelivery(
                    id=delivery_id,
                    endpoint_id=endpoint.id,
                    topic=notice.topic,
                    event_type=notice.event_type,
                    rule_id=(notice.rule_id or "")[:64],
                    payload=body(delivery_id, notice, rules.get(notice.rule_id), endpoint.format),
                    status=DeliveryStatus.PENDING,
                    next_attempt_at=now,
                    created_at=now,
                )
            )
    WebhookDelivery.objects.bulk_create(deliveries)
    ids = [d.id for d in deliveries]
    webhook_deliver_on_commit(ids)
    return deliveries


def encode(payload: dict) -> bytes:
    """The exact bytes sent (and signed)."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def sign(secret: str, body_bytes: bytes, timestamp: int) -> str:
    """`sha256=<hex>` of HMAC-SHA256(secret, "<timestamp>." + body)."""
    message = str(timestamp).encode() + b"." + body_bytes
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_valid(
    secret: str,
    body_bytes: bytes,
    timestamp: str,
    signature: str,
    *,
    now: int,
    tolerance: int = 300,
) -> bool:
    """What a receiver checks: the signature, and a timestamp within `tolerance` seconds (an
    old body replayed by someone who saw it is refused)."""
    try:
        stamp = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs(now - stamp) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, body_bytes, stamp), signature or "")
