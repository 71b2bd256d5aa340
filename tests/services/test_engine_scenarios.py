"""Validation rounds end to end on the database, driven by a scripted Python backend
(semantics §6–§10, §14). Each test names the rule of the spec it holds the engine to."""

import io
import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle.models import JournalEvent, Rule, RuleRead, TrialEnrolment
from lifecycle.services.corpus import import_corpus
from lifecycle.services.rules import rule_retire_by_reviewer
from lifecycle.states import Actor
from lifecycle.validation import read_jsonl
from replay import lock
from replay.intake import reports_ingest
from replay.kick import kick_round
from replay.models import ValidationRound
from replay.rounds import round_run, run_until_settled
from replay.trials import trial_enrol
from tests.builders import T0, candidate, jsonl, report, trajectory

BACKEND = "tests.services.test_engine_scenarios:scripted"
SIGNATURE = ["tool:git", "action:git.push", "error:non_fast_forward"]
ORIGINAL = {"outcome_correct": 0.0, "task_completion": 0.3, "coherence": 0.8, "plan_quality": 0.5}
WIN = {"outcome_correct": 1.0, "task_completion": 0.9, "coherence": 0.85}

# case id -> behaviour(case, context) -> session; calls are logged per case id.
SCRIPT: dict = {}
CALLS: list[str] = []


def scripted(case, context):
    CALLS.append(case.id)
    return SCRIPT.get(case.id, read_and_return())(case, context)


def session(metrics: dict) -> dict:
    # An earlier trace that would promote anything: only the last one may be scored (§7.4).
    return {"traces": [{"metrics": {"task_completion": 1.0}}, {"metrics": metrics}]}


def read_and_return(**changes):
    def behaviour(case, context):
        context.mark_execution_started()
        context.rule_tool(scope=case.rule["scope"])
        return session({**case.trajectory["metrics"], **changes})

    return behaviour


