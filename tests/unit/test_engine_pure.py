"""The engine's decisions (semantics §6–§9) as pure functions: no database, every branch."""

from datetime import UTC, datetime, timedelta

import pytest

from lifecycle.metrics import MetricInfo, Registry
from replay import engine
from replay.engine import CaseRef, Margins, Trial

REGISTRY = Registry(
    {
        "outcome_correct": MetricInfo("outcome_correct", 0),
        "task_completion": MetricInfo("task_completion", 1, aliases=("completion",)),
        "coherence": MetricInfo("coherence", 1),
        "tool_correctness": MetricInfo("tool_correctness", 2),
        "error_rate": MetricInfo("error_rate", 2, higher_is_better=False),
        "plan_quality": MetricInfo("plan_quality", 3),
    }
)
M = Margins(promote=0.05, regress=0.05)
T = datetime(2026, 11, 1, tzinfo=UTC)


def d(**deltas):
    return {k: {"original": 0.5, "replayed": 0.5 + v, "delta": v} for k, v in deltas.items()}


# --- §9.2 rotation and budget -------------------------------------------------------------------


def keys(*ids):
    return [(T + timedelta(minutes=i), rid) for i, rid in enumerate(ids)]


@pytest.mark.parametrize(
    "previous, expected",
    [
        (None, ["A", "B", "C"]),
        ("A", ["B", "C", "A"]),
        ("B", ["C", "A", "B"]),
        ("C", ["A", "B", "C"]),
    ],
)
def test_rounds_rotate_abc_bca_cab(previous, expected):  # semantics §9.2
    ks = keys("A", "B", "C")
    prev = next((k for k in ks if k[1] == previous), None)
    assert engine.rotate(ks, prev) == expected


def test_rotation_starts_past_a_previous_first_that_was_decided_since():  # semantics §9.2
    ks = keys("A", "B", "C")
    gone = (T + timedelta(minutes=1, seconds=30), "B2")  # sorted between B and C, now decided
    assert engine.rotate(ks, gone) == ["C", "A", "B"]


def test_rotation_of_nothing_is_nothing():
    assert engine.rotate([], None) == []


@pytest.mark.parametrize(
    "budget, elapsed, over",
    [(0, 1e9, False), (1.0, 0.5, False), (1.0, 1.0, True), (0.001, 0.002, True)],
)
def test_budget_zero_is_unlimited_and_is_checked_against_elapsed(budget, elapsed, over):
    assert engine.budget_exhausted(budget_s=budget, elapsed_s=elapsed) is over  # semantics §9.2


@pytest.mark.parametrize(
    "wired, attempts, over, validator",
    [
        (True, 0, False, "replay"),
        (True, 2, False, "replay"),
        (True, 3, False, "forward_trial"),  # semantics §7.10: replay no longer tried
        (True, 0, True, "forward_trial"),  # semantics §9.2: past the budget
        (False, 0, False, "forward_trial"),  # semantics §8: no backend
    ],
)
def test_the_validator_is_replay_while_wired_within_budget_and_attempts(
    wired, attempts, over, validator
):
    assert (
        engine.choose_validator(
            replay_wired=wired, replay_attempts=attempts, max_replay_attempts=3, over_budget=over
        )
        == validator
    )


@pytest.mark.parametrize(
    "took_over, arrived, deferred, why",
    [
        (False, 0, 0, None),  # a round that did all it could: the next kick starts the next
        (True, 0, 0, "took over a dead round"),
        (False, 2, 0, "candidates arrived during the round"),
        (False, 0, 3, "out of budget with replays left"),
        (True, 2, 3, "took over a dead round"),
    ],
)
def test_a_round_asks_for_a_follow_up_only_for_work_a_further_round_can_do_now(
    took_over, arrived, deferred, why
):  # docs/semantics.md#s9-1-lease
    assert engine.follow_up(took_over=took_over, arrived=arrived, deferred=deferred) == why


# --- §7.1, §7.2 case selection ----------------------------------------------------------------


def test_failing_cases_are_newest_first_then_by_id_and_capped():  # semantics §7.1
    cases = [
        CaseRef("F-1", T),
        CaseRef("F-3", T + timedelta(hours=1)),
        CaseRef("F-2", T + timedelta(hours=1)),
        CaseRef("F-0", None),
    ]
    assert [c.id for c in engine.select_failing_cases(cases, limit=3)] == ["F-3", "F-2", "F-1"]
    assert [c.id for c in engine.select_failing_cases(cases, limit=9)][-1] == "F-0"
    # As the round passes them: an iterator, read once (a case without a start time is kept).
    assert [c.id for c in engine.select_failing_cases(iter(cases), limit=9)] == [
        "F-3",
        "F-2",
        "F-1",
        "F-0",
    ]


