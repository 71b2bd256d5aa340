"""The lifecycle's follow-ups as Celery tasks: thin, they take ids and call one service each.
The service that made the change enqueues them on commit by name (lifecycle/follow_ups.py),
so it never imports this module; they are idempotent. A task imports its service when it runs:
the comparator is loaded by the worker, never by the request that recorded the rule."""

import logging

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
    from .follow_ups import webhook_deliver_enqueue
    from .services.webhooks import deliveries_due

    webhook_deliver_enqueue(deliveries_due())


def _enqueue_in(seconds: float, **kwargs) -> None:
    from .follow_ups import celery_app

    # Inline (the embedded default) a countdown would be ignored and the retry sent at once:
    # there the sweep (`deliver_webhooks`, or beat) sends it when it is due.
    if celery_app().conf.task_always_eager:
        return
    try:
        webhook_deliver_task.apply_async(kwargs=kwargs, countdown=seconds)
    except Exception as exc:
        logger.warning("could not schedule a webhook retry (%s): %s", kwargs, exc)
