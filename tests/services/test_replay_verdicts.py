"""Replay verdicts end to end on the database, driven by the scripted backend (semantics §6–§7):
improvement, regression, attribution, the verifier. Each test names the rule it holds the engine to."""

import pytest

from replay.rounds import round_run
from tests.scenarios import (
    SCRIPT,
    case_events,
    corpus,
    events,
    failing,
    read_and_return,
    rule,
    state_of,
    win,
)

pytestmark = pytest.mark.usefixtures("scripted_engine")


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
    settings.CAUTERWEB_VERIFIER = "tests.services.test_replay_verdicts:scripted_verifier"
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
    settings.CAUTERWEB_VERIFIER = "tests.services.test_replay_verdicts:scripted_verifier"
    VERDICTS["answer"] = None
    corpus(failing("F-1"))
    rule()
    SCRIPT["F-1"] = read_and_return(task_completion=0.9)
    round_run()
    assert state_of().state == "active"
    assert case_events()["F-1"]["deciding_metric"] == "task_completion"
