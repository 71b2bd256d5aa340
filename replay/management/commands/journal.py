from lifecycle.management.base import JsonCommand
from lifecycle.models import JournalEvent


class Command(JsonCommand):
    help = "Journal events, oldest first, optionally for one rule, type or round (semantics §10, §15)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--rule", help="only events of this rule")
        parser.add_argument("--type", help="only events of this type")
        parser.add_argument("--round", type=int, help="only events of this round")

    def handle(self, *args, **options):
        events = JournalEvent.objects.order_by("at", "id")
        if options["rule"]:
            events = events.filter(rule_id=options["rule"])
        if options["type"]:
            events = events.filter(type=options["type"])
        if options["round"] is not None:
            events = events.filter(round_id=options["round"])
        rows = [
            {
                "type": e.type,
                "at": e.at.isoformat(),
                "rule": e.rule_id,
                "round": e.round_id,
                "actor": e.actor,
                "evidence": e.evidence,
            }
            for e in events.iterator(chunk_size=2000)
        ]
        human = "\n".join(
            f"{r['at']} {r['type']}"
            + (f" rule={r['rule']}" if r["rule"] else "")
            + (f" round={r['round']}" if r["round"] is not None else "")
            + f" by {r['actor']}"
            for r in rows
        )
        self.emit(rows, human or "(no events)")
