"""Webhook endpoints and the sending half of their deliveries (docs/webhooks.md).

Deliveries are written with the change they announce (lifecycle/outbox.py) and sent here,
one attempt at a time, by a Celery task (lifecycle/tasks.py). An attempt claims its delivery
with a conditional UPDATE — pending and due, or no attempt — so two workers, a task delivered
twice or a sweep racing a retry never send it at once; a sender that dies mid-attempt leaves
a lease that expires, and the sweep gives the delivery back. Delivery is at least once: a
receiver that answered but whose answer was lost sees the same `X-CauterWeb-Delivery` again.

Retries: a network error, a timeout, 408, 425, 429 or a 5xx is tried again after 30 s, 2 min,
10 min, 30 min and 2 h (or the receiver's `Retry-After`, if longer, up to 2 h); any other
4xx is the receiver refusing it, and is not repeated. After six attempts it has failed; a
staff user may send it again from its endpoint's page.
"""

import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .. import journal
from ..follow_ups import webhook_deliver_on_commit
from ..journal import EventType
from ..models import DeliveryStatus, WebhookDelivery, WebhookEndpoint, WebhookFormat

if TYPE_CHECKING:
    import httpx
from ..outbox import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    TEST,
    TIMESTAMP_HEADER,
    TOPIC_HEADER,
    TOPICS,
    Notice,
    encode,
    enqueue,
    sign,
)

RETRY_DELAYS_S = (30, 120, 600, 1800, 7200)
MAX_ATTEMPTS = len(RETRY_DELAYS_S) + 1
# How long past its timeout an attempt may hold its delivery before the sweep takes it back.
LEASE_MARGIN_S = 30
RETRYABLE = frozenset({408, 425, 429})
SWEEP_LIMIT = 500
USER_AGENT = "CauterWeb-Webhooks/1"


class InvalidWebhook(ValueError):
    """An endpoint that cannot be saved; `field` names the part at fault."""

    def __init__(self, message: str, *, field: str):
        super().__init__(message)
        self.field = field


# --- endpoints ------------------------------------------------------------------------------------


def _checked(*, name: str, url: str, fmt: str, topics: list[str]) -> dict:
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise InvalidWebhook("a name of 1 to 100 characters is required", field="name")
    parts = urlsplit((url or "").strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidWebhook("an http:// or https:// URL is required", field="url")
    if fmt not in WebhookFormat.values:
        raise InvalidWebhook(
            f"format must be one of {', '.join(WebhookFormat.values)}", field="format"
        )
    unknown = sorted(set(topics) - set(TOPICS))
    if unknown or not topics:
        raise InvalidWebhook(f"topics must be among {', '.join(TOPICS)}", field="topics")
    return {"name": name, "url": url.strip(), "format": fmt, "topics": sorted(set(topics))}


def _journal_change(endpoint: WebhookEndpoint, change: str, *, by: str, now: datetime) -> None:
    # The secret is never journaled; the host is, so a changed destination shows.
    journal.write(
        type=EventType.WEBHOOK_CHANGED,
        actor=by,
        at=now,
        evidence={
            "endpoint": endpoint.name,
            "change": change,
            "host": urlsplit(endpoint.url).netloc,
            "topics": endpoint.topics,
            "format": endpoint.format,
            "active": endpoint.active,
        },
    )


def webhook_create(
    *, name: str, url: str, fmt: str, topics: list[str], by: str, now: datetime | None = None
) -> WebhookEndpoint:
    """A new endpoint with a fresh secret, journaled (without the secret)."""
    fields = _checked(name=name, url=url, fmt=fmt, topics=topics)
    now = now or timezone.now()
    with transaction.atomic():
        if WebhookEndpoint.objects.filter(name=fields["name"]).exists():
            raise InvalidWebhook(f"an endpoint named {fields['name']!r} exists", field="name")
        endpoint = WebhookEndpoint.objects.create(
            **fields, secret=secrets.token_urlsafe(32), created_at=now, created_by=by[:150]
        )
        _journal_change(endpoint, "created", by=by, now=now)
    return endpoint


def webhook_update(
    *,
    endpoint_id: int,
    url: str,
    fmt: str,
    topics: list[str],
    active: bool,
    by: str,
    now: datetime | None = None,
) -> WebhookEndpoint:
    now = now or timezone.now()
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint_id)
        fields = _checked(name=endpoint.name, url=url, fmt=fmt, topics=topics)
        for key, value in {**fields, "active": bool(active)}.items():
            setattr(endpoint, key, value)
        endpoint.save()
        _journal_change(endpoint, "updated", by=by, now=now)
    return endpoint


def webhook_rotate_secret(*, endpoint_id: int, by: str, now: datetime | None = None) -> str:
    """A new secret; deliveries signed from now on use it."""
    now = now or timezone.now()
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint_id)
        endpoint.secret = secrets.token_urlsafe(32)
        endpoint.save(update_fields=["secret"])
        _journal_change(endpoint, "secret rotated", by=by, now=now)
    return endpoint.secret


# --- sending ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    delivery: WebhookDelivery
    code: int | None
    error: str
    # Seconds until the next attempt; None when it was delivered or will not be retried.
    retry_in: float | None


def _retry_after(response: "httpx.Response | None") -> float:
    value = response.headers.get("Retry-After", "") if response is not None else ""
    return float(value) if value.isdigit() else 0.0


