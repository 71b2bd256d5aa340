"""Reads for the webhooks pages (docs/webhooks.md): the endpoints with their delivery counts,
and one endpoint's delivery log, paged. A fixed number of queries each."""

from django.core.paginator import Page, Paginator
from django.db.models import Count, Q

from ..models import DeliveryStatus, WebhookDelivery, WebhookEndpoint

DELIVERIES_PER_PAGE = 25


def _with_counts():
    """Endpoints annotated with their deliveries per status (`pending`, `delivered`, …)."""
    counts = {
        status: Count("deliveries", filter=Q(deliveries__status=status))
        for status in DeliveryStatus.values
    }
    return WebhookEndpoint.objects.annotate(**counts)


def endpoint_list() -> list[WebhookEndpoint]:
    """Every endpoint with its counts (one query)."""
    return list(_with_counts().order_by("name"))


def endpoint_get(endpoint_id: int) -> WebhookEndpoint | None:
    return _with_counts().filter(pk=endpoint_id).first()


def endpoint_deliveries(endpoint: WebhookEndpoint, *, page: str | int | None) -> Page:
    """One page of an endpoint's delivery log, newest first, each with its attempts."""
    deliveries = WebhookDelivery.objects.filter(endpoint=endpoint).order_by("-created_at", "-id")
    return Paginator(deliveries, DELIVERIES_PER_PAGE).get_page(page)


def delivery_get(delivery_id) -> WebhookDelivery | None:
    return (
        WebhookDelivery.objects.filter(pk=delivery_id).only("id", "endpoint_id", "status").first()
    )
