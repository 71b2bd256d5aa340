"""Corpus import (semantics §2), streamed: the file is read, validated and written a chunk at a
time inside ONE transaction, so memory stays flat however long the file is and a bad line
anywhere still writes nothing.

How a chunk goes through:
- each line is parsed and checked (`parse_trajectory`), then serialised ONCE into the cells
  the database receives, in COPY's text form; the content hash is the sha256 of that same
  text, so re-import compares what is stored, not how the line happened to be written;
- ids are checked set-based (`corpus_store`): one statement records the chunk's ids in a
  temporary table of the ids seen so far (a repeat is a duplicate, named with its first line)
  and returns the stored hashes of the chunk's ids;
- the new and replaced rows go in by COPY (PostgreSQL) or `executemany` (SQLite).
On PostgreSQL the check and write of chunk k run on a second thread while chunk k+1 is
validated: the database's work and Python's overlap, and at most two chunks are alive at once.

After the first bad line nothing more is written, but the rest of the file is still checked,
so every bad line is reported; then the transaction rolls back.
"""

import gc
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from itertools import islice
from typing import NamedTuple

from django.db import transaction
from django.utils import timezone

from lifecycle.validation import (
    ImportRejected,
    ImportResult,
    LineError,
    parse_metrics,
    parse_time,
    read_jsonl,
    trajectory_size_errors,
)

from .. import atoms as atom_lib
from .. import journal
from ..journal import EventType
from ..models import TrajectoryKind
from ..states import Actor
from ..traces.derive import with_derived_signature
from .corpus_store import Row, copy_escape, corpus_store
from .follow_ups import rules_rescore_enqueue

KINDS = {k.value for k in TrajectoryKind}
REQUIRED = ("id", "kind", "task", "steps", "outcome", "metrics")
# Lines a chunk holds: large enough that a chunk's statements cost little per line, small
# enough that two chunks alive at once stay a few megabytes.
CHUNK = 5_000

JSON_COLUMNS = (
    "steps",
    "outcome",
    "metrics",
    "signature",
    "notices",
    "expected_rule",
    "replay_input",
    "meta",
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
    return wrong + trajectory_size_errors(obj)


def _started_at(obj: dict):
    value = obj.get("started_at")
    return None if value is None else parse_time(value)


# (field, parser of the line's object): the fields that need parsing. Module-level functions,
# not closures built per line: a corpus has millions of lines.
PARSED = (
    ("metrics", lambda obj: parse_metrics(obj["metrics"])),
    ("signature", lambda obj: atom_lib.parse_atoms(obj["signature"])),
    ("notices", lambda obj: atom_lib.parse_atoms(obj.get("notices") or [], notices_only=True)),
    ("started_at", _started_at),
)


def _parsed_values(obj: dict) -> tuple[dict, list[tuple[str, str]]]:
    """The fields that need parsing (metrics, atoms, time), and (field, message) errors."""
    values, wrong = {}, []
    for name, parse in PARSED:
        try:
            values[name] = parse(obj)
        except (ValueError, atom_lib.BadAtom) as exc:
            wrong.append((name, str(exc)))
    return values, wrong


def parse_trajectory(number: int, obj: object) -> tuple[dict | None, list[LineError]]:
    """Validate one corpus line into model fields; collects every error of the line."""
    if not isinstance(obj, dict):
        return None, [LineError(number, "", "each line must be a JSON object")]
    # semantics §19: a trajectory without a signature gets one derived from its steps (which
    # also notes the atoms on the steps and the explanation in meta). The content hash stays
    # that of the line as given (`as_given`), so re-importing it is a no-op even if the
    # derivation has changed since.
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
        **({} if obj is original else {"as_given": _as_given(original)}),
    }, []


def _as_given(line: dict) -> dict:
    """The fields derivation changes, as the line gave them: what its content hash is of."""
    return {
        "steps": line["steps"],
        "meta": line.get("meta") or {},
        "signature": line.get("signature"),
    }


