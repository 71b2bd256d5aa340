"""SWE-agent and mini-SWE-agent trajectories (docs/traces.md, "SWE-agent"), read as they
stream, so a trajectory's long `history` (every prompt sent, again and again) is never held.

- **SWE-agent** `.traj`: `{"trajectory": [{action, observation, thought, response,
  execution_time, state}], "history": [...], "info": {exit_status, submission, model_stats}}`.
  An action is the command line the agent ran (a shell command or one of its tools:
  `str_replace_editor`, `open`, `edit`, `submit`…); an observation is what came back, with no
  exit status, so its text decides (a traceback, `command not found`, a command "cancelled
  because it took more than N seconds"). `info.exit_status` is how the run ended: `submitted`
  or an `exit_*` (cost, context, format, error) — any status but a plain `submitted` ends the
  session failed.
- **mini-SWE-agent** `.traj.json`: `{"info": {exit_status, submission, mini_version},
  "messages": [{role, content}], "trajectory_format"}`. Version 1 puts the command in the
  assistant's ```` ```bash ```` block and the result in the next user message
  (`<returncode>N</returncode>` … `<output>…</output>`); version 2 (`mini-swe-agent-1.1`)
  uses tool calls (`tool_calls`, then `role: "tool"` messages with `extra.returncode`). Any
  `exit_status` but `Submitted` ends the session failed.
"""

import hashlib
import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import BinaryIO

import ijson

from . import jsonl
from .model import RecordError, trajectory_id
from .session_log import SessionLog, file_name

FORMAT = "swe-agent"
MINI_FORMAT = "mini-swe-agent"
_BASH_BLOCK = re.compile(r"```(?:bash|sh|mswea_bash_command)?\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUTPUT = re.compile(r"<output(?:_head|_tail)?>\n?(.*?)</output(?:_head|_tail)?>", re.DOTALL)
_TIMED_OUT = re.compile(r"timed out and has been killed|has timed out", re.IGNORECASE)
_ISSUE = re.compile(
    r"<(?:pr_description|issue|task)>\s*(.*?)\s*</(?:pr_description|issue|task)>", re.DOTALL
)


def looks_like(keys: set[str]) -> str | None:
    """swe-agent | mini-swe-agent | None, from a trajectory file's top-level keys."""
    if "trajectory" in keys and ("info" in keys or "history" in keys or "environment" in keys):
        return FORMAT
    if "messages" in keys and ("info" in keys or "trajectory_format" in keys):
        return MINI_FORMAT
    return None


class _Hashing:
    """A stream that hashes what is read through it: a trajectory file has no id of its own,
    and two runs of one instance must not share one, so its content names it."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.digest.update(data)
        return data


def _name(name: str) -> str:
    base = PurePosixPath(name).name
    for suffix in (".traj.json", ".traj", ".json"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def read(stream: BinaryIO, name: str, errors: list[RecordError], fmt: str) -> Iterator[dict]:
    hashing = _Hashing(stream)
    log = SessionLog(fmt=fmt, id="", session_id=_name(name), source={"file": file_name(name)})
    try:
        if fmt == FORMAT:
            _swe_agent(hashing, log)
        else:
            _mini(hashing, log)
        while hashing.read(1 << 20):
            pass
    except ijson.JSONError as exc:
        errors.append(RecordError(name, "", f"not valid JSON: {exc}"))
        return
    log.id = trajectory_id(fmt, f"{_name(name)}-{hashing.digest.hexdigest()[:10]}")
    yield log.trajectory()


def _end(log: SessionLog, info: dict, submitted: str) -> None:
    status = str(info.get("exit_status") or "")
    if status:
        log.end(
            failed=status != submitted,
            message="" if status == submitted else f"exit status: {status}",
        )
    if info.get("instance_id"):
        log.session_id = str(info["instance_id"])


def _swe_agent(stream, log: SessionLog) -> None:
    wanted = ("trajectory.item", "info", "history.item", "problem_statement")
    count = 0
    for prefix, value in jsonl.values_at(stream, wanted):
        if prefix == "trajectory.item" and isinstance(value, dict):
            action = str(value.get("action") or "").strip()
            if not action:
                continue
            call_id = f"t{count}"
            count += 1
            tool = action.split(None, 1)[0] if action.split() else "bash"
            log.call(call_id, "bash" if tool not in _SWE_TOOLS else tool, {"command": action})
            log.result(call_id, output=str(value.get("observation") or ""))
        elif prefix == "history.item" and isinstance(value, dict) and not log.task:
            if value.get("role") == "user" and not value.get("is_demo"):
                text = jsonl.text_of(value.get("content"))
                issue = _ISSUE.search(text)
                log.set_task(issue.group(1) if issue else text)
        elif prefix == "info" and isinstance(value, dict):
            _end(log, value, "submitted")


_SWE_TOOLS = frozenset(
    {
        "str_replace_editor",
        "open",
        "goto",
        "edit",
        "create",
        "scroll_up",
        "scroll_down",
        "find_file",
        "search_dir",
        "search_file",
        "submit",
        "filemap",
    }
)


def _mini(stream, log: SessionLog) -> None:
    count = 0
    pending = ""
    for prefix, value in jsonl.values_at(stream, ("messages.item", "info")):
        if prefix == "info" and isinstance(value, dict):
            _end(log, value, "Submitted")
            continue
        if not isinstance(value, dict):
            continue
        role, content = value.get("role"), jsonl.text_of(value.get("content"))
        if role == "user" and not log.task:
            issue = _ISSUE.search(content)
            log.set_task(issue.group(1) if issue else content)
        elif role == "assistant":
            calls = value.get("tool_calls") or []
            for call in calls if isinstance(calls, list) else []:
                function = call.get("function") or {}
                log.call(
                    str(call.get("id")),
                    str(function.get("name") or "bash"),
                    function.get("arguments"),
                )
            block = _BASH_BLOCK.search(content) if not calls else None
            if block:
                pending = f"m{count}"
                count += 1
                log.call(pending, "bash", {"command": block.group(1)})
        elif role == "tool":
            extra = value.get("extra") if isinstance(value.get("extra"), dict) else {}
            _observe(log, str(value.get("tool_call_id")), content, extra.get("returncode"))
        elif role == "user" and pending:
            _observe(log, pending, content, None)
            pending = ""


def _observe(log: SessionLog, call_id: str, content: str, code: object) -> None:
    if not isinstance(code, int):
        found = _RETURNCODE.search(content)
        code = int(found.group(1)) if found else None
    output = _OUTPUT.search(content)
    text = output.group(1) if output else content
    timed_out = bool(_TIMED_OUT.search(content[:2000]))
    failed = True if timed_out else (None if code is None else code != 0)
    log.result(
        call_id, output=text, error=content if timed_out else "", failed=failed, exit_code=code
    )
