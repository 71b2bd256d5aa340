from django.core.management.base import CommandError

from lifecycle.management.base import JsonCommand, open_lines
from lifecycle.selectors.extraction import score_pairs, summary_line, verdict_counts
from lifecycle.validation import ImportRejected, read_jsonl


class Command(JsonCommand):
    help = (
        "Score extracted rules against expected ones, one JSON pair a line: "
        '{"extracted": {trigger, directive}, "expected": {trigger, directive}} (semantics §12, §15).'
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--pairs", required=True, help="JSON Lines file, or - for stdin")
        parser.add_argument(
            "--workers",
            type=int,
            default=1,
            help="processes to score a large file with (default 1; the CPU count is "
            "the most that helps)",
        )

    def handle(self, *args, **options):
        if options["workers"] < 1:
            raise CommandError("--workers must be at least 1")
        with open_lines(options["pairs"]) as lines:
            try:
                rows = score_pairs(read_jsonl(lines), workers=options["workers"])
            except ImportRejected as exc:
                self.reject(exc)
        if not rows:
            raise CommandError(f"no pairs in {options['pairs']}")
        counts = verdict_counts(rows)
        human = [
            f"{'line':>4}  {'verdict':<9} {'trigger F1':>10} {'directive F1':>12} "
            f"{'semantic':>8} {'signature':>9}"
        ]
        for row in rows:
            human.append(
                f"{row['line']:>4}  {row['verdict']:<9} {row['trigger']['token_f1']:>10.2f} "
                f"{row['directive']['token_f1']:>12.2f} {row['semantic']:>8.2f} "
                f"{row['signature_agreement']:>9.2f}  {row['why']}"
            )
        human.append(summary_line(counts))
        self.emit({"pairs": rows, "summary": counts}, "\n".join(human))
