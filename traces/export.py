"""Trajectories written as an OTLP/JSON export with OpenTelemetry GenAI spans — the demo corpus
ships this way too (`lifecycle/fixtures/demo/corpus.otlp.json`), so `import_traces` is shown on
the same sessions the JSON Lines corpus holds.

No signature is written: importing the export derives them (semantics §19). The parts of a
corpus line no convention names (`id`, `corpus`, `expected_rule`, `replay_input`, `replayable`,
`notices`, `meta`) travel as `cauterweb.*` attributes on the root span.

    python -m traces.export lifecycle/fixtures/demo/corpus.jsonl \
        lifecycle/fixtures/demo/corpus.otlp.json
"""

import hashlib
import json
import sys
from datetime import datetime
from pathlib import Path

STEP_MS = 1000
AGENT = "cauterweb-demo-agent"


def _id(seed: str, length: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:length]


def _value(value: object) -> dict:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    return {"stringValue": json.dumps(value, ensure_ascii=False, sort_keys=True)}


def _attributes(pairs: dict) -> list[dict]:
    return [{"key": k, "value": _value(v)} for k, v in pairs.items() if v is not None]


def _nanos(started_at: str, offset_ms: int) -> str:
    start = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
    return str(int(start.timestamp()) * 1_000_000_000 + offset_ms * 1_000_000)


EXTENSIONS = ("id", "corpus", "expected_rule", "replay_input", "replayable", "notices", "meta")


def trajectory_spans(line: dict) -> list[dict]:
    """The spans of one trajectory: an `invoke_agent` root and one `execute_tool` per step."""
    steps = line.get("steps") or []
    return [_root_span(line, len(steps))] + [_step_span(line, i, s) for i, s in enumerate(steps)]


def _root_span(line: dict, n_steps: int) -> dict:
    started = line.get("started_at") or "1970-01-01T00:00:00Z"
    end = _nanos(started, STEP_MS * (n_steps + 1))
    extensions = {
        f"cauterweb.{key}": line[key]
        for key in EXTENSIONS
        if line.get(key) not in (None, [], {}, "")
    }
    summary = (line.get("outcome") or {}).get("summary", "")
    return {
        "traceId": _id(f"trace:{line['id']}", 32),
        "spanId": _id(f"root:{line['id']}", 16),
        "name": f"invoke_agent {AGENT}",
        "kind": 1,
        "startTimeUnixNano": _nanos(started, 0),
        "endTimeUnixNano": end,
        "attributes": _attributes(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": AGENT,
                "gen_ai.conversation.id": line.get("session_id") or line["id"],
                "gen_ai.input.messages": [
                    {"role": "user", "parts": [{"type": "text", "content": line["task"]}]}
                ],
                **extensions,
            }
        ),
        "events": [
            {
                "timeUnixNano": end,
                "name": "gen_ai.evaluation.result",
                "attributes": _attributes(
                    {"gen_ai.evaluation.name": name, "gen_ai.evaluation.score.value": float(value)}
                ),
            }
            for name, value in sorted((line.get("metrics") or {}).items())
        ],
        "status": {"code": 2, "message": summary} if line["kind"] == "failure" else {"code": 1},
    }


def _step_span(line: dict, i: int, step: dict) -> dict:
    started = line.get("started_at") or "1970-01-01T00:00:00Z"
    error = step.get("error") or ""
    return {
        "traceId": _id(f"trace:{line['id']}", 32),
        "spanId": _id(f"step:{line['id']}:{i}", 16),
        "parentSpanId": _id(f"root:{line['id']}", 16),
        "name": f"execute_tool {step.get('tool', 'tool')}",
        "kind": 1,
        "startTimeUnixNano": _nanos(started, STEP_MS * (i + 1)),
        "endTimeUnixNano": _nanos(started, STEP_MS * (i + 1) + STEP_MS // 2),
        "attributes": _attributes(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": step.get("tool", "tool"),
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": "call_" + _id(f"call:{line['id']}:{i}", 12),
                "gen_ai.tool.call.arguments": {"command": step.get("input", "")},
                "gen_ai.tool.call.result": step.get("output", ""),
                "error.type": "tool_error" if error else None,
            }
        ),
        "status": {"code": 2, "message": error} if error else {},
    }


def corpus_to_otlp(lines: list[dict], *, service: str = "cauterweb-demo") -> dict:
    """An ExportTraceServiceRequest (OTLP/JSON) holding every trajectory's spans."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": service})},
                "scopeSpans": [
                    {
                        "scope": {"name": "cauterweb.traces.export", "version": "1"},
                        "spans": [span for line in lines for span in trajectory_spans(line)],
                    }
                ],
            }
        ]
    }


def main(argv: list[str]) -> None:
    source, target = Path(argv[0]), Path(argv[1])
    lines = [
        json.loads(raw) for raw in source.read_text(encoding="utf-8").splitlines() if raw.strip()
    ]
    target.write_text(json.dumps(corpus_to_otlp(lines), indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
