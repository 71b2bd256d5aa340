"""The paired design's defaults (docs/semantics.md#s21-3): 10 repeats per case and arm in looks
at 4, 8 and 10, O'Brien–Fleming spending for promotion, and the futility boundary of the exact
test of the success rates (a lift of 0.2 ruled out at 0.02 over the two early looks). Where
the default schedule stops for efficacy, where it goes on, and where its last look leaves a
rule pending with the repeats that would decide it. Pure: no database."""

import math

import pytest

from replay.engine.paired import (
    PairedConfig,
    Sample,
    decide_paired,
    look,
    next_requests,
    spent_by,
)
from tests.paired_cases import FAILING, OC, C, T

DEFAULTS = PairedConfig()


def every_case(treatment: list[float], control: list[float]) -> list[Sample]:
    out = []
    for case in FAILING:
        out += [Sample(case.case_id, "failing", T, i, {OC: v}) for i, v in enumerate(treatment)]
        out += [Sample(case.case_id, "failing", C, i, {OC: v}) for i, v in enumerate(control)]
    return out


def runs(successes: int, n: int) -> list[float]:
    return [1.0] * successes + [0.0] * (n - successes)


def test_the_defaults_are_ten_repeats_in_looks_of_four_with_the_rates_futility_test():
    assert (DEFAULTS.max_repeats, DEFAULTS.batch, DEFAULTS.spending) == (10, 4, "obf")
    assert (DEFAULTS.futility_beta, DEFAULTS.futility_effect) == (0.02, 0.2)
    # The wins of each look first, their regressions tested at every look (O'Brien–Fleming).
    assert (DEFAULTS.wins_lead, DEFAULTS.retire_spending) == (True, "obf")
    # Looks at 4, 8 and 10 repeats: the last batch is the two repeats left.
    assert len(next_requests(every_case(runs(2, 4), runs(1, 4)), FAILING, DEFAULTS)) == 24
    assert len(next_requests(every_case(runs(4, 8), runs(4, 8)), FAILING, DEFAULTS)) == 12
    assert next_requests(every_case(runs(5, 10), runs(5, 10)), FAILING, DEFAULTS) == []
    levels = [look(every_case(runs(1, n), runs(1, n)), DEFAULTS) for n in (4, 8, 10)]
    assert [(x.index, x.count) for x in levels] == [(1, 3), (2, 3), (3, 3)]
    assert math.isclose(sum(x.level for x in levels), 0.05)
    assert levels[0].level == pytest.approx(spent_by(1 / 3, alpha=0.05, spending="obf"))


def test_a_clear_lift_stops_for_efficacy_at_the_second_look():
    # 6 of 8 against 2 of 8 on each of three cases: p 0.0007, under the second look's 0.0157.
    verdict = decide_paired(every_case(runs(6, 8), runs(2, 8)), FAILING, DEFAULTS)
    assert verdict.outcome == "promote"
    assert (verdict.evidence["look"], verdict.evidence["looks"]) == (2, 3)
    level = spent_by(2 / 3, alpha=0.05, spending="obf") - spent_by(
        1 / 3, alpha=0.05, spending="obf"
    )
    assert verdict.evidence["alpha_look"]["promote"] == pytest.approx(level)
    assert verdict.evidence["improvement"]["p_value"] <= level
    assert verdict.reason.startswith("improved outcome_correct: effect +0.50 [+0.20, +0.80]")


def test_a_first_look_that_neither_shows_a_lift_nor_rules_one_out_goes_on():
    # 2 of 4 against 1 of 4: not significant at 0.0007, and a lift of 0.2 is not ruled out (the
    # sign boundary would not have stopped it either; 0 of 4 against 1 of 4 it would have).
    verdict = decide_paired(every_case(runs(2, 4), runs(1, 4)), FAILING, DEFAULTS)
    assert verdict.outcome == "pending"
    assert verdict.evidence["improvement"]["futility_p"] > 0.01
    assert verdict.reason.endswith("needs more samples: 4 of 10 repeats per case")
    behind = decide_paired(every_case(runs(0, 4), runs(1, 4)), FAILING, DEFAULTS)
    assert behind.outcome == "pending"
    sign = PairedConfig(futility_beta=None)
    assert decide_paired(every_case(runs(0, 4), runs(1, 4)), FAILING, sign).outcome == "retire"


def test_a_first_look_that_rules_the_lift_out_stops_for_futility():
    verdict = decide_paired(every_case(runs(0, 4), runs(2, 4)), FAILING, DEFAULTS)
    assert verdict.outcome == "retire"
    assert verdict.evidence["futility_test"] == "rates"
    assert verdict.reason.endswith(
        "a lift of 0.2 ruled out at level 0.01 (exact test of the success rates, p 0.00054) "
        "at look 1 of 3 (a futility stop)"
    )


def test_the_last_look_leaves_a_small_lift_pending_with_the_repeats_that_would_decide():
    verdict = decide_paired(every_case(runs(6, 10), runs(4, 10)), FAILING, DEFAULTS)
    assert verdict.outcome == "pending" and verdict.pending_reason == "replay_inconclusive"
    assert verdict.reason == (
        "effect +0.20 [−0.06, +0.44]; the interval still holds the margin after the last look; "
        "about 7 more repeats per case and arm would decide (replay_max_repeats 10 → 17)"
    )
    # Not a futility stop: no early look is left, and nothing is retired.
    assert "futility_test" not in verdict.evidence
    assert decide_paired(every_case(runs(7, 10), runs(4, 10)), FAILING, DEFAULTS).outcome == (
        "promote"
    )
