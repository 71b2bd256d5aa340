from django.apps import AppConfig


class ReplayConfig(AppConfig):
    name = "replay"
    verbose_name = "Validation engine"

    def ready(self) -> None:
        from lifecycle import signals

        from . import kick, tasks  # noqa: F401  (tasks: registered for the kicks by name)

        # After commit only: a round must see what asked for it.
        signals.work_arrived.connect(kick.kick_on_work, dispatch_uid="replay.kick")
