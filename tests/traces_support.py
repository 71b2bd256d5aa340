"""Helpers for the trace tests: fixture files, and OTLP/JSON turned into the OTLP/protobuf an
exporter would send for the same spans."""

import base64
import copy
import json
from pathlib import Path

from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def fixture_json(name: str):
    return json.loads(fixture_bytes(name))


def otlp_protobuf(request: dict) -> bytes:
    """The protobuf encoding of an OTLP/JSON request (OTLP/JSON writes ids in hex, the
    protobuf JSON mapping wants base64)."""
    data = copy.deepcopy(request)
    for resource in data["resourceSpans"]:
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return ParseDict(data, ExportTraceServiceRequest()).SerializeToString()
