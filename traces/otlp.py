"""OpenTelemetry traces (semantics §19): OTLP JSON and OTLP protobuf containers, and the GenAI
semantic conventions that make spans an agent session.

Containers: an `ExportTraceServiceRequest` as OTLP/JSON (one object, or JSON Lines of them as
the Collector's file exporter writes), or as OTLP/protobuf bytes (decoded with
`opentelemetry-proto`).

GenAI mapping (semantic conventions for generative AI, the `gen_ai.*` namespace, v1.37+):
- the session is `gen_ai.conversation.id`, else the trace;
- the root is the outermost `invoke_agent` span (`gen_ai.operation.name`), else the trace's
  root span; its status decides the outcome, its `gen_ai.input.messages` give the task;
- steps are `execute_tool` spans: `gen_ai.tool.name`, `gen_ai.tool.call.arguments`,
  `gen_ai.tool.call.result`, `gen_ai.tool.call.id`; a span with status ERROR or `error.type`
  failed, its status message or `exception` event is the error;
- metrics are `gen_ai.evaluation.result` events (`gen_ai.evaluation.name`,
  `gen_ai.evaluation.score.value`, `gen_ai.evaluation.score.label`).
"""

import base64
import binascii
import json
import re

from . import model
from .model import RecordError, TraceRejected
from .spans import Span, check_ids, exception_text, sessions, span_failed

SESSION_KEYS = (
    "gen_ai.conversation.id",
    "session.id",
    "traceloop.association.properties.session_id",
)
# The conventions' names first; then the older and framework names seen in real exports
# (OpenLLMetry's traceloop.*, Pydantic AI's tool_arguments / tool_response).
TASK_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.prompt",
    "gen_ai.prompt.0.content",
    "input.value",
    "traceloop.entity.input",
    "gen_ai.agent.input",
)
TOOL_NAME_KEYS = ("gen_ai.tool.name", "traceloop.entity.name")
TOOL_ARGUMENT_KEYS = (
    "gen_ai.tool.call.arguments",
    "tool_arguments",
    "input.value",
    "traceloop.entity.input",
)
TOOL_RESULT_KEYS = (
    "gen_ai.tool.call.result",
    "tool_response",
    "output.value",
    "traceloop.entity.output",
)
EXTENSION_PREFIX = "cauterweb."
_HEX_ID = re.compile(r"^(?:[0-9a-fA-F]{16}|[0-9a-fA-F]{32})$")
_STATUS = {
    0: "unset",
    1: "ok",
    2: "error",
    "STATUS_CODE_UNSET": "unset",
    "STATUS_CODE_OK": "ok",
    "STATUS_CODE_ERROR": "error",
}


# ---- containers ------------------------------------------------------------------------------


