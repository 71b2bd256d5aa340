"""Validation rounds (semantics §9): budget and rotation, idempotence, reviewers acting mid-round,
the baseline of a round, statement counts, standstill, the lock and kicks, the fallback notice."""

import io
import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle.models import Rule, TrialEnrolment
from lifecycle.services.reports import reports_ingest
from lifecycle.services.rules import rule_retire_by_reviewer
from lifecycle.states import Actor
from lifecycle.validation import read_jsonl
from replay import lock
from replay.kick import kick_round
from replay.models import ValidationRound
from replay.rounds import round_run, run_until_settled
from tests.builders import T0, candidate, jsonl, report
from tests.scenarios import (
    CALLS,
    SCRIPT,
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


def a_reviewer_retires_r2_while_r1_replays():
    """Two candidates on F-1; while R-1's replay runs, a reviewer retires R-2."""
    corpus(failing("F-1"))
    rule("R-1")
    rule("R-2", directive="another directive")

    def reviewer_retires_r2(case, context):
        if case.rule["id"] == "R-1":
            rule_retire_by_reviewer(rule_id="R-2", actor=Actor.reviewer("rita"), reason="wrong")
        return read_and_return(task_completion=0.9)(case, context)

    SCRIPT["F-1"] = reviewer_retires_r2


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
    # A chunk of the queue, as PostgreSQL selects (SQLite selects for each candidate alone).
    monkeypatch.setattr(rounds, "_select_ahead", lambda: rounds.SELECT_AHEAD)
    a_reviewer_retires_r2_while_r1_replays()
    vround = round_run()
    assert state_of("R-1").state == "active"
    r2 = state_of("R-2")
    assert r2.state == "retired" and r2.verdict_reason == "wrong"
    assert [e.type for e in events("R-2") if e.round_id == vround.pk] == []
    assert vround.summary["skipped"] == 1
    assert expected == CALLS


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite selects per candidate")
def test_on_sqlite_each_candidate_selects_when_reached_never_from_a_stale_chunk(
    registry_seeded, monkeypatch
):
    from replay import rounds

    monkeypatch.setattr(rounds, "SELECTION_FRESH_S", 60.0)
    a_reviewer_retires_r2_while_r1_replays()
    assert round_run().summary["skipped"] == 1
    assert CALLS == ["F-1"]  # R-2 was retired before it was reached: never replayed


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
    # A chunk of the queue, as PostgreSQL selects (SQLite selects for each candidate alone).
    monkeypatch.setattr(rounds, "_select_ahead", lambda: rounds.SELECT_AHEAD)
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


@pytest.mark.django_db
def test_a_broker_that_failed_a_kick_is_not_tried_again_for_a_moment(monkeypatch):
    # docs/deploy.md: a hung broker costs one request its socket timeout, not every request.
    from cauterweb.celery import app
    from replay import kick, tasks

    tried = []

    def hung(**kwargs):
        tried.append(kwargs)
        raise TimeoutError("timed out")

    monkeypatch.setattr(tasks.round_run_task, "delay", hung)
    monkeypatch.setitem(kick._down, "until", 0.0)
    eager, app.conf.task_always_eager = app.conf.task_always_eager, False
    try:
        first, second = kick_round(reason="report"), kick_round(reason="report")
    finally:
        app.conf.task_always_eager = eager
    assert len(tried) == 1
    assert not first["queued"] and not second["queued"]
    assert second["detail"] == (
        "broker unavailable: not tried: a kick failed 5 s ago (TimeoutError: timed out)"
    )
    # Every kick missed is journaled, tried or not.
    assert len(events(type_="validation_kick_failed")) == 2
    monkeypatch.setitem(kick._down, "until", 0.0)  # the back-off is over
    eager, app.conf.task_always_eager = app.conf.task_always_eager, False
    try:
        kick_round(reason="report")
    finally:
        app.conf.task_always_eager = eager
    assert len(tried) == 2


# --- follow-up rounds (docs/semantics.md#s9-1-lease) --------------------------------------------


@pytest.fixture
def follow_ups(monkeypatch, django_capture_on_commit_callbacks):
    """A broker (not eager): the follow-up kicks a round queues, by `kicked_by`."""
    from cauterweb.celery import app
    from replay import tasks

    queued = []
    monkeypatch.setattr(
        tasks.round_run_task,
        "apply_async",
        lambda kwargs, countdown: queued.append((kwargs["kicked_by"], countdown)),
    )
    eager, app.conf.task_always_eager = app.conf.task_always_eager, False
    try:
        yield queued
    finally:
        app.conf.task_always_eager = eager


def run_on_commit(capture):
    with capture(execute=True):
        return round_run()


@pytest.mark.django_db
def test_a_round_that_took_over_a_dead_round_queues_one_follow_up(
    follow_ups, django_capture_on_commit_callbacks
):
    from tests.builders import make_round

    corpus(failing("F-1"))
    rule("R-1")
    SCRIPT["F-1"] = read_and_return(task_completion=0.3)
    dead = make_round(["R-1"], status="running", worker="host:1")
    vround = run_on_commit(django_capture_on_commit_callbacks)
    dead.refresh_from_db()
    assert dead.status == "failed"
    assert follow_ups == [("follow-up: took over a dead round", lock.lock_ttl_s() / 2)]
    assert vround.kicked_by == ""
    # The follow-up round finds no dead round and nothing new: it asks for no other.
    run_on_commit(django_capture_on_commit_callbacks)
    assert len(follow_ups) == 1


@pytest.mark.django_db
def test_a_candidate_recorded_during_a_round_gets_a_follow_up_round(
    follow_ups, django_capture_on_commit_callbacks
):
    corpus(failing("F-1"))
    rule("R-1")
    SCRIPT["F-1"] = read_and_return(task_completion=0.3)

    def record_one_more(written, queued):
        # While the round holds the lock: this candidate's own kick found it held.
        if not Rule.objects.filter(pk="R-2").exists():
            rule("R-2", directive="something else entirely")

    with django_capture_on_commit_callbacks(execute=True):
        vround = round_run(on_progress=record_one_more)
    assert vround.queue == ["R-1"]
    assert follow_ups == [("follow-up: candidates arrived during the round", 5.0)]
    run_on_commit(django_capture_on_commit_callbacks)  # takes R-2 up
    assert len(follow_ups) == 1


@pytest.mark.django_db
def test_a_round_that_did_all_it_could_queues_no_follow_up(
    follow_ups, django_capture_on_commit_callbacks
):
    corpus(failing("F-1"))
    rule("R-1")
    SCRIPT["F-1"] = read_and_return(task_completion=0.3)
    run_on_commit(django_capture_on_commit_callbacks)
    assert state_of("R-1").state == "retired"
    assert follow_ups == []
