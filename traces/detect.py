"""Which trace format a file or request body is, and the one entry point that parses any of
them into trajectories (semantics §19)."""

import json

from . import inspect_ai, langfuse, openinference, otlp
from .model import FORMATS, RecordError, TraceRejected

PROTOBUF_TYPES = ("application/x-protobuf", "application/protobuf")
_OI_KIND = b'"openinference.span.kind"'
_GENAI_OP = b'"gen_ai.operation.name"'


class UnknownFormat(TraceRejected):
    pass


def _first_record(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        for line in text.splitlines():
            if line.strip():
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    return None
    return None


def _looks_langfuse(item: object) -> bool:
    return isinstance(item, dict) and bool(
        {"observations", "sessionId", "htmlPath", "projectId"} & set(item)
    )


def _looks_span_json(item: object) -> bool:
    return isinstance(item, dict) and ("context" in item or "span_kind" in item) and "name" in item


def detect(body: bytes, content_type: str = "") -> str:
    """otlp | openinference | langfuse | inspect; UnknownFormat when nothing fits."""
    if body[:4] == b"PK\x03\x04":
        return "inspect"
    if content_type.split(";")[0].strip() in PROTOBUF_TYPES:
        return "openinference" if _OI_KIND[1:-1] in body and _GENAI_OP[1:-1] not in body else "otlp"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "otlp"  # binary and not a zip: an OTLP/protobuf export
    first = _first_record(text)
    if isinstance(first, dict) and "resourceSpans" in first:
        return "openinference" if _OI_KIND in body and _GENAI_OP not in body else "otlp"
    if isinstance(first, dict) and isinstance(first.get("samples"), list) and "eval" in first:
        return "inspect"
    items = (
        first.get("data", first.get("traces", first.get("spans")))
        if isinstance(first, dict)
        else first
    )
    sample = items[0] if isinstance(items, list) and items else first
    if _looks_langfuse(sample) or (
        isinstance(first, dict) and "observations" in first and "traces" in first
    ):
        return "langfuse"
    if _looks_span_json(sample):
        return "openinference"
    raise UnknownFormat(
        [RecordError("file", "", f"cannot tell the trace format; name it ({', '.join(FORMATS)})")]
    )


def parse(body: bytes, *, fmt: str | None = None, content_type: str = "") -> list[dict]:
    """Trajectories (signatures not yet derived) from a trace file or request body.
    TraceRejected names every bad record; nothing is returned then."""
    fmt = fmt or detect(body, content_type)
    if fmt not in FORMATS:
        raise UnknownFormat(
            [RecordError("format", "", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")]
        )
    if fmt == "inspect":
        return inspect_ai.parse(body)
    protobuf = content_type.split(";")[0].strip() in PROTOBUF_TYPES
    if not protobuf:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            protobuf = fmt in ("otlp", "openinference")
            if not protobuf:
                raise TraceRejected([RecordError("file", "", "not valid UTF-8")]) from None
    if fmt == "otlp":
        return otlp.parse_protobuf(body) if protobuf else otlp.parse_json(text)
    if fmt == "openinference":
        return openinference.parse_protobuf(body) if protobuf else openinference.parse_json(text)
    return langfuse.parse_json(text)
