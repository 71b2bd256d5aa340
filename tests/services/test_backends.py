"""Both backends tell the harness which arm it is replaying (semantics §14, §17.1): the Python
callable through `context.arm` / `context.repeat`, the HTTP harness through the signed body."""

import json

import pytest

from replay.backends import http
from replay.backends.python import ReplayCase, ReplayContext, execute
from tests.builders import HarnessAnswer

CASE = ReplayCase("F-1", "failing", {"metrics": {"task_completion": 0.1}}, "push", {"id": "C-1"})


@pytest.mark.parametrize("arm, repeat", [("treatment", 0), ("control", 3)])
def test_a_python_backend_sees_the_arm_and_the_repeat_of_its_replay(arm, repeat):
    seen = {}

    def backend(case, context):
        seen.update(arm=context.arm, repeat=context.repeat, rules=context.rule_tool())
        return {"traces": [{"metrics": {"task_completion": 0.5}}]}

    context = ReplayContext(
        session_id="s", rules_for=lambda scope, query: [], arm=arm, repeat=repeat
    )
    run = execute(backend, CASE, context, replay_timeout_s=5, env_wait_timeout_s=0)
    assert run.error is None and seen == {"arm": arm, "repeat": repeat, "rules": []}


def test_a_context_defaults_to_the_treatment_arm_so_single_design_harnesses_keep_working():
    context = ReplayContext(session_id="s", rules_for=lambda scope, query: [])
    assert (context.arm, context.repeat) == ("treatment", 0)


@pytest.mark.parametrize("arm", ["treatment", "control"])
def test_the_http_backend_sends_the_arm_in_the_signed_body(arm, monkeypatch, settings):
    settings.CAUTERWEB_REPLAY_HMAC_KEY = "k" * 32
    sent = {}

    def post(url, data, headers, timeout):
        sent.update(url=url, data=data, headers=headers)
        return HarnessAnswer({"traces": [{"metrics": {"task_completion": 0.4}}]}, data)

    monkeypatch.setattr(http.requests, "post", post)
    context = ReplayContext(session_id="s", rules_for=lambda scope, query: [], arm=arm)
    context.token = "t" * 32  # the engine gives every replay its own capability token
    session = http.HttpBackend("http://harness.test/replay")(CASE, context)
    body = json.loads(sent["data"])
    assert body["arm"] == arm and body["rule"] == {"id": "C-1"}
    assert http.signature_valid(sent["data"], sent["headers"][http.SIGNATURE_HEADER])
    assert session["traces"][0]["metrics"] == {"task_completion": 0.4}
