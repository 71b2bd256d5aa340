"""Holm's step-down correction (replay/engine/holm.py, docs/semantics.md#s17-4), against values
worked out by hand and against statsmodels' `multipletests(method="holm")`, which it replaced."""

import random

import pytest

from replay.engine.holm import holm, holm_weighted


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


@pytest.mark.parametrize(
    ("p_values", "first", "rejected", "adjusted"),
    [
        # The first part (0.01, 0.03) at 0.8 × 0.05 = 0.04: Holm rejects both (0.01 ≤ 0.02,
        # 0.03 ≤ 0.04), adjusted 0.02 and 0.03 over 0.8; the second, 0.005 ≤ 0.2 × 0.05,
        # adjusted 0.005 over 0.2.
        ([0.01, 0.03, 0.005], [True, True, False], [True, True, True], [0.025, 0.0375, 0.025]),
        # Passing on decides: 0.02 > 0.2 × 0.05 alone, ≤ 0.05 once the first part is done.
        ([0.001, 0.02], [True, False], [True, True], [0.00125, 0.02]),
        # And the other way: the second part, all rejected at 0.01, hands its share on, and
        # 0.045 > 0.04 is tested at the whole 0.05.
        ([0.045, 0.005], [True, False], [True, True], [0.045, 0.025]),
        # Neither part rejects: each adjusted over its share, capped at 1.
        ([0.3, 0.5], [True, False], [False, False], [0.375, 1.0]),
        # One part only: Holm over it at the whole level.
        ([0.02, 0.03], [True, True], [True, True], [0.04, 0.04]),
        ([0.02, 0.03], [False, False], [True, True], [0.04, 0.04]),
        ([], [], [], []),
    ],
)
def test_weighted_holm_by_hand(p_values, first, rejected, adjusted):
    got_rejected, got_adjusted = holm_weighted(p_values, 0.05, first, share=0.8)
    assert got_rejected == rejected
    assert got_adjusted == pytest.approx(adjusted, abs=1e-12)


def test_weighted_holm_keeps_the_family_error_at_alpha():
    """Every hypothesis true, p-values uniform: some rejection at most alpha of the time."""
    rng = random.Random(7)
    draws, wrong = 40_000, 0
    for _ in range(draws):
        m = rng.randint(2, 7)
        first = [i < rng.randint(1, m - 1) for i in range(m)]
        wrong += any(holm_weighted([rng.random() for _ in range(m)], 0.05, first, 0.8)[0])
    # Binomial sd at 0.05 over 40,000 draws is 0.0011.
    assert wrong / draws <= 0.05 + 0.003
