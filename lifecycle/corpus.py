"""Corpus import (semantics §2): parse JSON Lines, validate every line, then write in bulk.

Import is atomic: a file with any bad line writes nothing and reports every bad line with its
line number and the field at fault. Re-importing the same ids is idempotent.
"""

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from . import atoms as atom_lib
from .models import Trajectory, TrajectoryAtom, TrajectoryKind
from .services import content_hash
from .traces.derive import with_derived_signature

KINDS = {k.value for k in TrajectoryKind}
REQUIRED = ("id", "kind", "task", "steps", "outcome", "metrics")
BATCH = 2000


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
        parsed = timezone.make_aware(parsed, timezone.UTC)
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


def parse_trajectory(number: int, obj: object) -> tuple[dict | None, list[LineError]]:
    """Validate one corpus line into model fields; collects every error of the line."""
    if not isinstance(obj, dict):
        return None, [LineError(number, "", "each line must be a JSON object")]
    # semantics §19: a trajectory without a signature gets one derived from its steps. The
    # content hash stays that of the line as given, so re-importing it is still a no-op.
    original = obj
    if not obj.get("signature"):
        obj = with_derived_signature(obj)
    errors: list[LineError] = []

    def bad(field_name: str, message: str) -> None:
        errors.append(LineError(number, field_name, message))

    for name in REQUIRED:
        if name not in obj:
            bad(name, "is required")
    if errors:
        return None, errors

    tid = obj["id"]
    if not isinstance(tid, str) or not tid.strip() or len(tid) > 128:
        bad("id", "must be a non-empty string of at most 128 characters")
    if not isinstance(obj["kind"], str) or obj["kind"] not in KINDS:
        bad("kind", f"must be one of {', '.join(sorted(KINDS))}, got {obj['kind']!r}")
    if not isinstance(obj["task"], str) or not obj["task"].strip():
        bad("task", "must be a non-empty string")
    if not isinstance(obj["steps"], list):
        bad("steps", "must be a list of steps")
    try:
        metrics = parse_metrics(obj["metrics"])
    except ValueError as exc:
        bad("metrics", str(exc))
        metrics = {}
    try:
        signature = atom_lib.parse_atoms(obj["signature"])
    except atom_lib.BadAtom as exc:
        bad("signature", str(exc))
        signature = []
    try:
        notices = atom_lib.parse_atoms(obj.get("notices") or [], notices_only=True)
    except atom_lib.BadAtom as exc:
        bad("notices", str(exc))
        notices = []
    started_at = None
    if obj.get("started_at") is not None:
        try:
            started_at = parse_time(obj["started_at"])
        except ValueError as exc:
            bad("started_at", str(exc))
    expected = obj.get("expected_rule")
    if expected is not None:
        if not isinstance(expected, dict):
            bad("expected_rule", "must be an object with 'trigger' and 'directive'")
        else:
            for part in ("trigger", "directive"):
                if not isinstance(expected.get(part), str) or not expected[part].strip():
                    bad(f"expected_rule.{part}", "is required and must be a non-empty string")
    replayable = obj.get("replayable")
    if replayable is not None and not isinstance(replayable, bool):
        bad("replayable", "must be true or false")
    for name in ("session_id", "corpus"):
        value = obj.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > 128):
            bad(name, "must be a string of at most 128 characters")
    meta = obj.get("meta")
    if meta is not None and not isinstance(meta, dict):
        bad("meta", "must be an object")
    if errors:
        return None, errors

    steps = obj["steps"]
    return {
        "id": tid.strip(),
        "kind": obj["kind"],
        "task": obj["task"],
        "steps": steps,
        "outcome": obj["outcome"],
        "metrics": metrics,
        "signature": signature,
        "notices": notices,
        "session_id": obj.get("session_id") or "",
        "started_at": started_at,
        "corpus": obj.get("corpus") or "",
        "expected_rule": expected,
        # semantics §2: replayable defaults to true when the trajectory has steps.
        "replayable": bool(steps) if replayable is None else replayable,
        "replay_input": obj.get("replay_input"),
        "meta": meta or {},
        "content_hash": content_hash(original),
    }, []


def trajectory_atoms(fields: dict) -> list[str]:
    """Atoms indexed for matching: the signature plus the notices (semantics §11)."""
    return list(dict.fromkeys([*fields["signature"], *fields["notices"]]))


