"""Corpus import (semantics §2), streamed: the file is read, validated and written a chunk at a
time inside ONE transaction, so memory stays flat however long the file is and a bad line
anywhere still writes nothing.

How a chunk goes through:
- each line is decoded (`read_lines`: orjson, and the strict `jsonsafe` reader for every line
  orjson might read otherwise), checked (`parse_trajectory`), then serialised ONCE into the
  cells the database receives, in COPY's text form; the content hash is the sha256 of that
  same text, so re-import compares what is stored, not how the line happened to be written;
  the byte limits of the JSON fields are checked on those cells, not on a second
  serialisation;
- ids are checked set-based (`corpus_store`): one statement records the chunk's ids in a
  temporary table of the ids seen so far (a repeat is a duplicate, named with its first line)
  and returns the stored hashes of the chunk's ids, each id looked up through an index; into
  a corpus empty at the start, chunks go in unchecked until the primary key meets a repeat or
  a line is bad, and only then does checking start (`corpus_store.write_unchecked`);
- the new and replaced rows go in by COPY (PostgreSQL) or `executemany` (SQLite).
On PostgreSQL the check and write of chunk k run on a second thread while chunk k+1 is
validated: the database's work and Python's overlap. The hand-off is bounded: a block of lines
is validated only when there is room for it, and the writer gives room back as it sends rows,
so at most one chunk's worth of rows (and a block) holds its text, whichever side is faster.

After the first bad line nothing more is written, but the rest of the file is still checked,
so every bad line is reported; then the transaction rolls back.
"""

import gc
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from itertools import islice
from typing import NamedTuple

import orjson
from django.db import transaction
from django.utils import timezone

from lifecycle.validation import (
    ImportRejected,
    ImportResult,
    LineError,
    json_line_error,
    trajectory_json_size_errors,
)

from .. import journal, jsonsafe, limits
from ..follow_ups import rules_rescore_enqueue
from ..inputs import parse_trajectory
from ..journal import EventType
from ..states import Actor
from .corpus_store import BLOCK, CELL_COLUMNS, NOT_TEXT, Row, copy_escape, corpus_store

# Lines a chunk holds: large enough that a chunk's statements cost little per line, small
# enough that two chunks alive at once stay a few megabytes.
CHUNK = 5_000
# The first chunk is smaller: PostgreSQL has nothing to do until it is validated.
FIRST_CHUNK = 1_000

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


# What orjson decodes otherwise than `jsonsafe` reads strictly: an escape of a NUL or of a
# surrogate (orjson keeps a NUL), a raw NUL, and a run of 19 digits (a number near or over the
# integer bound, which orjson would turn into a float; digits are all made "0" to find a run
# without a regular expression trying every position). Such a line, one with more brackets
# than the depth limit, and every line orjson refuses, are read again by `jsonsafe`, which
# takes or names them exactly as every other entry point does.
_RISKY_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER = b"0" * len(str(jsonsafe.MAX_INT))


def _decoded(raw: bytes) -> object:
    """A line's value by orjson (a few times faster than `json`), or `_STRICT` when it needs
    the strict reader."""
    if (
        raw.count(b"[") + raw.count(b"{") > jsonsafe.MAX_DEPTH
        or b"\x00" in raw
        or _LONG_NUMBER in raw.translate(_DIGITS_AS_ZERO)
        or _RISKY_ESCAPE.search(raw)
    ):
        return _STRICT
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _STRICT


_STRICT = object()


def _read(lines: Iterable[str | bytes]) -> Iterator[tuple[int, object, LineError | None, bool]]:
    """`read_lines`, each line with whether it is plain: read by orjson, not by the strict
    reader (`serialise` may then write its cells by orjson too)."""
    for number, raw in enumerate(lines, start=1):
        # Blank or not, without the copy of every line `strip` makes (0.3 µs of 18 a line):
        # `isspace` knows the same spaces and stops at a line's first other character.
        if not raw or raw.isspace():
            continue
        value = _decoded(raw) if raw.__class__ is bytes else _STRICT
        plain = value is not _STRICT
        if not plain:
            try:
                value = jsonsafe.loads(raw)
            except jsonsafe.JsonRejected as exc:
                yield number, None, json_line_error(exc, number), False
                continue
        yield number, value, None, plain


def read_lines(lines: Iterable[str | bytes]) -> Iterator[tuple[int, object, LineError | None]]:
    """(line number, value, error) for every non-blank line, as `validation.read_jsonl` reads
    them, through `_decoded` where it gives the same value."""
    for number, value, error, _ in _read(lines):
        yield number, value, error


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


