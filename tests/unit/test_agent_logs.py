"""Coding agents' own logs (docs/traces.md, "Coding-agent logs"): each format detected from its
bytes, read into steps with atoms, recoveries and a kind — from fixtures written after each
project's own serialisation (tests/fixtures/logs). Pure: no database."""

import gzip
import json
import re
from pathlib import Path

import pytest

from traces import logs
from traces.model import TraceRejected

FIXTURES = Path(__file__).parents[1] / "fixtures" / "logs"
CLAUDE = FIXTURES / "claude" / "-home-ana-shop"
CODEX = FIXTURES / "codex" / "sessions"


def sessions(path: Path, **kwargs) -> dict[str, dict]:
    return {t["id"]: t for t in logs.read(path, **kwargs)}


@pytest.fixture(scope="module")
def everything() -> dict[str, dict]:
    return sessions(FIXTURES)


@pytest.mark.parametrize(
    ("relative", "fmt"),
    [
        ("claude/-home-ana-shop/0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e.jsonl", "claude-code"),
        (
            "claude/-home-ana-shop/9a3e5f10-2c7b-4d88-a1e6-5b0f4c3d2e71/subagents/agent-a17e4983.jsonl",
            "claude-code",
        ),
        (
            "codex/sessions/2025/11/04/rollout-2025-11-04T10-00-00-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5.jsonl",
            "codex",
        ),
        ("codex/sessions/rollout-2025-06-02-5f0c3a2e-9b14-4d6a-8e21-c7b0d9f3a416.jsonl", "codex"),
        ("codex/exec-20251106.jsonl", "codex"),
        ("openhands/sessions/a3f9c2e1b7d04e58/events/3.json", "openhands"),
        ("openhands/output.jsonl", "openhands"),
        ("swe-agent/sympy__sympy-20590.traj", "swe-agent"),
        ("swe-agent/psf__requests-2317.traj", "swe-agent"),
        ("mini-swe-agent/pallets__flask-5063.traj.json", "mini-swe-agent"),
        ("claude/-home-ana-shop/notes.txt", None),
    ],
)
def test_each_format_is_detected_from_its_first_bytes(relative, fmt):
    assert logs.detect((FIXTURES / relative).read_bytes()[:4096]) == fmt


def test_a_claude_code_session_that_recovered_is_a_near_miss_with_its_fix(everything):
    session = everything["claude-0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e"]
    assert session["kind"] == "near_miss"
    assert session["task"] == "Commit the currency rounding fix and push it to main"
    assert [s["input"] for s in session["steps"]] == [
        'git commit -am "Fix currency rounding"',
        "git push origin main",
        "git pull --rebase origin main",
        "git push origin main",
    ]
    assert [s["status"] for s in session["steps"]] == ["ok", "error", "ok", "ok"]
    assert session["steps"][1]["exit_code"] == 1
    assert session["signature"] == [
        "tool:bash",
        "tool:git",
        "action:git.push",
        "error:non_fast_forward",
        "exit:1",
    ]
    assert session["meta"]["recoveries"] == [
        {
            "step": 1,
            "atoms": ["tool:bash", "tool:git", "action:git.push", "error:non_fast_forward"],
            "retry_step": 3,
            "fix_steps": [2],
            "fix_actions": ["action:git.pull"],
            "fix_commands": ["git pull --rebase origin main"],
            "how": "fixed",
        }
    ]
    assert session["meta"]["source"] == {
        "file": "0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e.jsonl",
        "lines": [2, 11],
    }
    assert session["meta"]["git_branch"] == "main" and session["meta"]["version"] == "2.0.30"
    assert session["started_at"] == "2025-11-03T09:00:00Z"


def test_a_refused_tool_call_is_the_failure_a_session_never_got_past(everything):
    session = everything["claude-5c1d9e77-08a4-4e61-b2f3-7a9e0c4d2b18"]
    assert session["kind"] == "failure"
    assert session["signature"] == [
        "tool:bash",
        "tool:git",
        "action:git.push",
        "error:tool_refused",
    ]
    assert session["meta"]["unrecovered_steps"] == [1, 2]


