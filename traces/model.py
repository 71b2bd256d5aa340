"""The plain trajectory every trace format becomes (semantics §2, §19), and the shared rules for
its kind, outcome and metrics. No Django: the service hands the result to the corpus import.

A trajectory here is the corpus line of semantics §2: `id`, `kind`, `task`, `steps`, `outcome`,
`metrics`, `signature` (empty: derived on import), `session_id`, `started_at`, `meta` (with the
source record under `meta["source"]`), and optionally `notices`, `corpus`, `expected_rule`,
`replay_input`, `replayable`. A step is `{tool, input, arguments, output, error, status}` plus
the source's ids (`span_id`, `call_id`) and times.
"""

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

FORMATS = ("otlp", "openinference", "langfuse", "inspect")
# Session-level fields a source may carry under the `cauterweb.` attribute namespace, for
# the parts of a corpus line no tracing convention has a name for.
EXTENSION_FIELDS = (
    "id",
    "kind",
    "corpus",
    "expected_rule",
    "replay_input",
    "replayable",
    "notices",
    "signature",
    "meta",
)
PASS_LABELS = frozenset(
    {
        "pass",
        "passed",
        "correct",
        "true",
        "yes",
        "success",
        "succeeded",
        "c",
        "relevant",
        "resolved",
    }
)
FAIL_LABELS = frozenset(
    {"fail", "failed", "incorrect", "false", "no", "failure", "i", "not_relevant", "unresolved"}
)
# The verdict of the outcome: an evaluation of one of these names decides the kind when the
# session's own status does not.
OUTCOME_METRICS = ("outcome_correct",)
ID_LIMIT = 128


@dataclass(frozen=True)
class RecordError:
    """A bad record of a trace file: where it is (record index, span id, line) and why."""

    record: str
    field: str
    message: str

    def __str__(self) -> str:
        where = self.record + (f", field '{self.field}'" if self.field else "")
        return f"{where}: {self.message}"

    def as_dict(self) -> dict:
        return {"record": self.record, "field": self.field, "message": self.message}


class TraceRejected(Exception):
    """Nothing was imported; `errors` names every bad record."""

    def __init__(self, errors: list[RecordError]):
        self.errors = errors
        shown = "\n".join(str(e) for e in errors[:50])
        more = f"\n… and {len(errors) - 50} more" if len(errors) > 50 else ""
        super().__init__(f"{len(errors)} error(s), nothing imported:\n{shown}{more}")


def metric_name(raw: str) -> str:
    """An evaluation's name as a metric name: `Task Completion`, `taskCompletion` and
    `task-completion` are all `task_completion`."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(raw).strip())
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def score_value(value: object, label: object = None) -> float | None:
    """A score as a number in [0, 1], or None when it is not one (kept in meta instead)."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        number = float(value)
        return number if 0.0 <= number <= 1.0 else None
    if isinstance(value, str):
        try:
            return score_value(float(value))
        except ValueError:
            label = label if label is not None else value
    if isinstance(label, str):
        word = label.strip().lower()
        if word in PASS_LABELS:
            return 1.0
        if word in FAIL_LABELS:
            return 0.0
    return None


def add_score(
    metrics: dict, unscored: dict, name: str, value: object, label: object = None
) -> None:
    number = score_value(value, label)
    key = metric_name(name)
    if not key:
        return
    if number is None:
        unscored[key] = value if value is not None else label
    else:
        metrics[key] = number


def decide_kind(*, root_failed: bool | None, metrics: dict, notices: list) -> str:
    """failure / success / near_miss from what the source says (semantics §1, §19).

    A session fails when its root says so, or when no root status is known and the outcome
    verdict is below 0.5. One that succeeded but showed a notice is a near miss. A success that
    recovered from a failed step is still a success: that recovery is what a protected win
    (semantics §7.2) looks like."""
    verdict = next((metrics[m] for m in OUTCOME_METRICS if m in metrics), None)
    if root_failed or (root_failed is None and verdict is not None and verdict < 0.5):
        return "failure"
    return "near_miss" if notices else "success"