_dumps = orjson.dumps
_SORTED = orjson.OPT_SORT_KEYS


def _fast_json(value) -> str | None:
    """`_json` by orjson, a few times faster, for the values of a line orjson read (`_read`);
    `_plain_text` says where its text may be used."""
    return None if value is None else _dumps(value, option=_SORTED).decode()


def _cells(fields: dict, time_text: Callable, dump: Callable = _json) -> tuple:
    """The row's cells in CELL_COLUMNS order, the JSON ones written by `dump`; raises
    ValueError (NaN, infinity)."""
    started_at = fields["started_at"]
    return (
        fields["id"],
        fields["kind"],
        fields["task"],
        dump(fields["steps"]),
        dump(fields["outcome"]),
        dump(fields["metrics"]),
        dump(fields["signature"]),
        dump(fields["notices"]),
        fields["session_id"],
        None if started_at is None else time_text(started_at),
        fields["corpus"],
        dump(fields["expected_rule"]),
        fields["replayable"],
        dump(fields["replay_input"]),
        dump(fields["meta"]),
    )


# The JSON cells with a byte limit (steps, outcome, replay_input, meta), and the length under
# which none can be over it: a cell is the compact JSON the limit measures, and a character is
# at most 4 bytes.
SIZED_CELLS = tuple(
    CELL_COLUMNS.index(name) for name in ("steps", "outcome", "replay_input", "meta")
)
SHORT_JSON = (
    min(
        limits.STEP_BYTES,
        limits.STEPS_BYTES,
        limits.OUTCOME_BYTES,
        limits.META_BYTES,
        limits.REPLAY_INPUT_BYTES,
    )
    // 4
)


def _may_be_too_large(cells: tuple) -> bool:
    """Whether a JSON cell may be over its limit; only then is the line measured field by
    field, so a good line's JSON is serialised once, for the write, not again for its size."""
    return any(cells[i] is not None and len(cells[i]) > SHORT_JSON for i in SIZED_CELLS)


def _size_errors(number: int, fields: dict) -> list[LineError]:
    return [LineError(number, f, m) for f, m in trajectory_json_size_errors(fields)]


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


def row_text(cells: tuple) -> str:
    """A row's cells in PostgreSQL's COPY text form (tab-separated, escaped): what COPY sends
    and what the content hash is taken from. The cells are joined unescaped first and the row
    searched once: most rows have nothing to escape (the JSON encoder writes no tab or line
    break), and then the only backslashes are those of the nulls (`\\N`)."""
    text = "\t".join([c if c.__class__ is str else NOT_TEXT[c] for c in cells])
    if (
        text.count("\\") == cells.count(None)
        and text.count("\t") == len(cells) - 1
        and "\n" not in text
        and "\r" not in text
    ):
        return text
    return "\t".join([copy_escape(c) for c in cells])


def stored_digest(fields: dict, time_text: Callable) -> str:
    """The content hash of a trajectory already stored (its fields as the ORM reads them):
    how migration 0011 re-hashed the corpus when the hash came to be taken from the cells."""
    return hashlib.sha256(row_text(_cells(fields, time_text)).encode()).hexdigest()


def _hashed_as_given(fields: dict, time_text: Callable) -> str:
    """The text a derived trajectory's hash is of: its cells with the line's own values where
    derivation changed them (those are serialised twice; only such lines pay it)."""
    return row_text(_cells({**fields, **fields["as_given"]}, time_text))


# Where orjson writes a value otherwise than the json module: a float between 1e-10 and 1e-4
# ("0.00001" and "1e-9" where `repr` writes "1e-05" and "1e-09"). Every such text holds one of
# these; a row's text without them is what the old encoder writes (every code point, key
# order, integers, the other floats: `tests/unit/test_corpus_reading.py`). Infinity and NaN,
# which orjson would write as null, cannot be in a value orjson read (it refuses them), and
# metrics are parsed into [0, 1].
_ORJSON_ONLY = ("e-", "0.0000")


def _plain_text(fields: dict, time_text: Callable) -> tuple[tuple, str] | None:
    """A line's cells and row text by `_fast_json`, or None where the old encoder must write
    them: a value orjson cannot write (a lone surrogate, an integer past 64 bits; the old
    encoder names what is wrong) or a text that may differ (`_ORJSON_ONLY`; a string that
    merely holds "e-" costs its line the old encoder, nothing else)."""
    try:
        cells = _cells(fields, time_text, _fast_json)
    except orjson.JSONEncodeError:
        return None
    text = row_text(cells)
    exponent, small = _ORJSON_ONLY
    if exponent in text or small in text:
        return None
    return cells, text


