"""The lifecycle's follow-ups as Celery tasks, and their enqueueing: thin, they take ids and
call one service each. The service that made the change enqueues them on commit; they are
idempotent. A task imports its service when it runs (the comparator is loaded by the worker,
never by the request that recorded the rule), which is also why `.importlinter` lets this one
module reach back into the services that enqueue it."""

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


@shared_task(name="lifecycle.tasks.rules_rescore_task", ignore_result=True)
def rules_rescore_task(*, rule_ids: list[str]) -> None:
    """After source cases are imported or replaced: the extraction scores of their rules."""
    from .services.comparisons import rule_store_comparison

    for rule_id in rule_ids:
        rule_store_comparison(rule_id=rule_id)


def rule_compare_enqueue(rule_id: str) -> None:
    """Enqueue `rule_compare_task`. A broker that is down never fails the request that
    recorded the rule: the rule is stored, only its scores and duplicate link are missed."""
    _enqueue(rule_compare_task, rule_id=rule_id)


def rules_rescore_enqueue(rule_ids: list[str]) -> None:
    if rule_ids:
        _enqueue(rules_rescore_task, rule_ids=rule_ids)


def _enqueue(task, **kwargs) -> None:
    try:
        task.delay(**kwargs)
    except Exception as exc:
        logger.warning("could not enqueue %s(%s): %s", task.name, kwargs, exc)
