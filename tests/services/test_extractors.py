"""Offline extractors: the contrastive extractor on the demo corpus, and the
optional LLM extractor against a local stub chat-completions server."""

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from comparison.compare import compare_rules
from lifecycle.extractors import (
    LlmAnswerError,
    LlmNotConfigured,
    Skipped,
    contrastive_proposal,
    extract_candidates,
    parse_llm_answer,
    recovery_proposal,
    trigger_text,
)
from lifecycle.models import AuthorKind, JournalEvent, Rule, Trajectory
from lifecycle.services.corpus import import_corpus

DEMO = Path(__file__).resolve().parents[2] / "lifecycle" / "fixtures" / "demo"


@pytest.fixture
def corpus(db):
    with open(DEMO / "corpus.jsonl", encoding="utf-8") as lines:
        import_corpus(lines)


def test_the_contrastive_extractor_proposes_the_f001_rule_on_the_demo_corpus(corpus):
    run = extract_candidates(case_ids=["F-001"])
    [proposal] = run.proposals
    assert proposal.trigger == "when git push fails with non-fast-forward"
    assert proposal.directive.startswith("pull the latest changes before pushing")
    assert proposal.provenance["step"] == "action:git.pull"
    expected = Trajectory.objects.get(pk="F-001").expected_rule
    scored = compare_rules(
        {"trigger": proposal.trigger, "directive": proposal.directive},
        expected,
        extracted_signature=proposal.signature,
    )
    assert scored["verdict"] == "match"


def test_proposals_are_recorded_as_candidates_by_the_extractor(corpus):
    run = extract_candidates(case_ids=["F-001"])
    [rule_id] = run.created
    rule = Rule.objects.get(pk=rule_id)
    assert rule.state == "candidate"
    assert (rule.author, rule.author_kind) == ("contrastive", AuthorKind.EXTRACTOR)
    assert rule.source_case == "F-001"
    assert rule.scope == "git"
    assert rule.metric == "task_completion"
    assert rule.signature == ["action:git.push", "error:non_fast_forward", "tool:git"]
    assert rule.provenance["successes"] == ["S-025", "S-024", "S-026"]
    assert rule.provenance["support"] == "2/3"
    added = JournalEvent.objects.get(rule=rule, type="rule_added")
    assert added.actor == "contrastive"
    assert added.evidence["provenance"]["extractor"] == "contrastive"


def test_running_the_extractor_again_records_nothing_new(corpus):
    first = extract_candidates()
    again = extract_candidates()
    assert again.created == []
    assert sorted(again.unchanged) == sorted(first.created)


def test_one_proposal_per_family_and_a_reason_for_each_family_skipped(corpus):
    run = extract_candidates()
    assert [p.source_case for p in run.proposals] == ["F-001", "F-009", "F-021", "F-025", "F-029"]
    skipped = {s.case: s.why for s in run.skipped}
    assert skipped["F-032"] == "no successful session ran deploy.rollout to compare with"
    assert skipped["F-017"].startswith("no step is shared by half the 3 successes")


def _failure(steps, **extra):
    return {"id": "F-1", "steps": steps, "signature": [], "notices": [], **extra}


def _step(*atoms, error="", input=""):
    return {"atoms": list(atoms), "error": error, "input": input}


PUSH_FAILED = _step("tool:git", "action:git.push", "error:non_fast_forward", error="rejected")


def test_a_failure_with_no_success_to_compare_with_is_skipped():
    result = contrastive_proposal(_failure([PUSH_FAILED]), [])
    assert result.why == "no successful session ran git.push to compare with"


def test_a_step_taken_by_less_than_half_the_successes_is_not_a_rule():
    successes = [
        {"id": "S-1", "steps": [_step("action:git.pull"), _step("action:git.push")]},
        {"id": "S-2", "steps": [_step("action:git.push")]},
        {"id": "S-3", "steps": [_step("action:git.push")]},
    ]
    result = contrastive_proposal(_failure([PUSH_FAILED]), successes)
    assert result.why == "no step is shared by half the 3 successes (best: git.pull, 1)"