def test_protected_wins_prefer_the_candidates_scope_then_newest():  # semantics §7.2
    wins = [
        CaseRef("S-1", T + timedelta(hours=3), "docs"),
        CaseRef("S-2", T + timedelta(hours=2), "git"),
        CaseRef("S-3", T + timedelta(hours=1), "git"),
    ]
    assert [c.id for c in engine.select_protected_wins(wins, scope="git", limit=2)] == [
        "S-2",
        "S-3",
    ]
    assert [c.id for c in engine.select_protected_wins(wins, scope="ops", limit=2)] == [
        "S-1",
        "S-2",
    ]


# --- §7.6 deltas ------------------------------------------------------------------------------


def test_deltas_cover_tiers_0_to_2_present_on_both_sides_only():  # semantics §7.4, §7.6
    out = engine.metric_deltas(
        {"task_completion": 0.2, "plan_quality": 0.5, "coherence": 0.8, "unknown": 0.1},
        {"task_completion": 0.9, "plan_quality": 0.1, "tool_correctness": 1.0, "unknown": 0.9},
        REGISTRY,
    )
    assert out == {"task_completion": {"original": 0.2, "replayed": 0.9, "delta": 0.7}}


def test_a_lower_is_better_metric_is_negated_so_positive_means_better():  # semantics §1, §7.6
    out = engine.metric_deltas({"error_rate": 0.4}, {"error_rate": 0.1}, REGISTRY)
    assert out["error_rate"]["delta"] == pytest.approx(0.3)


def test_an_alias_is_scored_under_its_metric():  # semantics §1 family
    out = engine.metric_deltas({"completion": 0.2}, {"completion": 0.5}, REGISTRY)
    assert list(out) == ["task_completion"]


# --- §6 deciding metric ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "deltas, verifier, rule_metric, trigger, expected",
    [
        (
            d(outcome_correct=1, task_completion=-0.5),
            True,
            "task_completion",
            None,
            "outcome_correct",
        ),
        (
            d(outcome_correct=1, task_completion=0.5),
            False,
            "task_completion",
            None,
            "task_completion",
        ),
        (
            d(task_completion=0.5, coherence=0.3),
            True,
            "task_completion",
            "coherence",
            "task_completion",
        ),
        (d(coherence=0.3), False, "task_completion", "coherence", "coherence"),
        (d(coherence=0.3, tool_correctness=-0.4), False, "", None, "tool_correctness"),
        (d(coherence=0.01), False, "", None, None),
        ({}, True, "task_completion", "coherence", None),
    ],
)
def test_the_deciding_metric_follows_the_trust_order(
    deltas, verifier, rule_metric, trigger, expected
):
    assert (
        engine.deciding_metric(
            deltas,
            verifier_answered=verifier,
            rule_metric=rule_metric,
            trigger_metric=trigger,
            margins=M,
        )
        == expected
    )  # semantics §6


def test_the_trigger_metric_is_the_notice_atom_of_the_case():  # semantics §6.3
    atoms = ["tool:git", "breach:completion", "error:x"]
    assert engine.signature_metric(atoms, REGISTRY) == "task_completion"
    assert engine.signature_metric(["tool:git"], REGISTRY) is None


def test_retire_on_is_outcome_rule_metric_and_failure_signature_metrics():  # semantics §7.7
    assert engine.retire_on(
        rule_metric="completion",
        rule_signature=["action:git.push", "stall:tool_correctness"],
        failing_case_atoms=[["breach:coherence"], ["error:x"]],
        registry=REGISTRY,
    ) == ["coherence", "outcome_correct", "task_completion", "tool_correctness"]


# --- §7.7 attribution --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, delta, blamed, decision",
    [
        ("failing", -0.09, False, "not_attributable"),
        ("failing", -0.09, True, "attributable"),
        ("failing", -0.05, True, "attributable"),  # ≤ −margin
        ("failing", -0.049, True, "within_margin"),
        ("failing", 0.05, True, "improved"),
        ("failing", 0.049, False, "within_margin"),
        ("win", -0.09, False, "attributable"),  # any metric on a win
        ("win", 0.2, False, "improved"),
    ],
)
def test_attribution_blames_only_retire_on_metrics_on_failing_cases(kind, delta, blamed, decision):
    rows = engine.attribute(
        d(coherence=delta), kind=kind, retire_on_metrics=["coherence"] if blamed else [], margins=M
    )
    assert [(r["metric"], r["decision"]) for r in rows] == [("coherence", decision)]
    assert rows[0]["why"]


