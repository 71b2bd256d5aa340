"""The lifecycle's Celery tasks, named here for Celery's autodiscovery (`<app>.tasks`). They are
defined in services/follow_ups.py, beside the services that enqueue them on commit."""

from .services.follow_ups import rule_compare_task, rules_rescore_task

__all__ = ["rule_compare_task", "rules_rescore_task"]