def test_a_step_the_failure_also_took_is_not_the_difference():
    successes = [{"id": "S-1", "steps": [_step("action:git.pull"), _step("action:git.push")]}]
    failure = _failure([_step("action:git.pull"), PUSH_FAILED])
    assert contrastive_proposal(failure, successes).why == (
        "the successes took no step the failure did not"
    )


def test_a_step_the_successes_took_after_the_failing_action_is_said_so():
    successes = [
        {
            "id": "S-1",
            "steps": [
                _step("action:test.run", error="timeout"),
                _step("action:test.rerun", input="pytest -x t.py"),
            ],
        }
    ]
    failure = _failure([_step("tool:pytest", "action:test.run", "error:timeout", error="x")])
    proposal = contrastive_proposal(failure, successes)
    assert (
        proposal.directive
        == "re-run the failing test on its own after a failed run: pytest -x t.py"
    )


@pytest.mark.parametrize(
    ("atoms", "text"),
    [
        (
            ["tool:git", "action:git.push", "error:non_fast_forward"],
            "when git push fails with non-fast-forward",
        ),
        (
            ["tool:fs", "action:file.edit", "error:file_not_found"],
            "when file edit fails with file not found",
        ),
        (["tool:docker", "action:docker.run"], "when docker run fails"),
        (["error:http_429"], "when the step fails with HTTP 429"),
    ],
)
def test_the_trigger_is_written_from_the_failure_atoms(atoms, text):
    assert trigger_text(atoms) == text


# --- the LLM extractor, against a stub chat-completions server on 127.0.0.1 --------------


class StubLLM:
    def __init__(self, answer):
        self.answer = answer
        self.requests = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append((self.path, dict(self.headers), body))
                payload = json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": stub.answer}}]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


GOOD = json.dumps(
    {"trigger": "when a push is rejected as non-fast-forward", "directive": "rebase, then push"}
)


@pytest.fixture
def llm_settings(settings):
    def configure(url, key="sk-test"):
        settings.CAUTERWEB_LLM_BASE_URL = url
        settings.CAUTERWEB_LLM_MODEL = "stub-model"
        settings.CAUTERWEB_LLM_API_KEY = key

    return configure


def test_the_llm_extractor_asks_the_configured_endpoint_and_records_its_rule(corpus, llm_settings):
    with StubLLM(GOOD) as stub:
        llm_settings(stub.url)
        run = extract_candidates(llm=True, case_ids=["F-001"])
    [(path, headers, body)] = stub.requests
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "stub-model"
    assert "action:git.push" in body["messages"][1]["content"]
    llm_rule = Rule.objects.get(author="llm")
    assert llm_rule.trigger == "when a push is rejected as non-fast-forward"
    assert llm_rule.author_kind == AuthorKind.EXTRACTOR
    # The model writes prose only: the signature comes from the failure's data.
    assert llm_rule.signature == ["action:git.push", "error:non_fast_forward", "tool:git"]
    assert llm_rule.provenance == {"extractor": "llm", "model": "stub-model", "failure": "F-001"}
    assert len(run.created) == 2  # the contrastive proposal and the LLM's


def test_a_malformed_model_answer_is_a_clear_error_and_nothing_is_recorded(corpus, llm_settings):
    with StubLLM("Sure! Here is a rule: always pull first.") as stub:
        llm_settings(stub.url)
        with pytest.raises(LlmAnswerError, match="F-001: the model's answer is not JSON"):
            extract_candidates(llm=True)
    assert not Rule.objects.exists()


def test_the_llm_is_never_called_unless_asked_and_configured(corpus, llm_settings):
    with StubLLM(GOOD) as stub:
        llm_settings(stub.url)
        extract_candidates(case_ids=["F-001"])
        assert stub.requests == []
        llm_settings("")
        with pytest.raises(LlmNotConfigured, match="CAUTERWEB_LLM_BASE_URL"):
            extract_candidates(llm=True)
        assert stub.requests == []


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('["when x", "do y"]', "not a JSON object"),
        ('{"trigger": "when x"}', "has no directive"),
        ('{"trigger": " ", "directive": "do y"}', "has no trigger"),
    ],
)
def test_an_answer_that_is_not_a_rule_is_refused(content, error):
    body = {"choices": [{"message": {"content": content}}]}
    with pytest.raises(LlmAnswerError, match=error):
        parse_llm_answer(body)


