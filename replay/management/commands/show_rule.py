from django.core.management.base import CommandError

from lifecycle.journal import DECISION_TYPES, EventType
from lifecycle.management.base import JsonCommand
from lifecycle.models import JournalEvent, Rule, TrialEnrolment
from lifecycle.scopes import rule_as_dict
from replay.trials import trial_counts

EVIDENCE_TYPES = (*DECISION_TYPES, EventType.VALIDATION_VERDICT)


class Command(JsonCommand):
    help = "Show a rule: state, pending reason, trial, replay attempts, latest evidence (§15)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("rule_id")

    def handle(self, *args, **options):
        rule = Rule.objects.filter(pk=options["rule_id"]).first()
        if rule is None:
            raise CommandError(f"no rule {options['rule_id']!r}")
        enrolled, breached = trial_counts([rule.id]).get(rule.id, (0, 0))
        read = TrialEnrolment.objects.filter(rule=rule, read_candidate=True).count()
        latest = (
            JournalEvent.objects.filter(rule=rule, type__in=EVIDENCE_TYPES)
            .order_by("-at", "-id")
            .first()
        )
        doc = {
            **rule_as_dict(rule),
            "pending_reason": rule.pending_reason or None,
            "pending_text": rule.pending_text or None,
            "replay_attempts": rule.replay_attempts,
            "validator": rule.last_validator or None,
            "reason": rule.verdict_reason,
            "trial": {
                "baseline_rate": rule.baseline_rate,
                "enrolled": enrolled,
                "breached": breached,
                "read_candidate": read,
            },
            "latest_evidence": None
            if latest is None
            else {
                "type": latest.type,
                "at": latest.at.isoformat(),
                "round": latest.round_id,
                "evidence": latest.evidence,
            },
        }
        state = rule.state + (
            f" — {rule.pending_reason or rule.pending_text}" if rule.pending_text else ""
        )
        human = [
            f"{rule.id} [{rule.scope}] {state}",
            f"  {rule.trigger} → {rule.directive}",
            f"  replay attempts {rule.replay_attempts}; validator {rule.last_validator or '-'}",
            f"  trial: {enrolled} enrolled, {breached} breached, {read} read it; "
            f"baseline {rule.baseline_rate:.2f}",
        ]
        if rule.verdict_reason:
            human.append(f"  reason: {rule.verdict_reason}")
        if latest is not None:
            human.append(f"  latest evidence: {latest.type} at {latest.at:%Y-%m-%d %H:%M:%S}")
        self.emit(doc, "\n".join(human))
