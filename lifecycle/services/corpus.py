"""Corpus import (semantics §2), streamed: the file is read, validated and written a chunk at a
time inside ONE transaction, so memory stays flat however long the file is and a bad line
anywhere still writes nothing.

How a chunk goes through:
- each line is parsed and checked (`parse_trajectory`), then serialised ONCE into the cells
  the database receives; the content hash is the sha256 of those same cells, so re-import
  compares what is stored, not how the line happened to be written;
- ids are checked set-based (`corpus_store`): one statement records the chunk's ids in a
  temporary table of the ids seen so far (a repeat is a duplicate, named with its first line)
  and one fetches the stored hashes of the chunk's ids;
- the new and replaced rows go in by COPY (PostgreSQL) or `executemany` (SQLite).
On PostgreSQL the writes of chunk k run on a second thread while chunk k+1 is validated: the
database's work and Python's overlap, and at most two chunks are alive at once.

After the first bad line nothing more is written, but the rest of the file is still checked,
so every bad line is reported; then the transaction rolls back.
"""

import gc
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from itertools import islice

from django.db import transaction
from django.utils import timezone

from lifecycle.validation import (
    ImportRejected,
    ImportResult,
    LineError,
    parse_metrics,
    parse_time,
    read_jsonl,
)

from .. import atoms as atom_lib
from ..models import TrajectoryKind
from .corpus_store import CELL_COLUMNS, Row, corpus_store

KINDS = {k.value for k in TrajectoryKind}
REQUIRED = ("id", "kind", "task", "steps", "outcome", "metrics", "signature")
# Lines a chunk holds: large enough that a chunk's statements cost little per line, small
# enough that two chunks alive at once stay a few megabytes.
CHUNK = 5_000

JSON_COLUMNS = frozenset(
    {"steps", "outcome", "metrics", "signature", "notices", "expected_rule", "replay_input", "meta"}
)


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
    return wrong


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
    }, []


def trajectory_atoms(fields: dict) -> list[str]:
    """Atoms indexed for matching: the signature plus the notices (semantics §11)."""
    return list(dict.fromkeys([*fields["signature"], *fields["notices"]]))


_dumps = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
).encode


def _cell(column: str, value, time_text: Callable) -> object:
    if value is None:
        return None
    if column in JSON_COLUMNS:
        text = _dumps(value)
        # PostgreSQL's jsonb refuses the NUL character; so does every text column.
        if "\\u0000" in text:
            raise ValueError("must not contain NUL characters")
        return text
    if column == "started_at":
        return time_text(value)
    if isinstance(value, str) and "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


def row_digest(cells: Iterable) -> str:
    """The content hash of a trajectory: sha256 of the cells as the database receives them."""
    text = "\x1f".join(
        "\\N" if c is None else ("t" if c else "f") if isinstance(c, bool) else c for c in cells
    )
    return hashlib.sha256(text.encode()).hexdigest()


def serialise(number: int, fields: dict, time_text: Callable) -> tuple[Row | None, list]:
    """One validated line as the row the store writes: every value serialised once."""
    cells, errors = [], []
    for column in CELL_COLUMNS:
        try:
            cells.append(_cell(column, fields[column], time_text))
        except ValueError as exc:
            errors.append(LineError(number, column, str(exc)))
    if errors:
        return None, errors
    return Row(number, fields["id"], tuple(cells), row_digest(cells), trajectory_atoms(fields)), []


def _validate_chunk(
    numbered: Iterator[tuple[int, object, LineError | None]], time_text: Callable
) -> tuple[list[Row], list[LineError], int]:
    """The next CHUNK lines as good rows (a repeated id within them refused), their errors and
    the number of the last line read (0 at the end of the file). Each parsed line is dropped
    as soon as its row is built: a chunk in memory is its rows, not its parsed objects."""
    rows: dict[str, Row] = {}
    errors: list[LineError] = []
    last = 0
    for number, obj, error in islice(numbered, CHUNK):
        last = number
        fields, line_errors = (None, [error]) if error else parse_trajectory(number, obj)
        row = None
        if not line_errors:
            row, line_errors = serialise(number, fields, time_text)
        if row is not None and row.id in rows:
            first = rows[row.id].line
            line_errors = [LineError(number, "id", f"{row.id!r} already appears on line {first}")]
        if line_errors:
            errors.extend(line_errors)
        else:
            rows[row.id] = row
    return list(rows.values()), errors, last


def _classify(rows: list[Row], seen: dict, stored: dict, *, replace: bool, result: ImportResult):
    """Split a checked chunk into rows to write and errors; counts what it can already tell."""
    to_write, replaced, errors = [], [], []
    for row in rows:
        if row.id in seen:
            errors.append(
                LineError(row.line, "id", f"{row.id!r} already appears on line {seen[row.id]}")
            )
        elif row.id not in stored:
            to_write.append(row)
        elif stored[row.id] == row.digest:
            result.unchanged += 1
        elif replace:
            to_write.append(row)
            replaced.append(row.id)
        else:
            errors.append(
                LineError(
                    row.line,
                    "id",
                    f"{row.id!r} is already stored with other content (use --replace to overwrite)",
                )
            )
    return to_write, replaced, errors


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection during an import. A chunk's rows are freed by reference
    counting; the collector would instead walk every row of the chunk again and again, for
    nothing (it cost a quarter of the import's time). Objects alive before are frozen so a
    collection someone else asks for does not walk them either."""
    enabled = gc.isenabled()
    gc.disable()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


def import_corpus(
    lines: Iterable[str | bytes],
    *,
    replace: bool = False,
    progress: Callable[[int], None] | None = None,
    keep_ids: bool = False,
) -> ImportResult:
    """Import a JSON Lines corpus, all or nothing, in one transaction. Trajectories already
    stored with other content are refused unless `replace`. `progress` is called with the
    number of lines read after each chunk; `keep_ids` lists the ids in the result (the API
    returns them; the command line does not keep a list as long as the file)."""
    result = ImportResult()
    errors: list[LineError] = []
    numbered = read_jsonl(lines)
    with _collector_paused(), transaction.atomic(), corpus_store(timezone.now()) as store:
        while True:
            rows, chunk_errors, last = _validate_chunk(numbered, store.time_text)
            if not last:
                break
            seen, stored = store.check(rows)
            to_write, replaced, bad = _classify(rows, seen, stored, replace=replace, result=result)
            errors.extend(chunk_errors + bad)
            if not errors:
                # Handed to the store, which may still be writing them while the next chunk
                # is validated.
                store.write(to_write, replaced=replaced)
                result.updated += len(replaced)
                result.created += len(to_write) - len(replaced)
                if keep_ids:
                    result.ids.extend(r.id for r in rows)
            if progress:
                progress(last)
            del rows, to_write
        if errors:
            raise ImportRejected(errors)
    return result
