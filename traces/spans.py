"""Spans as plain data, whatever container they came in (OTLP JSON, OTLP protobuf, the
OpenTelemetry SDK's span JSON that Phoenix writes), and the grouping of spans into sessions."""

from collections import defaultdict
from dataclasses import dataclass, field

from .model import RecordError


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    status: str  # "ok" | "error" | "unset"
    status_message: str
    attributes: dict
    events: list[dict] = field(default_factory=list)
    record: str = ""
    raw: dict = field(default_factory=dict)

    def attr(self, *keys: str, default: object = None) -> object:
        for key in keys:
            value = self.attributes.get(key)
            if value not in (None, ""):
                return value
        return default


def exception_text(span: Span) -> str:
    """The error of a span: its status message, else its `exception` event, else `error.type`."""
    if span.status_message:
        return span.status_message
    for event in span.events:
        if event.get("name") == "exception":
            attrs = event.get("attributes") or {}
            parts = [attrs.get("exception.type"), attrs.get("exception.message")]
            text = ": ".join(str(p) for p in parts if p)
            if text:
                return text
    error_type = span.attributes.get("error.type")
    return str(error_type) if error_type else ""


def span_failed(span: Span) -> bool:
    return span.status == "error" or bool(span.attributes.get("error.type"))


def by_trace(spans: list[Span]) -> dict[str, list[Span]]:
    traces: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        traces[span.trace_id].append(span)
    for members in traces.values():
        members.sort(key=lambda s: (s.start_ns, s.span_id))
    return dict(traces)


def roots(spans: list[Span]) -> list[Span]:
    """Spans whose parent is not in the batch: the tops of the trace."""
    ids = {s.span_id for s in spans}
    return [s for s in spans if not s.parent_id or s.parent_id not in ids]


def sessions(spans: list[Span], session_keys: tuple[str, ...]) -> dict[str, list[list[Span]]]:
    """session id → its traces (each a list of spans, in start order), sessions in the order
    they began. A trace carrying a session attribute on any span joins that session; a trace
    without one is a session of its own (keyed by its trace id)."""
    out: dict[str, list[list[Span]]] = {}
    traces = sorted(by_trace(spans).values(), key=lambda t: (t[0].start_ns, t[0].trace_id))
    for trace in traces:
        key = next((str(s.attr(*session_keys)) for s in trace if s.attr(*session_keys)), "")
        out.setdefault(key or trace[0].trace_id, []).append(trace)
    return out


def check_ids(span: Span, errors: list[RecordError]) -> bool:
    ok = True
    if not span.trace_id:
        errors.append(RecordError(span.record, "traceId", "is required"))
        ok = False
    if not span.span_id:
        errors.append(RecordError(span.record, "spanId", "is required"))
        ok = False
    return ok