def test_grep_finding_nothing_is_an_answer_not_a_failure(everything):
    session = everything["claude-e4b2c6d8-1f3a-4b5c-9d7e-2a4c6e8f0b13"]
    assert session["kind"] == "success"
    assert session["steps"][0]["status"] == "ok"


def test_a_subagent_transcript_is_its_own_trajectory_of_the_same_session(everything):
    agent = everything["claude-9a3e5f10-2c7b-4d88-a1e6-5b0f4c3d2e71-agent-a17e4983"]
    assert agent["session_id"] == "9a3e5f10-2c7b-4d88-a1e6-5b0f4c3d2e71"
    assert agent["task"] == "Find where round_money is called"
    assert agent["signature"] == ["tool:grep", "action:file.search"]


def test_a_test_failure_fixed_by_an_edit_records_the_edit_as_the_fix(everything):
    session = everything["claude-9a3e5f10-2c7b-4d88-a1e6-5b0f4c3d2e71"]
    assert session["kind"] == "near_miss"
    assert "error:assertion_failed" in session["signature"]
    assert session["meta"]["recoveries"][0]["fix_actions"] == [
        "action:file.read",
        "action:file.edit",
    ]


def test_codex_rollouts_in_each_shape(everything):
    pushed = everything["codex-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"]
    assert (pushed["kind"], pushed["task"]) == ("near_miss", "Push the login branch")
    # `bash -lc "…"` is read inside: the command is the script.
    assert pushed["meta"]["recoveries"][0]["fix_actions"] == [
        "action:git.fetch",
        "action:git.rebase",
    ]
    assert pushed["meta"]["model"] == "gpt-5-codex"
    failed = everything["codex-019a3e11-7c20-7d41-9a0e-2b6f8c1d4e53"]
    assert failed["kind"] == "failure"
    assert [s["exit_code"] for s in failed["steps"]] == [2, 0, 0, 1]
    # The module error was fixed (the retry failed otherwise): the last try decides.
    assert "exception:ExpiredSignatureError" in failed["signature"]
    assert (
        failed["steps"][2]["tool"] == "apply_patch"
        and "action:file.edit" in failed["steps"][2]["atoms"]
    )
    legacy = everything["codex-5f0c3a2e-9b14-4d6a-8e21-c7b0d9f3a416"]
    assert (legacy["kind"], legacy["task"]) == ("success", "List the outdated Python packages")
    streamed = everything["codex-019a4f22-0b31-7e52-8c1f-3d7a9e2b5f64"]
    assert streamed["kind"] == "near_miss"
    assert "error:command_not_found" in streamed["signature"]


def test_openhands_event_files_lists_and_evaluation_outputs(everything):
    files = everything["openhands-a3f9c2e1b7d04e58"]
    assert files["kind"] == "near_miss" and files["task"] == "Publish the docs fix to main"
    assert files["meta"]["recoveries"][0]["fix_actions"] == ["action:git.pull"]
    v1 = everything["openhands-c7e2a91f04b3"]
    assert v1["kind"] == "failure"
    assert v1["signature"] == ["tool:terminal", "action:uvicorn", "error:address_in_use", "exit:1"]
    assert "error:timeout" in v1["steps"][1]["atoms"]
    solved = everything["openhands-astropy__astropy-12907"]
    assert solved["kind"] == "near_miss" and "error:assertion_failed" in solved["signature"]
    stuck = everything["openhands-django__django-11099"]
    assert stuck["kind"] == "failure" and "error:file_not_found" in stuck["signature"]


def test_swe_agent_trajectories_are_streamed_and_judged_by_their_exit_status(everything):
    ids = {i for i in everything if i.startswith("swe-agent-")}
    sympy = next(everything[i] for i in ids if "sympy" in i)
    assert sympy["kind"] == "near_miss"
    assert sympy["task"] == "Symbol instances have __dict__ since 1.7?"
    assert sympy["meta"]["recoveries"][0]["fix_actions"] == ["action:pip.install"]
    assert sympy["steps"][3]["tool"] == "str_replace_editor"
    timed_out = next(everything[i] for i in ids if "requests" in i)
    assert timed_out["kind"] == "failure"
    assert timed_out["signature"] == [
        "tool:bash",
        "tool:pytest",
        "action:test.run",
        "error:timeout",
    ]
    assert timed_out["outcome"] == {"status": "failed", "summary": "exit status: exit_cost"}


