"""Enqueueing the lifecycle's follow-ups (lifecycle/tasks.py) when a change commits.

The services that make a change enqueue its follow-ups here, by task name, and the tasks call
those services when they run: naming the task instead of importing it keeps the services and
the tasks from importing each other. The Celery app, with its tasks, is created on a process's
first enqueue (`celery_app`), not when Django starts: a command that enqueues nothing — `check`,
`help`, an agent's JSON command with nothing to do — never loads Celery. An eager task (the
embedded default) runs in this process as before. A broker that is down never fails
the request that made the change: it is stored, and only its follow-up is missed (the sweep
catches up with webhook deliveries).
"""

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

RULE_COMPARE = "lifecycle.tasks.rule_compare_task"
RULES_COMPARE = "lifecycle.tasks.rules_compare_task"
RULES_RESCORE = "lifecycle.tasks.rules_rescore_task"
WEBHOOK_DELIVER = "lifecycle.tasks.webhook_deliver_task"

_batch = threading.local()


def rule_compare_on_commit(rule_id: str) -> None:
    """Enqueue the comparison of one recorded candidate (its extraction scores, is it a
    probable duplicate?) once the current transaction commits; inside
    `compared_in_one_task()`, add the rule to the one task enqueued when the block ends."""
    ids = getattr(_batch, "ids", None)
    if ids is not None:
        ids.append(rule_id)
        return
    transaction.on_commit(lambda: _enqueue(RULE_COMPARE, rule_id=rule_id))


@contextmanager
def compared_in_one_task() -> Iterator[None]:
    """The comparisons of a bulk record (a file of candidates, a pack) as one task, enqueued
    when the current transaction commits after the outermost block ends. A block that raises
    enqueues nothing: nothing was stored."""
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
        transaction.on_commit(lambda: _enqueue(RULES_COMPARE, rule_ids=ids))


def rules_rescore_enqueue(rule_ids: list[str]) -> None:
    """After source cases are imported or replaced: rescore the extraction of their rules."""
    if rule_ids:
        _enqueue(RULES_RESCORE, rule_ids=rule_ids)


def webhook_deliver_enqueue(delivery_ids: list) -> None:
    """One delivery task per webhook delivery row (docs/webhooks.md)."""
    for delivery_id in delivery_ids:
        _enqueue(WEBHOOK_DELIVER, delivery_id=str(delivery_id))


def webhook_deliver_on_commit(delivery_ids: list) -> None:
    transaction.on_commit(lambda: webhook_deliver_enqueue(delivery_ids))


def celery_app():
    """The project's Celery app with every task registered, created on first use. The setting
    `CAUTERWEB_CELERY_APP` names it (cauterweb/celery.py), as `ROOT_URLCONF` names the URLs:
    the domain does not import the project's wiring."""
    return import_string(settings.CAUTERWEB_CELERY_APP)()


def _enqueue(name: str, **kwargs) -> None:
    try:
        celery_app().tasks[name].delay(**kwargs)
    except Exception as exc:
        logger.warning("could not enqueue %s(%s): %s", name, kwargs, exc)
