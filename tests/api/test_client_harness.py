"""The Python client and the replay harness helper against a live server (semantics §14, §19):
the client posts traces, trajectories, reports and candidates and reads rules; a scripted agent
served by `serve_harness` is replayed by the engine's HTTP backend end to end."""

import importlib.util
import json
import time
from pathlib import Path

import httpx
import pytest

from cauterweb.client import CauterWeb, CauterWebError, serve_harness, signature
from lifecycle.models import RuleRead, Trajectory
from lifecycle.services.tokens import token_create
from replay.rounds import round_run
from tests.scenarios import (
    corpus,
    events,
    failing,
    rule,
    state_of,
)
from tests.traces_support import fixture_bytes

KEY = "harness-test-key"


@pytest.fixture
def cw(live_server, request):
    request.getfixturevalue("registry_seeded")
    token = token_create(name="harness-bot", role="agent", actor="test").key
    with CauterWeb(live_server.url, token) as client:
        yield client


def test_the_client_posts_traces_and_reads_what_they_became(cw):
    imported = cw.post_traces(fixture_bytes("genai_agent.otlp.json"))
    assert (imported.created, imported.unchanged) == (2, 0)
    again = cw.post_traces(fixture_bytes("genai_agent.otlp.json"))
    assert (again.created, again.unchanged) == (0, 2)
    assert Trajectory.objects.get(pk="otel-conv_5j66UpCpwteGg4YSxUnt7lPY").kind == "failure"


def test_the_client_posts_trajectories_reports_and_candidates_and_reads_rules(cw):
    line = {
        "id": "F-1",
        "kind": "failure",
        "task": "push",
        "steps": [{"tool": "git", "input": "git push", "error": "(non-fast-forward)"}],
        "outcome": {"status": "failed"},
        "metrics": {"task_completion": 0.3},
    }
    assert cw.post_trajectories([line]).created == 1
    assert Trajectory.objects.get(pk="F-1").signature == [
        "tool:git",
        "action:git.push",
        "error:non_fast_forward",
    ]
    (recorded,) = cw.record_candidates(
        [{"trigger": "when git push is rejected", "directive": "pull first", "scope": "git"}]
    )
    assert recorded["state"] == "candidate"
    report = {"session_id": "s-1", "at": "2026-01-01T00:00:00Z", "notices": [], "metrics": {}}
    assert cw.post_reports([report]).created == 1
    rules = cw.rules("git", query="push", session="sess-9")
    assert [r["id"] for r in rules] == [recorded["id"]]
    assert RuleRead.objects.filter(session_id="sess-9", rule_id=recorded["id"]).exists()


def test_an_api_error_raises_with_its_status_and_the_items_at_fault(cw):
    with pytest.raises(CauterWebError) as exc:
        cw.post_traces(b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x"}]}]}]}')
    assert exc.value.status == 422
    assert ["record", "resourceSpans[0].scopeSpans[0].spans[0] (span ?)", "traceId"] in [
        e["loc"] for e in exc.value.errors
    ]


# ---- the harness -----------------------------------------------------------------------------


def load_example_agent():
    """The scripted agent of examples/scripted_agent/, as its README wires it."""
    path = Path(__file__).resolve().parents[2] / "examples" / "scripted_agent" / "agent.py"
    spec = importlib.util.spec_from_file_location("example_agent", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.replay


def scripted_agent(seen: list):
    """The example's agent, with each call it gets written down."""
    replay = load_example_agent()

    def recorded(case, rule_tool, mark_started, arm):
        seen.append((case.id, case.kind, arm))
        return replay(case, rule_tool, mark_started, arm)

    return recorded


@pytest.fixture
def harness(live_server, request, settings):
    request.getfixturevalue("registry_seeded")
    seen: list = []
    running = serve_harness(scripted_agent(seen), key=KEY, port=0, block=False)
    settings.CAUTERWEB_REPLAY_BACKEND = running.url
    settings.CAUTERWEB_REPLAY_HMAC_KEY = KEY
    settings.CAUTERWEB_PUBLIC_URL = live_server.url
    settings.CAUTERWEB_VERIFIER = ""
    settings.CAUTERWEB_REPLAY_TIMEOUT_S = 30.0
    settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S = 0.0
    settings.CAUTERWEB_LOCK_URL = ""
    yield running, seen
    running.stop()


def test_a_scripted_agent_served_by_the_harness_is_replayed_end_to_end(harness):
    running, seen = harness
    corpus(failing("F-1"))
    rule(directive="pull latest changes before pushing")
    round_run()
    # One case: its first look (4 replays per arm) cannot decide, so the rule waits for the
    # next round's look (semantics §17.3).
    assert state_of().state == "candidate"
    round_run()
    # Paired replays (semantics §17.1): the harness is told each replay's arm, and only the
    # treatment arm is handed the candidate through its own token.
    assert {arm for case_id, kind, arm in seen if case_id == "F-1"} == {"treatment", "control"}
    replays = [e.evidence for e in events("R-1", "validation_replay_case")]
    treatment = [e for e in replays if e["arm"] == "treatment"]
    control = [e for e in replays if e["arm"] == "control"]
    assert treatment and all(e["candidate_read"] for e in treatment)
    assert control and not any(e["candidate_read"] for e in control)
    assert RuleRead.objects.filter(session_id=treatment[0]["replay_session"], via="replay").exists()
    assert state_of().state == "active"


def test_the_harness_refuses_an_unsigned_or_missigned_request(harness):
    running, seen = harness
    body = json.dumps({"case": {}}).encode()
    for header in ("", signature(body, "another-key")):
        answer = httpx.post(running.url, content=body, headers={"X-CauterWeb-Signature": header})
        assert answer.status_code == 401
    undated = httpx.post(
        running.url, content=b"{}", headers={"X-CauterWeb-Signature": signature(b"{}", KEY)}
    )
    assert undated.status_code == 401
    assert undated.json()["detail"] == "the request carries no sent_at and nonce"
    fresh = json.dumps({"sent_at": time.time(), "nonce": "n-1"}).encode()
    malformed = httpx.post(
        running.url, content=fresh, headers={"X-CauterWeb-Signature": signature(fresh, KEY)}
    )
    assert malformed.status_code == 400
    assert seen == []


def test_the_harness_refuses_a_captured_request_sent_again_or_late(harness):
    running, seen = harness

    def post(body: dict) -> httpx.Response:
        data = json.dumps(body).encode()
        return httpx.post(
            running.url, content=data, headers={"X-CauterWeb-Signature": signature(data, KEY)}
        )

    assert post({"sent_at": time.time(), "nonce": "n-2"}).status_code == 400  # signed, fresh
    again = post({"sent_at": time.time(), "nonce": "n-2"})
    assert (again.status_code, again.json()["detail"]) == (
        401,
        "replayed request: its nonce was seen before",
    )
    late = post({"sent_at": time.time() - 3600, "nonce": "n-3"})
    assert late.status_code == 401 and late.json()["detail"].startswith(
        "stale request: sent 3600 s ago"
    )
    assert seen == []
