"""The lifecycle's follow-ups as Celery tasks, and their enqueueing: thin, they take ids and
call one service each. The service that made the change enqueues them on commit; they are
idempotent. A task imports its service when it runs (the comparator is loaded by the worker,
never by the request that recorded the rule), which is also why `.importlinter` lets this one
module reach back into the services that enqueue it."""

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="lifecycle.tasks.rule_compare_task", ignore_result=True)
def rule_compare_task(*, rule_id: str) -> None:
    """After a candidate is recorded: its extraction scores, and is it a probable duplicate?"""
    from .services.comparisons import rule_store_comparison
    from .services.duplicates import rule_check_duplicate

    rule_store_comparison(rule_id=rule_id)
    rule_check_duplicate(rule_id=rule_id)


@shared_task(name="lifecycle.tasks.rules_compare_task", ignore_result=True)
def rules_compare_task(*, rule_ids: list[str]) -> None:
    """`rule_compare_task` for every candidate of a bulk record, in the order recorded, in one
    task: the metric registry read once, the comparator loaded once."""
    from .metrics import load_registry
    from .models import Rule
    from .services.comparisons import rule_store_comparison
    from .services.duplicates import rule_check_duplicate

    registry = load_registry()
    rules = Rule.objects.in_bulk(rule_ids)
    for rule_id in rule_ids:
        if rule_id in rules:
            rule_store_comparison(rule_id=rule_id, rule=rules[rule_id])
            rule_check_duplicate(rule_id=rule_id, registry=registry, rule=rules[rule_id])


@shared_task(name="lifecycle.tasks.rules_rescore_task", ignore_result=True)
def rules_rescore_task(*, rule_ids: list[str]) -> None:
    """After source cases are imported or replaced: the extraction scores of their rules."""
    from .services.comparisons import rule_store_comparison

    for rule_id in rule_ids:
        rule_store_comparison(rule_id=rule_id)


_batch = threading.local()


def rule_compare_on_commit(rule_id: str) -> None:
    """Enqueue `rule_compare_task` once the current transaction commits; inside
    `compared_in_one_task()`, add the rule to the one task enqueued when the block ends. A
    broker that is down never fails the request that recorded the rule: the rule is stored,
    only its scores and duplicate link are missed."""
    ids = getattr(_batch, "ids", None)
    if ids is not None:
        ids.append(rule_id)
        return
    from django.db import transaction

    transaction.on_commit(lambda: _enqueue(rule_compare_task, rule_id=rule_id))


@contextmanager
def compared_in_one_task() -> Iterator[None]:
    """The comparisons of a bulk record (a file of candidates, a pack) as one
    `rules_compare_task`, enqueued when the current transaction commits after the outermost
    block ends. A block that raises enqueues nothing: nothing was stored."""
    if getattr(_batch, "ids", None) is not None:
        yield
        return
    _batch.ids = []
    try:
        yield
        ids = list(dict.fromkeys(_batch.ids))
    finally:
        _batch.ids = None
    if ids:
        from django.db import transaction

        transaction.on_commit(lambda: _enqueue(rules_compare_task, rule_ids=ids))


def rules_rescore_enqueue(rule_ids: list[str]) -> None:
    if rule_ids:
        _enqueue(rules_rescore_task, rule_ids=rule_ids)


def _enqueue(task, **kwargs) -> None:
    try:
        task.delay(**kwargs)
    except Exception as exc:
        logger.warning("could not enqueue %s(%s): %s", task.name, kwargs, exc)


# A redelivered task finds its delivery claimed, delivered or not yet due: harmless.
@shared_task(name="lifecycle.tasks.webhook_deliver_task", ignore_result=True, acks_late=True)
def webhook_deliver_task(*, delivery_id: str) -> None:
    """One attempt at one webhook delivery (docs/webhooks.md); a failure schedules the next."""
    from .services.webhooks import delivery_attempt

    attempt = delivery_attempt(delivery_id=delivery_id)
    if attempt is not None and attempt.retry_in is not None:
        _enqueue_in(attempt.retry_in, delivery_id=delivery_id)


@shared_task(name="lifecycle.tasks.webhooks_sweep_task", ignore_result=True)
def webhooks_sweep_task() -> None:
    """Periodic: deliveries that are due (a retry, a broker that was down at commit, a
    sender that died mid-attempt) are handed to `webhook_deliver_task` again."""
    from .services.webhooks import deliveries_due

    webhook_deliver_enqueue(deliveries_due())


def webhook_deliver_enqueue(delivery_ids: list) -> None:
    for delivery_id in delivery_ids:
        _enqueue(webhook_deliver_task, delivery_id=str(delivery_id))


def _enqueue_in(seconds: float, **kwargs) -> None:
    from celery import current_app

    # Inline (the embedded default) a countdown would be ignored and the retry sent at once:
    # there the sweep (`deliver_webhooks`, or beat) sends it when it is due.
    if current_app.conf.task_always_eager:
        return
    try:
        webhook_deliver_task.apply_async(kwargs=kwargs, countdown=seconds)
    except Exception as exc:
        logger.warning("could not schedule a webhook retry (%s): %s", kwargs, exc)
