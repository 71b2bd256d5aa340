"""bench/oc_paired.py, the fast evaluator of the paired design's operating characteristics
(docs/semantics.md#s21-3): its test is the engine's test, and its `--tiny` mode runs in CI."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from replay.engine import stats

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import oc_paired  # noqa: E402


def binary(successes: int, n: int) -> tuple[float, ...]:
    return (1.0,) * successes + (0.0,) * (n - successes)


@pytest.mark.parametrize(
    ("n", "counts"),
    [(4, [(3, 1)]), (4, [(2, 1), (4, 0)]), (4, [(0, 2), (3, 3)]), (2, [(2, 0), (1, 1), (0, 1)])],
)
def test_its_p_values_are_the_engines_untied_exact_test_at_the_extremes_of_the_tie_break(n, counts):
    # With no tie-breaking values the engine counts every tie as at least as extreme: the
    # evaluator's randomised p at V = 1 (greater) and V = 0 (less), exactly (the engine
    # enumerates these relabellings).
    strata = [stats.Stratum(binary(t, n), binary(c, n)) for t, c in counts]
    engine = stats.shift_test(strata, seed=0)
    t = np.array([[t for t, _ in counts]])
    c = np.array([[c for _, c in counts]])
    greater, _ = oc_paired.randomised_p(t, c, n, np.ones(1))
    _, less = oc_paired.randomised_p(t, c, n, np.zeros(1))
    assert greater[0] == pytest.approx(engine.p_greater)
    assert less[0] == pytest.approx(engine.p_less)


def test_a_rule_that_changes_nothing_is_promoted_at_most_about_alpha():
    cell = {"base": 0.5, "F": 3, "W": 2, "effect": 0.0, "harm": 0.0}
    design = {
        "looks": [4, 8, 10],
        "alpha": 0.05,
        "margin": 0.05,
        "spending": "obf",
        "futility": "sign",
        "beta": 0.02,
        "futility_effect": 0.2,
        "win_rate": 1.0,
        "retire_spending": "last",
        "wins": "follow",
    }
    out = oc_paired.summary(oc_paired.simulate(cell, design, 4000, np.random.default_rng(1)))
    assert 0.02 < out["promoted"] < 0.06
    helped = oc_paired.simulate(cell | {"effect": 0.4}, design, 2000, np.random.default_rng(2))
    assert oc_paired.summary(helped)["promoted"] > 0.85


def test_the_tiny_run_prints_its_table():
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "oc_paired.py"), "--tiny", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert len(out["cells"]) == 2
    assert set(out["cells"][0]["classes"]) == set(oc_paired.CLASSES)
