"""Validation of input, once for every entry point (API, command line, dashboard, packs).

Line-oriented input (JSON Lines files and API batches) is read into numbered objects; every
check names the line and the field at fault, so a caller can report all bad lines and write
nothing. The checks of a field are here and nowhere else: the models of `lifecycle.inputs`
(reports, candidates) call them for each field, and the API publishes those models.
"""

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.utils.dateparse import parse_datetime

from . import jsonsafe, limits
from .metrics import Registry, load_registry

MAX_RULE_ID = limits.RULE_ID


@dataclass(frozen=True)
class LineError:
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}" + (f", field '{self.field}'" if self.field else "")
        return f"{where}: {self.message}"

    def as_dict(self) -> dict:
        return {"line": self.line, "field": self.field, "message": self.message}


class ImportRejected(Exception):
    """Nothing was written; `errors` names every bad line."""

    def __init__(self, errors: list[LineError]):
        self.errors = errors
        shown = "\n".join(str(e) for e in errors[:50])
        more = f"\n… and {len(errors) - 50} more" if len(errors) > 50 else ""
        super().__init__(f"{len(errors)} error(s), nothing imported:\n{shown}{more}")


@dataclass
class ImportResult:
    created: int = 0
    unchanged: int = 0
    updated: int = 0
    ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"created": self.created, "unchanged": self.unchanged, "updated": self.updated}


def read_jsonl(lines: Iterable[str | bytes]) -> Iterator[tuple[int, object, LineError | None]]:
    """(line number, parsed object, error). Blank lines are skipped. JSON is read strictly
    (`lifecycle.jsonsafe`): invalid UTF-8, NUL, lone surrogates, NaN/Infinity, numbers out of
    range and nesting deeper than 64 are line errors, naming the path of a bad string."""
    for number, obj, error in jsonsafe.iter_jsonl(lines):
        yield number, obj, None if error is None else json_line_error(error, number)


def json_line_error(error: jsonsafe.JsonRejected, number: int) -> LineError:
    where = f" (column {error.column})" if error.column is not None else ""
    return LineError(number, error.path, f"{error.message}{where}")


# ---- times ---------------------------------------------------------------------------------
# Times from outside, parsed as ISO 8601 and kept inside a range every layer can represent.
# Python's datetime reaches from year 1 to 9999 in local time only: `0001-01-01T00:00:00+01:00`
# parses, then fails when converted to UTC (it is 1 BC there), and `9999-12-31T23:00:00-05:00`
# is year 10000 in UTC. PostgreSQL stores both and hands back values Python cannot build, so
# one such report made every later read of its session fail. Any time we store is therefore
# checked against a sane range, after normalising to UTC, before it reaches the database.

# Agents and traces are younger than the Unix epoch; nothing is scheduled past 2200.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
# An ISO 8601 date-time with nanoseconds and an offset is 35 characters; anything much longer is
# not one, and is refused before a parser spends time on it.
MAX_TIME_TEXT = 64


class TimeOutOfRange(ValueError):
    """A well-formed time outside [EARLIEST, LATEST] (UTC)."""


def check_time_range(when: datetime) -> datetime:
    """`when` in UTC (a naive value is taken as UTC), or TimeOutOfRange."""
    if when.tzinfo is None or when.utcoffset() is None:
        when = when.replace(tzinfo=UTC)
    # Converting year 1 or year 9999 with an offset overflows: decide on the year first, with a
    # day's margin either side, and convert only what is near the range.
    if not EARLIEST.year - 1 <= when.year <= LATEST.year:
        raise _out_of_range(when)
    utc = when.astimezone(UTC)
    if not EARLIEST <= utc <= LATEST:
        raise _out_of_range(when)
    return utc


def parse_time(value: object) -> datetime:
    """An ISO 8601 string → an aware UTC datetime inside the range; ValueError with a message
    that says what was wrong (not a string, not a date-time, or out of range)."""
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 string")
    text = value.strip()
    if len(text) > MAX_TIME_TEXT:
        raise ValueError(f"is not an ISO 8601 date-time (longer than {MAX_TIME_TEXT} characters)")
    try:
        parsed = parse_datetime(text)
    except ValueError as exc:  # well-formed but impossible: 30 February, a 25-hour offset
        raise ValueError(f"{text!r} is not a valid date-time: {exc}") from None
    if parsed is None:
        raise ValueError(f"{text!r} is not an ISO 8601 date-time")
    return check_time_range(parsed)


def _out_of_range(when: datetime) -> TimeOutOfRange:
    return TimeOutOfRange(
        f"{when.isoformat()} is outside the accepted range "
        f"{EARLIEST.isoformat()} .. {LATEST.isoformat()} (UTC)"
    )


# ---- metrics, rules, trajectories ---------------------------------------------------------


def parse_metrics(value: object) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ValueError("must be an object of metric name to number")
    if len(value) > limits.METRICS:
        raise ValueError(f"has {len(value):,} metrics; the limit is {limits.METRICS}")
    out = {}
    for name, number in value.items():
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise ValueError(f"{name!r} must be a number, got {number!r}")
        if not 0.0 <= float(number) <= 1.0:
            raise ValueError(f"{name!r} must be in [0, 1], got {number!r}")
        out[str(name)] = float(number)
    return out


