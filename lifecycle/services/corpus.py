"""Corpus import (semantics §2): parse JSON Lines, validate every line, then write in bulk.

Import is atomic: a file with any bad line writes nothing and reports every bad line with its
line number and the field at fault. Re-importing the same ids is idempotent.
"""

import json
from collections.abc import Iterable
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from lifecycle.validation import (
    ImportRejected,
    ImportResult,
    LineError,
    content_hash,
    parse_metrics,
    parse_time,
    read_jsonl,
    trajectory_size_errors,
)

from .. import atoms as atom_lib
from .. import journal
from ..journal import EventType
from ..models import Rule, Trajectory, TrajectoryAtom, TrajectoryKind
from ..states import Actor
from ..traces.derive import with_derived_signature
from .follow_ups import rules_rescore_enqueue

KINDS = {k.value for k in TrajectoryKind}
REQUIRED = ("id", "kind", "task", "steps", "outcome", "metrics")
BATCH = 2000


def _shape_errors(obj: dict) -> list[tuple[str, str]]:
    """(field, message) for every plain field of the wrong shape."""
    wrong = []
    tid = obj["id"]
    if not isinstance(tid, str) or not tid.strip() or len(tid) > 128:
        wrong.append(("id", "must be a non-empty string of at most 128 characters"))
    if not isinstance(obj["kind"], str) or obj["kind"] not in KINDS:
        wrong.append(("kind", f"must be one of {', '.join(sorted(KINDS))}, got {obj['kind']!r}"))
    if not isinstance(obj["task"], str) or not obj["task"].strip():
        wrong.append(("task", "must be a non-empty string"))
    if not isinstance(obj["steps"], list):
        wrong.append(("steps", "must be a list of steps"))
    expected = obj.get("expected_rule")
    if expected is not None and not isinstance(expected, dict):
        wrong.append(("expected_rule", "must be an object with 'trigger' and 'directive'"))
    elif expected is not None:
        for part in ("trigger", "directive"):
            if not isinstance(expected.get(part), str) or not expected[part].strip():
                wrong.append(
                    (f"expected_rule.{part}", "is required and must be a non-empty string")
                )
    if obj.get("replayable") is not None and not isinstance(obj["replayable"], bool):
        wrong.append(("replayable", "must be true or false"))
    for name in ("session_id", "corpus"):
        value = obj.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > 128):
            wrong.append((name, "must be a string of at most 128 characters"))
    if obj.get("meta") is not None and not isinstance(obj["meta"], dict):
        wrong.append(("meta", "must be an object"))
    return wrong + trajectory_size_errors(obj)


def _parsed_values(obj: dict) -> tuple[dict, list[tuple[str, str]]]:
    """The fields that need parsing (metrics, atoms, time), and (field, message) errors."""
    parsers = {
        "metrics": lambda: parse_metrics(obj["metrics"]),
        "signature": lambda: atom_lib.parse_atoms(obj["signature"]),
        "notices": lambda: atom_lib.parse_atoms(obj.get("notices") or [], notices_only=True),
        "started_at": lambda: (
            parse_time(obj["started_at"]) if obj.get("started_at") is not None else None
        ),
    }
    values, wrong = {}, []
    for name, parse in parsers.items():
        try:
            values[name] = parse()
        except (ValueError, atom_lib.BadAtom) as exc:
            wrong.append((name, str(exc)))
    return values, wrong