def any_value(value: object) -> object:
    """An OTLP `AnyValue` as plain data."""
    if not isinstance(value, dict):
        raise ValueError(f"attribute value must be an AnyValue object, got {value!r:.60}")
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [any_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return attributes((value["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def attributes(items: object) -> dict:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise ValueError("attributes must be a list of {key, value}")
    out = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise ValueError(f"attribute must be an object with a string 'key', got {item!r:.60}")
        out[item["key"]] = any_value(item.get("value", {}))
    return out


def span_id(value: object) -> str:
    """OTLP/JSON writes ids in hex; protobuf-to-dict (and some exporters) in base64."""
    if not value:
        return ""
    text = str(value)
    if _HEX_ID.match(text):
        return text.lower()
    try:
        return base64.b64decode(text, validate=True).hex()
    except (binascii.Error, ValueError):
        return text


def _span(raw: object, where: str, resource: dict) -> Span:
    if not isinstance(raw, dict):
        raise ValueError("a span must be an object")
    status = raw.get("status") or {}
    code = status.get("code", 0)
    return Span(
        trace_id=span_id(raw.get("traceId")),
        span_id=span_id(raw.get("spanId")),
        parent_id=span_id(raw.get("parentSpanId")),
        name=str(raw.get("name") or ""),
        start_ns=int(raw.get("startTimeUnixNano") or 0),
        end_ns=int(raw.get("endTimeUnixNano") or 0),
        status=_STATUS.get(code, "unset"),
        status_message=str(status.get("message") or ""),
        attributes={**resource, **attributes(raw.get("attributes"))},
        events=[
            {
                "name": e.get("name", ""),
                "time_ns": int(e.get("timeUnixNano") or 0),
                "attributes": attributes(e.get("attributes")),
            }
            for e in raw.get("events") or []
        ],
        record=f"{where} (span {span_id(raw.get('spanId')) or '?'})",
        raw=raw,
    )


def spans_from_request(request: object, where: str, errors: list[RecordError]) -> list[Span]:
    """The spans of one ExportTraceServiceRequest (as OTLP/JSON data); bad ones named."""
    if not isinstance(request, dict) or not isinstance(request.get("resourceSpans"), list):
        errors.append(
            RecordError(where, "resourceSpans", "an OTLP trace export needs a list 'resourceSpans'")
        )
        return []
    out = []
    for r, resource_spans in enumerate(request["resourceSpans"]):
        here = f"{where}resourceSpans[{r}]"
        try:
            resource = attributes(((resource_spans or {}).get("resource") or {}).get("attributes"))
        except (ValueError, TypeError, AttributeError) as exc:
            errors.append(RecordError(here, "resource.attributes", str(exc)))
            continue
        # Resource attributes (service.name …) are kept, under the span's own.
        resource = {k: v for k, v in resource.items() if k.startswith(("service.", "gen_ai."))}
        for s, scope_spans in enumerate(resource_spans.get("scopeSpans") or []):
            for i, raw in enumerate((scope_spans or {}).get("spans") or []):
                record = f"{here}.scopeSpans[{s}].spans[{i}]"
                try:
                    span = _span(raw, record, resource)
                except (ValueError, TypeError, AttributeError) as exc:
                    errors.append(RecordError(record, "", str(exc)))
                    continue
                if check_ids(span, errors):
                    out.append(span)
    return out


def spans_from_json(text: str, errors: list[RecordError]) -> list[Span]:
    """One OTLP/JSON request, or JSON Lines of them (the Collector's file exporter)."""
    try:
        return spans_from_request(json.loads(text), "", errors)
    except json.JSONDecodeError:
        pass
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(
                RecordError(
                    f"line {number}", "", f"not valid JSON: {exc.msg} at column {exc.colno}"
                )
            )
            continue
        out += spans_from_request(request, f"line {number}, ", errors)
    return out


def spans_from_protobuf(body: bytes, errors: list[RecordError]) -> list[Span]:
    """An OTLP/protobuf ExportTraceServiceRequest, decoded with opentelemetry-proto."""
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        errors.append(
            RecordError("body", "", f"not an OTLP/protobuf ExportTraceServiceRequest: {exc}")
        )
        return []
    data = MessageToDict(request, use_integers_for_enums=True)
    data.setdefault("resourceSpans", [])
    return spans_from_request(data, "", errors)


# ---- GenAI semantic conventions -----------------------------------------------------------


def _operation(span: Span) -> str:
    op = span.attributes.get("gen_ai.operation.name")
    if isinstance(op, str) and op:
        return op
    return span.name.split(" ", 1)[0]


def is_tool(span: Span) -> bool:
    # OpenLLMetry (traceloop) marks tool spans its own way; accepted beside the conventions.
    if span.attributes.get("traceloop.span.kind") == "tool":
        return True
    return (
        _operation(span) == "execute_tool"
        or "gen_ai.tool.name" in span.attributes
        and _operation(span) not in ("chat", "invoke_agent", "create_agent")
    )


def is_agent(span: Span) -> bool:
    return _operation(span) == "invoke_agent"


def is_genai(span: Span) -> bool:
    return any(k.startswith(("gen_ai.", "traceloop.span.kind")) for k in span.attributes)


def _root(trace: list[Span]) -> Span:
    ids = {s.span_id: s for s in trace}
    agents = [s for s in trace if is_agent(s)]

    def outermost(span: Span) -> bool:
        parent = ids.get(span.parent_id)
        while parent is not None:
            if is_agent(parent):
                return False
            parent = ids.get(parent.parent_id)
        return True

    tops = [s for s in agents if outermost(s)]
    if tops:
        return tops[0]
    return next((s for s in trace if not s.parent_id or s.parent_id not in ids), trace[0])


def _task(root: Span, trace: list[Span]) -> str:
    for key in TASK_KEYS:
        text = model.message_text(root.attributes.get(key))
        if text.strip():
            return text
    for event in root.events:
        if event["name"] == "gen_ai.user.message":
            text = model.message_text(event["attributes"].get("content") or event["attributes"])
            if text.strip():
                return text
    for span in trace:
        if _operation(span) == "chat":
            text = model.message_text(span.attributes.get("gen_ai.input.messages"))
            if text.strip():
                return text
    # Content capture is opt-in in the conventions: without it, the agent's name is all there is.
    return root.attr("gen_ai.agent.description", "gen_ai.agent.name", default="") or root.name


def _event_value(span: Span, names: tuple[str, ...], keys: tuple[str, ...]) -> object:
    """Tool input and output recorded as span events, as some instrumentations (e.g. Strands
    Agents' `gen_ai.tool.message` and `gen_ai.choice`) do instead of attributes."""
    for event in span.events:
        if event["name"] in names:
            for key in keys:
                if event["attributes"].get(key) not in (None, ""):
                    return event["attributes"][key]
    return None


def step_from_span(
    span: Span, *, tool_keys: tuple, argument_keys: tuple, result_keys: tuple, id_key: str
) -> dict:
    failed = span_failed(span)
    tool = span.attr(*tool_keys) or re.sub(r"^execute_tool\s+", "", span.name)
    arguments = span.attr(*argument_keys)
    if arguments is None:
        arguments = _event_value(
            span, ("gen_ai.tool.message", "gen_ai.tool.input"), ("content", "arguments")
        )
    output = span.attr(*result_keys)
    if output is None:
        output = _event_value(
            span, ("gen_ai.choice", "gen_ai.tool.output"), ("message", "content", "result")
        )
    return model.step(
        tool=str(tool),
        arguments=arguments,
        output=output,
        error=exception_text(span) if failed else "",
        failed=failed,
        span_id=span.span_id,
        call_id=span.attr(id_key),
        started_at=model.iso_from_unix_nano(span.start_ns),
    )


def evaluations(spans: list[Span]) -> tuple[dict, dict]:
    metrics, unscored = {}, {}
    for span in spans:
        for event in span.events:
            if event["name"] != "gen_ai.evaluation.result":
                continue
            attrs = event["attributes"]
            name = attrs.get("gen_ai.evaluation.name")
            if name:
                model.add_score(
                    metrics,
                    unscored,
                    name,
                    attrs.get("gen_ai.evaluation.score.value"),
                    attrs.get("gen_ai.evaluation.score.label"),
                )
    return metrics, unscored


def extensions(span: Span) -> dict:
    return {
        k[len(EXTENSION_PREFIX) :]: v
        for k, v in span.attributes.items()
        if k.startswith(EXTENSION_PREFIX)
    }


def session_trajectory(key: str, traces: list[list[Span]]) -> dict | None:
    """One agent session (semantics §19) from its traces, or None when no span is GenAI."""
    spans = [s for trace in traces for s in trace]
    if not any(is_genai(s) for s in spans):
        return None
    roots = [_root(trace) for trace in traces]
    last = roots[-1]
    tools = sorted((s for s in spans if is_tool(s)), key=lambda s: (s.start_ns, s.span_id))
    steps = [
        step_from_span(
            s,
            tool_keys=TOOL_NAME_KEYS,
            argument_keys=TOOL_ARGUMENT_KEYS,
            result_keys=TOOL_RESULT_KEYS,
            id_key="gen_ai.tool.call.id",
        )
        for s in tools
    ]
    metrics, unscored = evaluations(spans)
    return trajectory_from_spans(
        source_format="otlp",
        id_prefix="otel",
        key=key,
        root=roots[0],
        last=last,
        task=_task(roots[0], traces[0]),
        traces=traces,
        spans=spans,
        parts=(steps, metrics, unscored),
    )


def trajectory_from_spans(
    *,
    source_format: str,
    id_prefix: str,
    key: str,
    root: Span,
    last: Span,
    task: str,
    traces: list,
    spans: list[Span],
    parts: tuple[list, dict, dict],
) -> dict:
    """One session's trajectory from its span tree, whichever convention named the spans: the
    outcome from the last root's status, the first root's time and extensions, the spans kept
    as the source record."""
    steps, metrics, unscored = parts
    root_failed = True if span_failed(last) else (False if last.status == "ok" else None)
    ext = extensions(root)
    return model.build(
        id=str(ext.get("id") or model.trajectory_id(id_prefix, key)),
        task=task,
        steps=steps,
        metrics=metrics,
        unscored=unscored,
        root_failed=root_failed,
        root_message=exception_text(last) if root_failed else "",
        session_id=key,
        started_at=model.iso_from_unix_nano(root.start_ns),
        source={"trace_ids": [t[0].trace_id for t in traces], "spans": [s.raw for s in spans]},
        source_format=source_format,
        extensions=ext,
    )


def trajectories_from_spans(spans: list[Span], errors: list[RecordError]) -> list[dict]:
    out = []
    for key, traces in sessions(spans, SESSION_KEYS).items():
        trajectory = session_trajectory(key, traces)
        if trajectory is not None:
            out.append(trajectory)
    if not out and not errors:
        errors.append(
            RecordError("file", "", "no agent session: no span carries gen_ai.* attributes")
        )
    return out


def parse_json(text: str) -> list[dict]:
    errors: list[RecordError] = []
    spans = spans_from_json(text, errors)
    out = trajectories_from_spans(spans, errors) if not errors else []
    if errors:
        raise TraceRejected(errors)
    return out


def parse_protobuf(body: bytes) -> list[dict]:
    errors: list[RecordError] = []
    spans = spans_from_protobuf(body, errors)
    out = trajectories_from_spans(spans, errors) if not errors else []
    if errors:
        raise TraceRejected(errors)
    return out
