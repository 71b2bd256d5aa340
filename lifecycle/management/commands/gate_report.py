from django.core.management.base import CommandError

from lifecycle.management.base import JsonCommand
from lifecycle.metrics import load_registry
from lifecycle.models import Rule
from lifecycle.selectors.gate import MATCHERS, LexicalCorpus, gate_report


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


class Command(JsonCommand):
    help = (
        "The corpus gate (semantics §11): what each rule would fire on, under the lexical and the "
        "signature matcher, side by side."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--rule", help="one rule id (default: every rule)")
        parser.add_argument(
            "--matcher", choices=[*MATCHERS, "both"], default="both", help="default: both"
        )

    def handle(self, *args, **options):
        rules = Rule.objects.order_by("recorded_at", "id")
        if options["rule"]:
            rules = rules.filter(pk=options["rule"])
            if not rules.exists():
                raise CommandError(f"no rule {options['rule']!r}")
        matchers = MATCHERS if options["matcher"] == "both" else (options["matcher"],)
        registry = load_registry()
        corpus = LexicalCorpus.load() if "lexical" in matchers else None
        rows = [
            {
                "rule": rule.id,
                "state": rule.state,
                "trigger": rule.trigger,
                "gate": {
                    m: gate_report(rule, matcher=m, corpus=corpus, registry=registry)
                    for m in matchers
                },
            }
            for rule in rules
        ]
        self.emit({"rules": rows}, self._table(rows) if rows else "no rules recorded")

    def _table(self, rows: list[dict]) -> str:
        head = (
            f"  {'matcher':<10} {'prevented':>9} {'broken':>6} {'near':>4} "
            f"{'precision':>9} {'recall':>6}  {'verdict':<12} broken ids"
        )
        out = []
        for row in rows:
            out += [f"{row['rule']} ({row['state']}): {row['trigger']}", head]
            for matcher, g in row["gate"].items():
                out.append(
                    f"  {matcher:<10} {g['failures_prevented']:>9} {g['successes_broken']:>6} "
                    f"{g['near_misses']:>4} {_ratio(g['precision']):>9} {_ratio(g['recall']):>6}"
                    f"  {g['verdict']:<12} {', '.join(g['fired']['broken']) or '—'}"
                )
            out.append(f"  family: {g['family_basis']} ({g['family_size']})")
            out.append("")
        return "\n".join(out).rstrip()
