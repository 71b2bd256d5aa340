"""Randomized forward trials (semantics §20): assignment at the read, recorded once; outcomes
from the session's own reports; the round's verdict and its exact journal rows."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle.assignment import CONTROL, TREATMENT, arm_for
from lifecycle.metrics import current_registry
from lifecycle.models import Exposure, Rule, RuleRead, TrialEnrolment
from lifecycle.scopes import PER_SESSION, render_scope, rule_tool_read
from lifecycle.services.reports import reports_ingest
from lifecycle.services.rules import rule_promote
from lifecycle.states import Actor
from lifecycle.validation import numbered
from replay.engine.randomized import Arm, Design, RandomizedTrial, decide
from replay.rounds import round_run
from tests.builders import T0, candidate, report, sessions_in_arm
from tests.scenarios import events, state_of

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("randomized_trials")]

BREACH = ["breach:task_completion"]


def arm_of(rule_id: str, session_id: str) -> str:
    return arm_for(
        rule_id,
        session_id,
        allocation=settings.CAUTERWEB_TRIAL_ALLOCATION,
        key=settings.SECRET_KEY.encode(),
    )


sessions = sessions_in_arm


def read_then_report(session_ids, *, breached: bool, value: float, at=T0, scope="git"):
    for session_id in session_ids:
        rule_tool_read(scope=scope, session_id=session_id, now=at)
    lines = [
        report(s, at, notices=BREACH if breached else [], metrics={"task_completion": value})
        for s in session_ids
    ]
    reports_ingest(numbered(lines), now=at)


def served(session_id: str, scope: str = "git") -> list[str]:
    return [r["id"] for r in rule_tool_read(scope=scope, session_id=session_id)]


# --- assignment (§20.1, §20.2) --------------------------------------------------------------------


def test_a_session_is_served_the_candidate_in_treatment_only_and_always_the_same():
    candidate("C-1")
    [treated], [held_out] = sessions("C-1", TREATMENT, 1), sessions("C-1", CONTROL, 1)
    for _ in range(3):
        assert served(treated) == ["C-1"]
        assert served(held_out) == []
    assert sorted(Exposure.objects.values_list("session_id", "arm")) == sorted(
        [(treated, TREATMENT), (held_out, CONTROL)]
    )
    # Only what was served counts as read: the control session never read the candidate.
    assert set(RuleRead.objects.values_list("session_id", "rule_id")) == {(treated, "C-1")}


def test_candidates_of_one_scope_are_assigned_independently_and_active_rules_go_to_all():
    candidate("A-1", trigger="when the push is rejected", directive="pull first")
    rule_promote(rule_id="A-1", actor=Actor.engine(), evidence={}, reason="trial")
    candidate("C-1")
    candidate("C-2", trigger="when the lockfile is stale", directive="regenerate it")
    for session_id in [f"x-{n}" for n in range(40)]:
        expected = [c for c in ("C-1", "C-2") if arm_of(c, session_id) == TREATMENT]
        assert served(session_id) == ["A-1", *expected]
    arms = list(Exposure.objects.values_list("rule_id", "session_id", "arm"))
    both = {(s, a) for r, s, a in arms if r == "C-1"} & {(s, a) for r, s, a in arms if r == "C-2"}
    assert 0 < len(both) < 40  # neither always the same arm nor always the opposite


def test_a_read_without_a_session_is_served_active_rules_only_and_assigns_nobody():
    candidate("A-1", trigger="when the push is rejected", directive="pull first")
    rule_promote(rule_id="A-1", actor=Actor.engine(), evidence={}, reason="trial")
    candidate("C-1")
    assert [r["id"] for r in rule_tool_read(scope="git", session_id="")] == ["A-1"]
    text = render_scope("git")
    assert "[A-1]" in text and "[C-1]" not in text and PER_SESSION in text
    assert not Exposure.objects.exists()


def test_a_scope_file_fetched_with_a_session_id_is_that_sessions_read():
    candidate("C-1")
    [treated], [held_out] = sessions("C-1", TREATMENT, 1), sessions("C-1", CONTROL, 1)
    assert "[C-1]" in render_scope("git", session_id=treated)
    assert "[C-1]" not in render_scope("git", session_id=held_out)
    assert served(treated) == ["C-1"] and served(held_out) == []
    assert set(RuleRead.objects.values_list("session_id", "via")) == {
        (treated, "file"),
        (treated, "api"),
    }


def test_assignment_is_recorded_once_however_many_candidates_and_reads():
    for n in range(20):
        candidate(f"C-{n}", trigger=f"when step {n} fails", directive=f"retry step {n}")
    served("s-1")
    with CaptureQueriesContext(connection) as later:
        served("s-1")
    assert Exposure.objects.filter(session_id="s-1").count() == 20
    # A later read finds its arms in one query and inserts nothing.
    assert not [
        q
        for q in later.captured_queries
        if "lifecycle_exposure" in q["sql"] and "INSERT" in q["sql"]
    ]


# --- outcomes (§20.2, §20.3) ----------------------------------------------------------------------


def test_a_report_writes_the_outcome_of_its_own_sessions_exposures_only():
    candidate("C-1")
    candidate("C-OTHER", scope="docker", trigger="when docker fails", directive="prune")
    served("s-1")
    reports_ingest(numbered([report("s-1", T0, notices=BREACH), report("never-read", T0)]), now=T0)
    assert list(Exposure.objects.values_list("rule_id", "session_id", "breached", "value")) == [
        ("C-1", "s-1", True, 0.8)
    ]
    assert Exposure.objects.get().reported_at == T0
    assert not TrialEnrolment.objects.exists()  # §8's enrolment is the baseline design's


def test_a_later_report_can_turn_a_session_breached_but_not_move_its_place():
    candidate("C-1")
    served("s-1")
    later = T0 + timedelta(hours=1)
    reports_ingest(numbered([report("s-1", T0, metrics={"task_completion": 0.9})]), now=T0)
    reports_ingest(
        numbered([report("s-1", later, notices=BREACH, metrics={"task_completion": 0.2})]),
        now=later,
    )
    exposure = Exposure.objects.get()
    assert (exposure.reported_at, exposure.breached, exposure.value) == (T0, True, 0.2)


def test_the_outcome_follows_the_candidates_metric_family_and_decided_trials_stay_put():
    candidate("C-TC")
    candidate("C-CO", metric="coherence", trigger="when it rambles", directive="be brief")
    candidate("C-ANY", metric="", trigger="when anything goes wrong", directive="stop")
    candidate("C-DONE", trigger="when the remote moved", directive="fetch")
    served("s-1")
    Rule.objects.filter(pk="C-DONE").update(state="retired")
    metrics = {"task_completion": 0.4, "coherence": 0.7, "outcome_correct": 1.0}
    reports_ingest(numbered([report("s-1", T0, notices=BREACH, metrics=metrics)]), now=T0)
    assert {
        r: (reported is not None, breached, value)
        for r, reported, breached, value in Exposure.objects.values_list(
            "rule_id", "reported_at", "breached", "value"
        )
    } == {
        "C-TC": (True, True, 0.4),
        "C-CO": (True, False, 0.7),
        "C-ANY": (True, True, 1.0),
        "C-DONE": (False, False, None),
    }


def test_a_report_costs_the_same_statements_with_1_or_40_candidates_in_force():
    def one(n: int) -> int:
        served(f"s-{n}")
        line = report(f"s-{n}", T0 + timedelta(minutes=n), notices=BREACH)
        with CaptureQueriesContext(connection) as queries:
            reports_ingest(numbered([line]))
        return len(queries.captured_queries)

    candidate("C-0")
    current_registry()  # read once a process, not a report (lifecycle.metrics)
    few = one(1)
    for n in range(1, 40):
        candidate(f"C-{n}", trigger=f"when step {n} fails", directive=f"retry step {n}")
    assert one(2) == few
    assert Exposure.objects.filter(session_id="s-2", reported_at__isnull=False).count() == 40


# --- the round's verdict and its journal rows (§20.4, §20.5, §10) --------------------------------


def expected_rows(rule_id: str, trial: RandomizedTrial, *, decided: str | None):
    verdict = decide(trial)
    evidence = trial.evidence()
    rows = [
        (
            "validation_candidate_started",
            {
                "validator": "forward_trial",
                "replay_attempts": 0,
                "sessions_observed": trial.enrolled,
                "sessions_needed": trial.design.max_sessions,
                "round_budget_exhausted": False,
            },
        ),
        (
            "validation_verdict",
            {
                "outcome": verdict.outcome,
                "validator": "forward_trial",
                "reason": verdict.reason,
                "pending_reason": verdict.pending_reason or None,
                "round_budget_exhausted": False,
                "details": {"trial": evidence, "replay_attempts": 0, "replay": None},
            },
        ),
    ]
    if decided:
        rows.append(
            (
                decided,
                {
                    "from": "candidate",
                    "to": "active" if decided == "rule_promoted" else "retired",
                    "reason": verdict.reason,
                    "validator": "forward_trial",
                    "cases": [],
                    "deciding_metric": None,
                    "retire_on": [],
                    "trial": evidence,
                },
            )
        )
    return verdict, rows


def trial_rows(rule_id: str):
    return [
        (e.type, e.evidence)
        for e in events(rule_id)
        if e.type != "rule_added" and e.actor == "engine"
    ]


def design() -> Design:
    return Design(
        alpha=settings.CAUTERWEB_TRIAL_ALPHA,
        allocation=settings.CAUTERWEB_TRIAL_ALLOCATION,
        max_sessions=settings.CAUTERWEB_TRIAL_MAX_SESSIONS,
        margin=settings.CAUTERWEB_RULE_PROMOTE_MARGIN,
    )


def test_a_candidate_that_cuts_breaches_is_promoted_with_its_arms_in_the_journal(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    candidate("C-1")
    read_then_report(sessions("C-1", TREATMENT, 30, "t"), breached=False, value=0.9)
    read_then_report(sessions("C-1", TREATMENT, 2, "tb"), breached=True, value=0.3)
    read_then_report(sessions("C-1", CONTROL, 30, "c"), breached=True, value=0.3)
    read_then_report(sessions("C-1", CONTROL, 2, "cb"), breached=False, value=0.9)
    round_run()
    trial = RandomizedTrial(
        Arm(32, 2, 32, (30 * 0.9 + 2 * 0.3) / 32),
        Arm(32, 30, 32, (30 * 0.3 + 2 * 0.9) / 32),
        design(),
    )
    verdict, rows = expected_rows("C-1", trial, decided="rule_promoted")
    assert verdict.outcome == "promote" and verdict.reason.startswith("improved: treatment 32")
    assert trial_rows("C-1") == rows
    rule = state_of("C-1")
    assert (rule.state, rule.last_validator, rule.verdict_reason) == (
        "active",
        "forward_trial",
        verdict.reason,
    )


def test_a_harmful_candidate_is_retired_at_once_as_having_made_it_worse(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    candidate("C-1")
    read_then_report(sessions("C-1", TREATMENT, 14, "t"), breached=True, value=0.2)
    read_then_report(sessions("C-1", CONTROL, 14, "c"), breached=False, value=0.9)
    round_run()
    trial = RandomizedTrial(Arm(14, 14, 14, 0.2), Arm(14, 0, 14, 0.9), design())
    verdict, rows = expected_rows("C-1", trial, decided="rule_retired")
    assert verdict.reason.startswith("made it worse: treatment 14 sessions, 14 breached")
    assert trial_rows("C-1") == rows
    assert state_of("C-1").state == "retired"


def test_an_undecided_trial_is_pending_with_its_arms_in_words(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    candidate("C-1")
    read_then_report(sessions("C-1", TREATMENT, 3, "t"), breached=False, value=0.9)
    read_then_report(sessions("C-1", CONTROL, 3, "c"), breached=True, value=0.3)
    served("waiting")  # exposed, no report yet: shown, never counted
    round_run()
    trial = RandomizedTrial(Arm(3, 0, 3, 0.9), Arm(3, 3, 3, 0.3), design(), unreported=1)
    verdict, rows = expected_rows("C-1", trial, decided=None)
    assert trial_rows("C-1") == rows
    rule = state_of("C-1")
    assert (rule.state, rule.pending_reason) == ("candidate", "trial_in_progress")
    assert rule.pending_text == f"forward trial in progress: {verdict.reason}"
    assert verdict.reason.startswith(
        "treatment 3 sessions, 0 breached; control 3, 3 breached; effect −1.00 ["
    )
    assert "more session" in verdict.reason


def test_sessions_that_never_read_the_scope_decide_nothing(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    candidate("C-1")
    lines = [report(f"elsewhere-{n}", T0, notices=BREACH) for n in range(50)]
    reports_ingest(numbered(lines), now=T0)
    round_run()
    rule = state_of("C-1")
    assert (rule.state, rule.pending_reason) == ("candidate", "trial_in_progress")
    assert rule.verdict_reason == (
        "treatment 0 sessions, 0 breached; control 0, 0 breached; waiting for sessions in both arms"
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_first_reads_of_a_session_agree_on_its_arms():
    import threading

    for n in range(10):
        candidate(f"C-{n}", trigger=f"when step {n} fails", directive=f"retry step {n}")
    barrier, served_to = threading.Barrier(4), []

    def read():
        try:
            barrier.wait()
            served_to.append(tuple(served("same-session")))
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(served_to)) == 1 and len(served_to) == 4
    arms = dict(Exposure.objects.values_list("rule_id", "arm"))
    assert len(arms) == 10 == Exposure.objects.count()
    assert list(served_to[0]) == sorted(r for r, arm in arms.items() if arm == TREATMENT)


def test_show_rule_gives_the_arms_of_a_randomized_trial(capsys):
    import json

    from django.core.management import call_command

    candidate("C-1")
    read_then_report(sessions("C-1", TREATMENT, 2, "t"), breached=False, value=0.9)
    read_then_report(sessions("C-1", CONTROL, 3, "c"), breached=True, value=0.3)
    served("waiting")
    call_command("show_rule", "C-1", "--json")
    arms = json.loads(capsys.readouterr().out)["trial"]["arms"]
    waiting = arm_of("C-1", "waiting")
    assert arms == {
        "treatment": {"sessions": 2, "breached": 0, "unreported": int(waiting == TREATMENT)},
        "control": {"sessions": 3, "breached": 3, "unreported": int(waiting == CONTROL)},
    }
    call_command("show_rule", "C-1")
    assert "randomized trial: treatment 2 sessions, 0 breached" in capsys.readouterr().out
