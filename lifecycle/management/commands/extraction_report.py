from lifecycle.management.base import JsonCommand
from lifecycle.selectors.extraction import extraction_rows, summary_line, verdict_counts

NOTE = (
    "extraction accuracy (semantics §12) — a separate number from replay fidelity, never combined"
)


def _line(row: dict) -> list[str]:
    t, d = row["trigger"], row["directive"]
    # A rule scored by the earlier comparator may carry no probability.
    score = f"{row['score']:>5.2f}" if isinstance(row.get("score"), int | float) else "    —"
    return [
        f"{row['rule']:<10} {row['source_case']:<8} {row['verdict']:<9} {score}   "
        f"{row['semantic']:>8.2f} {row['signature_agreement']:>9.2f} "
        f"{t['token_f1']:>10.2f} {d['token_f1']:>12.2f}",
        f"  expected:  {row['expected']['trigger']} → {row['expected']['directive']}",
        f"  extracted: {row['extracted']['trigger']} → {row['extracted']['directive']}",
        f"  why: {row['why']}",
    ]


class Command(JsonCommand):
    help = "Score every rule whose source case has an expected_rule against it (semantics §12)."

    def handle(self, *args, **options):
        rows = extraction_rows()
        counts = verdict_counts(rows)
        human = [NOTE, ""]
        if rows:
            # The score (a probability) and its verdict decide; the rest are components.
            human.append(
                f"{'rule':<10} {'source':<8} {'verdict':<9} {'score':>5} | {'semantic':>8} "
                f"{'signature':>9} {'trigger F1':>10} {'directive F1':>12}"
            )
            for row in rows:
                human += _line(row)
        else:
            human.append("no rule has a source case with an expected_rule")
        human.append("")
        human.append(summary_line(counts))
        self.emit({"rows": rows, "summary": counts}, "\n".join(human))
