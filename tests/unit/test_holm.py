"""Holm's step-down correction (replay/engine/holm.py, docs/semantics.md#s17-4), against values
worked out by hand and against statsmodels' `multipletests(method="holm")`, which it replaced."""

import random

import pytest

from replay.engine.holm import holm


@pytest.mark.parametrize(
    ("p_values", "alpha", "rejected", "adjusted"),
    [
        # m = 1: the test itself.
        ([0.03], 0.05, [True], [0.03]),
        ([0.07], 0.05, [False], [0.07]),
        # Sorted 0.01, 0.02, 0.04: ×3, ×2, ×1 → 0.03, 0.04, max(0.04, 0.04) = 0.04.
        # 0.01 ≤ 0.05/3, 0.02 ≤ 0.05/2, 0.04 ≤ 0.05: all rejected.
        ([0.04, 0.01, 0.02], 0.05, [True, True, True], [0.04, 0.03, 0.04]),
        # 0.02 > 0.05/3 stops the descent at once: 0.03 is kept although 0.03 ≤ 0.05/2.
        ([0.02, 0.03, 0.5], 0.05, [False, False, False], [0.06, 0.06, 0.5]),
        # The running maximum: 0.01×4 = 0.04, 0.012×3 = 0.036 → 0.04; 0.02×2 = 0.04; 0.3.
        (
            [0.3, 0.02, 0.012, 0.01],
            0.05,
            [False, True, True, True],
            [0.3, 0.04, 0.04, 0.04],
        ),
        # Adjusted values are capped at 1.
        ([0.6, 0.9], 0.05, [False, False], [1.0, 1.0]),
        # Ties: the same adjusted value and the same decision, whichever comes first.
        ([0.02, 0.02], 0.05, [True, True], [0.04, 0.04]),
        ([0.03, 0.03], 0.05, [False, False], [0.06, 0.06]),
        # A stricter level rejects fewer: 0.004 ≤ 0.01/2, then 0.02 > 0.01.
        ([0.02, 0.004], 0.01, [False, True], [0.02, 0.008]),
        ([], 0.05, [], []),
    ],
)
def test_holm_by_hand(p_values, alpha, rejected, adjusted):
    got_rejected, got_adjusted = holm(p_values, alpha)
    assert got_rejected == rejected
    assert got_adjusted == pytest.approx(adjusted, abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_holm_agrees_with_statsmodels(seed):
    from statsmodels.stats import multitest  # a dev dependency (pyproject.toml)

    rng = random.Random(seed)
    m = rng.randint(1, 12)
    # Small p-values and ties on purpose: the step-down's stopping point and the running maximum.
    p_values = [rng.choice([rng.random() * 0.05, rng.random(), 0.01]) for _ in range(m)]
    alpha = rng.choice([0.01, 0.05, 0.1])
    reject, adjusted, _, _ = multitest.multipletests(p_values, alpha=alpha, method="holm")
    got_rejected, got_adjusted = holm(p_values, alpha)
    assert got_rejected == [bool(r) for r in reject]
    assert got_adjusted == pytest.approx([float(a) for a in adjusted], abs=1e-15)