# --- §7.5 per-case outcome ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "env, failed, deltas, read, outcome",
    [
        (True, False, d(task_completion=0.5), True, "env_wait_timeout"),
        (False, True, d(task_completion=0.5), True, "inconclusive"),
        (False, False, {}, True, "inconclusive"),  # no metric shared with the original
        (False, False, d(task_completion=0.5), False, "candidate_not_exercised"),
        (False, False, d(task_completion=0.5), True, "scored"),
    ],
)
def test_each_case_has_exactly_one_outcome(env, failed, deltas, read, outcome):
    assert (
        engine.case_outcome(env_wait_expired=env, failed=failed, deltas=deltas, candidate_read=read)
        == outcome
    )  # semantics §7.5


# --- §7.8, §7.9 decision -----------------------------------------------------------------------


def score(case, kind="failing", outcome="scored", **deltas):
    return engine.score_case(
        case=case,
        kind=kind,
        outcome=outcome,
        candidate_read=outcome != "candidate_not_exercised",
        deltas=d(**deltas),
        verifier_answered=False,
        rule_metric="task_completion",
        trigger_metric=None,
        retire_on_metrics=["outcome_correct", "task_completion"],
        margins=M,
    )


def test_improvement_past_the_margin_promotes():  # semantics §7.8
    v = engine.decide_replay([score("F-1", task_completion=0.05)], margins=M)
    assert (v.outcome, v.deciding_metric) == ("promote", "task_completion")


def test_an_improvement_just_below_the_margin_retires_for_no_improvement():  # semantics §7.9
    v = engine.decide_replay([score("F-1", task_completion=0.04)], margins=M)
    assert (v.outcome, v.reason) == ("retire", "no improvement on F-1")


def test_an_attributable_regression_outranks_an_improvement():  # semantics §7.9 order
    v = engine.decide_replay(
        [score("F-1", task_completion=0.5), score("S-1", "win", coherence=-0.2)], margins=M
    )
    assert v.outcome == "retire"
    assert "protected win S-1" in v.reason and "coherence" in v.reason


def test_an_unrelated_dip_on_a_failing_case_does_not_retire():  # semantics §7.7
    v = engine.decide_replay([score("F-1", task_completion=0.3, coherence=-0.09)], margins=M)
    assert v.outcome == "promote"


def test_one_improved_case_is_enough():  # semantics §7.8
    v = engine.decide_replay(
        [score("F-1", task_completion=0.0), score("F-2", task_completion=0.4)], margins=M
    )
    assert v.outcome == "promote" and "F-2" in v.reason


@pytest.mark.parametrize(
    "outcomes, reason",
    [
        (["env_wait_timeout", "env_wait_timeout"], "env_wait_timeout"),
        (["env_wait_timeout", "inconclusive"], "replay_inconclusive"),
        (["env_wait_timeout", "candidate_not_exercised"], "candidate_not_exercised"),
        (["inconclusive"], "replay_inconclusive"),
    ],
)
def test_no_scored_failing_case_is_pending_with_the_reason_that_accounts_for_it(outcomes, reason):
    cases = [score(f"F-{i}", outcome=o) for i, o in enumerate(outcomes)]
    cases.append(score("S-1", "win", coherence=0.0))
    v = engine.decide_replay(cases, margins=M)
    assert (v.outcome, v.pending_reason) == ("pending", reason)  # semantics §7.9


def test_no_case_at_all_is_no_matching_replayable_case():  # semantics §7.1
    v = engine.decide_replay([], margins=M)
    assert (v.outcome, v.pending_reason) == ("pending", "no_matching_replayable_case")


# --- §8 forward trial and §7.10 combination ----------------------------------------------------


