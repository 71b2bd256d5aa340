"""The demo settles with every kind of outcome: promoted and retired by paired replays with
per-case, per-arm evidence, decided by forward trial, and pending with a named reason
(semantics §7–§10, §17)."""

import pytest
from django.core.management import call_command

from lifecycle.models import JournalEvent, Rule


@pytest.fixture
def demo(db, settings):
    settings.CAUTERWEB_REPLAY_BACKEND = "replay.backends.simulated:replay"
    settings.CAUTERWEB_VERIFIER = ""
    call_command("demo_setup", stdout=open("/dev/null", "w"))  # noqa: SIM115


def test_the_demo_settles_with_every_kind_of_outcome(demo):
    rules = {r.id: r for r in Rule.objects.all()}
    by_replay = {r.id for r in rules.values() if r.last_validator == "replay"}
    assert any(rules[i].state == "active" for i in by_replay)
    assert rules["C-001"].state == "active"  # the F-001 rule
    assert (rules["C-002"].state, rules["C-002"].last_validator) == ("retired", "replay")
    assert "protected win" in rules["C-002"].verdict_reason
    retired = JournalEvent.objects.get(rule_id="C-002", type="rule_retired").evidence
    assert {case["arm"] for case in retired["cases"]} == {"treatment", "control"}
    assert any(r["rejected"] for r in retired["paired"]["regressions"])
    assert (rules["C-009"].state, rules["C-009"].last_validator) == ("active", "forward_trial")
    assert rules["C-013"].state == "candidate" and rules["C-013"].pending_reason


def test_the_simulator_is_deterministic():
    # Same case, same rule, same noise: the journal of a re-run would be identical.
    from replay.backends.python import ReplayCase, ReplayContext
    from replay.backends.simulated import replay

    trajectory = {"metrics": {"coherence": 0.8, "plan_quality": 0.5}, "steps": []}
    case = ReplayCase("F-x", "failing", trajectory, {"fault": None}, {"id": "R", "scope": "g"})
    first = replay(case, ReplayContext(session_id="a", rules_for=lambda s, q: []))
    again = replay(case, ReplayContext(session_id="b", rules_for=lambda s, q: []))
    assert first == again
    assert first["traces"][-1]["metrics"] != trajectory["metrics"]  # the noise is there