@pytest.fixture(autouse=True)
def wired(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = BACKEND
    settings.CAUTERWEB_VERIFIER = ""
    settings.CAUTERWEB_REPLAY_TIMEOUT_S = 5.0
    settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S = 0.0
    settings.CAUTERWEB_VALIDATION_ROUND_BUDGET_S = 0.0
    settings.CAUTERWEB_LOCK_URL = ""
    # Semantics §7 as written: one replay per case against the recorded original.
    settings.CAUTERWEB_REPLAY_DESIGN = "single"
    settings.CAUTERWEB_REPLAY_CONCURRENCY = 1
    SCRIPT.clear()
    CALLS.clear()
    yield
    SCRIPT.clear()


@pytest.fixture
def registry_seeded(transactional_db, settings, monkeypatch):
    """For tests whose backend touches the database from its thread: data must be committed.
    The flush of a transactional test empties the registry the migrations seeded: seed it
    again. Commits fire the kicks; the test drives its rounds itself."""
    from lifecycle.models import MetricDefinition
    from replay import tasks

    monkeypatch.setattr(tasks.round_run_task, "delay", lambda **kw: None)

    for name, tier, higher_is_better, aliases in settings.CAUTERWEB_DEFAULT_METRICS:
        MetricDefinition.objects.get_or_create(
            name=name,
            defaults={"tier": tier, "higher_is_better": higher_is_better, "aliases": aliases},
        )


def corpus(*lines):
    import_corpus(jsonl(*lines))


def failing(tid, minutes=0, **overrides):
    return trajectory(
        tid,
        "failure",
        signature=SIGNATURE,
        notices=["breach:task_completion"],
        metrics=dict(ORIGINAL),
        started_at=(T0 + timedelta(minutes=minutes)).isoformat(),
        replay_input={"task": "push", "scope": "git"},
        **overrides,
    )


def win(tid, minutes=0, scope="git", **overrides):
    return trajectory(
        tid,
        "success",
        signature=["tool:git", "action:git.status"],
        metrics=dict(WIN),
        started_at=(T0 + timedelta(minutes=minutes)).isoformat(),
        replay_input={"task": "status", "scope": scope},
        **overrides,
    )


def rule(rule_id="R-1", **fields):
    fields.setdefault("signature", SIGNATURE)
    return candidate(rule_id, **fields)


def events(rule_id=None, type_=None):
    qs = JournalEvent.objects.order_by("id")
    if rule_id:
        qs = qs.filter(rule_id=rule_id)
    if type_:
        qs = qs.filter(type=type_)
    return list(qs)


def case_events(rule_id="R-1"):
    return {e.evidence["case"]: e.evidence for e in events(rule_id, "validation_replay_case")}


def state_of(rule_id="R-1"):
    return Rule.objects.get(pk=rule_id)


# --- the verdicts of replay (§7) ----------------------------------------------------------------


@pytest.mark.django_db
def test_an_improvement_past_the_margin_promotes_with_exact_journal_rows():  # semantics §7.8, §10
    corpus(failing("F-1"), win("S-1"))
    rule()
    SCRIPT["F-1"] = read_and_return(task_completion=0.9)
    vround = round_run()

    r = state_of()
    assert (r.state, r.last_validator, r.replay_attempts) == ("active", "replay", 1)
    assert [(e.type, e.rule_id) for e in events() if e.round_id == vround.pk] == [
        ("validation_round_started", None),
        ("validation_candidate_started", "R-1"),
        ("validation_replay_case", "R-1"),
        ("validation_replay_case", "R-1"),
        ("validation_verdict", "R-1"),
        ("rule_promoted", "R-1"),
        ("validation_round_finished", None),
    ]
    promoted = events("R-1", "rule_promoted")[0].evidence
    assert promoted["from"] == "candidate" and promoted["to"] == "active"
    assert promoted["validator"] == "replay" and promoted["deciding_metric"] == "task_completion"
    assert promoted["trial"] is None
    assert [c["case"] for c in promoted["cases"]] == ["F-1", "S-1"]
    f1 = promoted["cases"][0]
    assert f1["metrics"]["task_completion"] == {"original": 0.3, "replayed": 0.9, "delta": 0.6}
    assert f1["outcome"] == "scored" and f1["improved"] and f1["candidate_read"]
    # Tier 3 is never scored in replay (§7.4).
    assert "plan_quality" not in f1["metrics"]
    started = events(type_="validation_round_started")[0].evidence
    assert started == {"queue": ["R-1"], "budget_s": 0.0, "replay_wired": True}
    verdict = events("R-1", "validation_verdict")[0].evidence
    assert (verdict["outcome"], verdict["validator"], verdict["pending_reason"]) == (
        "promote",
        "replay",
        None,
    )


@pytest.mark.django_db
def test_an_improvement_just_below_the_margin_retires_for_no_improvement():  # semantics §7.8, §7.9
    corpus(failing("F-1"))
    rule()
    SCRIPT["F-1"] = read_and_return(task_completion=0.34)  # +0.04 < 0.05
    round_run()
    r = state_of()
    assert (r.state, r.verdict_reason) == ("retired", "no improvement on F-1")
    assert len(events("R-1", "rule_retired")) == 1


@pytest.mark.django_db
def test_a_win_case_regression_retires_and_names_the_win():  # semantics §7.7 protected wins
    corpus(failing("F-1"), win("S-7"))
    rule()
    SCRIPT["F-1"] = read_and_return(task_completion=0.9)
    SCRIPT["S-7"] = read_and_return(coherence=0.7)  # any metric counts on a win
    round_run()
    r = state_of()
    assert r.state == "retired"
    assert "protected win S-7" in r.verdict_reason
    s7 = case_events()["S-7"]
    assert s7["regressed"] and s7["attribution"][0]["decision"] == "attributable"


@pytest.mark.django_db
def test_an_unrelated_coherence_drop_does_not_retire():  # semantics §7.7
    corpus(failing("F-1"))
    rule()
    SCRIPT["F-1"] = read_and_return(task_completion=0.9, coherence=0.71)  # −0.09
    round_run()
    assert state_of().state == "active"
    rows = {a["metric"]: a["decision"] for a in case_events()["F-1"]["attribution"]}
    assert rows["coherence"] == "not_attributable"


@pytest.mark.django_db
def test_a_drop_on_the_target_metric_retires():  # semantics §7.7 retire_on
    corpus(failing("F-1"))
    rule()
    SCRIPT["F-1"] = read_and_return(task_completion=0.2, outcome_correct=0.0)
    round_run()
    r = state_of()
    assert r.state == "retired" and "task_completion" in r.verdict_reason
    evidence = events("R-1", "rule_retired")[0].evidence
    assert evidence["retire_on"] == ["outcome_correct", "task_completion"]


def verifier_says(answer):
    def verify(session, replay_input):
        return answer

    return verify


VERDICTS: dict = {}


def scripted_verifier(session, replay_input):
    return VERDICTS.get("answer")


@pytest.mark.django_db
def test_the_verifier_outranks_the_declared_metric(settings):  # semantics §6.1
    settings.CAUTERWEB_VERIFIER = "tests.services.test_engine_scenarios:scripted_verifier"
    VERDICTS["answer"] = 0.0  # the outcome is still wrong, whatever task_completion says
    corpus(failing("F-1"))
    rule()
    SCRIPT["F-1"] = read_and_return(task_completion=0.9)
    round_run()
    r = state_of()
    assert r.state == "retired"
    assert case_events()["F-1"]["deciding_metric"] == "outcome_correct"


@pytest.mark.django_db
def test_a_verifier_that_does_not_know_vetoes_nothing(settings):  # semantics §6.1
    settings.CAUTERWEB_VERIFIER = "tests.services.test_engine_scenarios:scripted_verifier"
    VERDICTS["answer"] = None
    corpus(failing("F-1"))
    rule()
    SCRIPT["F-1"] = read_and_return(task_completion=0.9)
    round_run()
    assert state_of().state == "active"
    assert case_events()["F-1"]["deciding_metric"] == "task_completion"


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


# --- rounds (§9) -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_tiny_budget_still_gives_every_candidate_a_verdict_or_a_named_reason(settings):
    settings.CAUTERWEB_VALIDATION_ROUND_BUDGET_S = 0.001  # semantics §9.2
    corpus(failing("F-1"))
    for i in range(4):
        rule(f"R-{i}", directive=f"directive {i}")

    def slow(case, context):
        threading.Event().wait(0.01)
        return read_and_return()(case, context)

    SCRIPT["F-1"] = slow
    vround = round_run()
    rules = list(Rule.objects.all())
    assert all(r.state != "candidate" or r.pending_reason for r in rules)
    exhausted = [r for r in rules if r.pending_reason == "round_budget_exhausted"]
    assert len(exhausted) >= 3
    verdicts = {e.rule_id: e.evidence for e in events(type_="validation_verdict")}
    assert all(verdicts[r.id]["round_budget_exhausted"] for r in exhausted)
    assert vround.summary["budget_exhausted"] >= 3


@pytest.mark.django_db
def test_rounds_rotate_abc_bca_cab(settings):  # semantics §9.2
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    for i, rid in enumerate("ABC"):
        candidate(rid, now=T0 + timedelta(minutes=i))
    queues = [round_run().queue for _ in range(4)]
    assert queues == [list("ABC"), list("BCA"), list("CAB"), list("ABC")]


@pytest.mark.django_db
def test_repeated_validate_is_idempotent():  # semantics §3, §9.4
    corpus(failing("F-1"))
    rule()
    SCRIPT["F-1"] = read_and_return(task_completion=0.9)
    for _ in range(3):
        call_command("validate", "--json", stdout=io.StringIO())
    assert len(events("R-1", "rule_promoted")) == 1
    assert state_of().state == "active"


@pytest.mark.parametrize(
    ("fresh_s", "expected"),
    [
        (0.0, ["F-1"]),  # its selection made after the retirement: never replayed
        (60.0, ["F-1", "F-1"]),  # selected with R-1's chunk before it: replayed, not written
    ],
)
def test_a_candidate_retired_by_a_reviewer_mid_round_is_skipped(
    registry_seeded, monkeypatch, fresh_s, expected
):  # semantics §3, §9.5
    from replay import rounds

    monkeypatch.setattr(rounds, "SELECTION_FRESH_S", fresh_s)
    corpus(failing("F-1"))
    rule("R-1")
    rule("R-2", directive="another directive")

    def reviewer_retires_r2(case, context):
        if case.rule["id"] == "R-1":
            rule_retire_by_reviewer(rule_id="R-2", actor=Actor.reviewer("rita"), reason="wrong")
        return read_and_return(task_completion=0.9)(case, context)

    SCRIPT["F-1"] = reviewer_retires_r2
    vround = round_run()
    assert state_of("R-1").state == "active"
    r2 = state_of("R-2")
    assert r2.state == "retired" and r2.verdict_reason == "wrong"
    assert [e.type for e in events("R-2") if e.round_id == vround.pk] == []
    assert vround.summary["skipped"] == 1
    assert expected == CALLS


def test_trial_evidence_arriving_during_a_replay_survives_the_verdict(
    registry_seeded,
):  # semantics §9.5
    corpus(failing("F-1"))
    rule()

    def report_arrives(case, context):
        reports_ingest(read_jsonl(jsonl(report("live-1", T0, notices=["breach:task_completion"]))))
        return read_and_return()(case, context)

    SCRIPT["F-1"] = report_arrives
    round_run()
    r = state_of()
    assert r.state == "retired"
    assert list(TrialEnrolment.objects.values_list("rule_id", "session_id", "breached")) == [
        ("R-1", "live-1", True)
    ]


def test_a_rule_a_reviewer_retires_during_its_own_replay_is_skipped_at_the_write(
    registry_seeded,
):  # semantics §3, §9.5: the write checks the one rule under its row lock
    corpus(failing("F-1"))
    rule("R-1")
    rule("R-2", directive="another directive")

    def reviewer_retires_r1(case, context):
        if case.rule["id"] == "R-1":
            rule_retire_by_reviewer(rule_id="R-1", actor=Actor.reviewer("rita"), reason="wrong")
        return read_and_return(task_completion=0.9)(case, context)

    SCRIPT["F-1"] = reviewer_retires_r1
    vround = round_run()
    r1 = state_of("R-1")
    assert (r1.state, r1.verdict_reason) == ("retired", "wrong")
    assert events("R-1", "rule_promoted") == []
    assert [e.type for e in events("R-1") if e.round_id == vround.pk] == []
    assert state_of("R-2").state == "active"
    assert (vround.summary["skipped"], vround.summary["promoted"]) == (1, 1)


def test_a_verdict_is_written_without_waiting_for_the_next_candidates_replay(
    registry_seeded, monkeypatch
):  # semantics §18: written as soon as decided, never held back by another replay
    from replay import rounds

    corpus(failing("F-1"))
    rule("R-1")
    rule("R-2", directive="another directive")
    written = {rid: threading.Event() for rid in ("R-1", "R-2")}
    real_write = rounds.verdicts_write

    def write(**kwargs):
        real_write(**kwargs)
        for outcome in kwargs["outcomes"]:
            written[outcome.rule.id].set()

    monkeypatch.setattr(rounds, "verdicts_write", write)
    seen = {}

    def look(case, context):
        if case.rule["id"] == "R-2":
            # R-2's replay ends only once R-1's verdict is written (or after 10 s).
            seen["R-1 written during R-2's replay"] = written["R-1"].wait(timeout=10)
        return read_and_return(task_completion=0.9)(case, context)

    SCRIPT["F-1"] = look
    round_run()
    assert seen == {"R-1 written during R-2's replay": True}
    assert [e.rule_id for e in events(type_="rule_promoted")] == ["R-1", "R-2"]


@pytest.mark.django_db
def test_the_baseline_is_the_active_rules_as_the_round_started():  # semantics §7.3, §18
    corpus(failing("F-1"))
    rule("R-1")
    rule("R-2", directive="another directive")
    seen = []

    def look(case, context):
        seen.append((case.rule["id"], [r["id"] for r in context.rule_tool(scope="git")]))
        return session({**case.trajectory["metrics"], "task_completion": 0.9})

    SCRIPT["F-1"] = look
    round_run()
    rule("R-3", directive="a third directive")
    round_run()
    # R-1, promoted in the first round, is not R-2's baseline there (verdicts must not depend
    # on which replays ran first), and is the baseline of every replay of the next round.
    assert seen == [("R-1", ["R-1"]), ("R-2", ["R-2"]), ("R-3", ["R-1", "R-2", "R-3"])]


@pytest.mark.parametrize(
    ("fresh_s", "expected"),
    [
        # semantics §7.1: a candidate reached once its chunk's selection is stale selects afresh
        (0.0, ["F-1", "F-1", "F-2", "F-1"]),
        # one statement selects for the chunk; a case recorded after it waits for the next one
        (None, ["F-1", "F-1", "F-1"]),
    ],
    ids=["selection-stale", "selection-fresh"],
)
def test_a_failing_case_recorded_during_a_replay_is_replayed_once_a_selection_sees_it(
    registry_seeded, monkeypatch, fresh_s, expected
):
    from replay import rounds

    if fresh_s is not None:
        monkeypatch.setattr(rounds, "SELECTION_FRESH_S", fresh_s)
    corpus(failing("F-1", minutes=1))
    rule("R-0")
    rule("R-1", directive="another directive")
    rule("R-2", directive="a third directive")

    def a_new_failure_arrives(case, context):
        if case.rule["id"] == "R-1":
            corpus(failing("F-2", minutes=2))
        return read_and_return(task_completion=0.9)(case, context)

    SCRIPT["F-1"] = a_new_failure_arrives
    round_run()
    assert expected == CALLS


@pytest.mark.django_db
def test_a_round_costs_the_same_statements_per_candidate_however_long_the_queue():
    # semantics §9: linear in candidates with a small constant, nothing quadratic

    def statements(n: int) -> int:
        Rule.objects.filter(state="candidate").update(state="retired")
        for i in range(n):
            rule(f"R-{n}-{i}", directive=f"remedy {n} {i}")
        with CaptureQueriesContext(connection) as ctx:
            vround = round_run()
        assert vround.summary["promoted"] == n
        return len(ctx.captured_queries)

    def improve(case, context):
        context.rule_tool(scope="git", query="error:unheard_of")
        return session({**case.trajectory["metrics"], "task_completion": 0.9})

    corpus(failing("F-1"), win("S-1"))
    SCRIPT["F-1"] = SCRIPT["S-1"] = improve
    s10, s20, s40 = statements(10), statements(20), statements(40)
    first, then = (s20 - s10) / 10, (s40 - s20) / 20
    assert then <= first + 0.5 and then <= 14, (s10, s20, s40)


@pytest.mark.django_db
def test_standstill_runs_rounds_until_nothing_changes():  # semantics §9.4
    corpus(failing("F-1", replayable=False))
    rule()
    result = run_until_settled(timeout_s=30)
    # Replay attempts 1, 2, 3; then the forward trial takes over (pending reason changes);
    # then one round that changes nothing.
    assert (result["rounds"], result["settled"]) == (5, True)
    assert result["rules"] == [
        {
            "id": "R-1",
            "state": "candidate",
            "pending_reason": "trial_in_progress",
            "replay_attempts": 3,
            "validator": "forward_trial",
            "reason": "trial: 0/5 sessions observed",
        }
    ]


@pytest.mark.django_db
def test_a_round_is_a_no_op_while_another_holds_the_lock():  # semantics §9.1
    assert lock.acquire("someone-else")
    assert round_run() is None
    assert ValidationRound.objects.count() == 0
    lock.release("someone-else")
    assert round_run() is not None


@pytest.mark.django_db
def test_the_database_lock_expires_if_its_holder_dies():  # semantics §9.1
    assert lock.acquire("dead-worker", ttl_s=-1)
    assert lock.acquire("next-worker")
    assert not lock.acquire("third-worker")


def test_a_kick_from_inside_a_round_does_not_recurse(registry_seeded, monkeypatch):
    # semantics §9.1: with eager Celery a kick runs its round inline; inside a round the lock makes
    # that a no-op instead of a recursion or a deadlock.
    monkeypatch.undo()
    inner = {}

    def kicks_again(case, context):
        inner["kick"] = kick_round(reason="candidate")
        return read_and_return(task_completion=0.9)(case, context)

    SCRIPT["F-1"] = kicks_again
    corpus(failing("F-1"))
    rule("R-1")  # its commit kicks the round, eagerly
    assert inner["kick"]["queued"] is True
    assert ValidationRound.objects.count() == 1
    assert state_of().state == "active"


@pytest.mark.django_db
def test_a_broker_that_is_down_is_logged_and_journaled_not_raised(monkeypatch):  # semantics §9.1
    from replay import tasks

    def down(**kwargs):
        raise ConnectionError("redis is down")

    monkeypatch.setattr(tasks.round_run_task, "delay", down)
    assert kick_round(reason="report") == {
        "queued": False,
        "detail": "broker unavailable: redis is down",
    }
    (event,) = events(type_="validation_kick_failed")
    assert event.evidence == {"kicked_by": "report", "error": "ConnectionError: redis is down"}


@pytest.mark.django_db
def test_the_fallback_is_announced_once_ever(settings, caplog):  # semantics §8
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    rule()
    with caplog.at_level("WARNING", logger="replay.rounds"):
        round_run()
        round_run()
    assert len(events(type_="validation_fallback_announced")) == 1
    assert len([r for r in caplog.records if "no replay backend" in r.message]) == 1
    assert state_of().pending_reason == "trial_in_progress"


@pytest.mark.django_db
def test_a_never_attempted_candidate_is_distinguishable_from_no_verdict_yet(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = ""  # semantics §10
    rule()
    assert state_of().pending_text == "not yet attempted"
    round_run()
    r = state_of()
    assert r.first_attempted_at is not None and r.pending_reason == "trial_in_progress"


# --- forward trials (§8) -----------------------------------------------------------------------


@pytest.mark.django_db
def test_enrolment_caps_at_min_sessions_and_flips_enrolled_sessions(settings):  # semantics §8
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    rule()
    reports_ingest(
        read_jsonl(jsonl(*[report(f"s{i}", T0 + timedelta(minutes=i)) for i in range(7)]))
    )
    assert TrialEnrolment.objects.count() == 5
    later = report(
        "s0", T0 + timedelta(hours=1), notices=["breach:task_completion"], rules_read=["R-1"]
    )
    reports_ingest(read_jsonl(jsonl(later)))
    s0 = TrialEnrolment.objects.get(session_id="s0")
    assert (s0.breached, s0.read_candidate) == (True, True)
    assert TrialEnrolment.objects.filter(breached=True).count() == 1


@pytest.mark.django_db
def test_a_later_report_flips_only_the_trials_it_concerns(settings):  # semantics §8
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    rule("R-TC", metric="task_completion")
    rule("R-CO", metric="coherence", directive="d2")
    rule("R-ANY", metric="", directive="d3")
    rule("R-DONE", metric="task_completion", directive="d4")
    reports_ingest(read_jsonl(jsonl(report("s1", T0), report("s2", T0))))
    assert TrialEnrolment.objects.count() == 8
    Rule.objects.filter(pk="R-DONE").update(state="active")  # decided: its trial is over
    later = report(
        "s1",
        T0 + timedelta(hours=1),
        notices=["breach:task_completion"],
        rules_read=["R-CO", "R-DONE"],
    )
    reports_ingest(read_jsonl(jsonl(later)))
    flags = {
        (e.rule_id, e.session_id): (e.breached, e.read_candidate)
        for e in TrialEnrolment.objects.all()
    }
    assert flags == {
        ("R-TC", "s1"): (True, False),
        ("R-CO", "s1"): (False, True),
        ("R-ANY", "s1"): (True, False),
        ("R-DONE", "s1"): (False, False),
        ("R-TC", "s2"): (False, False),
        ("R-CO", "s2"): (False, False),
        ("R-ANY", "s2"): (False, False),
        ("R-DONE", "s2"): (False, False),
    }


@pytest.mark.django_db
def test_enrolment_takes_a_fixed_number_of_queries_however_many_candidates(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = ""  # semantics §8: set-based, not a query per candidate
    from lifecycle.models import Report

    def enrol(session_id: str) -> int:
        reports = [
            Report.objects.create(
                session_id=session_id,
                at=T0,
                notices=["breach:task_completion"],
                content_hash="x",
                received_at=T0,
                has_notice=True,
            )
        ]
        with CaptureQueriesContext(connection) as ctx:
            trial_enrol(reports=reports, now=T0)
        return len(ctx.captured_queries)

    for i in range(3):
        rule(f"R-{i}", directive=f"d{i}")
    few = enrol("s1")
    for i in range(3, 40):
        rule(f"R-{i}", directive=f"d{i}")
    many = enrol("s2")
    assert few == many <= 3
    assert TrialEnrolment.objects.filter(session_id="s2", breached=True).count() == 40


@pytest.mark.django_db
def test_the_trial_retires_a_candidate_that_did_not_improve_on_its_baseline(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = ""  # semantics §8
    reports_ingest(
        read_jsonl(
            jsonl(
                *[
                    report(
                        f"h{i}",
                        T0,
                        notices=["breach:task_completion"] if i < 2 else ["stall:coherence"],
                    )
                    for i in range(4)
                ]
            )
        )
    )
    rule()
    assert state_of().baseline_rate == 0.5
    reports_ingest(
        read_jsonl(
            jsonl(
                *[
                    report(
                        f"s{i}",
                        T0 + timedelta(hours=1),
                        notices=["breach:task_completion"] if i < 3 else [],
                    )
                    for i in range(5)
                ]
            )
        )
    )
    round_run()
    r = state_of()
    assert (r.state, r.last_validator) == ("retired", "forward_trial")
    assert r.verdict_reason == "did not improve on baseline: trial rate 0.60 vs baseline 0.50"


# --- commands (§15) ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_validate_json_prints_rounds_and_rules(capsys):  # semantics §15
    import json

    corpus(failing("F-1"))
    rule()
    SCRIPT["F-1"] = read_and_return(task_completion=0.9)
    call_command("validate", "--until-settled", "--json")
    doc = json.loads(capsys.readouterr().out)
    assert doc == {
        "rounds": 2,
        "rules": [
            {
                "id": "R-1",
                "state": "active",
                "pending_reason": None,
                "replay_attempts": 1,
                "validator": "replay",
                "reason": "improved task_completion by +0.60 on F-1",
            }
        ],
    }


@pytest.mark.django_db
def test_validate_exits_non_zero_when_it_cannot_settle_in_time(monkeypatch):  # semantics §9.4
    from django.core.management.base import CommandError

    from replay import rounds

    monkeypatch.setattr(rounds, "round_run", lambda **kw: None)  # another round never ends
    with pytest.raises(CommandError, match="not settled"):
        call_command("validate", "--until-settled", "--timeout", "0.3")


@pytest.mark.django_db
def test_journal_and_show_rule_commands(capsys):  # semantics §15
    import json

    corpus(failing("F-1"))
    rule()
    SCRIPT["F-1"] = read_and_return(task_completion=0.9)
    vround = round_run()
    capsys.readouterr()
    call_command("journal", "--rule", "R-1", "--type", "rule_promoted", "--json")
    (row,) = json.loads(capsys.readouterr().out)
    assert set(row) == {"type", "at", "rule", "round", "actor", "evidence"}
    assert (row["type"], row["rule"], row["round"], row["actor"]) == (
        "rule_promoted",
        "R-1",
        vround.pk,
        "engine",
    )
    call_command("journal", "--round", str(vround.pk), "--json")
    types = [r["type"] for r in json.loads(capsys.readouterr().out)]
    assert types[0] == "validation_round_started" and types[-1] == "validation_round_finished"
    call_command("show_rule", "R-1", "--json")
    doc = json.loads(capsys.readouterr().out)
    assert (doc["state"], doc["replay_attempts"], doc["latest_evidence"]["type"]) == (
        "active",
        1,
        "rule_promoted",
    )


@pytest.mark.django_db
def test_rules_decide_moves_only_candidates_and_journals_each_once(engine):  # semantics §3
    from lifecycle.services.rules import Decision, rules_decide
    from lifecycle.states import Action

    for rid in ("R-1", "R-2", "R-3"):
        rule(rid, directive=f"directive {rid}")
    rule_retire_by_reviewer(rule_id="R-3", actor=Actor.reviewer("rita"), reason="no")
    decisions = [
        Decision("R-1", Action.PROMOTE, "improved", {"trial": None}, "replay"),
        Decision("R-2", Action.RETIRE, "did not improve", {}, "forward_trial"),
        Decision("R-3", Action.PROMOTE, "improved", {}, "replay"),
    ]
    assert rules_decide(decisions=decisions, actor=engine, round_id=7) == {"R-1", "R-2"}
    assert rules_decide(decisions=decisions, actor=engine, round_id=8) == set()
    assert [(r.id, r.state, r.last_validator) for r in Rule.objects.order_by("id")] == [
        ("R-1", "active", "replay"),
        ("R-2", "retired", "forward_trial"),
        ("R-3", "retired", ""),
    ]
    (promoted,) = events("R-1", "rule_promoted")
    assert (promoted.round_id, promoted.actor, promoted.evidence) == (
        7,
        "engine",
        {"from": "candidate", "to": "active", "reason": "improved", "trial": None},
    )
    assert len(events(type_="rule_retired")) == 1


@pytest.mark.django_db
def test_a_round_keeps_each_candidates_own_fields_decided_or_pending():  # semantics §7.10, §10
    corpus(failing("F-1"), win("S-1"))
    rule("R-1", directive="promote me")
    rule("R-2", signature=["tool:none", "error:nothing_matches"])
    rule("R-3", directive="retire me")
    Rule.objects.filter(pk="R-3").update(first_attempted_at=T0, replay_attempts=1)

    def by_rule(case, context):
        better = 0.9 if case.rule["id"] == "R-1" else 0.3
        return read_and_return(task_completion=better)(case, context)

    SCRIPT["F-1"] = by_rule
    round_run()
    rows = {r.id: r for r in Rule.objects.all()}
    fields = {
        rid: (r.state, r.last_validator, r.replay_attempts, r.pending_reason, r.verdict_reason)
        for rid, r in rows.items()
    }
    assert fields == {
        "R-1": ("active", "replay", 1, "", rows["R-1"].verdict_reason),
        "R-2": (
            "candidate",
            "replay",
            1,
            "no_matching_replayable_case",
            "no matching replayable failing case",
        ),
        "R-3": ("retired", "replay", 2, "", "no improvement on F-1"),
    }
    assert rows["R-1"].verdict_reason.startswith("improved")
    assert rows["R-1"].first_attempted_at == rows["R-1"].decided_at is not None
    assert rows["R-2"].first_attempted_at is not None and rows["R-2"].decided_at is None
    assert rows["R-3"].first_attempted_at == T0 and rows["R-3"].decided_at is not None


@pytest.mark.django_db
def test_nobody_but_the_engine_may_decide(reviewer_actor):  # semantics §3
    from lifecycle.services.rules import Decision, rules_decide
    from lifecycle.states import Action, NotAllowed

    rule()
    with pytest.raises(NotAllowed):
        rules_decide(decisions=[Decision("R-1", Action.PROMOTE, "x", {})], actor=reviewer_actor)
    assert state_of().state == "candidate"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.django_db
def test_validate_shows_a_progress_bar_on_a_terminal_only():  # semantics §15
    corpus(failing("F-1"))
    SCRIPT["F-1"] = read_and_return(task_completion=0.9)
    outputs = []
    for out, args in ((Terminal(), ["--json"]), (io.StringIO(), []), (Terminal(), [])):
        rule(f"R-{len(outputs)}a", directive=f"directive {len(outputs)} a")
        rule(f"R-{len(outputs)}b", directive=f"directive {len(outputs)} b")
        call_command("validate", *args, stdout=out)
        outputs.append(out.getvalue())
    as_json, piped, terminal = outputs
    assert "validating" not in as_json and "validating" not in piped
    assert "validating" in terminal and "2/2" in terminal
