from django.apps import AppConfig


class ReplayConfig(AppConfig):
    name = "replay"
    verbose_name = "Validation engine"

    def ready(self) -> None:
        from lifecycle import signals

        # The tasks are registered when the Celery app is first used (lifecycle/follow_ups.py).
        from . import kick

        # After commit only: a round must see what asked for it.
        signals.work_arrived.connect(kick.kick_on_work, dispatch_uid="replay.kick")
