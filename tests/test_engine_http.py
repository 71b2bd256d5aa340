"""The HTTP replay backend and its callbacks (semantics §14): a signed POST, a per-replay token, the
rule tool and the started signal through the API."""

import json
from urllib.parse import urlparse

import pytest
from django.test import Client

from lifecycle.models import RuleRead
from replay.backends import http
from replay.models import ReplaySession
from replay.services import round_run
from tests.test_engine_scenarios import (  # noqa: F401  (fixtures)
    case_events,
    corpus,
    failing,
    registry_seeded,
    rule,
    state_of,
)

HARNESS = "http://harness.test/replay"


class Answer:
    def __init__(self, body):
        self.body = body

    def raise_for_status(self):
        pass

    def json(self):
        return self.body


def harness(*, start=True, read=True, received=None):
    """A remote harness: checks the signature, signals start, reads rules, answers."""

    def post(url, data, headers, timeout):
        assert url == HARNESS
        assert http.signature_valid(data, headers[http.SIGNATURE_HEADER])
        body = json.loads(data)
        if received is not None:
            received.append(body)
        client = Client()
        token = {"HTTP_X_CAUTERWEB_REPLAY_TOKEN": body["replay_token"]}
        if start:
            assert client.post(urlparse(body["started_url"]).path, **token).status_code == 200
        if read:
            answer = client.get(urlparse(body["rule_tool_url"]).path, {"scope": "git"}, **token)
            assert answer.status_code == 200
        metrics = {**body["case"]["trajectory"]["metrics"], "task_completion": 0.9}
        return Answer({"traces": [{"metrics": metrics}]})

    return post


@pytest.fixture
def remote(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = HARNESS
    settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S = 2.0
    settings.CAUTERWEB_PUBLIC_URL = "http://testserver"


@pytest.mark.usefixtures("registry_seeded", "remote")
def test_a_remote_harness_replays_through_signed_requests_and_the_api(monkeypatch):  # semantics §14
    received = []
    monkeypatch.setattr(http.requests, "post", harness(received=received))
    corpus(failing("F-1"))
    rule()
    round_run()
    assert state_of().state == "active"
    (body,) = received
    assert set(body) == {"case", "rule", "replay_token", "rule_tool_url", "started_url"}
    assert body["rule"]["id"] == "R-1" and body["case"]["kind"] == "failing"
    f1 = case_events()["F-1"]
    assert (f1["outcome"], f1["candidate_read"]) == ("scored", True)
    assert RuleRead.objects.filter(session_id=f1["replay_session"], via="replay").exists()
    assert ReplaySession.objects.get(pk=f1["replay_session"]).started_at is not None


@pytest.mark.usefixtures("registry_seeded", "remote")
def test_a_remote_harness_that_never_signals_start_is_env_wait_timeout(
    monkeypatch, settings
):  # semantics §9.3
    settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S = 0.2
    import threading

    gate = threading.Event()

    def slow(*args, **kwargs):
        gate.wait(5)
        return harness(start=False)(*args, **kwargs)

    monkeypatch.setattr(http.requests, "post", slow)
    corpus(failing("F-1"))
    rule()
    try:
        round_run()
    finally:
        gate.set()
    assert state_of().pending_reason == "env_wait_timeout"


@pytest.mark.django_db
def test_the_rule_tool_refuses_a_forged_or_missing_token(client):  # semantics §14
    assert client.get("/api/v1/replay/rules").status_code == 401
    forged = {"HTTP_X_CAUTERWEB_REPLAY_TOKEN": "replay:1:R-1:F-1"}
    assert client.get("/api/v1/replay/rules", **forged).status_code == 401
    assert client.post("/api/v1/replay/started", **forged).status_code == 401


@pytest.mark.django_db
def test_the_rule_tool_shows_the_candidate_under_test_and_no_other(client):  # semantics §7.3
    rule("R-1")
    rule("R-2", directive="another directive")
    token = http.make_token(session_id="replay:9:R-1:F-1", rule_id="R-1")
    answer = client.get("/api/v1/replay/rules", HTTP_X_CAUTERWEB_REPLAY_TOKEN=token)
    assert [r["id"] for r in answer.json()] == ["R-1"]
    assert list(RuleRead.objects.values_list("session_id", "rule_id", "via")) == [
        ("replay:9:R-1:F-1", "R-1", "replay")
    ]


def test_the_signature_is_hmac_sha256_of_the_exact_body():
    body = b'{"a": 1}'
    assert http.sign(body, key="k") == (
        "sha256=" + __import__("hmac").new(b"k", body, "sha256").hexdigest()
    )
    assert http.signature_valid(body, http.sign(body, key="k"), key="k")
    assert not http.signature_valid(body + b" ", http.sign(body, key="k"), key="k")
