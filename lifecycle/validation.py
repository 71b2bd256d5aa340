"""Validation of input, once for every entry point (API, command line, dashboard, packs).

Line-oriented input (JSON Lines files and API batches) is read into numbered objects; every
check names the line and the field at fault, so a caller can report all bad lines and write
nothing. Candidate fields, metric names and rule ids are checked here and nowhere else.
"""

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from . import atoms as atom_lib
from .metrics import Registry, load_registry

MAX_RULE_ID = 64


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
    """(line number, parsed object, error). Blank lines are skipped."""
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError:
                yield number, None, LineError(number, "", "not valid UTF-8")
                continue
        if not raw.strip():
            continue
        try:
            yield number, json.loads(raw), None
        except json.JSONDecodeError as exc:
            yield (
                number,
                None,
                LineError(number, "", f"not valid JSON: {exc.msg} at column {exc.colno}"),
            )


def parse_time(value: object) -> datetime | None:
    """ISO 8601 → aware datetime (naive values are taken as UTC); raises ValueError."""
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 string")
    parsed = parse_datetime(value.strip())
    if parsed is None:
        raise ValueError(f"{value!r} is not an ISO 8601 date-time")
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    return parsed


def parse_metrics(value: object) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ValueError("must be an object of metric name to number")
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


def unknown_keys(number: int, obj: dict, allowed: set[str]) -> list[LineError]:
    return [
        LineError(number, key, f"unknown field (allowed: {', '.join(sorted(allowed))})")
        for key in obj
        if key not in allowed
    ]


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


def candidate_fields(
    *,
    trigger: str,
    directive: str,
    scope: str = "global",
    metric: str = "",
    signature: list | None = None,
    tags: list | None = None,
    source_case: str = "",
    source_notice: str = "",
) -> dict:
    """Validate and normalise a candidate's fields; raises InvalidRule naming the field."""
    trigger = (trigger or "").strip() if isinstance(trigger, str) else trigger
    directive = (directive or "").strip() if isinstance(directive, str) else directive
    if not isinstance(trigger, str) or not trigger:
        raise InvalidRule("trigger is required (the 'when …' part)", field="trigger")
    if not isinstance(directive, str) or not directive:
        raise InvalidRule("directive is required (the 'do …' part)", field="directive")
    if not isinstance(scope, str) or not scope.strip() or len(scope) > 128:
        raise InvalidRule("scope must be a non-empty name of at most 128 characters", field="scope")
    if not isinstance(metric, str):
        raise InvalidRule("metric must be a metric name", field="metric")
    try:
        signature = atom_lib.parse_atoms(signature if signature is not None else [])
    except atom_lib.BadAtom as exc:
        raise InvalidRule(f"signature: {exc}", field="signature") from None
    if tags is None:
        tags = []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidRule("tags must be a list of strings", field="tags")
    if not isinstance(source_case, str) or not isinstance(source_notice, str):
        raise InvalidRule("source_case and source_notice must be strings", field="source_case")
    return {
        "trigger": trigger,
        "directive": directive,
        "scope": scope.strip(),
        "metric": metric.strip(),
        "signature": signature,
        "tags": sorted(set(tags)),
        "source_case": source_case.strip(),
        "source_notice": source_notice.strip(),
    }


def rule_content_hash(fields: dict) -> str:
    keys = ("trigger", "directive", "scope", "metric", "signature", "source_case")
    return content_hash({k: fields[k] if k != "signature" else sorted(fields[k]) for k in keys})
