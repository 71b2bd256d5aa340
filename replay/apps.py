from django.apps import AppConfig


class ReplayConfig(AppConfig):
    name = "replay"
    verbose_name = "Validation engine"

    def ready(self) -> None:
        from lifecycle import signals

        from . import receivers

        # Enrolment commits or rolls back with the reports (semantics §8); kicks come after commit.
        signals.reports_stored.connect(receivers.enrol_reports, dispatch_uid="replay.enrol")
        signals.reports_received.connect(receivers.kick_on_reports, dispatch_uid="replay.kick_r")
        signals.candidate_recorded.connect(
            receivers.kick_on_candidate, dispatch_uid="replay.kick_c"
        )
