"""Langfuse exports (semantics §19): traces with their observations and scores, as the public
API returns them (`GET /api/public/traces/{id}`: a trace with `observations` and `scores`
inlined; `GET /api/public/traces`: `{"data": [...], "meta": …}`) and as the UI exports them
(a JSON list or JSON Lines of traces). Observations and scores may also come beside the traces
(`{"traces": [...], "observations": [...], "scores": [...]}`).

Mapping: the session is `sessionId`, else the trace; the task is the first trace's `input`;
steps are TOOL observations (`name`, `input`, `output`, `level`, `statusMessage`) — or, in
traces recorded before Langfuse had a TOOL type, the SPAN observations that have no children;
an observation with `level: "ERROR"` failed and its `statusMessage` is the error; a root
observation at ERROR level fails the session; scores (`name`, `value` / `stringValue`) are
the metrics.
"""

import json

from . import model
from .model import RecordError, TraceRejected

STEP_TYPES = ("TOOL",)
FALLBACK_STEP_TYPES = ("SPAN",)


def _records(text: str, errors: list[RecordError]) -> tuple[list[tuple[str, dict]], list, list]:
    """(numbered traces, loose observations, loose scores)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        traces = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                traces.append((f"line {number}", json.loads(line)))
            except json.JSONDecodeError as exc:
                errors.append(RecordError(f"line {number}", "", f"not valid JSON: {exc.msg}"))
        return traces, [], []
    if isinstance(data, dict) and ("data" in data or "traces" in data):
        items = data.get("traces", data.get("data"))
        loose = (data.get("observations") or [], data.get("scores") or [])
    elif isinstance(data, dict):
        items, loose = [data], ([], [])
    else:
        items, loose = data, ([], [])
    if not isinstance(items, list):
        errors.append(RecordError("file", "data", "expected a list of traces"))
        return [], [], []
    return [(f"traces[{i}]", t) for i, t in enumerate(items)], list(loose[0]), list(loose[1])


def _check_trace(where: str, trace: object, errors: list[RecordError]) -> bool:
    if not isinstance(trace, dict):
        errors.append(RecordError(where, "", "a trace must be an object"))
        return False
    ok = True
    if not isinstance(trace.get("id"), str) or not trace["id"]:
        errors.append(RecordError(where, "id", "is required"))
        ok = False
    for name in ("observations", "scores"):
        value = trace.get(name)
        if value is not None and not isinstance(value, list):
            errors.append(RecordError(f"{where} (trace {trace.get('id')})", name, "must be a list"))
            ok = False
            continue
        for i, item in enumerate(value or []):
            if not isinstance(item, dict):
                errors.append(
                    RecordError(
                        f"{where} (trace {trace.get('id')})", f"{name}[{i}]", "must be an object"
                    )
                )
                ok = False
    return ok


def _steps(observations: list[dict]) -> list[dict]:
    tools = [o for o in observations if o.get("type") in STEP_TYPES]
    if not tools:
        parents = {o.get("parentObservationId") for o in observations}
        tools = [
            o
            for o in observations
            if o.get("type") in FALLBACK_STEP_TYPES
            and o.get("parentObservationId")
            and o.get("id") not in parents
        ]
    tools.sort(key=lambda o: (str(o.get("startTime") or ""), str(o.get("id"))))
    return [
        model.step(
            tool=str(o.get("name") or o.get("type")),
            arguments=o.get("input"),
            output=o.get("output"),
            error=str(o.get("statusMessage") or "ERROR") if o.get("level") == "ERROR" else "",
            failed=o.get("level") == "ERROR",
            observation_id=o.get("id"),
            started_at=model.iso_time(o.get("startTime")),
        )
        for o in tools
    ]


def session_trajectory(key: str, traces: list[dict]) -> dict:
    traces = sorted(traces, key=lambda t: (str(t.get("timestamp") or ""), t["id"]))
    observations = [o for t in traces for o in t.get("observations") or []]
    scores = [s for t in traces for s in t.get("scores") or []]
    metrics, unscored = {}, {}
    for score in sorted(scores, key=lambda s: str(s.get("timestamp") or "")):
        if score.get("name"):
            value = score.get("value")
            label = score.get("stringValue")
            model.add_score(metrics, unscored, score["name"], value, label)
    last_id = traces[-1]["id"]
    top = [
        o
        for o in observations
        if not o.get("parentObservationId") and o.get("traceId", last_id) == last_id
    ]
    failed_top = next((o for o in top if o.get("level") == "ERROR"), None)
    root_failed = True if failed_top else None
    first = traces[0]
    meta_ext = (
        (first.get("metadata") or {}).get("cauterweb")
        if isinstance(first.get("metadata"), dict)
        else None
    )
    return model.build(
        id=str((meta_ext or {}).get("id") or model.trajectory_id("langfuse", key)),
        task=model.message_text(first.get("input")) or str(first.get("name") or ""),
        steps=_steps(observations),
        metrics=metrics,
        unscored=unscored,
        root_failed=root_failed,
        root_message=str(failed_top.get("statusMessage") or "") if failed_top else "",
        session_id=key,
        started_at=model.iso_time(first.get("timestamp")),
        source={"traces": traces},
        source_format="langfuse",
        extensions=meta_ext if isinstance(meta_ext, dict) else {},
    )


def parse_json(text: str) -> list[dict]:
    errors: list[RecordError] = []
    numbered, loose_observations, loose_scores = _records(text, errors)
    traces = [t for where, t in numbered if _check_trace(where, t, errors)]
    if not traces and not errors:
        errors.append(RecordError("file", "", "no Langfuse trace found"))
    if errors:
        raise TraceRejected(errors)
    by_id = {
        t["id"]: {
            **t,
            "observations": list(t.get("observations") or []),
            "scores": list(t.get("scores") or []),
        }
        for t in traces
    }
    for kind, loose in (("observations", loose_observations), ("scores", loose_scores)):
        for i, item in enumerate(loose):
            owner = by_id.get(item.get("traceId")) if isinstance(item, dict) else None
            if owner is None:
                errors.append(RecordError(f"{kind}[{i}]", "traceId", "names no trace in the file"))
                continue
            owner[kind].append(item)
    if errors:
        raise TraceRejected(errors)
    sessions: dict[str, list[dict]] = {}
    for trace in by_id.values():
        sessions.setdefault(str(trace.get("sessionId") or trace["id"]), []).append(trace)
    return [session_trajectory(key, members) for key, members in sessions.items()]
