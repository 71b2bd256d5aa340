"""What a replay reads and how it ends (semantics §7.1–§7.5, §7.10–§7.11, §9.3): reads counted per
case, the hidden candidates, backend errors and timeouts, case selection, attempts."""

import threading

import pytest

from lifecycle.models import Rule, RuleRead
from lifecycle.services.reports import reports_ingest
from lifecycle.validation import read_jsonl
from replay.rounds import round_run
from tests.builders import T0, candidate, jsonl, report
from tests.scenarios import (
    CALLS,
    SCRIPT,
    case_events,
    corpus,
    events,
    failing,
    read_and_return,
    rule,
    session,
    state_of,
    win,
)

pytestmark = pytest.mark.usefixtures("scripted_engine")


# --- reads, context and outcomes (§7.3, §7.5, §7.11) ------------------------------------------


@pytest.mark.django_db
def test_a_never_read_candidate_is_not_exercised_and_reads_count_per_case():  # semantics §7.5
    corpus(failing("F-1", minutes=2), failing("F-2", minutes=1))
    rule()
    SCRIPT["F-1"] = read_and_return(task_completion=0.3)  # read, no improvement

    def improves_without_reading(case, context):
        context.mark_execution_started()
        return session({**case.trajectory["metrics"], "task_completion": 0.9})

    SCRIPT["F-2"] = improves_without_reading
    round_run()
    cases = case_events()
    assert (cases["F-1"]["outcome"], cases["F-1"]["candidate_read"]) == ("scored", True)
    assert (cases["F-2"]["outcome"], cases["F-2"]["candidate_read"]) == (
        "candidate_not_exercised",
        False,
    )
    # The improvement of an unread case is not credited: F-1 alone decides.
    assert state_of().verdict_reason == "no improvement on F-1"
    reads = set(RuleRead.objects.filter(via="replay").values_list("session_id", "rule_id"))
    assert reads == {(cases["F-1"]["replay_session"], "R-1")}


@pytest.mark.django_db
def test_only_unread_cases_leave_the_candidate_pending_not_exercised():  # semantics §7.5, §7.9
    corpus(failing("F-1"))
    rule()

    def never_reads(case, context):
        return session({**case.trajectory["metrics"], "task_completion": 0.9})

    SCRIPT["F-1"] = never_reads
    round_run()
    r = state_of()
    assert (r.state, r.pending_reason) == ("candidate", "candidate_not_exercised")


@pytest.mark.django_db
def test_the_context_hides_other_candidates_and_shows_active_rules():  # semantics §7.3
    corpus(failing("F-1"))
    other = candidate("R-0", signature=["action:deploy"], scope="git")
    active = candidate("A-1", signature=["action:git.pull"], scope="git")
    Rule.objects.filter(pk=active.pk).update(state="active")
    rule("R-1")
    seen = {}

    def look(case, context):
        seen[case.rule["id"]] = [r["id"] for r in context.rule_tool(scope="git")]
        return session(case.trajectory["metrics"])

    SCRIPT["F-1"] = look
    round_run()
    assert seen["R-1"] == ["A-1", "R-1"]
    assert other.id not in seen["R-1"]


@pytest.mark.django_db
def test_a_backend_that_raises_is_inconclusive_and_the_round_finishes():  # semantics §7.5, §7.11
    corpus(failing("F-1"))
    rule("R-1")
    rule("R-2", directive="something else entirely")

    def boom(case, context):
        raise RuntimeError("harness exploded")

    SCRIPT["F-1"] = boom
    vround = round_run()
    assert vround.status == "finished"
    for rid in ("R-1", "R-2"):
        r = state_of(rid)
        assert (r.state, r.pending_reason) == ("candidate", "replay_inconclusive")
        assert case_events(rid)["F-1"]["error"] == "RuntimeError: harness exploded"


