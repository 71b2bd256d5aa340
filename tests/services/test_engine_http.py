"""The HTTP replay backend and its callbacks (semantics §14): a signed POST, a per-replay
capability token, the rule tool and the started signal through the API; reads that cannot be
forged (semantics §7.5)."""

import json
from urllib.parse import urlparse

import pytest
from django.test import Client

from lifecycle.models import RuleRead
from lifecycle.services.tokens import token_create
from replay.backends import http
from replay.models import ReplaySession
from replay.rounds import round_run
from tests.builders import T0, HarnessAnswer
from tests.scenarios import (
    case_events,
    corpus,
    failing,
    rule,
    state_of,
)

HARNESS = "http://harness.test/replay"


def harness(*, start=True, read=True, received=None):
    """A remote harness: checks the signature, signals start, reads rules, answers."""

    def post(url, data, headers, timeout):
        assert url == HARNESS
        assert http.signature_valid(data, headers[http.SIGNATURE_HEADER])
        body = json.loads(data)
        if received is not None:
            received.append(body)
        client = Client()
        if start:
            assert client.post(urlparse(body["started_url"]).path).status_code == 200
        if read:
            answer = client.get(urlparse(body["rule_tool_url"]).path, {"scope": "git"})
            assert answer.status_code == 200
        metrics = {**body["case"]["trajectory"]["metrics"], "task_completion": 0.9}
        return HarnessAnswer({"traces": [{"metrics": metrics}]}, data)

    return post


@pytest.fixture
def remote(settings):
    settings.CAUTERWEB_REPLAY_DESIGN = "single"
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
    assert set(body) == {
        *("case", "rule", "arm", "replay_token", "rule_tool_url", "started_url"),
        *("sent_at", "nonce"),  # added fields: a harness refuses a request sent again
    }
    assert body["arm"] == "treatment" and len(body["replay_token"]) >= 32
    assert body["rule_tool_url"] == f"http://testserver/api/v1/replay/{body['replay_token']}/rules"
    assert body["rule"]["id"] == "R-1" and body["case"]["kind"] == "failing"
    f1 = case_events()["F-1"]
    assert (f1["outcome"], f1["candidate_read"]) == ("scored", True)
    assert RuleRead.objects.filter(session_id=f1["replay_session"], via="replay").exists()
    replay = ReplaySession.objects.get(pk=f1["replay_session"])
    assert replay.started_at is not None
    # Finished: its token reads nothing any more.
    assert Client().get(urlparse(body["rule_tool_url"]).path).status_code == 401


@pytest.mark.usefixtures("registry_seeded", "remote")
def test_reads_under_the_replay_session_by_any_other_route_do_not_count(monkeypatch):
    # semantics §7.5: a harness that never calls its own rule tool, plus a read of the public
    # rule tool by an agent token that names the replay's session, is not exercised
    agent = token_create(name="intruder", role="agent", actor="test").key

    def forging(url, data, headers, timeout):
        body = json.loads(data)
        client = Client()
        client.post(urlparse(body["started_url"]).path)
        forged = f"replay:{ReplaySession.objects.get().round_id}:R-1:F-1"
        answer = client.get(
            "/api/v1/scopes/git/rules",
            {"session": forged},
            HTTP_AUTHORIZATION=f"Bearer {agent}",
        )
        assert answer.status_code == 200 and "R-1" in [r["id"] for r in answer.json()["rules"]]
        metrics = {**body["case"]["trajectory"]["metrics"], "task_completion": 0.9}
        return HarnessAnswer({"traces": [{"metrics": metrics}]}, data)

    monkeypatch.setattr(http.requests, "post", forging)
    corpus(failing("F-1"))
    rule()
    round_run()
    f1 = case_events()["F-1"]
    assert (f1["outcome"], f1["candidate_read"]) == ("candidate_not_exercised", False)
    assert f1["replay_session"] == f"replay:{ReplaySession.objects.get().round_id}:R-1:F-1"
    assert (state_of().state, state_of().pending_reason) == ("candidate", "candidate_not_exercised")


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
def test_the_rule_tool_refuses_a_guessed_or_missing_token(client):  # semantics §14
    rule("R-1")
    ReplaySession.objects.create(
        id="replay:1:R-1:F-1", rule_id="R-1", case_id="F-1", token="t" * 32, created_at=T0
    )
    assert client.get("/api/v1/replay/replay:1:R-1:F-1/rules").status_code == 401
    assert client.get("/api/v1/replay/" + "u" * 32 + "/rules").status_code == 401
    assert client.post("/api/v1/replay/" + "u" * 32 + "/started").status_code == 401
    assert client.get("/api/v1/replay/" + "t" * 32 + "/rules").status_code == 200


