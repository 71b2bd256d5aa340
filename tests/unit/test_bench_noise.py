"""bench/bench_noise.py's grid (docs/semantics.md#s21-3) runs, at a tiny size, through the
engine's real decision code: CI keeps it from rotting (the figures are in docs/benchmarks.md,
from full runs)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_grid(*switches: str, **options: str) -> str:
    """`bench_noise.py --grid` with these switches and options (`failing_cases="1"` →
    `--failing-cases 1`); its output, after asserting it ran."""
    flags = [
        part for name, value in options.items() for part in (f"--{name.replace('_', '-')}", value)
    ]
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_noise.py"), "--grid", *switches, *flags],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_noise_bench_runs_a_tiny_grid_with_shared_controls():
    shown = run_grid(
        "--json",
        groups="2",
        bases="0.3",
        effects="0.4",
        harms="0.5",
        failing_cases="1,2",
        win_counts="1",
        per_case="1,2",
        max_repeats="4",
    )
    out = json.loads(shown)
    cells = out["cells"]
    assert [(c["base"], c["failing"], c["wins"]) for c in cells] == [(0.3, 1, 1), (0.3, 2, 1)]
    for cell in cells:
        assert set(cell["classes"]) == {
            "null",
            "helps +0.4",
            "harms 0.5",
            "rescues +0.4, harms 0.5",  # the default `--mixed` class
        }
        for figures in cell["classes"].values():
            assert figures["rules"] == 4  # 2 groups of 2 candidates sharing their cases
            shares = figures["promoted"] + figures["retired"] + figures["pending"]
            # The exact one-sided 95 % upper bound of the cell's promotion rate: with none of
            # 4 promoted it is 1 − 0.05^(1/4); it never falls below the rate it bounds.
            upper = figures["promoted_upper95"]
            assert figures["promoted"] <= upper <= 1
            if figures["promoted"] == 0:
                assert upper == pytest.approx(1 - 0.05 ** (1 / 4))
            assert shares == 1 and 0 <= figures["futility"] <= figures["retired"]
            # One look of 4 repeats per case and arm: alone a decided rule spends 8 replays a
            # case; two candidates sharing the control replays spend 4 + 4 / 2 each.
            cases = cell["failing"] + 1
            assert figures["replays_alone"] in (None, cases * 8)
            assert figures["replays"]["1"] in (None, cases * 8)
            assert figures["replays"]["2"] in (None, cases * 6)
    assert set(out["overall"]["replays_per_decided"]) == {"1", "2"}
    # The rule that rescues and harms is reported apart: its promotions are errors.
    assert set(out["overall"]["mixed_promoted_max"]) == {"rescues +0.4, harms 0.5"}
    assert set(out["overall"]["power_min"]) == {"helps +0.4"}
    assert set(out["overall"]["harm_retired_min"]) == {"harms 0.5"}


def test_the_noise_bench_runs_the_rates_futility_boundary():
    # The test-based boundary on the verifier's pass/fail outcome: the grid runs through the
    # exact test of the success rates and says which boundary it measured.
    shown = run_grid(
        groups="3",
        bases="0.5",
        effects="0.2",
        harms="",
        failing_cases="1",
        win_counts="1",
        per_case="1",
        futility_beta="0.02",
    )
    assert "futility True (effect 0.2, beta 0.02)" in shown
    assert shown.count("| 0.5 | 1 | 1 |") == 1
