"""Outgoing webhooks (docs/webhooks.md): deliveries written with the change they announce,
sent to a real HTTP receiver with a verifiable HMAC-SHA256 signature, retried with back-off.
Time is frozen and moved by hand: nothing here sleeps through a back-off."""

import hashlib
import hmac
import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import transaction
from freezegun import freeze_time

from lifecycle import outbox
from lifecycle.journal import write as journal_write
from lifecycle.models import DeliveryStatus, JournalEvent, WebhookDelivery
from lifecycle.services import webhooks as services
from lifecycle.services.rules import rule_promote, rule_retire_by_reviewer
from lifecycle.states import Actor
from tests.builders import T0, Receiver, candidate, make_rule, verdict

pytestmark = pytest.mark.django_db


def endpoint(url: str, topics=("promote", "retire"), fmt="json"):
    return services.webhook_create(name="ops", url=url, fmt=fmt, topics=list(topics), by="admin")


def promote(rule_id="C-1"):
    rule = candidate(rule_id)
    rule_promote(
        rule_id=rule.id, actor=Actor.engine(), evidence={}, reason="improved task_completion"
    )


# --- which events are notifications ----------------------------------------------------------


@pytest.mark.parametrize(
    ("type_", "evidence", "topic"),
    [
        ("rule_promoted", {}, "promote"),
        ("rule_retired", {}, "retire"),
        ("rule_retired_by_reviewer", {}, "retire"),
        (
            "validation_round_finished",
            {"errors": [{"rule": None, "error": "boom"}]},
            "round_failed",
        ),
        ("validation_round_finished", {"errors": []}, None),
        ("validation_kick_failed", {"error": "broker down"}, "round_failed"),
        ("validation_verdict", {"outcome": "pending"}, None),
        ("rule_added", {}, None),
    ],
)
def test_the_topic_of_an_event(type_, evidence, topic):
    event = journal_write(type=type_, actor="engine", evidence=evidence)
    assert outbox.topic_of(event) == topic


def test_a_promotion_writes_one_delivery_per_subscribed_active_endpoint():
    wanted = endpoint("https://hooks.example/a", topics=["promote"])
    services.webhook_create(
        name="retire-only", url="https://hooks.example/b", fmt="json", topics=["retire"], by="admin"
    )
    silent = services.webhook_create(
        name="off", url="https://hooks.example/c", fmt="json", topics=["promote"], by="admin"
    )
    services.webhook_update(
        endpoint_id=silent.pk,
        url=silent.url,
        fmt="json",
        topics=["promote"],
        active=False,
        by="admin",
    )
    promote()
    (delivery,) = WebhookDelivery.objects.all()
    assert (delivery.endpoint_id, delivery.topic, delivery.rule_id) == (wanted.pk, "promote", "C-1")
    assert delivery.payload["id"] == str(delivery.id)
    assert delivery.payload["event"]["type"] == "rule_promoted"
    assert delivery.payload["rule"]["trigger"] == "when git push fails with non-fast-forward"
    assert delivery.payload["summary"] == "C-1 promoted by engine: improved task_completion"
    assert delivery.payload["url"].endswith("/rules/C-1/")


def test_a_change_that_rolls_back_leaves_no_delivery():
    endpoint("https://hooks.example/a")
    rule = candidate("C-1")
    with pytest.raises(RuntimeError), transaction.atomic():
        rule_retire_by_reviewer(rule_id=rule.id, actor=Actor.reviewer("rita"), reason="wrong")
        raise RuntimeError("the request failed after the retirement")
    assert WebhookDelivery.objects.count() == 0


