"""OpenInference spans (semantics §19), as Arize Phoenix records them.

Containers: OTLP (JSON or protobuf, as sent to Phoenix's collector), or span JSON — the
OpenTelemetry SDK's `span.to_json()` shape (`context.trace_id`, `parent_id`, `status.status_code`,
flat dotted `attributes`) or Phoenix's REST shape (`span_kind`, `status_code`,
`status_message`), as a JSON list, `{"data": [...]}`, or JSON Lines.

Mapping (OpenInference semantic conventions): the session is `session.id`, else the trace; the
root is the outermost AGENT span, else the trace's root (CHAIN); its `input.value` is the task
and its status the outcome; steps are TOOL spans (`tool.name`, `input.value` the arguments,
`output.value` the result, status ERROR and the `exception` event the error); metrics are
annotations (`annotation.<name>.score` / `.label` attributes, `eval.<name>.score` / `.label`,
or Phoenix span annotations `{name, result: {score, label}}`).
"""

import json
from datetime import datetime

from . import model, otlp
from .model import RecordError, TraceRejected
from .spans import Span, check_ids, roots, sessions

KIND = "openinference.span.kind"
SESSION_KEYS = ("session.id",)
_STATUS = {
    "OK": "ok",
    "ERROR": "error",
    "UNSET": "unset",
    "STATUSCODE.OK": "ok",
    "STATUSCODE.ERROR": "error",
}


def flatten(value: object, prefix: str = "") -> dict:
    """Nested attribute objects as the flat dotted keys the conventions name."""
    if not isinstance(value, dict):
        return {prefix: value} if prefix else {}
    out = {}
    for key, item in value.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(item, dict) and item:
            out.update(flatten(item, name))
        else:
            out[name] = item
    return out


def _ns(value: object) -> int:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value.strip():
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        return int(parsed.timestamp() * 1_000_000) * 1000
    return 0


def _hex(value: object) -> str:
    text = str(value or "")
    return text[2:].lower() if text.lower().startswith("0x") else text.lower()


def span_from_json(raw: object, where: str) -> Span:
    if not isinstance(raw, dict):
        raise ValueError("a span must be an object")
    context = raw.get("context") or {}
    status = raw.get("status") or {}
    code = str(status.get("status_code") or raw.get("status_code") or "UNSET").upper()
    attributes = flatten(raw.get("attributes") or {})
    if raw.get("span_kind") and KIND not in attributes:
        attributes[KIND] = raw["span_kind"]
    span_id = _hex(context.get("span_id") or raw.get("span_id"))
    return Span(
        trace_id=_hex(context.get("trace_id") or raw.get("trace_id")),
        span_id=span_id,
        parent_id=_hex(raw.get("parent_id") or raw.get("parent_span_id")),
        name=str(raw.get("name") or ""),
        start_ns=_ns(raw.get("start_time")),
        end_ns=_ns(raw.get("end_time")),
        status=_STATUS.get(code, "unset"),
        status_message=str(status.get("description") or raw.get("status_message") or ""),
        attributes=attributes,
        events=[
            {
                "name": e.get("name", ""),
                "time_ns": _ns(e.get("timestamp")),
                "attributes": flatten(e.get("attributes") or {}),
            }
            for e in raw.get("events") or []
        ],
        record=f"{where} (span {span_id or '?'})",
        raw=raw,
    )


def spans_from_span_json(text: str, errors: list[RecordError]) -> tuple[list[Span], list[dict]]:
    """(spans, span annotations) from span JSON: a list, `{"data": [...]}`, or JSON Lines."""
    try:
        data = json.loads(text)
        items = data.get("data", data.get("spans")) if isinstance(data, dict) else data
        annotations = data.get("annotations", []) if isinstance(data, dict) else []
        numbered = [(f"spans[{i}]", item) for i, item in enumerate(items or [])]
    except json.JSONDecodeError:
        annotations, numbered = [], []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                numbered.append((f"line {number}", json.loads(line)))
            except json.JSONDecodeError as exc:
                errors.append(RecordError(f"line {number}", "", f"not valid JSON: {exc.msg}"))
    if not isinstance(numbered, list):
        errors.append(RecordError("file", "", "expected a list of spans"))
        return [], []
    spans = []
    for where, raw in numbered:
        try:
            span = span_from_json(raw, where)
        except (ValueError, TypeError, AttributeError) as exc:
            errors.append(RecordError(where, "", str(exc)))
            continue
        if check_ids(span, errors):
            spans.append(span)
    return spans, [a for a in annotations if isinstance(a, dict)]


