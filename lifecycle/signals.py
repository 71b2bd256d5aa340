"""Signals the lifecycle sends after a commit; the replay app listens and kicks a round
(semantics §9.1). Lifecycle never imports the engine."""

from django.dispatch import Signal

# sender=None, rule_id=...
candidate_recorded = Signal()
# sender=None, report_ids=[...]
reports_received = Signal()

# Sent INSIDE the transaction that stored new or changed reports, so trial enrolment (semantics §8)
# commits or rolls back with them. sender=None, reports=[Report], now=datetime
reports_stored = Signal()