@pytest.mark.django_db
def test_the_rule_tool_shows_the_candidate_under_test_and_no_other(client):  # semantics §7.3
    rule("R-1")
    rule("R-2", directive="another directive")
    for arm, token in (("treatment", "t" * 32), ("control", "c" * 32)):
        ReplaySession.objects.create(
            id=f"replay:9:R-1:F-1:{arm}",
            rule_id="R-1",
            case_id="F-1",
            arm=arm,
            token=token,
            created_at=T0,
        )
    treatment = client.get("/api/v1/replay/" + "t" * 32 + "/rules")
    control = client.get("/api/v1/replay/" + "c" * 32 + "/rules")
    assert [r["id"] for r in treatment.json()] == ["R-1"]
    assert control.json() == []  # semantics §17.1: the control arm hides the candidate too
    assert list(RuleRead.objects.values_list("session_id", "rule_id", "via")) == [
        ("replay:9:R-1:F-1:treatment", "R-1", "replay")
    ]


def test_the_signature_is_hmac_sha256_of_the_exact_body():
    body = b'{"a": 1}'
    assert http.sign(body, key="k") == (
        "sha256=" + __import__("hmac").new(b"k", body, "sha256").hexdigest()
    )
    assert http.signature_valid(body, http.sign(body, key="k"), key="k")
    assert not http.signature_valid(body + b" ", http.sign(body, key="k"), key="k")


def answering(session, *, signed=True, key=None):
    def post(url, data, headers, timeout):
        return HarnessAnswer(session, data, signed=signed, key=key)

    return post


@pytest.mark.parametrize(
    ("signed", "key"), [(False, None), (True, "another-key")], ids=["unsigned", "missigned"]
)
def test_an_answer_not_signed_for_its_request_is_refused(monkeypatch, settings, signed, key):
    # docs/semantics.md#s14-5: a harness's answer is trusted only signed back for the request.
    from replay.backends.python import ReplayCase, ReplayContext

    settings.CAUTERWEB_PUBLIC_URL = "http://testserver"
    monkeypatch.setattr(
        http.requests,
        "post",
        answering({"traces": [{"metrics": {"task_completion": 0.9}}]}, signed=signed, key=key),
    )
    context = ReplayContext(session_id="s", rules_for=lambda scope, query: [])
    context.token = "t" * 32
    case = ReplayCase("F-1", "failing", {}, "task", {"id": "R-1"})
    with pytest.raises(http.AnswerRefused, match="not signed for this request"):
        http.HttpBackend(HARNESS)(case, context)


def test_each_request_is_dated_and_carries_a_fresh_nonce_inside_the_signed_body(monkeypatch):
    from replay.backends.python import ReplayCase, ReplayContext

    sent = []

    def post(url, data, headers, timeout):
        sent.append((data, headers))
        return HarnessAnswer({"traces": [{"metrics": {"task_completion": 0.9}}]}, data)

    monkeypatch.setattr(http.requests, "post", post)
    context = ReplayContext(session_id="s", rules_for=lambda scope, query: [])
    context.token = "t" * 32
    case = ReplayCase("F-1", "failing", {}, "task", {"id": "R-1"})
    for _ in range(2):
        http.HttpBackend(HARNESS)(case, context)
    (first, first_headers), (second, _) = sent
    body = json.loads(first)
    assert first_headers[http.NONCE_HEADER] == body["nonce"] != json.loads(second)["nonce"]
    assert first_headers[http.TIMESTAMP_HEADER] == str(body["sent_at"])
    nonces = http.Nonces()
    signed = first_headers[http.SIGNATURE_HEADER]
    assert http.request_refusal(first, signed, nonces=nonces) is None
    assert http.request_refusal(first, signed, nonces=nonces) == (
        "replayed request: its nonce was seen before"
    )
    late = http.request_refusal(second, sent[1][1][http.SIGNATURE_HEADER], nonces=nonces,
                                now=body["sent_at"] + 3600)  # fmt: skip
    assert late.startswith("stale request")
    assert http.request_refusal(first, "sha256=00", nonces=http.Nonces()) == (
        "bad or missing X-CauterWeb-Signature"
    )


@pytest.mark.django_db
def test_a_replay_token_dies_with_its_round(client):
    # docs/semantics.md#s14-5: a round that finished, failed or was reaped leaves no live token.
    from replay.models import ValidationRound

    rule("R-1")
    vround = ValidationRound.objects.create(started_at=T0)
    ReplaySession.objects.create(
        id="replay:r:R-1:F-1",
        rule_id="R-1",
        case_id="F-1",
        token="t" * 32,
        round_id=vround.pk,
        created_at=T0,
        status="running",
    )
    assert client.get("/api/v1/replay/" + "t" * 32 + "/rules").status_code == 200
    ValidationRound.objects.filter(pk=vround.pk).update(status="failed")
    assert client.get("/api/v1/replay/" + "t" * 32 + "/rules").status_code == 401
    assert client.post("/api/v1/replay/" + "t" * 32 + "/started").status_code == 401
