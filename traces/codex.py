"""Codex CLI rollout files (docs/traces.md, "Codex CLI"): the JSON Lines file Codex writes for
each session, `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl`, and the events
`codex exec --json` prints.

Three shapes, as Codex wrote them over its versions:
- **rollout lines** (`{"timestamp", "type", "payload"}`): `session_meta` (the session's `id`,
  `cwd`, `cli_version`, `git`), `turn_context` (the model), `response_item` (a Responses API
  item: `message`, `function_call` `{name, arguments (JSON text), call_id}`,
  `function_call_output` `{call_id, output}`, `local_shell_call` `{call_id, action {command}}`,
  `custom_tool_call` (`apply_patch`) and its output), `event_msg` (`user_message` — the
  prompt as typed —, `exec_command_end` with the `exit_code`, `error`, `turn_aborted`), and
  `compacted`;
- **the first rollouts**: a bare first line `{id, timestamp, instructions}`, then bare
  response items, with `{"record_type": "state"}` lines between;
- **`codex exec --json`**: `thread.started` `{thread_id}`, `item.completed` with a
  `command_execution` `{command, aggregated_output, exit_code, status}`, a `file_change` or an
  `mcp_tool_call`, and `turn.failed`.
A shell call's output is JSON text `{"output", "metadata": {"exit_code"}}` in older versions and
plain text `Exit code: N` / `Process exited with code N` … `Output:` in newer ones.
"""

import json
import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import BinaryIO

from . import jsonl
from .model import RecordError, iso_time, trajectory_id
from .session_log import SessionLog, file_name

FORMAT = "codex"
ROLLOUT_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
ITEM_TYPES = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "local_shell_call",
        "custom_tool_call",
        "custom_tool_call_output",
        "reasoning",
        "web_search_call",
    }
)
EXEC_EVENTS = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.completed",
        "item.updated",
    }
)
_EXIT = re.compile(r"^(?:Exit code:|Process exited with code)\s*(-?\d+)", re.MULTILINE)
_OUTPUT_SECTION = re.compile(r"^Output:\n", re.MULTILINE)
# Outputs Codex writes for a call that never ran or was refused.
_REFUSED = re.compile(
    r"rejected by user|failed in sandbox|sandbox denied|execution error:|failed to parse function arguments"
    r"|apply_patch verification failed|command timed out|exec command rejected",
    re.IGNORECASE,
)
_SESSION_IN_NAME = re.compile(
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$"
)


def looks_like(first: dict) -> bool:
    kind = first.get("type")
    if kind in ROLLOUT_TYPES and isinstance(first.get("payload"), dict):
        return True
    if kind in EXEC_EVENTS and (
        "thread_id" in first or "item" in first or kind.startswith("turn.")
    ):
        return True
    # The first rollouts: a bare session line, or bare response items and state records.
    if "record_type" in first:
        return True
    if kind in ITEM_TYPES and "message" not in first and first.keys() & {"role", "call_id", "name"}:
        return True
    return (
        kind is None
        and {"id", "timestamp"} <= set(first)
        and ("instructions" in first or "git" in first)
    )


def _output(raw: object) -> tuple[str, int | None, bool | None]:
    """(text, exit code, failed) of a call's output, in any of the shapes Codex wrote."""
    success = None
    if isinstance(raw, dict):  # {content, success}
        success = raw.get("success")
        raw = raw.get("content", "")
    if isinstance(raw, list):
        raw = jsonl.text_of(raw)
    text = raw if isinstance(raw, str) else json.dumps(raw)
    code = None
    if text.startswith("{"):
        try:
            decoded = json.loads(text)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and "output" in decoded:
            text = str(decoded.get("output") or "")
            metadata = (
                decoded.get("metadata") if isinstance(decoded.get("metadata"), dict) else decoded
            )
            code = metadata.get("exit_code") if isinstance(metadata.get("exit_code"), int) else None
    match = _EXIT.search(text[:500])
    if code is None and match:
        code = int(match.group(1))
        section = _OUTPUT_SECTION.search(text)
        text = text[section.end() :] if section else text
    if code is not None:
        failed = code != 0
    elif success is not None:
        failed = not success
    else:
        failed = True if _REFUSED.search(text[:1000]) else None
    return text, code, failed


