"""The webhooks pages (docs/webhooks.md): staff only; an endpoint is added, tested against a
real receiver, and its delivery log read on its page."""

import json

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from lifecycle.models import WebhookDelivery, WebhookEndpoint
from lifecycle.services import webhooks as services
from lifecycle.services.rules import rule_promote
from lifecycle.states import Actor
from tests.builders import Receiver, candidate

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, db):
    user = User.objects.create_user("ada", password="x", is_staff=True)
    client.force_login(user)
    return client


def test_only_staff_see_and_configure_webhooks(reviewer_user, viewer_user, staff_client):
    for user in (reviewer_user, viewer_user):
        client = Client()
        client.force_login(user)
        assert client.get(reverse("webhooks")).status_code == 403
        assert client.post(reverse("webhooks"), {"name": "x"}).status_code == 403
        assert ">Webhooks<" not in client.get(reverse("overview")).content.decode()
    assert staff_client.get(reverse("webhooks")).status_code == 200
    assert ">Webhooks</a>" in staff_client.get(reverse("overview")).content.decode()


def test_staff_add_an_endpoint_then_test_it_against_a_receiver(staff_client):
    with Receiver(answers=(200,)) as receiver:
        response = staff_client.post(
            reverse("webhooks"),
            {"name": "ops", "url": receiver.url, "format": "json", "topics": ["promote", "retire"]},
        )
        endpoint = WebhookEndpoint.objects.get(name="ops")
        assert response["Location"] == reverse("webhook-detail", args=[endpoint.pk])
        tested = staff_client.post(reverse("webhook-test", args=[endpoint.pk]), follow=True)
    body = tested.content.decode()
    assert "Test delivered: the receiver answered 200." in body
    assert endpoint.secret in body  # behind a <details>, for staff to give the receiver
    assert json.loads(receiver.received[0]["body"])["topic"] == "test"
    assert "HTTP 200" in body


def test_a_bad_endpoint_is_refused_with_the_field_named(staff_client):
    response = staff_client.post(
        reverse("webhooks"), {"name": "ops", "url": "https://x/h", "format": "json"}
    )
    assert response.status_code == 400 and WebhookEndpoint.objects.count() == 0
    assert "This field is required." in response.content.decode()


def test_a_failed_delivery_is_sent_again_from_the_log(staff_client):
    endpoint = services.webhook_create(
        name="ops", url="https://hooks.example/x", fmt="json", topics=["promote"], by="ada"
    )
    rule = candidate("C-1")
    rule_promote(rule_id=rule.id, actor=Actor.engine(), evidence={}, reason="improved")
    WebhookDelivery.objects.update(status="failed", attempts=6, last_error="HTTP 500: down")
    (delivery,) = WebhookDelivery.objects.all()
    page = staff_client.get(reverse("webhook-detail", args=[endpoint.pk])).content.decode()
    assert "Send again" in page and "C-1" in page
    staff_client.post(reverse("webhook-resend", args=[delivery.pk]))
    assert WebhookDelivery.objects.get().status == "pending"


def test_the_delivery_log_runs_the_same_queries_for_3_or_30_deliveries(staff_client):
    endpoint = services.webhook_create(
        name="ops", url="https://hooks.example/x", fmt="json", topics=["promote"], by="ada"
    )

    def promote(n: int, start: int) -> None:
        for i in range(start, start + n):
            rule = candidate(f"C-{i}", trigger=f"when {i} fails")
            rule_promote(rule_id=rule.id, actor=Actor.engine(), evidence={}, reason="improved")

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            staff_client.get(reverse("webhook-detail", args=[endpoint.pk]))
        return len(ctx.captured_queries)

    promote(3, 0)
    small = count()
    promote(27, 3)
    assert WebhookDelivery.objects.count() == 30 and count() == small
