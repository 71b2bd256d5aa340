"""bench/bench_trials.py runs, at a tiny size, through the engine's real decision code: CI keeps
it from rotting (the figures themselves are in docs/benchmarks.md, from full runs)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_trials_bench_runs_both_designs_on_a_tiny_grid():
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_trials.py"),
            "--populations",
            "4",
            "--bases",
            "0.5",
            "--sizes",
            "0.3",
            "--per-scope",
            "1",
            "2",
            "--max-sessions",
            "60",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    cells = json.loads(result.stdout)["cells"]
    assert [(c["base"], c["size"], c["per_scope"]) for c in cells] == [(0.5, 0.3, 1), (0.5, 0.3, 2)]
    for cell in cells:
        randomized, baseline = cell["randomized"], cell["baseline"]
        # Every trial ends by the cap; §8 decides every candidate after five reports.
        assert randomized["undecided"] == 0 and baseline["undecided"] == 0
        assert randomized["median_sessions"] <= 60 and baseline["median_sessions"] == 5
        assert 0 <= randomized["false_promotion"] <= 1 and 0 <= randomized["power"] <= 1
