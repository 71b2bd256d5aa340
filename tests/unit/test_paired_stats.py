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


# --- ties broken by a second value per replay -----------------------------------------------


def by_hand_lexicographic(strata):
    """(P(T* ≥ T), P(T* ≤ T)) comparing (first sum, second sum) lexicographically, every
    within-stratum relabelling listed."""
    observed = (
        sum(sum(s.treatment) for s in strata),
        sum(sum(s.treatment_ties) for s in strata),
    )
    per_stratum = []
    for s in strata:
        pooled = list(zip(s.treatment + s.control, s.treatment_ties + s.control_ties, strict=True))
        per_stratum.append(
            [
                tuple(sum(pooled[i][j] for i in pick) for j in (0, 1))
                for pick in combinations(range(len(pooled)), len(s.treatment))
            ]
        )
    sums = [tuple(sum(c[j] for c in combo) for j in (0, 1)) for combo in product(*per_stratum)]

    def cmp(x, y):  # -1, 0, +1 with a tolerance on each key in turn
        for a, b in zip(x, y, strict=True):
            if abs(a - b) > 1e-9:
                return 1 if a > b else -1
        return 0

    greater = sum(1 for t in sums if cmp(t, observed) >= 0) / len(sums)
    less = sum(1 for t in sums if cmp(t, observed) <= 0) / len(sums)
    return greater, less


TIED = [
    [Stratum((1.0, 0.0), (0.0, 0.0), (0.9, 0.2), (0.1, 0.3))],
    [
        Stratum((1.0, 1.0), (0.0, 1.0), (0.8, 0.7), (0.2, 0.6)),
        Stratum((1.0, 0.0), (1.0, 0.0), (0.5, 0.4), (0.5, 0.1)),
    ],
    [
        Stratum((1.0, 1.0, 0.0), (0.0, 1.0), (0.3, 0.3, 0.3), (0.3, 0.3)),  # ties all round
        Stratum((0.0,), (1.0, 0.0), (0.9,), (0.1, 0.2)),
    ],
]


def test_a_tie_is_broken_by_the_second_value_of_the_replays():
    # One success in treatment, none in control: every relabelling that keeps the success in
    # the treatment set ties on the first sum (3 of 6); the second sum 0.9 + 0.2 = 1.1 is met
    # or beaten by {0.9, 0.2} and {0.9, 0.3} only. Without the second values p is 1/2.
    strata = TIED[0]
    assert shift_test(strata, seed=0).p_greater == pytest.approx(2 / 6)
    plain = [Stratum(s.treatment, s.control) for s in strata]
    assert shift_test(plain, seed=0).p_greater == pytest.approx(3 / 6)


@pytest.mark.parametrize("strata", TIED)
def test_exact_p_values_with_ties_broken_are_the_relabellings_counted_by_hand(strata):
    result = shift_test(strata, seed=0)
    greater, less = by_hand_lexicographic(strata)
    assert result.method == "exact"
    assert result.p_greater == pytest.approx(greater)
    assert result.p_less == pytest.approx(less)


def test_breaking_ties_keeps_the_test_exactly_valid_on_every_labelling_of_null_data():
    # Under "the candidate changes nothing" every labelling of the pooled replays is equally
    # likely. Listing them all: the share with p ≤ a never exceeds a, for every a the test
    # can give, and the tie-broken test reaches levels the plain one cannot.
    first = [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    second = [0.95, 0.85, 0.3, 0.1, 0.7, 0.25, 0.8, 0.2]
    shares = {}
    for ties in (True, False):
        ps = []
        for pick in combinations(range(8), 4):
            rest = [i for i in range(8) if i not in pick]
            stratum = Stratum(
                tuple(first[i] for i in pick),
                tuple(first[i] for i in rest),
                tuple(second[i] for i in pick) if ties else (),
                tuple(second[i] for i in rest) if ties else (),
            )
            ps.append(shift_test([stratum], seed=0).p_greater)
        for a in set(ps):
            assert sum(p <= a + 1e-12 for p in ps) / len(ps) <= a + 1e-12
        shares[ties] = sum(p <= 0.05 for p in ps) / len(ps)
    assert shares[False] == pytest.approx(1 / 70)  # only all four successes in treatment
    assert shares[False] < shares[True] <= 0.05


@pytest.mark.parametrize("strata", TIED)
@pytest.mark.parametrize("level", [0.1, 0.3, 0.5])
def test_with_ties_broken_the_interval_is_the_closure_of_the_shifts_not_rejected(strata, level):
    result = shift_test(strata, seed=0)
    low, high = result.lower_bound(level), result.upper_bound(level)
    # A bound clear of 0 still means significant; a significant test may have its bound at 0
    # exactly (the end of the interval is then open: the tie at 0 was broken against it).
    if low > 0:
        assert result.p_greater <= level
    if result.p_greater <= level:
        assert low >= 0
    if high < 0:
        assert result.p_less <= level
    if result.p_less <= level:
        assert high <= 0


def test_tie_breaking_values_must_cover_every_replay_or_none():
    with pytest.raises(ValueError):
        Stratum((1.0, 0.0), (0.0,), (0.5,), (0.2,))
