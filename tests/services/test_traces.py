"""Agent traces in (semantics §19): each format, read from files written the way the tool
writes them, becomes one trajectory per session through the corpus import — atomic,
idempotent, every bad record named — by `import_traces` and by `POST /api/v1/traces`."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from lifecycle.models import JournalEvent, Trajectory, TrajectoryAtom
from lifecycle.services.corpus import import_corpus
from lifecycle.services.tokens import token_create
from tests.traces_support import FIXTURES, fixture_bytes, fixture_json, otlp_protobuf
from traces import detect

pytestmark = pytest.mark.django_db
API = "/api/v1/traces"


def run(*args) -> dict:
    out = StringIO()
    call_command("import_traces", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def stored(trajectory_id: str) -> Trajectory:
    return Trajectory.objects.get(pk=trajectory_id)


def test_an_otlp_genai_export_becomes_one_trajectory_per_session():
    assert run(str(FIXTURES / "genai_agent.otlp.json")) == {
        "created": 2,
        "unchanged": 0,
        "updated": 0,
    }

    failed = stored("otel-conv_5j66UpCpwteGg4YSxUnt7lPY")
    assert failed.kind == "failure"
    assert failed.task == "Commit the currency rounding fix and publish it to main"
    assert failed.session_id == "conv_5j66UpCpwteGg4YSxUnt7lPY"
    assert failed.started_at.isoformat() == "2025-12-03T09:00:00+00:00"
    assert [s["input"] for s in failed.steps] == [
        "git status --short",
        'git commit -am "Fix currency rounding"',
        "git push origin main",
    ]
    assert failed.steps[2]["error"] == "Command failed with exit code 1"
    assert failed.outcome == {
        "status": "failed",
        "summary": "agent stopped: remote rejected the update",
    }
    # Scores named like registry metrics take their names; a 1-5 score is kept aside.
    assert failed.metrics == {"outcome_correct": 0.0, "task_completion": 0.33}
    assert failed.meta["scores_not_in_unit_range"] == {"relevance": 4.0}
    assert {"tool:git", "action:git.push", "error:non_fast_forward"} <= set(failed.signature)
    assert len(failed.meta["source"]["spans"]) == 6
    assert set(
        TrajectoryAtom.objects.filter(trajectory=failed).values_list("atom", flat=True)
    ) == set(failed.signature)

    ok = stored("otel-0af7651916cd43dd8448eb211c80319c")
    assert (ok.kind, ok.task) == ("success", "List the outdated Python packages")
    assert ok.signature == ["tool:run_shell_command", "tool:pip", "action:pip.list"]


def test_the_protobuf_export_imports_to_the_same_trajectories_as_its_json():
    run(str(FIXTURES / "genai_agent.otlp.json"))
    before = {
        t.id: (t.task, t.steps, t.kind, t.signature, t.metrics) for t in Trajectory.objects.all()
    }
    Trajectory.objects.all().delete()
    assert run(str(FIXTURES / "genai_agent.otlp.pb"))["created"] == 2
    after = {
        t.id: (t.task, t.steps, t.kind, t.signature, t.metrics) for t in Trajectory.objects.all()
    }
    assert after == before


def test_openinference_spans_from_phoenix_become_trajectories():
    assert run(str(FIXTURES / "phoenix_spans.json"))["created"] == 2
    failed = stored("oi-sess-deps-0412")
    assert failed.kind == "failure"
    assert failed.task == "Upgrade sentry-sdk to 2.18.0 and make sure the tests still pass"
    assert failed.metrics == {"task_completion": 0.2, "correctness": 0.0}
    assert {"tool:pip", "action:pip.install", "error:resolution_impossible"} <= set(
        failed.signature
    )
    assert [s["tool"] for s in failed.steps] == ["run_shell", "final_answer"]
    assert stored("oi-sess-tests-0413").kind == "success"


def test_a_langfuse_export_joins_the_traces_of_a_session():
    assert run(str(FIXTURES / "langfuse_export.json"))["created"] == 2
    session = stored("langfuse-chat-4471")
    assert session.kind == "failure"
    assert session.task == "Fetch the last 30 days of EUR rates and store them"
    assert len(session.steps) == 3  # two in the first trace, one in the second
    assert session.metrics == {"task_completion": 0.1, "user_feedback": 0.0}
    assert session.signature == [
        "tool:http_get",
        "tool:http",
        "action:http.request",
        "error:http_429",
    ]
    docs = stored("langfuse-0e2d6b5a-6f1c-4a4e-8f6b-2c1d9e8a7b22")
    assert (docs.kind, [s["tool"] for s in docs.steps]) == ("success", ["read_file", "write_file"])


@pytest.mark.parametrize("name", ["inspect_eval_log.json", "inspect_eval_log.eval"])
def test_an_inspect_log_gives_one_trajectory_per_sample_and_epoch(name):
    assert run(str(FIXTURES / name))["created"] == 2
    push = stored("inspect-repo_maintenance-push-main-e1-kX3pQ9vR")
    assert push.kind == "failure"
    # The input was an attachment reference: resolved from the sample's attachments.
    assert push.task == "Commit the changelog update and push it to main on the site repository."
    assert push.metrics == {"match": 0.0}
    assert push.signature == ["tool:bash", "tool:git", "action:git.push", "error:non_fast_forward"]
    assert push.session_id == "kX3pQ9vR2mN7bT4wY8zA1c:push-main:1"
    flaky = stored("inspect-repo_maintenance-flaky-ci-e1-kX3pQ9vR")
    # It recovered from a timed-out run: a success, carrying its tools and actions only.
    assert flaky.kind == "success"
    assert flaky.signature == ["tool:bash", "tool:pytest", "action:test.run"]
    assert flaky.steps[0]["error"] == "timeout: Command timed out before completing."


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("genai_agent.otlp.json", "otlp"),
        ("genai_agent.otlp.pb", "otlp"),
        ("phoenix_spans.json", "openinference"),
        ("langfuse_export.json", "langfuse"),
        ("inspect_eval_log.json", "inspect"),
        ("inspect_eval_log.eval", "inspect"),
    ],
)
def test_the_format_is_detected(name, fmt):
    assert detect.detect(fixture_bytes(name)) == fmt


def test_importing_the_same_file_again_changes_nothing():
    run(str(FIXTURES / "langfuse_export.json"))
    assert run(str(FIXTURES / "langfuse_export.json")) == {
        "created": 0,
        "unchanged": 2,
        "updated": 0,
    }


def test_changed_content_is_a_conflict_naming_the_session_unless_replaced(tmp_path):
    run(str(FIXTURES / "inspect_eval_log.json"))
    log = fixture_json("inspect_eval_log.json")
    log["samples"][1]["scores"]["match"]["value"] = "I"
    changed = tmp_path / "log.json"
    changed.write_text(json.dumps(log))
    with pytest.raises(CommandError) as exc:
        call_command("import_traces", str(changed), stdout=StringIO())
    assert "session kX3pQ9vR2mN7bT4wY8zA1c:flaky-ci:1" in str(exc.value)
    assert "--replace" in str(exc.value)
    assert stored("inspect-repo_maintenance-flaky-ci-e1-kX3pQ9vR").kind == "success"
    assert run(str(changed), "--replace") == {"created": 0, "unchanged": 1, "updated": 1}
    assert stored("inspect-repo_maintenance-flaky-ci-e1-kX3pQ9vR").kind == "failure"


def _bad_otlp() -> dict:
    data = fixture_json("genai_agent.otlp.json")
    del data["resourceSpans"][0]["scopeSpans"][0]["spans"][2]["spanId"]
    data["resourceSpans"][1]["scopeSpans"][0]["spans"][1]["attributes"] = [{"value": {}}]
    return data


@pytest.mark.parametrize(
    ("name", "content", "named"),
    [
        (
            "bad.otlp.json",
            json.dumps(_bad_otlp()),
            [
                "resourceSpans[0].scopeSpans[0].spans[2] (span ?), field 'spanId': is required",
                "resourceSpans[1].scopeSpans[0].spans[1]: attribute must be an object with a string 'key'",
            ],
        ),
        ("bad.jsonl", '{"resourceSpans": []}\n{"resourceSpans": [\n', ["line 2: not valid JSON"]),
        (
            "bad.langfuse.json",
            json.dumps([{"observations": [], "name": "x"}]),
            ["traces[0], field 'id': is required"],
        ),
        (
            "bad.inspect.json",
            json.dumps(
                {"eval": {"task": "t"}, "samples": [{"id": "a", "input": ""}, {"input": "x"}]}
            ),
            [
                "samples[0] (sample a), field 'input': is required",
                "samples[1], field 'id': is required",
            ],
        ),
        ("bad.txt", "hello", ["cannot tell the trace format"]),
    ],
)
def test_a_bad_record_is_named_and_nothing_is_written(tmp_path, name, content, named):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(CommandError) as exc:
        call_command("import_traces", str(path), stdout=StringIO())
    for text in named:
        assert text in str(exc.value)
    assert not Trajectory.objects.exists()


def test_a_trajectory_posted_without_a_signature_gets_a_derived_one(client):
    key = token_create(name="repair-bot", role="agent", actor="test").key
    line = {
        "id": "F-900",
        "kind": "failure",
        "task": "publish the fix",
        "steps": [
            {
                "tool": "git",
                "input": "git push",
                "error": "! [rejected] main -> main (non-fast-forward)",
            }
        ],
        "outcome": {"status": "failed"},
        "metrics": {},
    }
    response = client.post(
        "/api/v1/trajectories",
        json.dumps(line),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 200, response.content
    trajectory = stored("F-900")
    assert trajectory.signature == ["tool:git", "action:git.push", "error:non_fast_forward"]
    because = trajectory.meta["signature_derivation"]["because"]
    assert {
        "atom": "error:non_fast_forward",
        "rule": "git.non_fast_forward",
        "source": "steps[0].error",
        "match": "non-fast-forward",
    } in because
    # Same line again: nothing changes (the hash is that of the line as posted).
    again = client.post(
        "/api/v1/trajectories",
        json.dumps(line),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert again.json()["unchanged"] == 1


# ---- POST /api/v1/traces ---------------------------------------------------------------------


@pytest.fixture
def agent_key():
    return token_create(name="otel-exporter", role="agent", actor="test").key


def post(client, body, content_type, key=None, **extra):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    return client.post(
        API + extra.pop("query", ""), body, content_type=content_type, **headers, **extra
    )


def test_an_otlp_json_export_is_accepted_and_journaled(client, agent_key):
    response = post(client, fixture_bytes("genai_agent.otlp.json"), "application/json", agent_key)
    assert response.status_code == 200, response.content
    assert response.json()["created"] == 2
    assert response["X-CauterWeb-Created"] == "2"
    event = JournalEvent.objects.get(type="corpus_imported")
    assert event.actor == "otel-exporter"
    assert (event.evidence["created"], event.evidence["updated"]) == (2, 0)


def test_an_otlp_protobuf_export_gets_an_export_response_like_a_collector(client, agent_key):
    body = otlp_protobuf(fixture_json("genai_agent.otlp.json"))
    response = post(client, body, "application/x-protobuf", agent_key)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/x-protobuf"
    reply = ExportTraceServiceResponse()
    reply.ParseFromString(response.content)
    assert not reply.HasField("partial_success")
    assert response["X-CauterWeb-Created"] == "2"
    assert Trajectory.objects.count() == 2
    again = post(client, body, "application/x-protobuf", agent_key, HTTP_ACCEPT="application/json")
    assert again.json() == {"created": 0, "unchanged": 2, "updated": 0, "ids": again.json()["ids"]}


def test_other_formats_are_posted_as_json_with_a_format(client, agent_key):
    response = post(
        client,
        fixture_bytes("langfuse_export.json"),
        "application/json",
        agent_key,
        query="?format=langfuse",
    )
    assert response.json()["created"] == 2
    response = post(
        client,
        fixture_bytes("inspect_eval_log.eval"),
        "application/zip",
        agent_key,
        query="?format=inspect",
    )
    assert response.json()["created"] == 2


@pytest.mark.parametrize(
    ("body", "content_type", "query", "status", "loc"),
    [
        (
            json.dumps(_bad_otlp()),
            "application/json",
            "",
            422,
            ["record", "resourceSpans[0].scopeSpans[0].spans[2] (span ?)", "spanId"],
        ),
        (b"\x0a\x05garbage-not-protobuf", "application/x-protobuf", "", 422, ["record", "body"]),
        (b"{}", "text/plain", "", 415, None),
        (b"{}", "application/json", "?format=zipkin", 422, None),
        (b"", "application/json", "", 400, None),
    ],
)
def test_bad_bodies_get_a_4xx_json_error_and_nothing_is_written(
    client, agent_key, body, content_type, query, status, loc
):
    response = post(client, body, content_type, agent_key, query=query)
    assert response.status_code == status, response.content
    assert set(response.json()) == {"detail", "errors"}
    if loc:
        assert loc in [e["loc"] for e in response.json()["errors"]]
    assert not Trajectory.objects.exists()


def test_posting_traces_needs_a_token(client):
    response = post(client, fixture_bytes("genai_agent.otlp.json"), "application/json")
    assert response.status_code == 401
    assert not Trajectory.objects.exists()


def test_the_learned_error_templates_are_listed_with_their_atoms():
    lines = [
        {
            "id": f"F-{n}",
            "kind": "failure",
            "task": "rotate the keys",
            "steps": [
                {
                    "tool": "vault",
                    "input": "vault write -f x",
                    "error": f"lease {n}9f3a quorum lost on node-{n}",
                }
            ],
            "outcome": {"status": "failed"},
            "metrics": {},
        }
        for n in (1, 2)
    ]
    import_corpus([json.dumps(line) for line in lines])
    atoms = {
        a for t in Trajectory.objects.all() for a in t.signature if a.startswith("error:tmpl_")
    }
    assert len(atoms) == 1  # two wordings, one template
    out = StringIO()
    call_command("error_templates", "--corpus", "--json", stdout=out)
    document = json.loads(out.getvalue())
    assert document["seeded"]
    (learned,) = document["corpus"]
    assert learned["texts"] == 2 and learned["atoms"] == sorted(atoms)


@pytest.mark.parametrize(
    ("name", "trajectory_id", "task", "signature"),
    [
        (
            # Strands Agents: the tool's input and output are span events.
            "strands_agent.otlp.json",
            "otel-4bf92f3577b34da6a3ce929d0e0e4736",
            "Bring up the local Postgres for the integration tests",
            ["tool:shell", "tool:docker", "action:docker.run", "error:address_in_use"],
        ),
        (
            # OpenLLMetry: traceloop.* attributes, the session in its association properties.
            "openllmetry.otlp.json",
            "otel-rel-2.4.1",
            "Publish release 2.4.1 to origin",
            ["tool:run_git", "tool:git", "action:git.push", "error:non_fast_forward", "exit:1"],
        ),
    ],
)
def test_framework_exports_beside_the_conventions_are_read_too(
    name, trajectory_id, task, signature
):
    assert run(str(FIXTURES / name))["created"] == 1
    got = stored(trajectory_id)
    assert (got.kind, got.task, got.signature) == ("failure", task, signature)


def test_an_exporter_sending_a_session_in_batches_builds_one_trajectory(client, agent_key):
    # The BatchSpanProcessor exports tool spans as they end, before the agent span that holds
    # them: the first batch is a fragment of the trace, the second completes the session.
    whole = fixture_json("genai_agent.otlp.json")
    spans = whole["resourceSpans"][0]["scopeSpans"][0]["spans"]
    tools = [s for s in spans if s["name"].startswith("execute_tool")]
    rest = [s for s in spans if not s["name"].startswith("execute_tool")]

    def batch(members):
        return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": members}]}]})

    assert post(client, batch(tools), "application/json", agent_key).json()["created"] == 1
    second = post(client, batch(rest), "application/json", agent_key)
    assert second.status_code == 200, second.content
    (session,) = Trajectory.objects.all()
    assert session.id == "otel-conv_5j66UpCpwteGg4YSxUnt7lPY"
    assert [s["input"] for s in session.steps] == [
        "git status --short",
        'git commit -am "Fix currency rounding"',
        "git push origin main",
    ]
    assert (session.kind, session.task) == (
        "failure",
        "Commit the currency rounding fix and publish it to main",
    )
    assert {"action:git.push", "error:non_fast_forward"} <= set(session.signature)
    again = post(client, batch(rest), "application/json", agent_key).json()
    assert (again["created"], again["unchanged"], again["updated"]) == (0, 1, 0)


def test_without_merge_a_changed_session_is_a_conflict(client, agent_key):
    post(client, fixture_bytes("genai_agent.otlp.json"), "application/json", agent_key)
    data = fixture_json("genai_agent.otlp.json")
    data["resourceSpans"][1]["scopeSpans"][0]["spans"][1]["attributes"][3]["value"] = {
        "stringValue": "x"
    }
    response = post(client, json.dumps(data), "application/json", agent_key, query="?merge=false")
    assert response.status_code == 422
    assert "--replace" in response.json()["errors"][0]["msg"]