def parse_trajectory(number: int, obj: object) -> tuple[dict | None, list[LineError]]:
    """Validate one corpus line into model fields; collects every error of the line."""
    if not isinstance(obj, dict):
        return None, [LineError(number, "", "each line must be a JSON object")]
    # semantics §19: a trajectory without a signature gets one derived from its steps. The
    # content hash stays that of the line as given, so re-importing it is still a no-op.
    original = obj
    if not obj.get("signature"):
        obj = with_derived_signature(obj)
    missing = [LineError(number, name, "is required") for name in REQUIRED if name not in obj]
    if missing:
        return None, missing
    values, wrong = _parsed_values(obj)
    errors = [LineError(number, f, m) for f, m in (*_shape_errors(obj), *wrong)]
    if errors:
        return None, errors
    steps, replayable = obj["steps"], obj.get("replayable")
    return {
        "id": obj["id"].strip(),
        "kind": obj["kind"],
        "task": obj["task"],
        "steps": steps,
        "outcome": obj["outcome"],
        **values,
        "session_id": obj.get("session_id") or "",
        "corpus": obj.get("corpus") or "",
        "expected_rule": obj.get("expected_rule"),
        # semantics §2: replayable defaults to true when the trajectory has steps.
        "replayable": bool(steps) if replayable is None else replayable,
        "replay_input": obj.get("replay_input"),
        "meta": obj.get("meta") or {},
        "content_hash": content_hash(original),
    }, []


def trajectory_atoms(fields: dict) -> list[str]:
    """Atoms indexed for matching: the signature plus the notices (semantics §11)."""
    return list(dict.fromkeys([*fields["signature"], *fields["notices"]]))


def _parse_corpus(lines: Iterable[str | bytes]) -> dict[str, tuple[int, dict]]:
    """id → (line, fields); raises ImportRejected naming every bad line."""
    parsed: dict[str, tuple[int, dict]] = {}
    errors: list[LineError] = []
    for number, obj, error in read_jsonl(lines):
        fields, line_errors = (None, [error]) if error else parse_trajectory(number, obj)
        if not line_errors and fields["id"] in parsed:
            first = parsed[fields["id"]][0]
            line_errors = [
                LineError(number, "id", f"{fields['id']!r} already appears on line {first}")
            ]
        if line_errors:
            errors.extend(line_errors)
        else:
            parsed[fields["id"]] = (number, fields)
    if errors:
        raise ImportRejected(errors)
    return parsed


def import_corpus(
    lines: Iterable[str | bytes], *, replace: bool = False, actor: Actor | None = None
) -> ImportResult:
    """Validate the whole file, then write it in one transaction with bulk statements.
    Trajectories already stored with other content are refused unless `replace`. With an
    `actor` (an API token), a change is journaled as `corpus_imported` in the same transaction;
    the command line loads corpora unjournaled, as the operator's own setup."""
    parsed = _parse_corpus(lines)
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
        _replace_trajectories([f for _, f in changed], imported_at=now)
        _insert_trajectories(new, imported_at=now)
        result.updated, result.created = len(changed), len(new)
        _rescore_on_commit([f["id"] for f in new] + [f["id"] for _, f in changed])
        if actor is not None and (new or changed):
            journal.write(
                type=EventType.CORPUS_IMPORTED,
                actor=actor,
                evidence={**result.as_dict(), "replace": replace},
            )
    return result


def _rescore_on_commit(case_ids: list[str]) -> None:
    """Rules recorded before their source case arrived (or changed) are scored again."""
    rule_ids = []
    for start in range(0, len(case_ids), BATCH * 5):
        chunk = case_ids[start : start + BATCH * 5]
        rule_ids += Rule.objects.filter(source_case__in=chunk).values_list("id", flat=True)
    if rule_ids:
        transaction.on_commit(lambda: rules_rescore_enqueue(rule_ids))


def _replace_trajectories(rows: list[dict], *, imported_at: datetime) -> None:
    if not rows:
        return
    TrajectoryAtom.objects.filter(trajectory_id__in=[f["id"] for f in rows]).delete()
    update_fields = [k for k in rows[0] if k != "id"] + ["imported_at"]
    Trajectory.objects.bulk_update(
        [Trajectory(**f, imported_at=imported_at) for f in rows], update_fields, batch_size=BATCH
    )
    _bulk_atoms(rows)


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
    if not rows:
        return
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
    with connection.wrap_database_errors, connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # COPY is psycopg's own API: wrapped, a lost connection is Django's OperationalError.
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
