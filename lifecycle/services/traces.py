"""Agent traces into the corpus (semantics §19, §2): the Django side of the pure parsers in
`traces`.

Parsed sessions go through the corpus import itself, so a trace import is atomic (any bad
record: nothing written), idempotent (same content: unchanged; changed content: a conflict
unless `replace`) and names its bad records, exactly as a JSON Lines import does. Signatures are
derived there, for every trajectory that arrives without one.

`merge` is for OpenTelemetry exporters, which send a session's spans in batches as they end
(tool spans before the agent span that contains them): the spans of a session already stored
are merged with the new ones and the session is rebuilt from all of them, so a later batch
completes a trajectory instead of conflicting with it.

`import_logs` is the other way in: coding agents' own session logs (Claude Code, Codex CLI,
OpenHands, SWE-agent) from a file, a directory tree or an archive, streamed through the same
corpus import.
"""

import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
from django.db import transaction

from traces import logs, openinference, otlp
from traces.detect import parse
from traces.logs import LogRead
from traces.model import RecordError, TraceRejected
from traces.sources import DEFAULT_LIMITS, Limits, container_of

from .. import journal
from ..journal import EventType
from ..metrics import Registry, load_registry
from ..models import Trajectory
from ..states import Actor
from ..validation import ImportRejected, ImportResult
from .corpus import import_corpus

HEAD_BYTES = 256 * 1024
# Sessions handed to the corpus import at once: a bounded amount of memory, however many.
BATCH_BYTES = 8 * 1024 * 1024
SPAN_PARSERS = {"otlp": otlp.parse_json, "openinference": openinference.parse_json}


def registry_names(trajectory: dict, registry: Registry) -> dict:
    """Scores whose name (or alias) is in the metric registry take the registry's name;
    others are kept under their own (semantics §1)."""
    metrics = {}
    for name, value in trajectory.get("metrics", {}).items():
        info = registry.resolve(name)
        metrics[info.name if info else name] = value
    return {**trajectory, "metrics": metrics}


def _where(trajectory: dict) -> str:
    return f"session {trajectory.get('session_id') or '?'} (trajectory {trajectory.get('id')})"


def import_traces(
    body: bytes,
    *,
    fmt: str | None = None,
    content_type: str = "",
    replace: bool = False,
    merge: bool = False,
    actor: Actor | None = None,
) -> ImportResult:
    """Parse a trace file or body and import its sessions as trajectories; TraceRejected
    names every bad record (or conflicting session) and nothing is written then. With an
    `actor`, a change is journaled as the corpus import journals it."""
    trajectories = parse(body, fmt=fmt, content_type=content_type)
    registry = load_registry()
    with transaction.atomic():
        if merge:
            trajectories, stale = _merged(trajectories)
            replace = True
            Trajectory.objects.filter(pk__in=stale).delete()
        trajectories = [registry_names(t, registry) for t in trajectories]
        lines = [json.dumps(t, ensure_ascii=False, default=str) for t in trajectories]
        try:
            return import_corpus(lines, replace=replace, actor=actor)
        except ImportRejected as exc:
            raise TraceRejected(
                [
                    RecordError(_where(trajectories[e.line - 1]), e.field, e.message)
                    for e in exc.errors
                ]
            ) from None


def _merged(trajectories: list[dict]) -> tuple[list[dict], set[str]]:
    """The sessions rebuilt from their stored spans plus the new ones, and the ids of stored
    fragments they absorbed (a batch of tool spans stored before its agent span arrived)."""
    out, stale = [], set()
    for trajectory in trajectories:
        fmt = trajectory["meta"].get("source_format")
        keys = {trajectory["session_id"], *trajectory["meta"]["source"].get("trace_ids", [])}
        stored = [
            t
            for t in Trajectory.objects.select_for_update().filter(session_id__in=keys)
            if t.meta.get("source_format") == fmt and fmt in SPAN_PARSERS
        ]
        spans = [s for t in stored for s in t.meta.get("source", {}).get("spans", [])]
        if not stored or not all("spanId" in s for s in spans):
            out.append(trajectory)
            continue
        by_id = {}
        for span in [*spans, *trajectory["meta"]["source"]["spans"]]:
            by_id[(otlp.span_id(span.get("traceId")), otlp.span_id(span.get("spanId")))] = span
        request = {"resourceSpans": [{"scopeSpans": [{"spans": list(by_id.values())}]}]}
        rebuilt = SPAN_PARSERS[fmt](json.dumps(request))
        out += rebuilt
        stale |= {t.id for t in stored} - {t["id"] for t in rebuilt}
    return out, stale


