"""`POST /api/v1/traces` (semantics §19): agent traces in, one trajectory per session.

The path an OpenTelemetry OTLP/HTTP exporter can point at: set
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=https://<host>/api/v1/traces` and
`OTEL_EXPORTER_OTLP_TRACES_HEADERS=Authorization=Bearer <agent token>`; both
`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf` (`application/x-protobuf`) and `http/json`
(`application/json`) bodies are accepted. A protobuf request is answered with an (empty, i.e.
fully successful) `ExportTraceServiceResponse` unless it asks for JSON (`Accept:
application/json`); the counts are also in `X-CauterWeb-Created/-Unchanged/-Updated` headers.

An exporter sends a session's spans in batches as they end; the spans of a session already
stored are merged with the new ones (`merge`, on by default: pass `merge=false` to get the
corpus import's strict conflict instead).

Other formats (`openinference`, `langfuse`, `inspect`) are JSON bodies (or an Inspect `.eval`
zip) with `?format=`. Coding agents' own logs (`claude-code`, `codex`, `openhands`,
`swe-agent`, `mini-swe-agent`) are posted as the file itself (JSON Lines or JSON), or as a
`.tar.gz`/`.zip` of many (`application/gzip`, `application/zip`); the format of each file is
detected, secrets are redacted, and an archive is read within the limits of `traces.sources`.
`?name=` gives the file's name (a log names its session from it, as the command line does). Agent token auth like every write; bad input is a 4xx JSON error naming
each bad record, and nothing is written.
"""

from django.http import HttpResponse
from ninja import Router

from lifecycle.services.traces import import_logs, import_traces, is_agent_log
from traces.detect import PROTOBUF_TYPES
from traces.logs import FORMATS as LOG_FORMATS
from traces.model import FORMATS
from traces.sources import REQUEST_LIMITS

from . import protocol
from .protocol import ERRORS, WRITE, ApiError, request_actor
from .schemas import ImportOut

router = Router(tags=["traces"])

JSON_TYPES = ("application/json", "application/x-ndjson", "application/jsonl")
ZIP_TYPES = (
    "application/zip",
    "application/octet-stream",
    "application/gzip",
    "application/x-gzip",
    "application/x-tar",
)


def _export_response(result) -> HttpResponse:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    return HttpResponse(
        ExportTraceServiceResponse().SerializeToString(),
        content_type="application/x-protobuf",
    )


@router.post(
    "/traces",
    operation_id="importTraces",
    auth=WRITE,
    response={200: ImportOut, **ERRORS},
    summary="Import agent traces (OTLP/HTTP JSON or protobuf, OpenInference, Langfuse, Inspect)",
    description="One trajectory per agent session, signatures derived (semantics §19); atomic "
    "and idempotent like the corpus import. `format` is detected when not given. With `merge` "
    "(the default) the spans of a session already stored are merged with the new ones, as an "
    "OTLP exporter sends a session in batches.",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                "application/json": {"schema": {"type": "object"}},
            },
        }
    },
)
def post_traces(
    request,
    format: str | None = None,
    replace: bool = False,
    merge: bool = True,
    name: str = "body",
):
    content_type = request.content_type or ""
    if not request.body:
        raise ApiError(400, "the body is empty")
    if content_type not in (*PROTOBUF_TYPES, *JSON_TYPES, *ZIP_TYPES):
        raise ApiError(415, "send application/json or application/x-protobuf (OTLP)")
    if format is not None and format not in FORMATS + LOG_FORMATS:
        raise ApiError(422, f"format must be one of {', '.join(FORMATS + LOG_FORMATS)}")
    # Binary bodies (protobuf, a zipped log) hold NUL bytes by nature; text may not.
    body = (
        request.body
        if content_type in (*PROTOBUF_TYPES, *ZIP_TYPES)
        else protocol.strict_text(request)
    )
    if content_type not in PROTOBUF_TYPES and is_agent_log(body, fmt=format, name=name):
        result = import_logs(
            body,
            fmt=format,
            name=name[:255],
            replace=replace,
            actor=request_actor(request),
            limits=REQUEST_LIMITS,
            keep_ids=True,
        ).result
        return _json_response(result)
    result = import_traces(
        body,
        fmt=format,
        content_type=content_type,
        replace=replace,
        merge=merge,
        actor=request_actor(request),
    )
    if content_type in PROTOBUF_TYPES and "application/json" not in request.headers.get(
        "Accept", ""
    ):
        return _with_counts(_export_response(result), result)
    return _json_response(result)


def _json_response(result) -> HttpResponse:
    response = HttpResponse(
        ImportOut(**result.as_dict(), ids=result.ids).model_dump_json(),
        content_type="application/json",
    )
    return _with_counts(response, result)


def _with_counts(response: HttpResponse, result) -> HttpResponse:
    for name, value in result.as_dict().items():
        response[f"X-CauterWeb-{name.capitalize()}"] = str(value)
    return response
