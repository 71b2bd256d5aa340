"""bench/bench_extraction.py runs at a tiny size on every test run, so it cannot rot: the
shipped comparator beside a baseline (here the same code, from this checkout's folder), and a
file of extra labelled pairs scored without being fitted on (semantics §12). The figures
themselves are in comparison/README.md, from full runs."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_bench_scores_every_split_and_an_extra_file_beside_a_baseline(tmp_path):
    extra = tmp_path / "writers.jsonl"
    same = {"trigger": "when git push fails with non-fast-forward", "directive": "pull first"}
    other = {"trigger": "when git push fails with non-fast-forward", "directive": "force push"}
    extra.write_text(
        "\n".join(
            json.dumps(
                {
                    "extracted": x,
                    "expected": same,
                    "label": label,
                    "split": "new_a",
                    "category": category,
                }
            )
            for x, label, category in (
                (same, 1, "identical_or_near"),
                (other, 0, "opposite_advice"),
            )
        )
        + "\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_extraction.py"),
            "--limit",
            "2",
            "--repeats",
            "1",
            "--pairs",
            str(extra),
            "--baseline",
            str(ROOT),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    report = json.loads(result.stdout)
    assert report["extra_splits"] == ["writers:new_a"]
    figures = report["writers:new_a"]
    assert figures["pairs"] == 2
    assert figures["auc"] == 1.0 and figures["accuracy"] == 1.0
    assert figures["uncertain_share"] == 0.0 and figures["different_at_0_9"] == 0
    # The baseline ran in its own process over the same pairs: the same code, the same figures.
    assert figures["baseline"]["accuracy"] == figures["accuracy"]
    assert figures["baseline"]["auc"] == figures["auc"]
    table = report["by_category"]["writers:new_a"]
    assert table["shipped"]["opposite_advice"]["errors"] == 0
    assert table["shipped"]["identical_or_near"]["match"] == 1
    assert table["baseline"] == table["shipped"]
    for split in report["training_splits"]:
        assert report[split]["pairs"] <= 2
        assert 0.0 <= report[split]["uncertain_share"] <= 1.0