def test_a_review_item_and_a_failed_round_are_announced_to_those_who_want_them():
    endpoint("https://hooks.example/a", topics=["needs_review", "round_failed"])
    make_rule("C-1")
    verdict("C-1", 5, "pending", replay_attempts=3)
    journal_write(
        type="validation_round_finished",
        actor="engine",
        round_id=9,
        evidence={"errors": [{"rule": "C-1", "error": "LockLost: the lock expired"}]},
    )
    topics = sorted(WebhookDelivery.objects.values_list("topic", flat=True))
    assert topics == ["needs_review", "round_failed"]
    failed = WebhookDelivery.objects.get(topic="round_failed")
    assert failed.payload["errors"] == [{"rule": "C-1", "error": "LockLost: the lock expired"}]
    review = WebhookDelivery.objects.get(topic="needs_review")
    assert review.payload["review"]["kind"] == "inconclusive"


def test_a_slack_endpoint_gets_a_text_with_a_link_to_the_rule():
    endpoint("https://hooks.slack.example/T0", fmt="slack")
    promote()
    (delivery,) = WebhookDelivery.objects.all()
    assert set(delivery.payload) == {"text"}
    assert delivery.payload["text"].startswith("<http://")
    assert (
        "/rules/C-1/|C-1> promoted by engine: improved task_completion" in delivery.payload["text"]
    )


# --- sending, against a real receiver -------------------------------------------------------------


def test_a_delivery_is_signed_and_retried_after_a_5xx_until_it_is_delivered():
    with Receiver(answers=(503, 200)) as receiver, freeze_time(T0) as clock:
        hook = endpoint(receiver.url)
        promote()
        (delivery,) = WebhookDelivery.objects.all()

        first = services.delivery_attempt(delivery_id=delivery.pk)
        assert (first.code, first.retry_in) == (503, 30)
        assert first.delivery.status == DeliveryStatus.PENDING
        assert first.delivery.next_attempt_at == T0 + timedelta(seconds=30)
        # Not due yet: nothing is sent.
        assert services.delivery_attempt(delivery_id=delivery.pk) is None

        clock.tick(timedelta(seconds=30))
        second = services.delivery_attempt(delivery_id=delivery.pk)
        assert (second.code, second.retry_in, second.delivery.status) == (200, None, "delivered")
        assert second.delivery.attempts == 2
        assert [entry["code"] for entry in second.delivery.log] == [503, 200]

    assert len(receiver.received) == 2
    for got in receiver.received:
        headers = got["headers"]
        # The same delivery id on every attempt: a receiver can drop a repeat.
        assert headers["X-CauterWeb-Delivery"] == str(delivery.pk)
        assert headers["X-CauterWeb-Topic"] == "promote"
        assert json.loads(got["body"]) == delivery.payload
        assert outbox.signature_valid(
            hook.secret,
            got["body"],
            headers["X-CauterWeb-Timestamp"],
            headers["X-CauterWeb-Signature"],
            now=int(headers["X-CauterWeb-Timestamp"]),
        )
    # The signature is what the docs say: HMAC-SHA256 over "<timestamp>.<body>".
    got = receiver.received[0]
    stamp = got["headers"]["X-CauterWeb-Timestamp"]
    expected = hmac.new(hook.secret.encode(), f"{stamp}.".encode() + got["body"], hashlib.sha256)
    assert got["headers"]["X-CauterWeb-Signature"] == "sha256=" + expected.hexdigest()
    assert stamp == str(int(T0.timestamp()))


def test_a_receiver_that_refuses_with_a_4xx_is_not_asked_again():
    with Receiver(answers=(400,)) as receiver, freeze_time(T0):
        endpoint(receiver.url)
        promote()
        (delivery,) = WebhookDelivery.objects.all()
        attempt = services.delivery_attempt(delivery_id=delivery.pk)
    assert (attempt.code, attempt.retry_in, attempt.delivery.status) == (400, None, "failed")
    assert attempt.delivery.last_error == "HTTP 400: not now"


def test_retry_after_is_honoured_up_to_the_longest_back_off():
    with Receiver(answers=(429,), headers={"Retry-After": "900"}) as receiver, freeze_time(T0):
        endpoint(receiver.url)
        promote()
        (delivery,) = WebhookDelivery.objects.all()
        assert services.delivery_attempt(delivery_id=delivery.pk).retry_in == 900