@pytest.mark.parametrize(
    "enrolled, breached, baseline, outcome",
    [
        (4, 0, 1.0, "pending"),
        (5, 0, 0.0, "promote"),  # a trial rate of 0 always promotes
        (5, 3, 0.65, "promote"),  # 0.6 ≤ 0.65 − 0.05
        (5, 3, 0.64, "retire"),
        (5, 5, 1.0, "retire"),
    ],
)
def test_the_trial_verdict(enrolled, breached, baseline, outcome):  # semantics §8
    v = engine.decide_trial(Trial(enrolled, breached, baseline), min_sessions=5, margins=M)
    assert v.outcome == outcome and v.validator == "forward_trial"
    if outcome == "pending":
        assert (v.pending_reason, v.reason) == ("trial_in_progress", "trial: 4/5 sessions observed")
    if outcome == "retire":
        assert v.reason.startswith("did not improve on baseline")


def test_trial_evidence_has_the_agreed_figures():
    assert Trial(5, 1, 0.8).evidence() == {
        "trial_rate": 0.2,
        "baseline_rate": 0.8,
        "observed_sessions": 5,
    }


PENDING_REPLAY = engine.Verdict("pending", "replay", "x", "candidate_not_exercised")
DONE_TRIAL = Trial(5, 0, 1.0)
OPEN_TRIAL = Trial(1, 0, 1.0)


@pytest.mark.parametrize(
    "replay, trial, over, outcome, validator, reason",
    [
        (engine.Verdict("promote", "replay", "r"), OPEN_TRIAL, False, "promote", "replay", ""),
        (PENDING_REPLAY, DONE_TRIAL, False, "promote", "forward_trial", ""),
        (PENDING_REPLAY, OPEN_TRIAL, False, "pending", "replay", "candidate_not_exercised"),
        (None, OPEN_TRIAL, False, "pending", "forward_trial", "trial_in_progress"),
        (None, OPEN_TRIAL, True, "pending", "forward_trial", "round_budget_exhausted"),
        (None, DONE_TRIAL, True, "promote", "forward_trial", ""),
    ],
)
def test_a_pending_replay_consults_the_trial_in_the_same_round(
    replay, trial, over, outcome, validator, reason
):  # semantics §7.10, §9.2
    v = engine.decide_candidate(
        replay=replay, trial=trial, over_budget=over, min_sessions=5, margins=M
    )
    assert (v.outcome, v.validator, v.pending_reason) == (outcome, validator, reason)


# --- paired replays (semantics §17.2) and concurrent rounds (§18) --------------------------------


@pytest.mark.parametrize(
    ("arm", "env_wait_expired", "failed", "scored", "read", "expected"),
    [
        ("treatment", False, False, True, True, engine.SCORED),
        ("treatment", False, False, True, False, engine.NOT_EXERCISED),
        ("control", False, False, True, False, engine.SCORED),
        ("control", False, False, True, True, engine.ENGINE_DEFECT),
        ("treatment", True, False, False, False, engine.ENV_WAIT_TIMEOUT),
        ("control", True, True, False, False, engine.ENV_WAIT_TIMEOUT),
        ("treatment", False, True, False, True, engine.INCONCLUSIVE),
        ("control", False, False, False, False, engine.INCONCLUSIVE),
    ],
)
def test_each_paired_replay_has_exactly_one_outcome(
    arm, env_wait_expired, failed, scored, read, expected
):
    assert (
        engine.arm_outcome(
            arm=arm,
            env_wait_expired=env_wait_expired,
            failed=failed,
            scored=scored,
            candidate_read=read,
        )
        == expected
    )


@pytest.mark.parametrize(
    ("outcomes", "design_reason", "expected"),
    [
        ([], "replay_inconclusive", "replay_inconclusive"),
        (["scored", "candidate_not_exercised"], "replay_inconclusive", "replay_inconclusive"),
        (["env_wait_timeout", "env_wait_timeout"], "replay_inconclusive", "env_wait_timeout"),
        (["env_wait_timeout", "candidate_not_exercised"], "", "candidate_not_exercised"),
        (["inconclusive", "env_wait_timeout"], "", "replay_inconclusive"),
    ],
)
def test_a_paired_candidate_without_a_scored_treatment_says_why(outcomes, design_reason, expected):
    assert engine.paired_pending_reason(outcomes, design_reason) == expected


def test_replay_metrics_are_tiers_0_to_2_under_their_canonical_names():
    replayed = {"completion": 0.5, "plan_quality": 0.9, "unknown": 1.0, "error_rate": 0.1}
    assert engine.replay_metrics(replayed, REGISTRY) == {"task_completion": 0.5, "error_rate": 0.1}
    assert engine.lower_is_better(REGISTRY) == frozenset({"error_rate"})