def _post(delivery: WebhookDelivery, *, timestamp: int) -> tuple[int | None, str, float]:
    """(status code or None, error, Retry-After seconds) of one POST."""
    body = encode(delivery.payload)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: sign(delivery.endpoint.secret, body, timestamp),
        DELIVERY_HEADER: str(delivery.id),
        TOPIC_HEADER: delivery.topic,
    }
    import httpx  # by the sender alone: every command would pay for it at start-up

    try:
        response = httpx.post(
            delivery.endpoint.url,
            content=body,
            headers=headers,
            timeout=settings.CAUTERWEB_WEBHOOK_TIMEOUT_S,
            follow_redirects=False,
        )
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:500], 0.0
    if 200 <= response.status_code < 300:
        return response.status_code, "", 0.0
    error = f"HTTP {response.status_code}: {response.text[:300]}"
    return response.status_code, error, _retry_after(response)


def _next_delay(code: int | None, attempts: int, retry_after: float) -> float | None:
    if code is not None and 200 <= code < 300:
        return None
    retryable = code is None or code in RETRYABLE or code >= 500
    if not retryable or attempts >= MAX_ATTEMPTS:
        return None
    return min(max(RETRY_DELAYS_S[attempts - 1], retry_after), RETRY_DELAYS_S[-1])


def delivery_attempt(
    *, delivery_id: str | uuid.UUID, now: datetime | None = None
) -> Attempt | None:
    """One attempt at a delivery that is pending and due; None when there is none to make (it
    is another sender's, not due, delivered or failed)."""
    now = now or timezone.now()
    lease = now + timedelta(seconds=settings.CAUTERWEB_WEBHOOK_TIMEOUT_S + LEASE_MARGIN_S)
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now
    ).update(status=DeliveryStatus.SENDING, lease_until=lease)
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)
    began = time.monotonic()
    code, error, retry_after = _post(delivery, timestamp=int(now.timestamp()))
    elapsed_ms = round((time.monotonic() - began) * 1000)
    return _record(delivery, code, error, retry_after, elapsed_ms, now)


def _record(delivery, code, error, retry_after, elapsed_ms, now) -> Attempt:
    attempts = delivery.attempts + 1
    delay = _next_delay(code, attempts, retry_after)
    if code is not None and 200 <= code < 300:
        status, next_at = DeliveryStatus.DELIVERED, None
    elif delay is not None:
        status, next_at = DeliveryStatus.PENDING, now + timedelta(seconds=delay)
    else:
        status, next_at = DeliveryStatus.FAILED, None
    entry = {"at": now.isoformat(), "code": code, "error": error, "ms": elapsed_ms}
    WebhookDelivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.SENDING).update(
        status=status,
        attempts=attempts,
        next_attempt_at=next_at,
        lease_until=None,
        last_code=code,
        last_error=error,
        delivered_at=now if status == DeliveryStatus.DELIVERED else None,
        log=[*delivery.log, entry],
    )
    delivery.refresh_from_db()
    return Attempt(delivery, code, error, delay)


def deliveries_due(*, now: datetime | None = None, limit: int = SWEEP_LIMIT) -> list[uuid.UUID]:
    """The deliveries to attempt now: pending and due, and those whose sender died mid-attempt
    (their lease ran out), oldest due first."""
    now = now or timezone.now()
    WebhookDelivery.objects.filter(status=DeliveryStatus.SENDING, lease_until__lt=now).update(
        status=DeliveryStatus.PENDING, lease_until=None, next_attempt_at=now
    )
    return list(
        WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("id", flat=True)[:limit]
    )


def deliver_due(*, now: datetime | None = None) -> dict[str, int]:
    """Attempt every due delivery in this process (the `deliver_webhooks` command: on the
    embedded default, where no beat sweeps, run it from cron)."""
    counts = {"attempted": 0, "delivered": 0, "retrying": 0, "failed": 0}
    for delivery_id in deliveries_due(now=now):
        attempt = delivery_attempt(delivery_id=delivery_id, now=now)
        if attempt is None:
            continue
        counts["attempted"] += 1
        status = attempt.delivery.status
        key = {"delivered": "delivered", "pending": "retrying"}.get(status, "failed")
        counts[key] += 1
    return counts


def delivery_resend(*, delivery_id: str | uuid.UUID, by: str, now: datetime | None = None) -> bool:
    """Send a failed delivery again (its id and body unchanged, a new round of attempts).
    False when it is not failed."""
    now = now or timezone.now()
    entry = {"at": now.isoformat(), "code": None, "error": f"sent again by {by}", "ms": 0}
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update()
            .filter(pk=delivery_id, status=DeliveryStatus.FAILED)
            .first()
        )
        if delivery is None:
            return False
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.PENDING,
            attempts=0,
            next_attempt_at=now,
            log=[*delivery.log, entry],
        )
        webhook_deliver_on_commit([delivery.pk])
    return True


def webhook_test(*, endpoint_id: int, by: str, now: datetime | None = None) -> WebhookDelivery:
    """A `test` delivery to one endpoint, attempted at once so the page can show the answer;
    retried like any other if it fails."""
    now = now or timezone.now()
    endpoint = WebhookEndpoint.objects.get(pk=endpoint_id)
    notice = Notice(
        topic=TEST,
        event_type="test",
        at=now,
        actor=by,
        summary=f"test notification from CauterWeb, sent by {by}",
    )
    with transaction.atomic():
        (delivery,) = enqueue([notice], now=now, to=endpoint)
    # With a broker a worker may be attempting it already: the claim lets one of us.
    delivery_attempt(delivery_id=delivery.pk, now=now)
    delivery.refresh_from_db()
    return delivery