def test_an_unreachable_receiver_is_retried_and_fails_after_the_last_attempt():
    with Receiver() as receiver:
        url = receiver.url
    # The server is gone: every attempt is a connection error.
    with freeze_time(T0) as clock:
        endpoint(url)
        promote()
        (delivery,) = WebhookDelivery.objects.all()
        delays = []
        for _ in range(services.MAX_ATTEMPTS):
            attempt = services.delivery_attempt(delivery_id=delivery.pk)
            delays.append(attempt.retry_in)
            clock.tick(timedelta(seconds=attempt.retry_in or 0))
    assert delays == [*services.RETRY_DELAYS_S, None]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_code) == ("failed", 6, None)
    assert delivery.last_error.startswith("ConnectError")


def test_a_delivery_claimed_by_another_sender_is_not_sent_twice_and_a_dead_sender_gives_it_back():
    endpoint("https://hooks.example/a")
    with freeze_time(T0) as clock:
        promote()
        (delivery,) = WebhookDelivery.objects.all()
        # Another sender claimed it (its UPDATE won) and died before recording anything.
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status="sending", lease_until=T0 + timedelta(seconds=40)
        )
        assert services.delivery_attempt(delivery_id=delivery.pk) is None
        assert services.deliveries_due() == []
        clock.tick(timedelta(seconds=41))
        assert services.deliveries_due() == [delivery.pk]
    delivery.refresh_from_db()
    assert delivery.status == "pending"


def test_the_sweep_command_sends_what_a_broker_outage_left_behind():
    with Receiver(answers=(200,)) as receiver:
        endpoint(receiver.url)
        # The test's transaction never commits: the task the commit would hand the delivery
        # to never runs, as with a broker that was down.
        promote()
        out = io.StringIO()
        call_command("deliver_webhooks", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {
        "attempted": 1,
        "delivered": 1,
        "retrying": 0,
        "failed": 0,
    }
    assert len(receiver.received) == 1


def test_the_test_button_sends_one_delivery_and_shows_its_answer():
    with Receiver(answers=(204,)) as receiver:
        hook = endpoint(receiver.url, topics=["retire"])
        delivery = services.webhook_test(endpoint_id=hook.pk, by="admin")
    assert (delivery.topic, delivery.status, delivery.last_code) == ("test", "delivered", 204)
    assert json.loads(receiver.received[0]["body"])["summary"].startswith("test notification")


def test_a_failed_delivery_can_be_sent_again_and_the_configuration_is_journaled():
    hook = endpoint("https://hooks.example/a")
    promote()
    WebhookDelivery.objects.update(status="failed", attempts=6)
    (delivery,) = WebhookDelivery.objects.all()
    assert services.delivery_resend(delivery_id=delivery.pk, by="admin")
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("pending", 0)
    assert not services.delivery_resend(delivery_id=delivery.pk, by="admin")
    changes = JournalEvent.objects.filter(type="webhook_changed").values_list("evidence", flat=True)
    assert [c["change"] for c in changes] == ["created"]
    assert hook.secret not in json.dumps(list(changes))


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"url": "ftp://x"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"topics": []}, "topics"),
        ({"topics": ["everything"]}, "topics"),
        ({"fmt": "xml"}, "format"),
        ({"name": ""}, "name"),
    ],
)
def test_a_bad_endpoint_is_refused_naming_the_field(fields, field):
    values = {"name": "ops", "url": "https://x/h", "fmt": "json", "topics": ["promote"]} | fields
    with pytest.raises(services.InvalidWebhook) as exc:
        services.webhook_create(**values, by="admin")
    assert exc.value.field == field


def test_a_timestamp_too_old_or_a_wrong_secret_does_not_verify():
    body = b'{"a":1}'
    good = outbox.sign("s3cret", body, 1000)
    assert outbox.signature_valid("s3cret", body, "1000", good, now=1100)
    assert not outbox.signature_valid("s3cret", body, "1000", good, now=1400)
    assert not outbox.signature_valid("other", body, "1000", good, now=1000)
    assert not outbox.signature_valid("s3cret", body, "nope", good, now=1000)