class _Reader:
    def __init__(self, name: str):
        self.name = name
        self.log: SessionLog | None = None
        self.lines = [0, 0]
        self.exit_codes: dict[str, int] = {}

    def session(self, number: int, sid: str = "") -> SessionLog:
        if self.log is None:
            in_name = _SESSION_IN_NAME.search(PurePosixPath(self.name).name)
            session = sid or (in_name.group(1) if in_name else PurePosixPath(self.name).stem)
            self.log = SessionLog(
                fmt=FORMAT,
                id=trajectory_id("codex", session),
                session_id=session,
                source={"file": file_name(self.name)},
            )
            self.lines[0] = number
        self.lines[1] = number
        return self.log

    def record(self, number: int, record: dict) -> None:
        if "record_type" in record:
            return
        kind = record.get("type")
        payload = record.get("payload")
        at = iso_time(record.get("timestamp"))
        if kind in EXEC_EVENTS:
            self.exec_event(number, record)
        elif kind == "session_meta" or (kind is None and "id" in record):
            self.meta(number, payload if isinstance(payload, dict) else record, at)
        elif kind == "response_item" and isinstance(payload, dict):
            self.item(number, payload, at)
        elif kind in ITEM_TYPES:
            self.item(number, record, at)
        elif kind == "event_msg" and isinstance(payload, dict):
            self.event(number, payload)
        elif kind == "turn_context" and isinstance(payload, dict):
            log = self.session(number)
            if payload.get("model"):
                log.extra.setdefault("model", str(payload["model"]))

    def meta(self, number: int, meta: dict, at: str | None) -> None:
        log = self.session(number, str(meta.get("id") or ""))
        log.started_at = log.started_at or iso_time(meta.get("timestamp")) or at
        git = meta.get("git") if isinstance(meta.get("git"), dict) else {}
        for key, value in (
            ("cwd", meta.get("cwd")),
            ("version", meta.get("cli_version")),
            ("originator", meta.get("originator")),
            ("git_branch", git.get("branch")),
            ("git_commit", git.get("commit_hash")),
        ):
            if value:
                log.extra.setdefault(key, str(value))

    def item(self, number: int, item: dict, at: str | None) -> None:
        log = self.session(number)
        log.started_at = log.started_at or at
        kind = item.get("type")
        call_id = str(item.get("call_id") or item.get("id") or "")
        if kind == "message" and item.get("role") == "user":
            text = jsonl.text_of(item.get("content"))
            if not text.lstrip().startswith(("<", "#")):
                log.set_task(text)
        elif kind == "function_call":
            log.call(call_id, str(item.get("name") or ""), item.get("arguments"), at=at)
        elif kind == "custom_tool_call":
            log.call(call_id, str(item.get("name") or ""), {"input": item.get("input")}, at=at)
        elif kind == "local_shell_call":
            action = item.get("action") if isinstance(item.get("action"), dict) else {}
            log.call(call_id, "local_shell", {"command": action.get("command")}, at=at)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            text, code, failed = _output(item.get("output"))
            if code is None and call_id in self.exit_codes:
                code = self.exit_codes.pop(call_id)
                failed = code != 0
            log.result(call_id, output=text, failed=failed, exit_code=code)

    def event(self, number: int, event: dict) -> None:
        log = self.session(number)
        kind = event.get("type")
        if kind == "user_message":
            log.set_task(str(event.get("message") or ""))
        elif kind == "exec_command_end" and isinstance(event.get("exit_code"), int):
            self.exit_codes[str(event.get("call_id"))] = event["exit_code"]
        elif kind == "error":
            log.end(failed=True, message=str(event.get("message") or "error"))
        elif kind in ("task_complete", "turn_complete"):
            log.end(failed=False)

    def exec_event(self, number: int, event: dict) -> None:
        kind = event.get("type")
        log = self.session(number, str(event.get("thread_id") or ""))
        if kind == "turn.failed":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            log.end(failed=True, message=str(error.get("message") or "turn failed"))
            return
        item = event.get("item") if isinstance(event.get("item"), dict) else {}
        if kind != "item.completed" or not item:
            return
        call_id = str(item.get("id") or "")
        if item.get("type") == "command_execution":
            log.call(call_id, "shell", {"command": item.get("command")})
            code = item.get("exit_code") if isinstance(item.get("exit_code"), int) else None
            failed = item.get("status") == "failed" or bool(code)
            log.result(
                call_id,
                output=str(item.get("aggregated_output") or ""),
                failed=failed,
                exit_code=code,
            )
        elif item.get("type") == "mcp_tool_call":
            log.call(call_id, f"{item.get('server')}.{item.get('tool')}", item.get("arguments"))
            error = item.get("error")
            log.result(
                call_id,
                output=json.dumps(item.get("result") or ""),
                error=jsonl.text_of(error) or str(error or ""),
                failed=item.get("status") == "failed" or bool(error),
            )
        elif item.get("type") == "file_change":
            log.call(call_id, "apply_patch", {"changes": item.get("changes")})
            log.result(
                call_id,
                failed=item.get("status") == "failed",
                error="patch failed" if item.get("status") == "failed" else "",
            )

    def finish(self) -> dict | None:
        if self.log is None:
            return None
        self.log.source["lines"] = list(self.lines)
        return self.log.trajectory()


def read(stream: BinaryIO, name: str, errors: list[RecordError]) -> Iterator[dict]:
    """The rollout in `stream` (a file named `name`) as one trajectory."""
    reader = _Reader(name)
    before = len(errors)
    for number, record in jsonl.objects(stream, name, errors):
        reader.record(number, record)
    trajectory = reader.finish()
    if trajectory is not None and len(errors) == before:
        yield trajectory