def import_corpus(lines: Iterable[str | bytes], *, replace: bool = False) -> ImportResult:
    """Validate the whole file, then write it in one transaction with bulk statements."""
    parsed: dict[str, tuple[int, dict]] = {}
    errors: list[LineError] = []
    for number, obj, error in read_jsonl(lines):
        if error:
            errors.append(error)
            continue
        fields, line_errors = parse_trajectory(number, obj)
        if line_errors:
            errors.extend(line_errors)
            continue
        if fields["id"] in parsed:
            first = parsed[fields["id"]][0]
            errors.append(
                LineError(number, "id", f"{fields['id']!r} already appears on line {first}")
            )
            continue
        parsed[fields["id"]] = (number, fields)
    if errors:
        raise ImportRejected(errors)

    result = ImportResult(ids=list(parsed))
    now = timezone.now()
    with transaction.atomic():
        stored: dict[str, str] = {}
        ids = list(parsed)
        for start in range(0, len(ids), BATCH * 5):
            chunk = ids[start : start + BATCH * 5]
            stored.update(Trajectory.objects.filter(pk__in=chunk).values_list("id", "content_hash"))
        new, changed = [], []
        for tid, (number, fields) in parsed.items():
            if tid not in stored:
                new.append(fields)
            elif stored[tid] == fields["content_hash"]:
                result.unchanged += 1
            else:
                changed.append((number, fields))
        if changed and not replace:
            raise ImportRejected(
                [
                    LineError(
                        n,
                        "id",
                        f"{f['id']!r} is already stored with other content "
                        "(use --replace to overwrite)",
                    )
                    for n, f in changed
                ]
            )
        if changed:
            changed_ids = [f["id"] for _, f in changed]
            TrajectoryAtom.objects.filter(trajectory_id__in=changed_ids).delete()
            update_fields = [k for k in changed[0][1] if k != "id"] + ["imported_at"]
            Trajectory.objects.bulk_update(
                [Trajectory(**f, imported_at=now) for _, f in changed],
                update_fields,
                batch_size=BATCH,
            )
            _bulk_atoms([f for _, f in changed])
            result.updated = len(changed)
        if new:
            _insert_trajectories(new, imported_at=now)
            result.created = len(new)
    return result


TRAJECTORY_COLUMNS = (
    "id",
    "kind",
    "task",
    "steps",
    "outcome",
    "metrics",
    "signature",
    "notices",
    "session_id",
    "started_at",
    "corpus",
    "expected_rule",
    "replayable",
    "replay_input",
    "meta",
    "content_hash",
    "imported_at",
)
JSON_COLUMNS = {
    "steps",
    "outcome",
    "metrics",
    "signature",
    "notices",
    "expected_rule",
    "replay_input",
    "meta",
}


def _insert_trajectories(rows: list[dict], *, imported_at: datetime) -> None:
    """New trajectories and their atoms, written below the ORM: building a model instance per
    row costs more than the database write itself, and a corpus can hold millions of rows."""
    ops = connection.ops

    def cell(column: str, value):
        if column in JSON_COLUMNS:
            return None if value is None else json.dumps(value, ensure_ascii=False)
        if column in ("started_at", "imported_at") and value is not None:
            return ops.adapt_datetimefield_value(value)
        return value

    values = (
        tuple(cell(c, imported_at if c == "imported_at" else f[c]) for c in TRAJECTORY_COLUMNS)
        for f in rows
    )
    _copy_rows(Trajectory._meta.db_table, TRAJECTORY_COLUMNS, values)
    _bulk_atoms(rows)


def _copy_rows(table: str, columns: tuple[str, ...], rows: Iterable[tuple]) -> None:
    quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.copy(
                f"COPY {connection.ops.quote_name(table)} ({quoted}) FROM STDIN"
            ) as copy:
                for row in rows:
                    copy.write_row(row)
            return
        marks = ", ".join(["%s"] * len(columns))
        sql = f"INSERT INTO {connection.ops.quote_name(table)} ({quoted}) VALUES ({marks})"
        batch: list[tuple] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= BATCH * 5:
                cursor.executemany(sql, batch)
                batch = []
        if batch:
            cursor.executemany(sql, batch)


def _bulk_atoms(rows: list[dict]) -> None:
    _copy_rows(
        TrajectoryAtom._meta.db_table,
        ("trajectory_id", "atom"),
        ((f["id"], atom) for f in rows for atom in trajectory_atoms(f)),
    )