def trajectory_atoms(fields: dict) -> list[str]:
    """Atoms indexed for matching: the signature plus the notices (semantics §11)."""
    return list(dict.fromkeys([*fields["signature"], *fields["notices"]]))


def _no_default(value):
    raise TypeError(f"{type(value).__name__} is not JSON")


# The C encoder built once: `json.dumps` builds it again on every call, which cost more than
# the encoding of a small value. Compact, keys sorted (the same content always gives the same
# text, so the same hash), no NaN (jsonb refuses it).
_encoder = json.encoder.c_make_encoder(
    None, _no_default, json.encoder.encode_basestring, None, ":", ",", True, False, False
)


def _json(value) -> str | None:
    return None if value is None else "".join(_encoder(value, 0))


def _cells(fields: dict, time_text: Callable) -> tuple:
    """The row's cells in CELL_COLUMNS order; raises ValueError (NaN, infinity)."""
    started_at = fields["started_at"]
    return (
        fields["id"],
        fields["kind"],
        fields["task"],
        _json(fields["steps"]),
        _json(fields["outcome"]),
        _json(fields["metrics"]),
        _json(fields["signature"]),
        _json(fields["notices"]),
        fields["session_id"],
        None if started_at is None else time_text(started_at),
        fields["corpus"],
        _json(fields["expected_rule"]),
        fields["replayable"],
        _json(fields["replay_input"]),
        _json(fields["meta"]),
    )


def _cell_errors(number: int, fields: dict, time_text: Callable) -> list[LineError]:
    """Which fields a row cannot be written with (the slow path, for a bad row only): NaN or
    infinity, the NUL character, a lone surrogate (none of which PostgreSQL stores)."""
    errors = []
    for column in ("id", "task", "session_id", "corpus", *JSON_COLUMNS):
        try:
            text = (_json(fields[column]) if column in JSON_COLUMNS else fields[column]) or ""
            text.encode()
        except (ValueError, UnicodeEncodeError) as exc:
            message = "is not valid Unicode text" if isinstance(exc, UnicodeError) else str(exc)
            errors.append(LineError(number, column, message))
            continue
        if "\x00" in text or "\\u0000" in text:
            errors.append(LineError(number, column, "must not contain NUL characters"))
    return errors


def row_text(cells: Iterable) -> str:
    """A row's cells in PostgreSQL's COPY text form (tab-separated, escaped): what COPY sends
    and what the content hash is taken from."""
    return "\t".join([copy_escape(c) for c in cells])


def stored_digest(fields: dict, time_text: Callable) -> str:
    """The content hash of a trajectory already stored (its fields as the ORM reads them):
    how migration 0011 re-hashed the corpus when the hash came to be taken from the cells."""
    return hashlib.sha256(row_text(_cells(fields, time_text)).encode()).hexdigest()


def _hashed_as_given(fields: dict, time_text: Callable) -> str:
    """The text a derived trajectory's hash is of: its cells with the line's own values where
    derivation changed them (those are serialised twice; only such lines pay it)."""
    return row_text(_cells({**fields, **fields["as_given"]}, time_text))


def serialise(number: int, fields: dict, store) -> tuple[Row | None, list]:
    """One validated line as the row the store writes: every value serialised once, and the
    content hash taken from that same text. A store that writes by COPY keeps the text; one
    that writes by INSERT keeps the cells."""
    time_text = store.time_text
    try:
        cells = _cells(fields, time_text)
        text = row_text(cells)
        hashed = text if "as_given" not in fields else _hashed_as_given(fields, time_text)
        # NUL is refused in text and jsonb alike (in the COPY text, JSON's backslash is doubled).
        if "\x00" in text or "\\\\u0000" in text:
            raise ValueError("NUL")
        digest = hashlib.sha256(hashed.encode()).hexdigest()
    except (ValueError, UnicodeEncodeError):
        return None, _cell_errors(number, fields, time_text)
    payload = text if store.copy_text else cells
    return Row(number, fields["id"], payload, digest, trajectory_atoms(fields)), []


