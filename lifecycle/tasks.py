"""Lifecycle follow-ups as Celery tasks: thin, they take ids and make one call into a service."""

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="lifecycle.tasks.rule_compare_task", ignore_result=True)
def rule_compare_task(*, rule_id: str) -> None:
    """After a candidate is recorded: is it a probable duplicate of a live rule?"""
    from .services.duplicates import rule_check_duplicate

    rule_check_duplicate(rule_id=rule_id)


def rule_compare_enqueue(rule_id: str) -> None:
    """Enqueue `rule_compare_task`. A broker that is down never fails the request that
    recorded the rule: the rule is stored, only the duplicate link is missed."""
    try:
        rule_compare_task.delay(rule_id=rule_id)
    except Exception as exc:
        logger.warning("could not enqueue the duplicate check of %s: %s", rule_id, exc)
