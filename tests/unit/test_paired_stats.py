"""The stratified permutation test behind the paired design (semantics §17.4), checked against
independent computations: SciPy's own permutation test, relabellings enumerated by hand, and the
hypergeometric distribution for 0/1 values. No database."""

import math
from itertools import combinations, product

import numpy as np
import pytest
from scipy import stats as sp
from scipy.signal import convolve

from replay.engine.stats import Stratum, shift_test, weighted_effect


def by_hand(strata, *, shift=0.0):
    """(P(T* ≥ T), P(T* ≤ T)) of the treatment sum, every within-stratum relabelling listed."""
    observed = sum(sum(x - shift for x in s.treatment) for s in strata)
    per_stratum = []
    for s in strata:
        pooled = [x - shift for x in s.treatment] + list(s.control)
        per_stratum.append(
            [
                sum(pooled[i] for i in pick)
                for pick in combinations(range(len(pooled)), len(s.treatment))
            ]
        )
    sums = [sum(combo) for combo in product(*per_stratum)]
    greater = sum(1 for t in sums if t >= observed - 1e-9) / len(sums)
    less = sum(1 for t in sums if t <= observed + 1e-9) / len(sums)
    return greater, less


SMALL = [
    [Stratum((1.0, 1.0), (0.0, 0.0))],
    [Stratum((0.9, 0.8, 0.7), (0.2, 0.6))],
    [Stratum((1.0, 0.0), (0.0, 1.0)), Stratum((1.0, 1.0), (0.0, 0.0))],
    [
        Stratum((0.3, 0.9), (0.1,)),
        Stratum((0.5,), (0.7, 0.2, 0.4)),
        Stratum((1.0, 1.0), (0.0, 1.0)),
    ],
    [Stratum((0.0, 0.0, 0.0), (1.0, 1.0, 0.0))],
]


@pytest.mark.parametrize("strata", SMALL)
def test_exact_p_values_are_the_relabellings_counted_by_hand(strata):
    result = shift_test(strata, seed=0)
    greater, less = by_hand(strata)
    assert result.method == "exact"
    assert result.relabellings == math.prod(
        math.comb(len(s.treatment) + len(s.control), len(s.treatment)) for s in strata
    )
    assert result.p_greater == pytest.approx(greater)
    assert result.p_less == pytest.approx(less)


@pytest.mark.parametrize(
    "treatment, control",
    [
        ((0.3, 0.9, 0.8, 0.7), (0.1, 0.5, 0.2, 0.6)),
        ((1, 0, 1), (0, 0, 1, 0)),
        ((0.5, 0.4), (0.6, 0.9)),
    ],
)
def test_one_stratum_agrees_with_scipy_permutation_test(treatment, control):
    result = shift_test([Stratum(tuple(map(float, treatment)), tuple(map(float, control)))], seed=0)
    for side, p in (("greater", result.p_greater), ("less", result.p_less)):
        ref = sp.permutation_test(
            (treatment, control),
            lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
            permutation_type="independent",
            alternative=side,
            n_resamples=math.inf,
        )
        assert p == pytest.approx(ref.pvalue)


def test_on_0_1_values_it_is_the_exact_stratified_hypergeometric_test():
    # Three cases, 8 replays per arm: treatment successes 7, 6, 8; control 4, 5, 3.
    tables = [(7, 4), (6, 5), (8, 3)]
    strata = [
        Stratum(tuple([1.0] * t + [0.0] * (8 - t)), tuple([1.0] * c + [0.0] * (8 - c)))
        for t, c in tables
    ]
    # Conditional on each case's total successes, the treatment successes are hypergeometric;
    # the statistic is their sum, whose law is the convolution over cases.
    law = np.array([1.0])
    for t, c in tables:
        law = convolve(law, sp.hypergeom.pmf(np.arange(9), 16, t + c, 8))
    expected = law[sum(t for t, _ in tables) :].sum()
    # 12870³ relabellings: drawn, not enumerated. The p-value lies within Monte Carlo error.
    result = shift_test(strata, seed=7, resamples=20_000)
    assert result.method == "monte_carlo"
    assert (
        abs(result.p_greater - expected) < 4 * math.sqrt(expected * (1 - expected) / 20_000) + 1e-4
    )


def test_monte_carlo_is_deterministic_for_a_seed_and_close_to_the_exact_value():
    rng = np.random.default_rng(3)
    strata = [Stratum(tuple(rng.random(5) + 0.2), tuple(rng.random(5))) for _ in range(2)]
    exact = shift_test(strata, seed=1, exact_limit=100_000)
    drawn = shift_test(strata, seed=1, exact_limit=10, resamples=20_000)
    again = shift_test(strata, seed=1, exact_limit=10, resamples=20_000)
    assert (exact.method, drawn.method) == ("exact", "monte_carlo")
    assert drawn.p_greater == again.p_greater and drawn.p_less == again.p_less
    assert abs(drawn.p_greater - exact.p_greater) < 0.01


def test_the_observed_labelling_counts_so_a_monte_carlo_p_value_is_never_zero():
    strata = [Stratum(tuple([1.0] * 8), tuple([0.0] * 8))] * 3
    result = shift_test(strata, seed=0, resamples=999)
    assert result.p_greater == 1 / 1000


@pytest.mark.parametrize("strata", SMALL[:4])
@pytest.mark.parametrize("level", [0.05, 0.2])
def test_the_interval_holds_exactly_the_shifts_the_test_does_not_reject(strata, level):
    result = shift_test(strata, seed=0)
    low, high = result.lower_bound(level), result.upper_bound(level)
    for bound, side in ((low, 0), (high, 1)):
        if math.isinf(bound):
            continue
        # At the bound the test of "effect = bound" does not reject; just past it, it does.
        assert by_hand(strata, shift=bound)[side] > level
        past = bound - 1e-6 if side == 0 else bound + 1e-6
        assert by_hand(strata, shift=past)[side] <= level
    # Significance and the interval agree: the bound excludes 0 exactly when p ≤ level.
    assert (low > 0) == (result.p_greater <= level)
    assert (high < 0) == (result.p_less <= level)


def test_an_interval_too_short_to_reject_anything_is_unbounded():
    result = shift_test([Stratum((1.0,), (0.0,))], seed=0)
    assert result.lower_bound(0.05) == -math.inf and result.upper_bound(0.05) == math.inf


def test_the_effect_is_the_cmh_weighted_mean_difference():
    strata = [Stratum((1.0, 1.0), (0.0, 0.0)), Stratum((0.5,), (0.3, 0.1, 0.2))]
    # weights n_T n_C / (n_T + n_C): 1 and 3/4; differences 1 and 0.3.
    assert weighted_effect(strata) == pytest.approx((1 * 1.0 + 0.75 * 0.3) / 1.75)
    assert shift_test(strata, seed=0).effect == pytest.approx(weighted_effect(strata))


def test_a_stratum_without_both_arms_is_refused():
    with pytest.raises(ValueError):
        shift_test([Stratum((1.0,), ())], seed=0)
    with pytest.raises(ValueError):
        shift_test([], seed=0)
