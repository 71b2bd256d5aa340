"""The protected wins first (docs/semantics.md#s21-3): each look replays the wins, tests the
regressions on them, and asks for the failing cases' replays of that look only if no regression
retired the rule. Each look tests the regressions once. Pure: no database."""

import pytest

from replay.engine.paired import (
    FAILING as FAILING_KIND,
)
from replay.engine.paired import (
    WIN,
    PairedConfig,
    Sample,
    decide_paired,
    leading_kind,
    look,
    next_requests,
    regressions_tested,
)
from tests.paired_cases import FAILING, OC, WINS, C, T

LEAD = PairedConfig(wins_lead=True, retire_spending="pocock")
CASES = FAILING + WINS


def replays(cases, arm_: str, values: list[float], start: int = 0) -> list[Sample]:
    return [
        Sample(c.case_id, c.case_kind, arm_, start + i, {OC: v})
        for c in cases
        for i, v in enumerate(values)
    ]


def wins(treatment: list[float], control: list[float], start: int = 0) -> list[Sample]:
    return replays(WINS, T, treatment, start) + replays(WINS, C, control, start)


def failing(treatment: list[float], control: list[float], start: int = 0) -> list[Sample]:
    return replays(FAILING, T, treatment, start) + replays(FAILING, C, control, start)


def test_the_wins_lead_only_with_both_kinds_selected():
    assert leading_kind(CASES, LEAD) == WIN
    assert leading_kind(FAILING, LEAD) == FAILING_KIND  # no win: the failing cases lead
    assert leading_kind(CASES, PairedConfig()) == WIN  # the default
    assert leading_kind(CASES, PairedConfig(wins_lead=False)) == FAILING_KIND
    assert leading_kind(CASES, PairedConfig(wins_lead=False, wins_follow=False)) is None


def test_a_look_replays_the_wins_first_then_the_failing_cases():
    first = next_requests([], CASES, LEAD)
    assert {case for case, _ in first} == {"W1", "W2"} and len(first) == 16
    samples = wins([1.0] * 4, [1.0] * 4)
    second = next_requests(samples, CASES, LEAD)
    assert {case for case, _ in second} == {"F1", "F2", "F3"} and len(second) == 24
    samples += failing([0.0] * 4, [0.0] * 4)
    third = next_requests(samples, CASES, LEAD)
    assert {case for case, _ in third} == {"W1", "W2"} and len(third) == 16


def test_a_win_broken_at_the_first_look_retires_before_any_failing_replay():
    # Both wins fail 4 of 4 with the rule and succeed 4 of 4 without: p 1/12870, under the first
    # look's Pocock share of the regression level.
    samples = wins([0.0] * 4, [1.0] * 4)
    verdict = decide_paired(samples, CASES, LEAD)
    assert verdict.outcome == "retire"
    assert verdict.evidence["regressions_tested"] is True
    assert verdict.evidence["replays"] == 16
    assert verdict.reason.startswith("regressed outcome_correct on protected win W1")
    level = look(samples, LEAD, "pocock").level
    assert verdict.evidence["alpha_look"]["retire"] == pytest.approx(level)
    assert 0 < level < LEAD.alpha


def test_with_all_the_level_at_the_last_look_an_early_harm_does_not_retire():
    last = PairedConfig(wins_lead=True, retire_spending="last")
    verdict = decide_paired(wins([0.0] * 4, [1.0] * 4), CASES, last)
    assert verdict.outcome == "pending"
    assert verdict.evidence["alpha_look"]["retire"] == 0


def test_a_complete_early_look_does_not_test_the_regressions_again():
    # The wins of look 1 were tested when they came in; once the failing cases are in too the
    # look promotes or stops for futility, but retires on no regression.
    samples = wins([1.0] * 4, [1.0] * 4) + failing([0.0] * 4, [0.0] * 4)
    verdict = decide_paired(samples, CASES, LEAD)
    assert verdict.evidence["regressions_tested"] is False
    assert verdict.outcome == "pending"
    # Its rows are kept for the holds, without an interval: the page says "not tested".
    rows = verdict.evidence["regressions"]
    assert rows and all(r["ci"] == [None, None] and not r["rejected"] for r in rows)


def test_the_failing_cases_of_a_look_not_yet_in_neither_promote_nor_stop_for_futility():
    # Look 2's wins are in, its failing cases are not: a rescue that would promote waits.
    samples = wins([1.0] * 8, [1.0] * 8) + failing([1.0] * 4, [0.0] * 4)
    verdict = decide_paired(samples, CASES, LEAD)
    assert verdict.evidence["regressions_tested"] is True
    assert verdict.outcome == "pending"
    assert verdict.evidence["improvement"]["significant"] is False
    # The same failing cases with the wins level with them promote (look 1, tested at once).
    level = wins([1.0] * 4, [1.0] * 4) + failing([1.0] * 4, [0.0] * 4)
    assert decide_paired(level, CASES, LEAD).outcome == "promote"


def test_the_last_look_tests_the_regressions_once_everything_is_in():
    samples = wins([1.0] * 10, [1.0] * 10) + failing([0.0] * 8, [0.0] * 8)
    before = decide_paired(samples, CASES, LEAD)
    assert before.outcome == "pending" and before.evidence["regressions_tested"] is False
    assert {case for case, _ in next_requests(samples, CASES, LEAD)} == {"F1", "F2", "F3"}
    samples += failing([0.0] * 2, [0.0] * 2, start=8)
    after = decide_paired(samples, CASES, LEAD)
    assert after.evidence["regressions_tested"] is True


@pytest.mark.parametrize(
    ("partial", "lead", "early", "tested"),
    [
        (True, True, True, True),  # wins first, an early look: when its wins are in
        (False, True, True, False),
        (True, True, False, False),  # the last look: once everything is in
        (False, True, False, True),
        (True, False, True, False),  # failing cases first: once the wins are in
        (False, False, True, True),
        (False, False, False, True),
    ],
)
def test_each_look_tests_the_regressions_once(partial, lead, early, tested):
    assert regressions_tested(partial, lead, early) is tested


def test_before_the_last_look_a_failing_case_that_does_worse_is_the_futility_stops():
    # Look 2's wins are in; the failing cases did worse under treatment at look 1. Only a win's
    # regression retires before the last look: this one is retired for no improvement instead,
    # when its failing cases' look is in.
    samples = wins([1.0] * 8, [1.0] * 8) + failing([0.0] * 4, [1.0] * 4)
    partial = decide_paired(samples, CASES, LEAD)
    assert partial.outcome == "pending" and partial.evidence["regressions_tested"] is True
    assert any(r["rejected"] and r["kind"] == "failing" for r in partial.evidence["regressions"])
    samples += failing([0.0] * 4, [1.0] * 4, start=4)
    verdict = decide_paired(samples, CASES, LEAD)
    assert verdict.outcome == "retire" and verdict.reason.endswith("(a futility stop)")