def test_a_fenced_json_answer_is_read():
    body = {"choices": [{"message": {"content": f"```json\n{GOOD}\n```"}}]}
    assert parse_llm_answer(body)["directive"] == "rebase, then push"


def test_an_answer_without_choices_is_refused():
    with pytest.raises(LlmAnswerError, match="no choices"):
        parse_llm_answer({"error": "overloaded"})


def _call(*args):
    out = io.StringIO()
    call_command("extract_candidates", *args, stdout=out)
    return out.getvalue()


def test_the_command_prints_what_it_proposed_and_recorded(corpus):
    document = json.loads(_call("--json", "--case", "F-001", "--case", "F-032"))
    assert document["created"] == 1
    assert document["proposals"][0]["trigger"] == "when git push fails with non-fast-forward"
    assert document["skipped"] == [
        {"case": "F-032", "why": "no successful session ran deploy.rollout to compare with"}
    ]
    assert _call("--case", "F-001").splitlines()[-1] == "0 created, 1 unchanged"


def test_the_command_exits_non_zero_on_a_malformed_llm_answer(corpus, llm_settings):
    with StubLLM("not json") as stub:
        llm_settings(stub.url)
        with pytest.raises(CommandError, match="nothing recorded"):
            _call("--llm")
    assert not Rule.objects.exists()


# --- The recovery extractor (docs/traces.md, "Failure families") --------------------------------

PUSH_ATOMS = ["action:git.push", "error:non_fast_forward"]


def recovery(*actions: str, how: str = "fixed", commands=()) -> dict:
    return {
        "atoms": ["tool:bash", *PUSH_ATOMS],
        "how": how,
        "fix_actions": list(actions),
        "fix_commands": list(commands),
    }


def test_the_step_most_recoveries_took_is_the_directive_looking_around_aside():
    found = recovery_proposal(
        PUSH_ATOMS,
        [
            recovery(
                "action:git.status", "action:git.pull", commands=["git status", "git pull --rebase"]
            ),
            recovery("action:git.fetch", "action:git.rebase"),
            recovery("action:git.log", "action:git.pull", commands=["git log -3", "git pull"]),
        ],
        "F-1",
    )
    assert (found.trigger, found.directive) == (
        "when git push fails with non-fast-forward",
        "pull the latest changes before pushing: git pull --rebase",
    )
    assert found.provenance["support"] == "2/3" and found.signature == sorted(PUSH_ATOMS)


def test_a_family_that_mostly_retried_as_it_was_is_told_to_retry_once():
    found = recovery_proposal(
        ["action:test.run", "error:timeout"],
        [
            {"atoms": ["action:test.run", "error:timeout"], "how": "retried", "fix_actions": []},
            {"atoms": ["action:test.run", "error:timeout"], "how": "retried", "fix_actions": []},
            {
                "atoms": ["action:test.run", "error:timeout"],
                "how": "fixed",
                "fix_actions": ["action:pip.install"],
            },
        ],
        "F-2",
    )
    assert found.directive == "retry the run once as it is before changing anything"


@pytest.mark.parametrize(
    ("recoveries", "why"),
    [
        ([], "no session of this family recovered from it"),
        (
            [recovery("action:git.status", "action:ls")],
            "its recoveries only looked around before retrying",
        ),
        (
            [
                recovery("action:git.pull"),
                recovery("action:git.stash"),
                recovery("action:git.fetch"),
            ],
            "no step is shared by half the 3 recoveries",
        ),
    ],
)
def test_no_rule_without_a_shared_step(recoveries, why):
    found = recovery_proposal(PUSH_ATOMS, recoveries, "F-3")
    assert isinstance(found, Skipped) and found.why.startswith(why)
