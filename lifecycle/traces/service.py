"""Agent traces into the corpus (semantics §19, §2): the one Django-side step of
`lifecycle.traces`.

Parsed sessions go through the corpus import itself, so a trace import is atomic (any bad
record: nothing written), idempotent (same content: unchanged; changed content: a conflict
unless `replace`) and names its bad records, exactly as a JSON Lines import does. Signatures are
derived there, for every trajectory that arrives without one.
"""

import json

from ..corpus import ImportRejected, ImportResult, import_corpus
from ..metrics import Registry, load_registry
from .detect import parse
from .model import RecordError, TraceRejected


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
    body: bytes, *, fmt: str | None = None, content_type: str = "", replace: bool = False
) -> ImportResult:
    """Parse a trace file or body and import its sessions as trajectories; TraceRejected
    names every bad record (or conflicting session) and nothing is written then."""
    trajectories = parse(body, fmt=fmt, content_type=content_type)
    registry = load_registry()
    trajectories = [registry_names(t, registry) for t in trajectories]
    lines = [json.dumps(t, ensure_ascii=False, default=str) for t in trajectories]
    try:
        return import_corpus(lines, replace=replace)
    except ImportRejected as exc:
        raise TraceRejected(
            [RecordError(_where(trajectories[e.line - 1]), e.field, e.message) for e in exc.errors]
        ) from None
