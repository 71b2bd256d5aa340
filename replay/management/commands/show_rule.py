from django.core.management.base import CommandError

from lifecycle.management.base import JsonCommand
from lifecycle.selectors.rules import rule_status


class Command(JsonCommand):
    help = "Show a rule: state, pending reason, trial, replay attempts, latest evidence (§15)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("rule_id")

    def handle(self, *args, **options):
        doc = rule_status(options["rule_id"])
        if doc is None:
            raise CommandError(f"no rule {options['rule_id']!r}")
        self.emit(doc, _human(doc))


def _human(doc: dict) -> str:
    pending = doc["pending_reason"] or doc["pending_text"]
    state = doc["state"] + (f" — {pending}" if doc["pending_text"] else "")
    trial = doc["trial"]
    lines = [
        f"{doc['id']} [{doc['scope']}] {state}",
        f"  {doc['trigger']} → {doc['directive']}",
        f"  replay attempts {doc['replay_attempts']}; validator {doc['validator'] or '-'}",
        f"  trial: {trial['enrolled']} enrolled, {trial['breached']} breached, "
        f"{trial['read_candidate']} read it; baseline {trial['baseline_rate']:.2f}",
    ]
    arms = trial["arms"]
    if any(arm["sessions"] or arm["unreported"] for arm in arms.values()):
        lines.append(
            "  randomized trial: "
            + "; ".join(
                f"{name} {a['sessions']} sessions, {a['breached']} breached"
                + (f", {a['unreported']} not reported yet" if a["unreported"] else "")
                for name, a in arms.items()
            )
        )
    if doc["reason"]:
        lines.append(f"  reason: {doc['reason']}")
    latest = doc["latest_evidence"]
    if latest is not None:
        at = latest["at"][:19].replace("T", " ")
        lines.append(f"  latest evidence: {latest['type']} at {at}")
    return "\n".join(lines)