def _kind(span: Span) -> str:
    return str(span.attributes.get(KIND) or "").upper()


def _root(trace: list[Span]) -> Span:
    tops = roots(trace)
    ids = {s.span_id: s for s in trace}
    agents = [s for s in trace if _kind(s) == "AGENT"]
    for agent in agents:
        parent = ids.get(agent.parent_id)
        while parent is not None and _kind(parent) != "AGENT":
            parent = ids.get(parent.parent_id)
        if parent is None:
            return agent
    return tops[0] if tops else trace[0]


def scores(spans: list[Span], annotations: list[dict]) -> tuple[dict, dict]:
    metrics, unscored = {}, {}
    for span in spans:
        for key, value in span.attributes.items():
            parts = key.split(".")
            if (
                len(parts) >= 3
                and parts[0] in ("annotation", "eval")
                and parts[-1] in ("score", "label")
            ):
                name = ".".join(parts[1:-1])
                label_key = f"{parts[0]}.{name}.label"
                if parts[-1] == "score" or f"{parts[0]}.{name}.score" not in span.attributes:
                    score = value if parts[-1] == "score" else None
                    model.add_score(metrics, unscored, name, score, span.attributes.get(label_key))
    ids = {s.span_id for s in spans}
    for annotation in annotations:
        if _hex(annotation.get("span_id")) in ids and annotation.get("name"):
            result = annotation.get("result") or {}
            model.add_score(
                metrics, unscored, annotation["name"], result.get("score"), result.get("label")
            )
    return metrics, unscored


def session_trajectory(key: str, traces: list[list[Span]], annotations: list[dict]) -> dict | None:
    spans = [s for trace in traces for s in trace]
    if not any(KIND in s.attributes for s in spans):
        return None
    tops = [_root(trace) for trace in traces]
    last = tops[-1]
    tools = sorted((s for s in spans if _kind(s) == "TOOL"), key=lambda s: (s.start_ns, s.span_id))
    steps = [
        otlp.step_from_span(
            s,
            tool_keys=("tool.name",),
            argument_keys=("input.value", "tool.parameters"),
            result_keys=("output.value",),
            id_key="tool_call.id",
        )
        for s in tools
    ]
    metrics, unscored = scores(spans, annotations)
    return otlp.trajectory_from_spans(
        source_format="openinference",
        id_prefix="oi",
        key=key,
        root=tops[0],
        last=last,
        task=model.message_text(tops[0].attributes.get("input.value")) or tops[0].name,
        traces=traces,
        spans=spans,
        parts=(steps, metrics, unscored),
    )


def trajectories_from_spans(
    spans: list[Span], annotations: list[dict], errors: list[RecordError]
) -> list[dict]:
    out = []
    for key, traces in sessions(spans, SESSION_KEYS).items():
        trajectory = session_trajectory(key, traces, annotations)
        if trajectory is not None:
            out.append(trajectory)
    if not out and not errors:
        errors.append(RecordError("file", "", f"no agent session: no span carries {KIND}"))
    return out


def parse_json(text: str) -> list[dict]:
    """OpenInference spans as OTLP/JSON or as span JSON."""
    errors: list[RecordError] = []
    stripped = text.lstrip()
    if stripped.startswith("{") and '"resourceSpans"' in stripped[:2000]:
        spans, annotations = otlp.spans_from_json(text, errors), []
    else:
        spans, annotations = spans_from_span_json(text, errors)
    out = trajectories_from_spans(spans, annotations, errors) if not errors else []
    if errors:
        raise TraceRejected(errors)
    return out


def parse_protobuf(body: bytes) -> list[dict]:
    errors: list[RecordError] = []
    spans = otlp.spans_from_protobuf(body, errors)
    out = trajectories_from_spans(spans, [], errors) if not errors else []
    if errors:
        raise TraceRejected(errors)
    return out