def outcome(kind: str, message: str = "") -> dict:
    status = {"failure": "failed", "near_miss": "recovered", "success": "succeeded"}[kind]
    return {"status": status, "summary": message} if message else {"status": status}


def iso_from_unix_nano(value: object) -> str | None:
    try:
        nanos = int(value)
    except (TypeError, ValueError):
        return None
    if nanos <= 0:
        return None
    return datetime.fromtimestamp(nanos / 1e9, tz=UTC).isoformat().replace("+00:00", "Z")


def iso_time(value: object) -> str | None:
    """Any timestamp a source writes (ISO 8601 text, epoch seconds) as ISO 8601 UTC."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(float(value), tz=UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, str) and value.strip():
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return None


def maybe_json(value: object) -> object:
    """Attribute values that hold JSON text (arguments, messages) as data."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def message_text(value: object) -> str:
    """The text of an input: a string, a chat message list (the last user turn), or parts."""
    value = maybe_json(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        users = [m for m in value if isinstance(m, dict) and m.get("role") in ("user", "human")]
        for message in reversed(users or value):
            text = message_text(message)
            if text:
                return text
        return ""
    if isinstance(value, dict):
        for key in (
            "messages",
            "content",
            "text",
            "parts",
            "input",
            "inputs",
            "query",
            "question",
            "task",
            "value",
        ):
            if key in value:
                text = message_text(value[key])
                if text:
                    return text
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return "" if value is None else str(value)


def trajectory_id(prefix: str, session: str) -> str:
    """A stable trajectory id from the session's own id: the same export imports to the same
    ids, so a re-import is idempotent."""
    value = f"{prefix}-{session}" if prefix else session
    return value[:ID_LIMIT]


def apply_extensions(trajectory: dict, extensions: dict) -> dict:
    """Fields the source carries under `cauterweb.*`, over the derived ones."""
    for key in EXTENSION_FIELDS:
        if key in extensions:
            value = maybe_json(extensions[key])
            if key == "meta" and isinstance(value, dict):
                trajectory["meta"] = {**value, **trajectory.get("meta", {})}
            else:
                trajectory[key] = value
    return trajectory


def build(
    *,
    id: str,
    task: str,
    steps: list[dict],
    metrics: dict,
    unscored: dict,
    root_failed: bool | None,
    root_message: str,
    session_id: str,
    started_at: str | None,
    source: dict,
    source_format: str,
    extensions: dict | None = None,
) -> dict:
    """One trajectory in the shape of a corpus line; the signature is left empty to derive."""
    extensions = extensions or {}
    notices = maybe_json(extensions.get("notices")) or []
    kind = decide_kind(root_failed=root_failed, metrics=metrics, notices=notices)
    meta = {"source_format": source_format, "source": source}
    if unscored:
        meta["scores_not_in_unit_range"] = unscored
    trajectory = {
        "id": id,
        "kind": kind,
        "task": task,
        "steps": steps,
        "outcome": outcome(kind, root_message),
        "metrics": metrics,
        "signature": [],
        "session_id": session_id[:ID_LIMIT],
        "started_at": started_at,
        "meta": meta,
    }
    return apply_extensions(trajectory, extensions)


def step(
    *,
    tool: str,
    arguments: object = None,
    output: object = None,
    error: str = "",
    failed: bool = False,
    **ids: object,
) -> dict:
    """One tool call: its name, arguments (as data) and a text form of them, result, error."""
    arguments = maybe_json(arguments)
    as_input = arguments if isinstance(arguments, str) else _input_text(arguments)
    out = {
        "tool": tool,
        "input": as_input,
        "arguments": arguments,
        "output": output
        if isinstance(output, str)
        else ("" if output is None else json.dumps(output, ensure_ascii=False, sort_keys=True)),
        "error": error,
        "status": "error" if failed or error else "ok",
    }
    out.update({k: v for k, v in ids.items() if v not in (None, "")})
    return out


def _input_text(arguments: object) -> str:
    if isinstance(arguments, dict):
        for key in ("command", "cmd", "script"):
            if isinstance(arguments.get(key), str):
                return arguments[key]
    if arguments is None:
        return ""
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)