def numbered(objects: Iterable[object]) -> list[tuple[int, object, LineError | None]]:
    """Objects already decoded (an API batch): numbered from 1 like lines of a file."""
    return [(n, obj, None) for n, obj in enumerate(objects, start=1)]


class FilterError(ValueError):
    """A filter value outside the vocabulary; `field` names the filter at fault."""

    def __init__(self, message: str, *, field: str):
        super().__init__(message)
        self.field = field


class InvalidRule(ValueError):
    """A candidate that cannot be recorded; `field` names the field at fault."""

    def __init__(self, message: str, *, field: str = ""):
        super().__init__(message)
        self.field = field


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(value) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def check_metric(name: str, registry: Registry | None = None) -> None:
    """A rule's metric must be in the registry (an empty metric means "any notice")."""
    if not name:
        return
    registry = registry if registry is not None else load_registry()
    if registry.resolve(name) is None:
        known = ", ".join(sorted(registry))
        raise InvalidRule(f"unknown metric {name!r} (known: {known})", field="metric")


def check_rule_id(rule_id: object) -> str | None:
    """A given rule id, stripped; None when none was given."""
    if rule_id is None:
        return None
    if not isinstance(rule_id, str) or not rule_id.strip() or len(rule_id) > MAX_RULE_ID:
        raise InvalidRule(
            f"id must be a non-empty string of at most {MAX_RULE_ID} characters", field="id"
        )
    return rule_id.strip()


def rule_text(value: object, field: str, limit: int, missing: str, required: bool = True) -> str:
    """A stripped text within its limit (`lifecycle.limits`) that storage can hold."""
    if not isinstance(value, str) or (required and not value.strip()):
        raise InvalidRule(f"{field} {missing}".strip(), field=field)
    value = value.strip()
    try:
        limits.check_length(value, field=field, limit=limit)
    except limits.TooLarge as exc:
        raise InvalidRule(str(exc), field=field) from None
    problem = jsonsafe.string_problem(value)
    if problem is not None:
        raise InvalidRule(f"{field} contains {problem[1]}", field=field)
    return value


def review_reason(reason: object) -> str:
    """A reviewer's reason to retire a rule by hand: required, bounded, storable."""
    return rule_text(
        reason or "", "reason", limits.REVIEW_REASON, "is required to retire a rule by hand"
    )


def trajectory_size_errors(obj: dict, *, json_bytes: bool = True) -> list[tuple[str, str]]:
    """(field, message) for every part of a corpus line over its limit (`lifecycle.limits`);
    the shapes are checked beside the other corpus fields. Without `json_bytes`, the sizes of
    the JSON parts are left to the caller (`trajectory_json_size_errors`): the corpus import
    measures them on the JSON it writes anyway."""
    wrong = []
    task, steps = obj.get("task"), obj.get("steps")
    if isinstance(task, str) and len(task) > limits.TASK:
        wrong.append(("task", f"is {len(task):,} characters; the limit is {limits.TASK:,}"))
    if isinstance(steps, list) and len(steps) > limits.STEPS:
        wrong.append(("steps", f"has {len(steps):,} steps; the limit is {limits.STEPS:,}"))
    if json_bytes:
        wrong += trajectory_json_size_errors(obj)
    expected = obj.get("expected_rule")
    if isinstance(expected, dict):
        for part, limit in (("trigger", limits.TRIGGER), ("directive", limits.DIRECTIVE)):
            text = expected.get(part)
            if isinstance(text, str) and len(text) > limit:
                wrong.append((f"expected_rule.{part}", f"is over the limit of {limit:,}"))
    return wrong


def trajectory_json_size_errors(obj: dict) -> list[tuple[str, str]]:
    """(field, message) for every JSON part of a corpus line over its byte limit."""
    steps = obj.get("steps")
    each_step = enumerate(steps) if isinstance(steps, list) else ()
    return _json_size_errors(
        [
            *((f"steps[{i}]", step, limits.STEP_BYTES) for i, step in each_step),
            ("steps", steps, limits.STEPS_BYTES),
            ("outcome", obj.get("outcome"), limits.OUTCOME_BYTES),
            ("meta", obj.get("meta"), limits.META_BYTES),
            ("replay_input", obj.get("replay_input"), limits.REPLAY_INPUT_BYTES),
        ]
    )


def _json_size_errors(parts: list[tuple[str, object, int]]) -> list[tuple[str, str]]:
    wrong = []
    for name, value, limit in parts:
        try:
            limits.check_json_size(value, field=name, limit=limit)
        except limits.TooLarge as exc:
            wrong.append((name, str(exc).removeprefix(f"{name} ")))
    return wrong


def rule_content_hash(fields: dict) -> str:
    keys = ("trigger", "directive", "scope", "metric", "signature", "source_case")
    return content_hash({k: fields[k] if k != "signature" else sorted(fields[k]) for k in keys})