@dataclass
class LogImport:
    """What importing coding-agent logs did: the corpus import's counts, and the files read
    and skipped (not a log this import reads)."""

    result: ImportResult
    files: int
    skipped: list[tuple[str, str]]


def is_agent_log(source: Path | bytes, *, fmt: str | None = None, name: str = "") -> bool:
    """Whether a source is read as coding-agent logs (a tree, an archive of them, or a log
    file) rather than as one trace export (docs/traces.md): an Inspect `.eval` is a zip too,
    and an OTLP export is JSON too, so the bytes decide, not the name."""
    if fmt is not None:
        return fmt in logs.FORMATS
    if isinstance(source, Path) and source.is_dir():
        return True
    head = _head(source)
    kind = container_of(head, "")
    if kind == "zip":
        return not _is_inspect_log(source)
    name = name or (source.name if isinstance(source, Path) else "")
    return kind is not None or logs.detect(head, name) is not None


def _head(source: Path | bytes) -> bytes:
    if isinstance(source, bytes):
        return source[:HEAD_BYTES]
    with open(source, "rb") as handle:
        return handle.read(HEAD_BYTES)


def _is_inspect_log(source: Path | bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source) as zf:
            return "header.json" in zf.namelist()
    except zipfile.BadZipFile:
        return False


def import_logs(
    source: Path | bytes,
    *,
    fmt: str | None = None,
    name: str = "",
    replace: bool = False,
    actor: Actor | None = None,
    limits: Limits = DEFAULT_LIMITS,
    keep_ids: bool = False,
) -> LogImport:
    """Coding agents' session logs into the corpus, streamed: each session is read, derived
    and redacted as its file streams by (`traces.logs`), and the sessions go to the corpus
    import a batch of about BATCH_BYTES at a time — a session is a large row, and the corpus
    import's chunks count rows — all in one transaction. Any bad file or line, any refused
    archive member, any conflict: TraceRejected naming every one, and nothing is written."""
    found = LogRead()
    result = ImportResult()
    errors: list[RecordError] = []
    with transaction.atomic():
        for batch, where in _batches(
            logs.read(source, fmt=fmt, name=name, limits=limits, found=found)
        ):
            try:
                part = import_corpus(batch, replace=replace, keep_ids=keep_ids)
            except ImportRejected as exc:
                errors += [RecordError(where[e.line - 1], e.field, e.message) for e in exc.errors]
                continue
            result.created += part.created
            result.unchanged += part.unchanged
            result.updated += part.updated
            result.ids += part.ids
        if errors:
            raise TraceRejected(errors)
        if actor is not None and (result.created or result.updated):
            journal.write(
                type=EventType.CORPUS_IMPORTED,
                actor=actor,
                evidence={**result.as_dict(), "replace": replace},
            )
    return LogImport(result, found.files, found.skipped)


def _batches(trajectories) -> Iterator[tuple[list[bytes], list[str]]]:
    """The sessions as corpus lines, a batch of at most BATCH_BYTES (or one session) at a
    time, with where each came from."""
    batch, where, size = [], [], 0
    for trajectory in trajectories:
        line = orjson.dumps(trajectory)
        if batch and size + len(line) > BATCH_BYTES:
            yield batch, where
            batch, where, size = [], [], 0
        batch.append(line)
        where.append(f"{_file_of(trajectory)} (trajectory {trajectory['id']})")
        size += len(line)
    if batch:
        yield batch, where


def _file_of(trajectory: dict) -> str:
    source = trajectory["meta"]["source"]
    return str(source.get("file") or source.get("directory") or "?")