def _validate_chunk(
    numbered: Iterator[tuple[int, object, LineError | None]], store
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
            row, line_errors = serialise(number, fields, store)
        if row is not None and row.id in rows:
            first = rows[row.id].line
            line_errors = [LineError(number, "id", f"{row.id!r} already appears on line {first}")]
        if line_errors:
            errors.extend(line_errors)
        else:
            rows[row.id] = row
    return list(rows.values()), errors, last


class Outcome(NamedTuple):
    """What a chunk came to once its ids were checked (and, without errors, written)."""

    created: int
    updated: int
    unchanged: int
    errors: list[LineError]


def _classify(rows: list[Row], seen: dict, stored: dict, *, replace: bool):
    """Split a checked chunk into rows to write (of them, the ids replaced), the number
    unchanged, and errors."""
    to_write, replaced, unchanged, errors = [], [], 0, []
    for row in rows:
        if row.id in seen:
            errors.append(
                LineError(row.line, "id", f"{row.id!r} already appears on line {seen[row.id]}")
            )
        elif row.id not in stored:
            to_write.append(row)
        elif stored[row.id] == row.digest:
            unchanged += 1
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
    return to_write, replaced, unchanged, errors


def _take_chunk(store, rows: list[Row], *, write: bool, replace: bool) -> Outcome:
    """Check a chunk's ids and, when nothing went wrong so far, write it. Runs on the store's
    worker (PostgreSQL) while the next chunk is validated."""
    seen, stored = store.check(rows)
    to_write, replaced, unchanged, errors = _classify(rows, seen, stored, replace=replace)
    if write and not errors:
        store.write(to_write, replaced=replaced)
    return Outcome(len(to_write) - len(replaced), len(replaced), unchanged, errors)


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
    actor: Actor | None = None,
    progress: Callable[[int], None] | None = None,
    keep_ids: bool = False,
) -> ImportResult:
    """Import a JSON Lines corpus, all or nothing, in one transaction. Trajectories already
    stored with other content are refused unless `replace`. With an `actor` (an API token), a
    change is journaled as `corpus_imported` in the same transaction; the command line loads
    corpora unjournaled, as the operator's own setup. `progress` is called with the number of
    lines read after each chunk; `keep_ids` lists the ids in the result (the API returns them;
    the command line keeps no list as long as the file)."""
    result = ImportResult()
    errors: list[LineError] = []
    numbered = read_jsonl(lines)
    with _collector_paused(), transaction.atomic(), corpus_store(timezone.now()) as store:
        while True:
            rows, chunk_errors, last = _validate_chunk(numbered, store)
            if not last:
                break
            _absorb(store.wait(), result, errors)
            errors.extend(chunk_errors)
            # Nothing more is written after the first bad line; the rest is still checked.
            store.submit(partial(_take_chunk, store, rows, write=not errors, replace=replace))
            if keep_ids:
                result.ids.extend(r.id for r in rows)
            if progress:
                progress(last)
            del rows
        _absorb(store.wait(), result, errors)
        if errors:
            raise ImportRejected(sorted(errors, key=lambda e: e.line))
        if result.created or result.updated:
            _imported(store, result, actor=actor, replace=replace)
    return result


def _absorb(outcome: Outcome | None, result: ImportResult, errors: list[LineError]) -> None:
    if outcome is not None:
        result.created += outcome.created
        result.updated += outcome.updated
        result.unchanged += outcome.unchanged
        errors.extend(outcome.errors)


def _imported(store, result: ImportResult, *, actor: Actor | None, replace: bool) -> None:
    """What an import that wrote something asks for: the rules whose source case arrived or
    changed are scored again after commit; a token's import is journaled."""
    rule_ids = store.rules_of_written_cases()
    if rule_ids:
        transaction.on_commit(lambda: rules_rescore_enqueue(rule_ids))
    if actor is not None:
        journal.write(
            type=EventType.CORPUS_IMPORTED,
            actor=actor,
            evidence={**result.as_dict(), "replace": replace},
        )