def test_mini_swe_agent_in_both_versions(everything):
    ids = [i for i in everything if i.startswith("mini-swe-agent-")]
    v1 = next(everything[i] for i in ids if "django" in i)
    assert v1["kind"] == "near_miss" and [s.get("exit_code") for s in v1["steps"]] == [
        1,
        0,
        0,
        None,
    ]
    v2 = next(everything[i] for i in ids if "flask" in i)
    assert v2["kind"] == "failure" and v2["outcome"]["summary"] == "exit status: LimitsExceeded"
    assert "error:timeout" in v2["steps"][1]["atoms"]


def test_the_same_failure_written_by_two_sessions_derives_the_same_atoms(everything):
    # The same rejected push, in three agents' logs, in other repositories and words.
    pushes = [
        everything["claude-0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e"],
        everything["codex-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"],
        everything["openhands-a3f9c2e1b7d04e58"],
    ]
    failure_modes = [
        {a for a in p["signature"] if a.startswith(("action:", "error:"))} for p in pushes
    ]
    assert failure_modes == [{"action:git.push", "error:non_fast_forward"}] * 3


def test_secrets_in_prompts_commands_and_outputs_never_reach_a_trajectory(everything):
    text = json.dumps(everything)
    for secret in ("ghp_R2d7Kx9", "sk-proj-Tq8z"):
        assert secret not in text
    assert "[REDACTED:github_token]" in text and "[REDACTED:openai_key]" in text


def test_a_bad_line_names_its_file_and_line_and_nothing_comes_out(tmp_path):
    good = (CLAUDE / "0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e.jsonl").read_bytes()
    lines = good.splitlines(keepends=True)
    (tmp_path / "s.jsonl").write_bytes(
        b"".join(lines[:3]) + b'{"type": "user", \n' + b"".join(lines[3:])
    )
    with pytest.raises(TraceRejected) as caught:
        list(logs.read(tmp_path))
    assert str(caught.value.errors[0]).startswith(f"{tmp_path / 's.jsonl'}, line 4: not valid JSON")


def test_a_forced_format_reads_a_file_detection_would_skip():
    found = logs.LogRead()
    assert list(logs.read(b"not a log\n", name="x.txt", found=found)) == []
    assert found.skipped == [("x.txt", "not a coding-agent log this import reads")]


def test_a_long_session_is_cut_to_its_bounds_and_says_so():
    lines = [{"type": "user", "sessionId": "long", "message": {"role": "user", "content": "go"}}]
    for i in range(1_200):
        lines.append(
            {
                "type": "assistant",
                "sessionId": "long",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"t{i}",
                            "name": "Bash",
                            "input": {"command": "echo " + "x" * 10},
                        }
                    ],
                },
            }
        )
        lines.append(
            {
                "type": "user",
                "sessionId": "long",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"t{i}", "content": "y" * 9_000}
                    ],
                },
            }
        )
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    (session,) = logs.read(body, name="long.jsonl")
    assert len(session["steps"]) == 1_000 and session["meta"]["steps_omitted"] == 200
    assert len(session["steps"][0]["output"]) < 4_100
    assert len(json.dumps(session["meta"]).encode()) <= 60 * 1024


def test_the_one_pass_screen_never_misses_a_rule_that_matches(everything):
    # errors.candidates must be a superset of the rules `re` matches, or an atom would be lost.
    from traces import errors

    texts = [
        s.get(k) or "" for t in everything.values() for s in t["steps"] for k in ("output", "error")
    ]
    texts += [
        "sh: 1: tsc: not found\n",
        "Disk quota exceeded (not a rate limit)",
        "Permission denied (publickey).",
        "exit status 404 but HTTP/1.1 404 Not Found",
        "requests.exceptions.ReadTimeout: HTTPSConnectionPool read timed out",
        'ERROR: relation "users" does not exist\n[Errno 111] Connection refused',
    ]
    for text in texts:
        may = errors.candidates(text)
        for name, source, flags in errors.SCREENED:
            if re.search(source, text, flags):
                assert name in may, (name, text[:80])