@pytest.mark.django_db
def test_a_hung_backend_times_out(settings):  # semantics §7.5, §9.3
    settings.CAUTERWEB_REPLAY_TIMEOUT_S = 0.2
    release = threading.Event()
    corpus(failing("F-1"))
    rule()

    def hangs(case, context):
        context.mark_execution_started()
        release.wait(10)
        return session(case.trajectory["metrics"])

    SCRIPT["F-1"] = hangs
    try:
        round_run()
    finally:
        release.set()
    f1 = case_events()["F-1"]
    assert (f1["outcome"], f1["error"]) == ("inconclusive", "replay timed out")
    assert state_of().pending_reason == "replay_inconclusive"


@pytest.mark.django_db
def test_the_env_wait_is_not_charged_to_the_replay_timeout(settings):  # semantics §9.3
    settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S = 2.0
    settings.CAUTERWEB_REPLAY_TIMEOUT_S = 0.3
    corpus(failing("F-1"))
    rule()
    left = {}

    def slow_env_then_quick_run(case, context):
        threading.Event().wait(0.25)  # the shared environment takes its time
        left["before"] = context.time_left()
        context.mark_execution_started()
        threading.Event().wait(0.2)  # 0.45 s in all: more than replay_timeout_s alone
        left["after"] = context.time_left()
        context.rule_tool(scope="git")
        return session({**case.trajectory["metrics"], "task_completion": 0.9})

    SCRIPT["F-1"] = slow_env_then_quick_run
    round_run()
    assert case_events()["F-1"]["outcome"] == "scored"
    assert state_of().state == "active"
    assert 1.0 < left["before"] <= 2.0 and 0.0 < left["after"] <= 0.3


@pytest.mark.django_db
def test_a_backend_that_never_starts_is_env_wait_timeout_and_stays_a_candidate(settings):
    settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S = 0.1  # semantics §7.5, §9.3
    release = threading.Event()
    corpus(failing("F-1"))
    rule()

    def never_starts(case, context):
        release.wait(10)
        return session(case.trajectory["metrics"])

    SCRIPT["F-1"] = never_starts
    try:
        round_run()
    finally:
        release.set()
    assert case_events()["F-1"]["outcome"] == "env_wait_timeout"
    r = state_of()
    assert (r.state, r.pending_reason) == ("candidate", "env_wait_timeout")


@pytest.mark.django_db
def test_no_matching_replayable_case_never_calls_the_backend():  # semantics §7.1
    corpus(failing("F-1", replayable=False), win("S-1"))
    rule()
    round_run()
    assert CALLS == []
    r = state_of()
    assert (r.pending_reason, r.replay_attempts) == ("no_matching_replayable_case", 1)


@pytest.mark.django_db
def test_failing_cases_are_the_newest_three_then_the_wins():  # semantics §7.1, §7.2
    corpus(*[failing(f"F-{i}", minutes=i) for i in range(1, 6)], win("S-1", 1), win("S-2", 2))
    rule()
    round_run()
    assert CALLS == ["F-5", "F-4", "F-3", "S-2", "S-1"]


@pytest.mark.django_db
def test_attempts_go_1_2_3_and_then_replay_stops_being_tried():  # semantics §7.10
    corpus(failing("F-1"))
    rule()

    def never_reads(case, context):
        return session(case.trajectory["metrics"])

    SCRIPT["F-1"] = never_reads
    attempts = []
    for _ in range(4):
        round_run()
        attempts.append(state_of().replay_attempts)
    assert attempts == [1, 2, 3, 3]
    assert CALLS == ["F-1", "F-1", "F-1"]
    r = state_of()
    assert (r.last_validator, r.pending_reason) == ("forward_trial", "trial_in_progress")


@pytest.mark.django_db
def test_a_pending_replay_lets_a_decisive_trial_decide_in_the_same_round():  # semantics §7.10, §8
    corpus(failing("F-1", replayable=False))
    rule()
    reports_ingest(read_jsonl(jsonl(*[report(f"s{i}", T0) for i in range(5)])))
    round_run()
    r = state_of()
    assert (r.state, r.last_validator) == ("active", "forward_trial")
    evidence = events("R-1", "rule_promoted")[0].evidence
    assert evidence["trial"] == {"trial_rate": 0.0, "baseline_rate": 1.0, "observed_sessions": 5}
