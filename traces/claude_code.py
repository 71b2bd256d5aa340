"""Claude Code session transcripts (docs/traces.md, "Claude Code"): the JSON Lines file Claude
Code appends to as it works, `~/.claude/projects/<project>/<session id>.jsonl` (a subagent's
in `<session id>/subagents/agent-<id>.jsonl`), and the same records printed by `claude -p
--output-format stream-json`.

Each line is one record: `user` and `assistant` carry an Anthropic Messages API `message`
whose `content` holds `tool_use` blocks (`id`, `name`, `input`) and, in the next user record,
their `tool_result` blocks (`tool_use_id`, `content`, `is_error`); beside it the record holds
`sessionId`, `cwd`, `gitBranch`, `version`, `timestamp`, and `toolUseResult` (the tool's own
result: a Bash call's `stdout`, `stderr`, `interrupted`). A failed Bash call's result begins
`Exit code N`; a refused one says the user did not want to proceed, or that permission was
denied. Other records (`summary`, `system`, `file-history-snapshot`, `queue-operation`,
`progress`, …) are skipped; a record type added by a later version is skipped too. An
assistant record flagged `isApiErrorMessage` that ends the session ends it failed; the
stream-json `result` record says how a headless run ended.
"""

import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import BinaryIO

from . import jsonl
from .model import RecordError, iso_time, trajectory_id
from .session_log import SessionLog, file_name

FORMAT = "claude-code"
RECORD_TYPES = frozenset(
    {
        "user",
        "assistant",
        "summary",
        "system",
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "result",
    }
)
_EXIT = re.compile(r"^(?:Error: )?Exit code (-?\d+)\b")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# User turns Claude Code writes itself: slash-command wrappers, caveats, interruptions.
_NOT_A_PROMPT = re.compile(
    r"^\s*(?:<(?:command-|local-command-|bash-|system-reminder|user-memory)|Caveat:|\[Request interrupted)"
)


def looks_like(first: dict) -> bool:
    """A record of a Claude Code transcript (the first few lines of a file are shown one by
    one): its type, and a field only Claude Code writes."""
    kind = first.get("type")
    if kind not in RECORD_TYPES or "payload" in first:
        return False
    message = first.get("message")
    if kind in ("user", "assistant") and isinstance(message, dict) and "content" in message:
        # An Anthropic Messages API message under `message`: the record itself, even written
        # without the metadata Claude Code adds around it.
        return True
    return bool(
        {"sessionId", "parentUuid", "leafUuid", "isSidechain", "messageId", "uuid"} & set(first)
        or (kind == "system" and first.get("subtype") == "init" and "session_id" in first)
        or (kind in ("user", "assistant") and "session_id" in first and "message" in first)
    )


class _Reader:
    def __init__(self, name: str):
        self.name = name
        self.log: SessionLog | None = None
        self.first_line = 0
        self.last_line = 0
        self.api_error = ""

    def session(self, record: dict, number: int) -> SessionLog:
        if self.log is None:
            path = PurePosixPath(self.name)
            sid = str(record.get("sessionId") or record.get("session_id") or "")
            stem = path.name.removesuffix(".jsonl")
            session = stem if _UUID.match(stem) else (sid or stem)
            agent = record.get("agentId") if path.parent.name == "subagents" else None
            tid = trajectory_id("claude", f"{session}-agent-{agent}" if agent else session)
            self.log = SessionLog(
                fmt=FORMAT, id=tid, session_id=sid or session, source={"file": file_name(self.name)}
            )
            self.first_line = number
        self.last_line = number
        log = self.log
        log.started_at = log.started_at or iso_time(record.get("timestamp"))
        for key, meta in (("cwd", "cwd"), ("gitBranch", "git_branch"), ("version", "version")):
            if record.get(key) and meta not in log.extra:
                log.extra[meta] = str(record[key])
        return log

    def record(self, number: int, record: dict, errors: list[RecordError]) -> None:
        kind = record.get("type")
        if kind not in ("user", "assistant", "result", "system"):
            return
        log = self.session(record, number)
        if kind == "result":
            failed = bool(record.get("is_error")) or record.get("subtype") != "success"
            log.end(failed=failed, message="" if not failed else str(record.get("subtype")))
            return
        if kind == "system":
            if record.get("model"):
                log.extra.setdefault("model", str(record["model"]))
            return
        message = record.get("message")
        if not isinstance(message, dict):
            errors.append(
                RecordError(jsonl.where(self.name, number), "message", "must be an object")
            )
            return
        content = message.get("content")
        if not isinstance(content, str | list):
            errors.append(
                RecordError(
                    jsonl.where(self.name, number), "message.content", "must be text or a list"
                )
            )
            return
        if kind == "assistant":
            self.assistant(log, record, message, content)
        else:
            self.user(log, record, content)

    def assistant(self, log: SessionLog, record: dict, message: dict, content) -> None:
        if message.get("model") and message["model"] != "<synthetic>":
            log.extra.setdefault("model", str(message["model"]))
        self.api_error = jsonl.text_of(content) if record.get("isApiErrorMessage") else ""
        at = iso_time(record.get("timestamp"))
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                log.call(
                    str(block.get("id") or ""),
                    str(block.get("name") or ""),
                    block.get("input"),
                    at=at,
                )

    def user(self, log: SessionLog, record: dict, content) -> None:
        if isinstance(content, str):
            if not record.get("isMeta") and not _NOT_A_PROMPT.match(content):
                log.set_task(content)
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                self.tool_result(log, record, block)
            elif block.get("type") == "text" and not record.get("isMeta"):
                text = str(block.get("text") or "")
                if not _NOT_A_PROMPT.match(text):
                    log.set_task(text)

    def tool_result(self, log: SessionLog, record: dict, block: dict) -> None:
        text = jsonl.text_of(block.get("content"))
        result = record.get("toolUseResult")
        exit_match = _EXIT.match(text)
        failed = bool(block.get("is_error"))
        if isinstance(result, dict) and result.get("interrupted"):
            failed, text = True, (text + "\n[interrupted]").strip()
        log.result(
            str(block.get("tool_use_id") or ""),
            output=text,
            failed=failed,
            exit_code=int(exit_match.group(1)) if exit_match else (None if failed else 0),
        )

    def finish(self) -> dict | None:
        if self.log is None:
            return None
        if self.api_error:
            self.log.end(failed=True, message=self.api_error)
        self.log.source["lines"] = [self.first_line, self.last_line]
        return self.log.trajectory()


def read(stream: BinaryIO, name: str, errors: list[RecordError]) -> Iterator[dict]:
    """The transcript in `stream` (a file named `name`) as one trajectory."""
    reader = _Reader(name)
    before = len(errors)
    for number, record in jsonl.objects(stream, name, errors):
        reader.record(number, record, errors)
    trajectory = reader.finish()
    if trajectory is not None and len(errors) == before:
        yield trajectory
