from lifecycle.management.base import JsonCommand
from lifecycle.selectors.journal import journal_rows


class Command(JsonCommand):
    help = (
        "Journal events, oldest first, optionally for one rule, type or round (semantics §10, §15)."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--rule", help="only events of this rule")
        parser.add_argument("--type", help="only events of this type")
        parser.add_argument("--round", type=int, help="only events of this round")

    def handle(self, *args, **options):
        rows = journal_rows(rule=options["rule"], type=options["type"], round_id=options["round"])
        human = "\n".join(
            f"{r['at']} {r['type']}"
            + (f" rule={r['rule']}" if r["rule"] else "")
            + (f" round={r['round']}" if r["round"] is not None else "")
            + f" by {r['actor']}"
            for r in rows
        )
        self.emit(rows, human or "(no events)")
