"""The futility boundary for pass/fail outcomes (docs/semantics.md#s21-3): the exact test of the
success rates a look before the last may stop a rule on, and its error budget. Pure: no
database."""

import math

import pytest

from replay.engine import stats
from replay.engine.paired import (
    PairedCase,
    PairedConfig,
    Sample,
    decide_paired,
    futility_level,
    futility_p_rates,
    look,
)
from tests.paired_cases import OC, C, T

CASES = [PairedCase(f"F{i}", "failing", OC, frozenset({OC})) for i in (1, 2, 3)]
RATES = PairedConfig(max_repeats=8, futility_beta=0.02, futility_effect=0.2)
SIGN = PairedConfig(max_repeats=8, futility_beta=None)


def first_look(cases: int, treatment: list[float], control: list[float]) -> list[Sample]:
    out = []
    for case in CASES[:cases]:
        out += [Sample(case.case_id, "failing", T, i, {OC: v}) for i, v in enumerate(treatment)]
        out += [Sample(case.case_id, "failing", C, i, {OC: v}) for i, v in enumerate(control)]
    return out


def stratum(successes: int, control: int, n: int = 4) -> stats.Stratum:
    return stats.Stratum(
        treatment=(1.0,) * successes + (0.0,) * (n - successes),
        control=(1.0,) * control + (0.0,) * (n - control),
    )


@pytest.mark.parametrize("control", [[0.0] * 4, [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
def test_one_case_failing_four_times_of_four_does_not_stop(control):
    # A case the rule lifts from 0.2 to 0.4 fails 4 times in a row 13 % of the time: the sign
    # stops it whenever its control succeeded once; the test of the rates waits.
    samples = first_look(1, [0.0] * 4, control)
    verdict = decide_paired(samples, CASES[:1], RATES)
    assert verdict.outcome == "pending"
    assert verdict.evidence["improvement"]["futility_p"] > 0.02
    sign = decide_paired(samples, CASES[:1], PairedConfig(max_repeats=8, futility_beta=None))
    assert sign.outcome == ("retire" if any(control) else "pending")


def test_one_case_failing_every_time_against_a_control_that_always_succeeds_stops():
    verdict = decide_paired(first_look(1, [0.0] * 4, [1.0] * 4), CASES[:1], RATES)
    assert verdict.outcome == "retire"
    assert verdict.evidence["futility_test"] == "rates"
    p = verdict.evidence["improvement"]["futility_p"]
    assert p < 0.002 and verdict.evidence["futility_bound"] == p
    assert "a lift of 0.2 ruled out at level 0.02 (exact test of the success rates, p " in (
        verdict.reason
    )
    assert verdict.reason.endswith("at look 1 of 2 (a futility stop)")


def test_three_cases_that_all_did_worse_stop():
    verdict = decide_paired(first_look(3, [0.0] * 4, [1.0, 1.0, 0.0, 0.0]), CASES, RATES)
    assert verdict.outcome == "retire" and verdict.evidence["futility_test"] == "rates"


def test_the_last_look_has_no_futility_test():
    samples = first_look(3, [0.0] * 8, [1.0] * 8)
    verdict = decide_paired(samples, CASES, RATES)
    assert "futility_p" not in verdict.evidence["improvement"]
    assert "futility" not in verdict.reason


@pytest.mark.parametrize("cases", [1, 3])
def test_the_p_value_rises_with_the_treatment_successes_and_falls_with_the_lift(cases):
    # Monotone: a look that stops, stops with fewer treatment successes too, and a larger lift
    # to protect is ruled out at least as easily.
    for control in range(5):
        ps = [futility_p_rates([stratum(s, control)] * cases, 0.2) for s in range(5)]
        assert ps == sorted(ps)
        for s in range(5):
            lifts = [futility_p_rates([stratum(s, control)] * cases, e) for e in (0.1, 0.2, 0.4)]
            assert lifts == sorted(lifts, reverse=True)


@pytest.mark.parametrize("rate", [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
def test_a_rule_lifting_one_case_by_the_effect_is_stopped_at_most_beta_of_the_time(rate):
    # The error budget, exactly: over every first look of one case (4 replays an arm) of a rule
    # lifting its success from `rate` to `rate` + 0.2, the chance of a futility stop.
    def binomial(n, p, k):
        return math.comb(n, k) * p**k * (1 - p) ** (n - k)

    stopped = sum(
        binomial(4, rate + 0.2, s) * binomial(4, rate, c)
        for s in range(5)
        for c in range(5)
        if futility_p_rates([stratum(s, c)], 0.2) <= 0.02
    )
    assert stopped <= 0.02


@pytest.mark.parametrize("rate", [0.2, 0.4, 0.5, 0.7])
def test_a_rule_lifting_two_cases_by_the_effect_is_stopped_at_most_beta_of_the_time(rate):
    # The same over every first look of two cases: the worst control rates are searched per
    # case, so the budget holds however the cases' looks combine.
    def chance(s, c):
        return (
            math.comb(4, s)
            * math.comb(4, c)
            * (rate + 0.2) ** s
            * (0.8 - rate) ** (4 - s)
            * (rate**c * (1 - rate) ** (4 - c))
        )

    looks = [(s, c) for s in range(5) for c in range(5)]
    stopped = sum(
        chance(*a) * chance(*b)
        for a in looks
        for b in looks
        if futility_p_rates([stratum(*a), stratum(*b)], 0.2) <= 0.02
    )
    assert 0 < stopped <= 0.02


def test_beta_is_shared_by_the_looks_before_the_last():
    samples = first_look(1, [0.0] * 4, [0.0] * 4)
    three = PairedConfig(max_repeats=12, futility_beta=0.02)
    assert futility_level(three, look(samples, three)) == pytest.approx(0.01)
    assert futility_level(RATES, look(samples, RATES)) == pytest.approx(0.02)
    assert futility_level(SIGN, look(samples, SIGN)) is None
