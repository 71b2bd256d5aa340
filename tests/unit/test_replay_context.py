"""The clock of one replay (semantics §9.3) and the replay's rule tool (§7.3, §17.1), without a
database: a frozen clock, rules in memory."""

from datetime import UTC, datetime

from lifecycle.models import Rule
from replay.cases import CONTROL, TREATMENT, Actives, rule_tool
from replay.config import RoundConfig
from replay.dispatch import Job, RoundContext
from tests.builders import round_config

T0 = datetime(2026, 11, 1, tzinfo=UTC)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def config(*, timeout: float, env_wait: float) -> RoundConfig:
    return round_config(replay_timeout_s=timeout, env_wait_timeout_s=env_wait)


def context(cfg: RoundConfig, clock: Clock) -> RoundContext:
    job = Job("R-1", "F-1", "failing", TREATMENT, 0, "replay:1:R-1:F-1")
    ctx = RoundContext(job=job, rules_for=lambda scope, query: [], cfg=cfg)
    ctx._clock = clock
    return ctx


def test_the_env_wait_is_bounded_and_the_replay_timeout_starts_at_the_signal():
    clock = Clock()
    ctx = context(config(timeout=30, env_wait=600), clock)
    assert ctx.time_left() == float("inf") and not ctx.overdue()  # not picked up yet
    ctx.begin()
    clock.now += 590
    assert (ctx.time_left(), ctx.waiting_for_start()) == (10, True)
    ctx.mark_execution_started()
    assert (ctx.time_left(), ctx.waiting_for_start()) == (30, False)
    clock.now += 30
    assert ctx.overdue()


def test_without_an_env_wait_one_timeout_covers_both_and_zero_means_no_limit():
    clock = Clock()
    ctx = context(config(timeout=30, env_wait=0), clock)
    ctx.begin()
    clock.now += 20
    ctx.mark_execution_started()
    assert ctx.time_left() == 10
    unlimited = context(config(timeout=0, env_wait=0), clock)
    unlimited.begin()
    clock.now += 10**6
    assert unlimited.time_left() == float("inf") and not unlimited.overdue()


def rule(rule_id: str, *, state: str, scope: str = "git", signature=()) -> Rule:
    return Rule(
        id=rule_id,
        trigger=f"when {rule_id}",
        directive=f"do {rule_id}",
        scope=scope,
        signature=list(signature),
        state=state,
        recorded_at=T0,
    )


def test_the_rule_tool_shows_the_baseline_and_the_candidate_in_the_treatment_arm_only():
    actives = Actives.of(
        [
            rule("A-2", state="active", signature=["action:git.pull"]),
            rule("A-1", state="active", signature=["error:non_fast_forward"]),
            rule("A-9", state="active", scope="deploy"),
        ]
    )
    candidate = rule("C-1", state="candidate")
    treatment = rule_tool(actives, candidate, arm=TREATMENT)
    control = rule_tool(actives, candidate, arm=CONTROL)
    assert [r["id"] for r in treatment("git", None)] == ["A-1", "A-2", "C-1"]
    assert [r["id"] for r in control("git", None)] == ["A-1", "A-2"]
    # A query narrows the active rules, never the candidate (semantics §4).
    assert [r["id"] for r in treatment("git", "error:non_fast_forward")] == ["A-1", "C-1"]
    assert [r["id"] for r in treatment(None, None)] == ["A-1", "A-2", "A-9", "C-1"]
    assert [r["id"] for r in treatment("deploy", None)] == ["A-9"]


def test_a_read_is_narrowed_once_a_round_and_what_a_harness_changes_stays_its_own(monkeypatch):
    import replay.cases

    actives = Actives.of(
        [
            rule("A-1", state="active", signature=["error:non_fast_forward"]),
            rule("A-2", state="active", signature=["action:git.pull"]),
        ]
    )
    narrowed = []
    real = replay.cases.narrow_active
    monkeypatch.setattr(replay.cases, "narrow_active", lambda *a: narrowed.append(a[1]) or real(*a))
    tools = [rule_tool(actives, rule(f"C-{i}", state="candidate"), arm=TREATMENT) for i in (1, 2)]
    first = tools[0]("git", "error:non_fast_forward")
    assert [r["id"] for r in first] == ["A-1", "C-1"]
    first[0]["signature"].append("error:made_up")
    first[0]["directive"] = "changed by the harness"
    second = tools[1]("git", "error:non_fast_forward")
    assert [r["id"] for r in second] == ["A-1", "C-2"]
    assert second[0]["signature"] == ["error:non_fast_forward"]
    assert second[0]["directive"] == "do A-1"
    assert narrowed == ["error:non_fast_forward"]  # the second candidate's read: no narrowing
