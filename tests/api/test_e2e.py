"""End to end: a harness that knows only the OpenAPI document and a token posts
reports, records a candidate, reads rules through the rule tool, and sees the verdict appear —
over real HTTP against a running server. The operator's one out-of-band step is creating the
token (`create_token`).

No replay backend is configured, so the engine decides by forward trial (semantics §8) with a
trial of three sessions."""

import io
import json
import threading
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from celery.signals import task_postrun
from django.core.management import call_command

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


class Harness:
    """A client written against the published schema: it finds every operation by its
    operationId, never by a hard-coded path."""

    def __init__(self, base_url: str, token: str):
        self.base = base_url
        self.http = httpx.Client(headers={"Authorization": f"Bearer {token}"})
        schema = self.http.get(f"{base_url}/api/v1/openapi.json", timeout=10).json()
        self.operations = {
            op["operationId"]: (method.upper(), path)
            for path, ops in schema["paths"].items()
            for method, op in ops.items()
        }

    def call(self, operation_id: str, *, path_params=None, **kwargs) -> httpx.Response:
        method, path = self.operations[operation_id]
        response = self.http.request(
            method, self.base + path.format(**(path_params or {})), timeout=30, **kwargs
        )
        assert response.status_code < 300, (operation_id, response.status_code, response.text)
        return response

    def report(self, session: str, at: datetime, notices=(), rules_read=()) -> dict:
        body = {
            "session_id": session,
            "at": at.isoformat(),
            "notices": list(notices),
            "metrics": {"task_completion": 0.4 if notices else 0.9},
            "rules_read": list(rules_read),
        }
        return self.call("postReports", json=body).json()

    def wait_for(self, rule_id: str, *, state: str, rounds_done: threading.Event) -> dict:
        # Rounds run after the report's commit; the request never waits for them (semantics
        # §9.4). A rule changes only when a round ends, so the harness reads it again after each
        # one; the timeout only bounds a failing test.
        while True:
            rounds_done.clear()
            rule = self.call("getRule", path_params={"rule_id": rule_id}).json()
            if rule["rule"]["state"] == state or not rounds_done.wait(timeout=20):
                return rule


@pytest.fixture
def rounds_done():
    """Set whenever a validation round ends in the server's thread (Celery is eager here, and
    an eager task sends task_postrun too)."""
    done = threading.Event()

    def round_ended(sender=None, **kwargs):
        if sender.name == "replay.tasks.round_run_task":
            done.set()

    task_postrun.connect(round_ended, weak=False)
    yield done
    task_postrun.disconnect(round_ended)


@pytest.fixture
def harness(live_server, settings):
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS = 3
    printed = io.StringIO()
    call_command("create_token", "e2e-harness", "--role", "agent", "--json", stdout=printed)
    harness = Harness(live_server.url, json.loads(printed.getvalue())["token"])
    yield harness
    # A kept-alive connection would hold a server thread (and its database connection) past
    # the end of the test.
    harness.http.close()


def test_a_harness_sees_its_candidate_promoted_over_http_only(harness, rounds_done):
    # History: four sessions had an incident, all of them on task_completion (baseline 1.0).
    for n in range(4):
        harness.report(f"hist-{n}", T0 + timedelta(minutes=n), ["breach:task_completion"])

    recorded = harness.call(
        "recordCandidates",
        json={
            "trigger": "when git push fails with non-fast-forward",
            "directive": "fetch and rebase onto the remote branch, then push again",
            "scope": "git",
            "metric": "task_completion",
            "signature": ["action:git.push", "error:non_fast_forward"],
        },
    ).json()
    candidate = recorded["candidates"][0]
    assert (candidate["state"], candidate["baseline"]["rate"]) == ("candidate", 1.0)

    # Three live sessions read the candidate through the rule tool and end healthy.
    for n in range(3):
        session = f"live-{n}"
        read = harness.call(
            "ruleTool",
            path_params={"scope": "git"},
            params={"session": session, "query": "action:git.push error:non_fast_forward"},
        ).json()
        assert candidate["id"] in [r["id"] for r in read["rules"]]  # semantics §4: always returned
        harness.report(session, T0 + timedelta(hours=1, minutes=n), rules_read=[candidate["id"]])

    detail = harness.wait_for(candidate["id"], state="active", rounds_done=rounds_done)

    assert detail["rule"]["state"] == "active", detail["rule"]
    assert detail["rule"]["last_validator"] == "forward_trial"
    assert detail["evidence"]["trial"] == {
        "trial_rate": 0.0,
        "baseline_rate": 1.0,
        "observed_sessions": 3,
    }
    assert detail["trial"]["read_candidate"] == 3
    promoted = harness.call(
        "listJournal", params={"rule": candidate["id"], "type": "rule_promoted"}
    ).json()["items"]
    assert [(e["type"], e["actor"]) for e in promoted] == [("rule_promoted", "engine")]
    # Now a standing rule: the rule tool returns it as active for a state that matches its
    # signature (semantics §11), and not for one that merely shares an atom.
    matching, unrelated = (
        harness.call("ruleTool", path_params={"scope": "git"}, params={"query": q}).json()
        for q in ("action:git.push error:non_fast_forward tool:git", "action:git.pull")
    )
    assert [(r["id"], r["state"]) for r in matching["rules"]] == [(candidate["id"], "active")]
    assert unrelated["rules"] == []