def _lines(*records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def test_a_claude_transcript_written_without_its_metadata_is_still_read():
    body = _lines(
        {"type": "user", "message": {"role": "user", "content": "run the tests"}},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Bash",
                        "input": {"command": "npm test"},
                    }
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": "Exit code 1\nTests:       2 failed, 10 passed, 12 total",
                    }
                ],
            },
        },
    )
    assert logs.detect(body) == "claude-code"
    (session,) = logs.read(body, name="sess.jsonl")
    assert (session["id"], session["kind"]) == ("claude-sess", "failure")
    assert session["signature"] == [
        "tool:bash",
        "tool:npm",
        "action:test.run",
        "error:test_failed",
        "exit:1",
    ]


def test_a_first_rollout_without_its_session_line_is_still_codex():
    body = _lines(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
        {
            "type": "function_call",
            "name": "shell",
            "arguments": json.dumps({"command": ["bash", "-lc", "make"]}),
            "call_id": "c1",
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": json.dumps(
                {"output": "make: *** [all] Error 2", "metadata": {"exit_code": 2}}
            ),
        },
    )
    assert logs.detect(body) == "codex"
    (session,) = logs.read(body, name="rollout-x.jsonl")
    assert session["kind"] == "failure" and "exit:2" in session["signature"]


def test_an_openhands_trajectory_export_is_not_taken_for_swe_agent():
    export = {
        "trajectory": [
            {"id": 1, "source": "user", "action": "message", "args": {"content": "list files"}},
            {"id": 2, "source": "agent", "action": "run", "args": {"command": "ls /nope"}},
            {
                "id": 3,
                "source": "agent",
                "cause": 2,
                "observation": "run",
                "content": "ls: cannot access '/nope': No such file or directory",
                "extras": {"metadata": {"exit_code": 2}},
            },
        ]
    }
    body = json.dumps(export).encode()
    assert logs.detect(body, "conversation.json") == "openhands"
    (session,) = logs.read(body, name="conversation.json")
    assert (
        session["task"] == "list files" and "error:file_not_found" in session["steps"][0]["atoms"]
    )


def test_a_swe_agent_trajectory_whose_first_step_outgrows_the_first_bytes_is_detected():
    step = {"action": "cat big.txt", "observation": "y" * 300_000, "thought": "", "response": ""}
    body = json.dumps({"trajectory": [step], "info": {"exit_status": "submitted"}}).encode()
    assert logs.detect(body[: 256 * 1024], "x.traj") == "swe-agent"
    assert logs.detect(body[: 256 * 1024], "x.json") == "swe-agent"


def test_openhands_event_caches_are_skipped_beside_the_events(tmp_path):
    events = tmp_path / "sessions" / "abc" / "events"
    events.mkdir(parents=True)
    cache = tmp_path / "sessions" / "abc" / "event_cache"
    cache.mkdir()
    event = {"id": 0, "source": "user", "action": "message", "args": {"content": "hi"}}
    (events / "0.json").write_text(json.dumps(event))
    (cache / "0-25.json").write_text(json.dumps([event]))
    found = logs.LogRead()
    (session,) = logs.read(tmp_path, found=found)
    assert session["id"] == "openhands-abc"
    assert [why for _, why in found.skipped] == ["a cache of the events read from events/"]


def test_a_file_that_is_no_log_is_not_read_past_its_first_bytes():
    # 64 MB of zeros, gzipped: were it read out, the 1 MB limit would refuse it.
    from traces.sources import Limits

    body = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=1)
    found = logs.LogRead()
    limits = Limits(max_total_bytes=1024 * 1024, max_ratio=10**6)
    assert list(logs.read(body, name="z.gz", limits=limits, found=found)) == []
    assert found.skipped == [("z", "not a coding-agent log this import reads")]
