"""The simulated demo backend honours the arm (semantics §17.1), and its stochastic mode is a
flaky agent that is reproducible replay by replay. No database."""

import pytest

from replay.backends.python import ReplayCase, ReplayContext, load_callable
from replay.backends.simulated import StochasticAgent, replay

RULE = {
    "id": "C-1",
    "scope": "git",
    "state": "candidate",
    "trigger": "when git push fails with non-fast-forward",
    "directive": "pull --rebase before pushing again",
    "metric": "",
    "signature": ["action:git.push", "error:non_fast_forward"],
}
FAULT = {"step": 1, "atoms": ["action:git.push", "error:non_fast_forward"]}
FAILING = ReplayCase(
    "F-1",
    "failing",
    {"metrics": {"task_completion": 0.2, "coherence": 0.7, "plan_quality": 0.5}, "steps": []},
    {"fault": FAULT, "fixes": [{"directive_terms": ["pull"], "metrics": {"task_completion": 0.9}}]},
    RULE,
)
WIN = ReplayCase(
    "S-1",
    "win",
    {"metrics": {"outcome_correct": 1.0, "task_completion": 0.9, "coherence": 0.8}, "steps": []},
    "a task that went well",
    RULE,
)


def context(arm="treatment", repeat=0, shown=(RULE,)):
    return ReplayContext(
        session_id=f"s-{arm}-{repeat}", rules_for=lambda s, q: list(shown), arm=arm, repeat=repeat
    )


def last(session: dict) -> dict:
    return session["traces"][-1]["metrics"]


# --- the deterministic demo agent -------------------------------------------------------------


def test_the_treatment_applies_the_fix_and_the_control_replays_as_recorded():
    treated = last(replay(FAILING, context("treatment")))
    control = last(replay(FAILING, context("control")))
    assert treated["task_completion"] == 0.9 and control["task_completion"] == 0.2
    # The noise is the case's, not the arm's: the arms differ by what the rule did, nothing else.
    assert treated["coherence"] == control["coherence"] != 0.7


def test_in_the_control_arm_the_candidate_never_fires_even_if_the_tool_returns_it():
    ctx = context("control")
    assert last(replay(FAILING, ctx))["task_completion"] == 0.2
    assert ctx.returned == [
        "C-1"
    ]  # the read is recorded: a control that saw it is the engine's defect


def test_every_repeat_of_the_demo_agent_is_the_same():
    assert replay(FAILING, context("treatment", 0)) == replay(FAILING, context("treatment", 5))


# --- the stochastic agent -----------------------------------------------------------------------


def test_a_replay_is_reproducible_from_case_rule_arm_and_repeat():
    agent = StochasticAgent(seed=3)
    first = [agent(FAILING, context("treatment", r)) for r in range(20)]
    again = [agent(FAILING, context("treatment", r)) for r in reversed(range(20))][::-1]
    assert first == again
    assert {s["traces"][-1]["success"] for s in first} == {True, False}  # repeats differ


@pytest.mark.parametrize(
    "agent, kind, arm, shown, rate",
    [
        (StochasticAgent(), "failing", "treatment", (RULE,), 0.5),
        (StochasticAgent(effect=0.4), "failing", "treatment", (RULE,), 0.9),
        (StochasticAgent(effect=0.4), "failing", "control", (RULE,), 0.5),
        (StochasticAgent(effect=0.4), "failing", "treatment", (), 0.5),  # not read: no effect
        (StochasticAgent(effect=0.8), "failing", "treatment", (RULE,), 1.0),
        (StochasticAgent(harm=0.5), "win", "treatment", (RULE,), 0.5),
        (StochasticAgent(harm=0.5), "win", "control", (RULE,), 1.0),
        (StochasticAgent(win_rate=0.9, harm=0.5), "win", "treatment", (RULE,), 0.45),
    ],
)
def test_success_rates_follow_base_rate_effect_and_harm(agent, kind, arm, shown, rate):
    case = FAILING if kind == "failing" else WIN
    runs = [agent(case, context(arm, r, shown))["traces"][-1]["success"] for r in range(400)]
    # 400 seeded draws: the frequency is fixed, and within 3.5 standard errors of the rate.
    spread = 3.5 * (rate * (1 - rate) / 400) ** 0.5
    assert abs(sum(runs) / 400 - rate) <= spread + 1e-9


def test_metrics_follow_the_outcome_and_judged_scores_move_within_the_noise():
    agent = StochasticAgent(noise=0.15)
    for r in range(50):
        session = agent(WIN, context("treatment", r))
        metrics, success = last(session), session["traces"][-1]["success"]
        assert metrics["outcome_correct"] == (1.0 if success else 0.0)
        centre = 0.85 if success else 0.3
        assert centre - 0.15 <= metrics["task_completion"] <= centre + 0.15
        assert 0.65 <= metrics["coherence"] <= 0.95


def test_only_replay_metrics_come_back_and_defaults_stand_in_for_none():
    metrics = last(StochasticAgent()(FAILING, context()))
    assert set(metrics) == {"task_completion", "coherence"}  # plan_quality is tier 3
    bare = ReplayCase("F-2", "failing", {"metrics": {}}, None, RULE)
    assert set(last(StochasticAgent()(bare, context()))) == {
        "outcome_correct",
        "task_completion",
        "coherence",
        "tool_correctness",
        "argument_correctness",
    }


def test_the_flaky_agent_is_reachable_as_a_configured_backend():
    agent = load_callable("replay.backends.simulated:flaky")
    assert isinstance(agent, StochasticAgent) and agent.effect == 0.0
    assert agent(FAILING, context())["simulated"] is True
