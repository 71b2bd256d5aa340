import os

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")

app = Celery("cauterweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
if app.conf.task_always_eager and not app.conf.broker_url:
    # The embedded default runs every task in-process, yet Celery still takes a producer from
    # the broker's pool for an eager call, and with no URL kombu warned "No hostname was
    # supplied" on every command. The in-memory transport is never connected to, and this
    # URL names a host, so there is nothing to warn about. settings.CELERY_BROKER_URL stays
    # empty: the embedded default is read from it.
    app.conf.broker_url = "memory://localhost/"
# A worker imports every app's tasks module when it starts.
app.autodiscover_tasks()


def app_with_tasks() -> Celery:
    """The app with the project's tasks registered: what a web or command process enqueues
    through (settings.CAUTERWEB_CELERY_APP, read by lifecycle/follow_ups.py). Their tasks are
    imported here, on the first enqueue, not when Django starts."""
    from lifecycle import tasks as lifecycle_tasks  # noqa: F401
    from replay import tasks as replay_tasks  # noqa: F401

    return app


@task_prerun.connect
@task_postrun.connect
def _connections_between_tasks(sender=None, **kwargs) -> None:
    """A worker keeps its database connections from task to task (CELERY_DB_REUSE_MAX) and,
    like Django between requests, closes one that broke or outlived CONN_MAX_AGE (and health
    checks it before its next statement: a round trip). Not around an eager task, which runs
    inside its caller's transaction, nor around a task that replaces a broken connection
    itself (`reconnects_itself`: the replay task, thousands a round)."""
    if sender is None or getattr(sender.request, "is_eager", False):
        return
    if getattr(sender, "reconnects_itself", False):
        return
    from django.db import close_old_connections

    close_old_connections()


@worker_init.connect
def _import_replay_backend(**kwargs) -> None:
    """Import the replay backend in the worker's main process, before prefork forks its
    children: otherwise each child imports it on its first replay, seconds of CPU each for a
    harness with heavy imports, paid in the middle of a round."""
    import logging

    from django.conf import settings

    from replay.config import UnimportableBackend, load_backend

    backend = load_backend(settings.CAUTERWEB_REPLAY_BACKEND)
    if isinstance(backend, UnimportableBackend):  # each replay ends inconclusive with it
        logging.getLogger(__name__).error(backend.reason)
