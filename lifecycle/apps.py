from django.apps import AppConfig
from django.db.models.signals import post_migrate


class LifecycleConfig(AppConfig):
    name = "lifecycle"
    verbose_name = "Rule lifecycle"

    def ready(self) -> None:
        # The registry is seeded by migration 0002; seeding again after every migrate (and
        # after a flush, which empties the table) keeps the defaults present, like
        # contenttypes and permissions. Existing rows are never changed.
        post_migrate.connect(_seed_metrics, sender=self, dispatch_uid="lifecycle.seed_metrics")
        # The services enqueue the follow-ups by task name; the Celery app registers the tasks
        # when a process first enqueues one (lifecycle/follow_ups.py), so starting Django —
        # `check`, `help`, a command with nothing to enqueue — does not load Celery.


def _seed_metrics(sender, using="default", apps=None, **kwargs) -> None:
    # `migrate` passes its historical apps; `flush` passes none.
    from django.apps import apps as global_apps

    from .metrics import seed_default_metrics

    registry = apps or global_apps
    seed_default_metrics(registry.get_model("lifecycle", "MetricDefinition"), using=using)
