"""Coding agents' own logs in (docs/traces.md, "Coding-agent logs"): every file of a source —
one file, a directory tree, a `.tar.gz`/`.tar`/`.zip`/`.gz` — has its format detected from its
first bytes and is read as it streams, one session at a time, into trajectories. Pure.

A file that is none of these logs (a README, `settings.json`, an image) is skipped and named in
`skipped`; a file that is one of them but has a bad line is an error naming the file and the
line. Errors are collected over the whole source and raised at its end (`TraceRejected`), so
the caller — the corpus import, in one transaction — writes nothing.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import ijson
import orjson

from . import claude_code, codex, jsonl, openhands, swe_agent
from .model import RecordError, TraceRejected
from .session_log import file_name
from .sources import DEFAULT_LIMITS, Limits, Member, members

FORMATS = (
    claude_code.FORMAT,
    codex.FORMAT,
    openhands.FORMAT,
    swe_agent.FORMAT,
    swe_agent.MINI_FORMAT,
)
_PEEK = 256 * 1024
# The first records of a JSON Lines file that detection looks at.
_LINES_LOOKED_AT = 20
EVENT_FILE_BYTES = 64 * 1024 * 1024


@dataclass
class LogRead:
    """What a read found besides its trajectories: the files it skipped (and why), and how many
    files and lines it read."""

    skipped: list[tuple[str, str]] = field(default_factory=list)
    files: int = 0
    errors: list[RecordError] = field(default_factory=list)


def _head_objects(head: bytes) -> list[object]:
    out = []
    for line in head.splitlines()[:_LINES_LOOKED_AT]:
        if line.strip():
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                break
    return out


def _document_shape(head: bytes) -> tuple[str, set[str], dict[str, set[str]]]:
    """('list'|'object'|'', the top-level keys seen, and the keys of the first item of each
    list seen — at the top (`item`) or under a key (`trajectory.item`)) of a JSON document,
    from its first bytes only."""
    keys: set[str] = set()
    firsts: dict[str, set[str]] = {}
    shape = ""
    try:
        for prefix, event, value in ijson.parse(head):
            if not prefix and event in ("start_map", "start_array"):
                shape = "object" if event == "start_map" else "list"
            elif prefix == "" and event == "map_key":
                keys.add(value)
            elif prefix.endswith("item") and prefix.count(".") <= 1 and event == "map_key":
                firsts.setdefault(prefix, set()).add(value)
            elif prefix.endswith("item") and event == "end_map":
                firsts.setdefault(prefix, set()).add("")  # first item complete: keep it only
    except (ijson.IncompleteJSONError, ijson.JSONError):
        pass
    return shape, keys, {k: v - {""} for k, v in firsts.items()}


# Keys of an OpenHands event, and of a SWE-agent step: both have an `action`.
_EVENT_KEYS = frozenset({"args", "extras", "cause", "source", "id", "kind", "tool_call_metadata"})
_STEP_KEYS = frozenset({"thought", "response", "execution_time", "state", "query"})


def _list_of(items: set[str] | None) -> str | None:
    """Whose list a first item's keys say it is: an OpenHands event has an id, a source or a
    kind before anything else; a SWE-agent step starts with its action and observation."""
    if not items:
        return None
    if items & _EVENT_KEYS:
        return openhands.FORMAT
    if items & (_STEP_KEYS | {"action", "observation"}):
        return swe_agent.FORMAT
    return None


def detect(head: bytes, name: str = "") -> str | None:
    """The log format of a file from its first bytes (and, for a trajectory file whose first
    bytes are all one long list, its name), or None when it is none of them."""
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if start not in (b"{", b"["):
        return None
    objects = _head_objects(head)
    dicts = [o for o in objects if isinstance(o, dict)]
    if any(claude_code.looks_like(o) for o in dicts):
        return claude_code.FORMAT
    if any(codex.looks_like(o) for o in dicts):
        return codex.FORMAT
    if dicts and openhands.looks_like(dicts[0]):
        return openhands.FORMAT
    if objects and isinstance(objects[0], list) and openhands.looks_like(objects[0]):
        return openhands.FORMAT
    return _document_format(head, name)


def _document_format(head: bytes, name: str) -> str | None:
    shape, keys, firsts = _document_shape(head)
    if shape == "list":
        return openhands.FORMAT if _list_of(firsts.get("item")) else None
    if shape != "object":
        return None
    if "trajectory" in keys:
        # SWE-agent's steps, or OpenHands' `{"trajectory": [events]}` export.
        inner = _list_of(firsts.get("trajectory.item"))
        if inner:
            return inner
    found = swe_agent.looks_like(keys)
    if found:
        return found
    if "messages" in keys and name.endswith(".traj.json"):
        return swe_agent.MINI_FORMAT
    if "trajectory" in keys and name.endswith(".traj"):
        return swe_agent.FORMAT
    if keys & {"history", "events"} or keys & {"action", "observation", "kind"}:
        return openhands.FORMAT
    return None


class _Peeked:
    """A stream with its first bytes already read for detection, read on from the start."""

    def __init__(self, head: bytes, stream):
        self.head, self.stream = head, stream

    def read(self, size: int = -1) -> bytes:
        if self.head:
            if size < 0 or size >= len(self.head):
                data, self.head = self.head, b""
                rest = self.stream.read(-1 if size < 0 else size - len(data))
                return data + rest
            data, self.head = self.head[:size], self.head[size:]
            return data
        return self.stream.read(size)

    def readline(self, limit: int = -1) -> bytes:
        if self.head:
            end = self.head.find(b"\n")
            if end >= 0 and (limit < 0 or end < limit):
                line, self.head = self.head[: end + 1], self.head[end + 1 :]
                return line
            line, self.head = self.head, b""
            if limit >= 0 and len(line) >= limit:
                self.head = line[limit:]
                return line[:limit]
            return line + self.stream.readline(-1 if limit < 0 else limit - len(line))
        return self.stream.readline(limit)


def _openhands_document(stream, name: str, errors: list[RecordError]):
    """A JSON list of events, or an object holding them (`history`/`events`, an evaluation's
    output), as one session."""
    extras: dict = {}
    events: list[dict] = []
    wanted = (
        "item",
        "history.item",
        "events.item",
        "trajectory.item",
        "instance_id",
        "instruction",
        "error",
    )
    try:
        for prefix, value in jsonl.values_at(stream, wanted):
            if prefix.endswith("item") and isinstance(value, dict):
                events.append(value)
            elif prefix in ("instance_id", "instruction", "error") and value:
                extras[prefix] = value
    except ijson.JSONError as exc:
        errors.append(RecordError(name, "", f"not valid JSON: {exc}"))
        return
    yield openhands.session(
        sorted(events, key=openhands.event_order)
        if events and isinstance(events[0].get("id"), int)
        else events,
        session_id=str(extras.get("instance_id") or PurePosixPath(name).stem),
        source={"file": file_name(name)},
        task=str(extras.get("instruction") or ""),
        error=str(extras.get("error") or ""),
    )


def _openhands_lines(stream, name: str, errors: list[RecordError]):
    """JSON Lines of evaluation outputs (one instance a line) or of events (one session)."""
    events = []
    for number, record in jsonl.objects(stream, name, errors):
        if isinstance(record.get("history"), list):
            yield openhands.session(
                record["history"],
                session_id=str(record.get("instance_id") or f"{PurePosixPath(name).stem}-{number}"),
                source={"file": file_name(name), "lines": [number, number]},
                task=str(record.get("instruction") or ""),
                error=str(record.get("error") or ""),
            )
        elif openhands.is_event(record):
            events.append(record)
    if events:
        yield openhands.session(
            events, session_id=PurePosixPath(name).stem, source={"file": file_name(name)}
        )


def _reader(fmt: str, head: bytes) -> Callable:
    if fmt == claude_code.FORMAT:
        return claude_code.read
    if fmt == codex.FORMAT:
        return codex.read
    if fmt in (swe_agent.FORMAT, swe_agent.MINI_FORMAT):
        return lambda stream, name, errors: swe_agent.read(stream, name, errors, fmt)
    objects = _head_objects(head)
    if len(objects) > 1 or (
        objects
        and isinstance(objects[0], dict)
        and "history" in objects[0]
        and head.count(b"\n") > 1
    ):
        return _openhands_lines
    return _openhands_document


def _event_group(name: str) -> str:
    """The session a single-event file belongs to: `sessions/<id>/events/3.json` → `<id>`."""
    path = PurePosixPath(name.replace(":", "/"))
    parent = path.parent
    return str(parent.parent if parent.name == "events" else parent)


def _single_event(head: bytes) -> dict | None:
    if len(head) >= _PEEK:
        return None
    try:
        value = orjson.loads(head)
    except orjson.JSONDecodeError:
        return None
    return value if openhands.is_event(value) else None


def read(
    source: Path | bytes,
    *,
    fmt: str | None = None,
    name: str = "",
    limits: Limits = DEFAULT_LIMITS,
    found: LogRead | None = None,
) -> Iterator[dict]:
    """Trajectories from every log file of `source`, one session at a time. Raises
    TraceRejected at the end when any file had a bad line (or an archive was refused at once);
    `found` collects the files skipped."""
    found = found if found is not None else LogRead()
    groups = _EventGroups()
    for member in members(source, name=name, limits=limits):
        found.files += 1
        yield from _member(member, fmt, found, groups)
    yield from groups.flush()
    if found.errors:
        raise TraceRejected(found.errors)


class _EventGroups:
    """OpenHands stores a session as one file per event: the files of one directory, read
    together, are one session (in event order; a file seen twice counts once)."""

    def __init__(self):
        self.key, self.events = "", []

    def add(self, key: str, event: dict) -> Iterator[dict]:
        if key != self.key:
            yield from self.flush()
            self.key = key
        self.events.append(event)

    def flush(self) -> Iterator[dict]:
        if self.events:
            events = sorted(self.events, key=openhands.event_order)
            session = PurePosixPath(self.key).name or "session"
            yield openhands.session(
                events, session_id=session, source={"directory": session, "events": len(events)}
            )
        self.key, self.events = "", []


def _member(member: Member, fmt: str | None, found: LogRead, groups: _EventGroups):
    head = member.stream.read(_PEEK)
    if "event_cache" in PurePosixPath(member.name.replace(":", "/")).parts:
        # OpenHands keeps chunks of a session's events beside them: read in events/.
        found.skipped.append((member.name, "a cache of the events read from events/"))
        return
    detected = fmt or detect(head, member.name)
    if detected is None:
        found.skipped.append((member.name, "not a coding-agent log this import reads"))
        return
    if detected not in FORMATS:
        raise TraceRejected(
            [RecordError("format", "", f"must be one of {', '.join(FORMATS)}, got {detected!r}")]
        )
    if detected == openhands.FORMAT:
        event = _single_event(head)
        if event is not None:
            yield from groups.add(_event_group(member.name), event)
            return
    stream = _Peeked(head, member.stream)
    yield from _reader(detected, head)(stream, member.name, found.errors)
