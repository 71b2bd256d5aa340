"""The rule tool, the scope file and the MCP tool under randomized forward trials (semantics
§20.1, §20.2): a control session never sees its candidate, assignment is stable, a read
without a session is served active rules only; and a rule's trial evidence in the API."""

import json

import anyio
import pytest
from mcp.client import Client

from cauterweb.mcp_server import Caller, build_server
from lifecycle.assignment import CONTROL, TREATMENT
from lifecycle.models import Exposure
from lifecycle.services.reports import reports_ingest
from lifecycle.services.rules import rule_promote
from lifecycle.services.tokens import token_create
from lifecycle.states import Actor
from lifecycle.validation import numbered
from replay.rounds import round_run
from tests.builders import T0, candidate, report
from tests.builders import sessions_in_arm as sessions

API = "/api/v1"
pytestmark = pytest.mark.usefixtures("randomized_trials")


def world():
    candidate("A-1", trigger="when the push is rejected", directive="pull first")
    rule_promote(rule_id="A-1", actor=Actor.engine(), evidence={}, reason="trial")
    candidate("C-1")


def get(client, key, path):
    response = client.get(f"{API}{path}", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def agent(db):
    return token_create(name="repair-bot", role="agent", actor="test").key


def test_the_api_rule_tool_serves_a_candidate_to_its_treatment_sessions_only(client, agent):
    world()
    treated, held_out = sessions("C-1", TREATMENT, 5), sessions("C-1", CONTROL, 5)
    for _ in range(2):  # the second read agrees with the first
        for session_id in treated:
            rules = get(client, agent, f"/scopes/git/rules?session={session_id}")["rules"]
            assert [r["id"] for r in rules] == ["A-1", "C-1"]
        for session_id in held_out:
            rules = get(client, agent, f"/scopes/git/rules?session={session_id}")["rules"]
            assert [r["id"] for r in rules] == ["A-1"]
    assert Exposure.objects.count() == 10
    assert [r["id"] for r in get(client, agent, "/scopes/git/rules")["rules"]] == ["A-1"]


def test_the_api_scope_file_lists_candidates_per_session(client, agent):
    world()
    [treated], [held_out] = sessions("C-1", TREATMENT, 1), sessions("C-1", CONTROL, 1)
    static = get(client, agent, "/scopes/git")["text"]
    assert "[A-1]" in static and "[C-1]" not in static
    assert "candidates are served per session" in static
    assert "[C-1]" in get(client, agent, f"/scopes/git?session={treated}")["text"]
    assert "[C-1]" not in get(client, agent, f"/scopes/git?session={held_out}")["text"]
    assert dict(Exposure.objects.values_list("session_id", "arm")) == {
        treated: TREATMENT,
        held_out: CONTROL,
    }


@pytest.mark.django_db(transaction=True)
def test_the_mcp_tool_serves_a_candidate_to_its_treatment_sessions_only():
    world()
    server = build_server(caller=Caller("claude-code", "agent"))
    [treated], [held_out] = sessions("C-1", TREATMENT, 1), sessions("C-1", CONTROL, 1)

    async def call(session: str | None) -> list[str]:
        async with Client(server) as mcp:
            arguments = {"scope": "git", **({"session": session} if session else {})}
            result = await mcp.call_tool("rules", arguments)
        assert not result.is_error, result
        found = result.structured_content or json.loads(result.content[0].text)
        return [r["id"] for r in found["rules"]]

    for _ in range(2):
        assert anyio.run(call, treated) == ["A-1", "C-1"]
        assert anyio.run(call, held_out) == ["A-1"]
    assert anyio.run(call, None) == ["A-1"]
    assert Exposure.objects.count() == 2


def test_a_rules_trial_evidence_is_in_the_api(client, agent, settings):
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    world()
    for arm, prefix, breached in ((TREATMENT, "t", False), (CONTROL, "c", True)):
        ids = sessions("C-1", arm, 12, prefix)
        for session_id in ids:
            get(client, agent, f"/scopes/git/rules?session={session_id}")
        notices = ["breach:task_completion"] if breached else []
        reports_ingest(numbered([report(s, T0, notices=notices) for s in ids]), now=T0)
    round_run()
    body = get(client, agent, "/rules/C-1")
    trial = body["randomized_trial"]
    assert trial["design"] == "randomized"
    assert trial["arms"]["treatment"]["sessions"] == 12
    assert trial["arms"]["control"]["breached"] == 12
    assert trial["effect"] == -1.0
    assert trial["alpha"] == settings.CAUTERWEB_TRIAL_ALPHA
    assert [p["sessions"] for p in trial["path"]][-1] == 24
