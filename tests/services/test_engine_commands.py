"""The engine's commands (semantics §15): validate, journal, show_rule; deciding by the engine only
(semantics §3)."""

import io

import pytest
from django.core.management import call_command

from lifecycle.models import Rule
from lifecycle.services.rules import rule_retire_by_reviewer
from lifecycle.states import Actor
from replay.rounds import round_run
from tests.builders import T0
from tests.scenarios import SCRIPT, corpus, events, failing, read_and_return, rule, state_of, win

pytestmark = pytest.mark.usefixtures("scripted_engine")


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
