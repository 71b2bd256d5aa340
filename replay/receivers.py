"""What the engine does when the lifecycle stores reports or records a candidate."""

from .kick import kick_round


def enrol_reports(sender, *, reports, now, **kwargs) -> None:
    from .trials import trial_enrol

    trial_enrol(reports=reports, now=now)


def kick_on_reports(sender, *, report_ids, **kwargs) -> None:
    kick_round(reason="report")


def kick_on_candidate(sender, *, rule_id, **kwargs) -> None:
    kick_round(reason="candidate")