def serialise(number: int, fields: dict, store, *, plain: bool = False) -> tuple[Row | None, list]:
    """One validated line as the row the store writes: every value serialised once, and the
    content hash taken from that same text. A store that writes by COPY keeps the row's line
    of COPY text, hash and time of import included, as bytes; one that writes by INSERT keeps
    the cells. A `plain` line (`_read`) without a derived signature has its JSON written by
    orjson where that is the same text (`_plain_text`); any other by the json module's
    encoder, as before."""
    time_text = store.time_text
    derived = "as_given" in fields
    try:
        written = _plain_text(fields, time_text) if plain and not derived else None
        if written is None:
            cells = _cells(fields, time_text)
            written = cells, row_text(cells)
        cells, text = written
        data = text.encode()
        hashed = data if not derived else _hashed_as_given(fields, time_text).encode()
        # NUL is refused in text and jsonb alike (in the COPY text, JSON's backslash is doubled).
        if b"\x00" in data or b"\\\\u0000" in data:
            raise ValueError("NUL")
        digest = hashlib.sha256(hashed).hexdigest()
    except (ValueError, UnicodeEncodeError):
        return None, _size_errors(number, fields) + _cell_errors(number, fields, time_text)
    if _may_be_too_large(cells) and (too_large := _size_errors(number, fields)):
        return None, too_large
    atoms = trajectory_atoms(fields)
    if store.copy_text:
        payload = b"".join((data, b"\t", digest.encode(), store.row_tail))
        atoms = _atom_lines(cells[0], atoms)
    else:
        payload = cells
    return Row(number, fields["id"], payload, digest, atoms), []


def _atom_lines(tid: str, atoms: list[str]) -> bytes:
    """A row's atoms as lines of COPY text for the atoms table, built here on the caller's
    thread: the worker only joins them (`corpus_store._copy_atoms`)."""
    if not atoms:
        return b""
    prefix = copy_escape(tid) + "\t"
    return (prefix + ("\n" + prefix).join([copy_escape(a) for a in atoms]) + "\n").encode()


def _validate_chunk(
    numbered: Iterator[tuple[int, object, LineError | None, bool]], store, size: int = 0
) -> tuple[list[Row], list[LineError], int]:
    """The next `size` lines (CHUNK by default) as good rows (a repeated id within them
    refused), their errors and the number of the last line read (0 at the end of the file).
    Each parsed line is dropped as soon as its row is built: a chunk in memory is its rows, not
    its parsed objects. Room is taken from the store before each block of lines
    (`corpus_store`)."""
    rows: dict[str, Row] = {}
    errors: list[LineError] = []
    last = 0
    size = size or CHUNK
    step = min(BLOCK, size)
    for count, (number, obj, error, plain) in enumerate(islice(numbered, size)):
        if not count % step:
            store.take(step)
        last = number
        fields, line_errors = (None, [error]) if error else parse_trajectory(number, obj)
        row = None
        if not line_errors:
            row, line_errors = serialise(number, fields, store, plain=plain)
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
    worker (PostgreSQL) while the next chunk is validated. Into a corpus empty at the start, a
    chunk is written unchecked while nothing has gone wrong (`write_unchecked`)."""
    if store.unchecked:
        if write and store.write_unchecked(rows):
            return Outcome(len(rows), 0, 0, [])
        store.check_from_now()
    seen, stored = store.check(rows)
    to_write, replaced, unchanged, errors = _classify(rows, seen, stored, replace=replace)
    # The rows not to be written go now; those written go as they are sent.
    rows.clear()
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
    numbered = _read(lines)
    size = min(FIRST_CHUNK, CHUNK)
    with (
        _collector_paused(),
        transaction.atomic(),
        corpus_store(timezone.now(), room=CHUNK + BLOCK) as store,
    ):
        while True:
            rows, chunk_errors, last = _validate_chunk(numbered, store, size)
            size = CHUNK
            if not last:
                break
            _absorb(store.wait(), result, errors)
            errors.extend(chunk_errors)
            if keep_ids:
                result.ids.extend(r.id for r in rows)
            # Nothing more is written after the first bad line; the rest is still checked.
            store.submit(partial(_take_chunk, store, rows, write=not errors, replace=replace))
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
