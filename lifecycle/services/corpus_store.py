"""Where a corpus import meets the database: set-based id checks and bulk writes of a chunk,
below the ORM (a model instance per row costs more than the database's own write).

The store lives for one import, inside its transaction. It keeps a temporary table of the ids
seen so far, so a repeated id is found by the database, not by a Python set as long as the
file. Into a corpus empty at the start, chunks are written unchecked, under a savepoint each,
until the first repeat meets the primary key or the first bad line (`write_unchecked`); their
ids are kept one row a chunk, and only if checking starts do they become the ids seen, from
which each later chunk is checked. On PostgreSQL a chunk's check and write (one statement,
then COPY) run as one job on a worker thread while the caller validates the next chunk:
`submit` hands the job over, `wait` takes its outcome before the next job is handed over, so
the one connection is never used by two threads at once. The caller `take`s room before each
block of lines it validates and the worker gives it back as each block of rows is sent: the
rows holding their text never pass the room given (`corpus_store(room=…)`), however fast
either side goes. On SQLite the job runs on the caller's thread: SQLite works in this process,
so a thread would only share the same CPU.
"""

import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime

import orjson
from django.db import connection
from django.utils import timezone

from ..models import Rule, Trajectory, TrajectoryAtom

SEEN = "corpus_import_seen"
# Into an empty corpus, the ids of each chunk written unchecked, one row a chunk: what the ids
# seen are filled from if checking starts (`check_from_now`).
SEEN_CHUNKS = "corpus_import_seen_chunks"
CHUNK_IDS = "corpus_import_chunk"


class Row:
    """One validated corpus line, serialised: what the store writes. `payload` is the row's
    line of COPY text (its hash and time of import included, encoded) for a store that writes
    by COPY, else the cells themselves; `atoms` likewise its atoms' lines of COPY text for the
    atoms table, else the list of atoms. Not a tuple: a row sent drops its text in place
    (`payload = None`, `atoms = None`), which a tuple could only do by being copied, a row at a
    time."""

    __slots__ = ("line", "id", "payload", "digest", "atoms")

    def __init__(self, line: int, id: str, payload: bytes | tuple, digest: str, atoms: list):
        self.line = line
        self.id = id
        self.payload = payload
        self.digest = digest
        self.atoms = atoms


_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
# How a cell that is not text reads in COPY's text form.
NOT_TEXT = {None: "\\N", True: "t", False: "f"}


def copy_escape(value) -> str:
    """A cell in COPY's text form. Most cells need no escape; they are only searched."""
    if value.__class__ is not str:
        return NOT_TEXT[value]
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_ESCAPES)
    return value


# The columns a corpus line fills, in the order of a row's cells; the content hash and the
# time of import follow them.
CELL_COLUMNS = (
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
)
COLUMNS = (*CELL_COLUMNS, "content_hash", "imported_at")


def _quoted(names) -> str:
    return ", ".join(connection.ops.quote_name(n) for n in names)


TRAJECTORIES = Trajectory._meta.db_table
ATOMS = TrajectoryAtom._meta.db_table
RULES = Rule._meta.db_table


def _rules_of_written_cases(cursor, imported_at: str) -> list[str]:
    """Rules whose source case this import wrote (its rows carry its time of import): one
    join over the rules that name a source case, however long the file."""
    cursor.execute(
        f"SELECT r.id FROM {RULES} r JOIN {TRAJECTORIES} t ON t.id = r.source_case "
        "WHERE r.source_case <> '' AND t.imported_at = %s ORDER BY r.id",
        [imported_at],
    )
    return [rule_id for (rule_id,) in cursor.fetchall()]


BLOCK = 200
# How long a thread waiting for the interpreter lock lets the one holding it run on while an
# import runs (Python's default is 5 ms). The worker needs the lock back after every wait on
# the connection (each statement's result, each flush of COPY data into a full socket) while
# the caller validates, and PostgreSQL has nothing to do until it gets it: at 5 ms the server
# waited for the client 0.26-0.56 s per 100,000 rows, at 1 ms 0.41-0.49 s, at 0.05 ms (with
# the fewer waits of `write_unchecked`) 0.10-0.15 s; docs/ingest.md.
SWITCH_INTERVAL = 0.00005


class _QuickSwitch:
    """The short switch interval while any import's worker runs, the process's own before and
    after. Counted, not saved per import: two imports at once in a threaded server would
    otherwise restore each other's setting and leave the short one behind."""

    def __init__(self):
        self._lock = threading.Lock()
        self._users = 0
        self._saved = 0.0

    def enter(self) -> None:
        with self._lock:
            if not self._users:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(SWITCH_INTERVAL)
            self._users += 1

    def leave(self) -> None:
        with self._lock:
            self._users -= 1
            if not self._users:
                sys.setswitchinterval(self._saved)


_quick_switch = _QuickSwitch()


def _parts(rows: list) -> Iterator[list]:
    for start in range(0, len(rows), BLOCK):
        yield rows[start : start + BLOCK]


class _Room:
    """Rows that may hold their text at once: the validator takes room before each block of
    lines, the worker gives it back as it sends them. A bounded hand-off, so the memory of an
    import does not depend on which side is faster at a given moment."""

    def __init__(self, rows: int):
        self._free = rows
        self._changed = threading.Condition()

    def take(self, rows: int) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._free >= rows)
            self._free -= rows

    def give(self, rows: int) -> None:
        with self._changed:
            self._free += rows
            self._changed.notify()


class _PostgresStore:
    copy_text = True

    def __init__(self, imported_at: datetime, *, room: int):
        connection.ensure_connection()
        self._raw = connection.connection
        # COPY is psycopg's own API, outside Django's cursor wrapper: wrapped, a connection
        # lost mid-write is Django's OperationalError (the API's JSON 503), not a raw error.
        self._wrap = connection.wrap_database_errors
        self._cursor = self._raw.cursor()
        self._imported_at = self.time_text(imported_at)
        # What ends each row's line of COPY text after its hash (`corpus.serialise`).
        self.row_tail = f"\t{self._imported_at}\n".encode()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="corpus-import")
        self._room = _Room(room)
        # Room taken by the caller since the last job, and room the running job still holds.
        self._taken = 0
        self._held = 0
        self.unchecked = True
        # The ids and lines of the chunk written last, as JSON, recorded as seen with the next
        # savepoint (`_next_savepoint`); and whether any chunk was written unchecked.
        self._written: list[str] | None = None
        self._wrote_unchecked = False
        # The import's statements of setup are the worker's first job, run while the caller
        # validates the first chunk: PostgreSQL's first rows no longer wait for them too. The
        # short switch interval is taken last, when nothing before `close` (which gives it
        # back) can fail.
        _quick_switch.enter()
        self._pending: Future | None = self._pool.submit(self._begin)

    def _begin(self) -> None:
        # A chunk's check is small, but its estimated cost (a subquery per id, two with the
        # stored hashes) can pass the threshold at which PostgreSQL compiles a statement: 13 ms
        # of compiling for 17 ms of work, every chunk. Only for this transaction.
        self._cursor.execute("SET LOCAL jit = off")
        self._cursor.execute(f"DROP TABLE IF EXISTS {SEEN}")
        # Byte-wise ("C") comparison: the locale's rules would only make the index slower.
        self._cursor.execute(
            f'CREATE TEMP TABLE {SEEN} (id varchar(128) COLLATE "C", line integer)'
        )
        self._cursor.execute(f"DROP TABLE IF EXISTS {SEEN_CHUNKS}")
        self._cursor.execute(f"CREATE TEMP TABLE {SEEN_CHUNKS} (ids json, lines json)")
        # Into an empty corpus nothing can be stored already, except by this import: the
        # lookup of stored hashes is skipped, and so is the check (`write_unchecked`).
        self._cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {TRAJECTORIES})")
        self._stored_lookup = self._cursor.fetchone()[0]
        if self._stored_lookup:
            self.check_from_now()

    def check_from_now(self) -> None:
        """Every later chunk is checked (`check`): the ids the unchecked chunks wrote become
        the ids seen, with their index. They are unique: they went through the trajectories'
        primary key."""
        if not self.unchecked:
            return
        if self._wrote_unchecked:
            self._record_written(self._cursor)
            self._cursor.execute(
                f"INSERT INTO {SEEN} (id, line) SELECT c.id, c.line::int FROM {SEEN_CHUNKS} w, "
                "ROWS FROM (json_array_elements_text(w.ids), json_array_elements_text(w.lines)) "
                "AS c (id, line)"
            )
        self._cursor.execute(f"CREATE UNIQUE INDEX ON {SEEN} (id)")
        self.unchecked = False

    def _record_written(self, cursor) -> None:
        """The ids and lines of the chunk written last, one row into SEEN_CHUNKS."""
        if self._written is not None:
            cursor.execute(
                f"INSERT INTO {SEEN_CHUNKS} (ids, lines) VALUES (%s::json, %s::json)",
                self._written,
            )
            self._written = None

    def _next_savepoint(self) -> None:
        """The savepoint of the next chunk written unchecked, in one round trip: the chunk
        written last has its ids recorded as seen and its savepoint released first. Its ids
        are recorded outside its own savepoint, so a later chunk undone keeps them."""
        with self._raw.pipeline(), self._raw.cursor() as cursor:
            if self._wrote_unchecked:
                self._record_written(cursor)
                cursor.execute(f"RELEASE SAVEPOINT {CHUNK_IDS}")
            cursor.execute(f"SAVEPOINT {CHUNK_IDS}")

    def write_unchecked(self, rows: list) -> bool:
        """Write a chunk into a corpus that was empty, with no check before: its rows written
        under a savepoint, its ids kept to be recorded as seen (`_next_savepoint`). An id an
        earlier chunk wrote meets the trajectories' primary key; then the chunk is undone, the
        store turns to checking every chunk from now on (`check`, which names the lines), and
        False is returned. A chunk of a corpus empty at the start needs no other check: every
        earlier row was written, so the primary key sees every id seen.

        The rows go first, each block's text released from `rows` once sent, so the chunk
        shrinks while the next one is validated; what a check would still need (line, id,
        hash) stays. Then the atoms. Five waits on the server a chunk, not eight (the savepoint,
        the start and end of each COPY; the ids seen are one row a chunk, not a COPY of their
        own): the worker needs the interpreter lock back after each, and PostgreSQL idles
        until it has it."""
        from psycopg.errors import UniqueViolation  # PostgreSQL only: not loaded on SQLite

        with self._wrap:
            self._next_savepoint()
            try:
                with self._raw.cursor() as cursor:
                    self._copy_trajectories(cursor, rows)
                    self._copy_atoms(cursor, rows)
            except UniqueViolation as exc:
                if exc.diag.table_name != TRAJECTORIES:
                    raise
                self._cursor.execute(f"ROLLBACK TO SAVEPOINT {CHUNK_IDS}")
                self.check_from_now()
                return False
        self._written = [
            orjson.dumps([r.id for r in rows]).decode(),
            orjson.dumps([r.line for r in rows]).decode(),
        ]
        self._wrote_unchecked = True
        return True

    @staticmethod
    def time_text(value: datetime) -> str:
        return value.astimezone(UTC).isoformat()

    def check(self, rows: list) -> tuple[dict[str, int], dict[str, str]]:
        """(id → first line, for ids already seen in this file; id → stored content hash), in
        one statement that also records the chunk's ids as seen. Its reads see the tables as
        they were before it, so a repeat is an id recorded by an earlier chunk; only repeats
        and stored ids come back, usually none. Each id is looked up by its index (a subquery
        per id): joined, the planner may hash the whole table of ids seen, which grows with the
        file, for every chunk."""
        stored = (
            f"(SELECT t.content_hash FROM {TRAJECTORIES} t WHERE t.id = c.id)"
            if self._stored_lookup
            else "NULL::varchar"
        )
        self._cursor.execute(
            "WITH chunk AS (SELECT id::varchar, line::int FROM ROWS FROM "
            "(json_array_elements_text(%s::json), json_array_elements_text(%s::json)) "
            "AS c (id, line)), "
            f"recorded AS (INSERT INTO {SEEN} (id, line) SELECT id, line FROM chunk "
            "ON CONFLICT (id) DO NOTHING) "
            "SELECT * FROM ("
            f'SELECT c.id, (SELECT s.line FROM {SEEN} s WHERE s.id = c.id COLLATE "C") AS line, '
            f"{stored} AS content_hash FROM chunk c OFFSET 0"
            ") looked_up WHERE line IS NOT NULL OR content_hash IS NOT NULL",
            # As JSON text: psycopg adapting two lists of 5,000 values to arrays took 10 ms of
            # this process's CPU a chunk, orjson takes 0.4.
            [
                orjson.dumps([r.id for r in rows]).decode(),
                orjson.dumps([r.line for r in rows]).decode(),
            ],
        )
        seen, stored = {}, {}
        for row_id, line, digest in self._cursor.fetchall():
            if line is not None:
                seen[row_id] = line
            else:
                stored[row_id] = digest
        return seen, stored

    def take(self, rows: int) -> None:
        """Room for the next `rows` lines the caller validates; waits while the rows not yet
        sent fill the room."""
        self._room.take(rows)
        self._taken += rows

    def _give(self, rows: int) -> None:
        self._held -= rows
        self._room.give(rows)

    def submit(self, job: Callable[[], object]) -> None:
        """Run `job` (a chunk's check and write) on the worker; `wait` for it before the next.
        The job holds the room taken for its lines; what it has not given back as it sent its
        rows is given back when it ends."""
        self._held, self._taken = self._taken, 0
        self._pending = self._pool.submit(self._run, job)

    def _run(self, job: Callable[[], object]):
        try:
            return job()
        finally:
            self._give(self._held)

    def wait(self):
        """The last job's result (None if there was none); its exception, if it raised."""
        pending, self._pending = self._pending, None
        return None if pending is None else pending.result()

    def write(self, rows: list, *, replaced: list[str]) -> None:
        if not rows:
            return
        with self._wrap, self._raw.cursor() as cursor:
            if replaced:
                cursor.execute(f"DELETE FROM {ATOMS} WHERE trajectory_id = ANY(%s)", [replaced])
                cursor.execute(f"DELETE FROM {TRAJECTORIES} WHERE id = ANY(%s)", [replaced])
            self._copy_trajectories(cursor, rows)
            self._copy_atoms(cursor, rows)

    def _copy_trajectories(self, cursor, rows: list) -> None:
        """COPY the rows as blocks of text joined at once, not row by row: the thread holds the
        interpreter lock only briefly, so the validation of the next chunk goes on while
        PostgreSQL writes this one. As each block is sent its text is dropped from `rows` (the
        line, id and hash a check would still need stay) and its room given back."""
        with cursor.copy(f"COPY {TRAJECTORIES} ({_quoted(COLUMNS)}) FROM STDIN") as copy:
            for part in _parts(rows):
                copy.write(b"".join([r.payload for r in part]))
                for r in part:
                    r.payload = None
                self._give(min(len(part), self._held))

    def _copy_atoms(self, cursor, rows: list) -> None:
        """The atoms' lines of COPY text, built as each row was validated, sent a block at a
        time and dropped once sent: joined a chunk at once, they took the traced peak of an import
        beside other work from 1.67 to 1.80 chunks."""
        with cursor.copy(f"COPY {ATOMS} (trajectory_id, atom) FROM STDIN") as copy:
            for part in _parts(rows):
                copy.write(b"".join([r.atoms for r in part]))
                for r in part:
                    r.atoms = None

    def rules_of_written_cases(self) -> list[str]:
        return _rules_of_written_cases(self._cursor, self._imported_at)

    def finish(self) -> None:
        self.wait()
        self._cursor.execute(f"DROP TABLE {SEEN}, {SEEN_CHUNKS}")

    def close(self) -> None:
        # Whatever happened, the worker is done with the connection before the caller's
        # transaction commits or rolls back.
        self._pool.shutdown(wait=True)
        _quick_switch.leave()
        self._cursor.close()


class _SqliteStore:
    copy_text = False
    # Every chunk is checked: SQLite works in this process, so nothing would overlap a saving.
    unchecked = False

    def __init__(self, imported_at: datetime, *, room: int):
        self._cursor = connection.cursor()
        self._imported_at = self.time_text(imported_at)
        self._done = None
        for table, key in ((SEEN, "PRIMARY KEY"), (CHUNK_IDS, "")):
            self._cursor.execute(f"DROP TABLE IF EXISTS temp.{table}")
            self._cursor.execute(f"CREATE TEMP TABLE {table} (id text {key}, line integer)")

    @staticmethod
    def time_text(value: datetime) -> str:
        # Django's own storage form on SQLite (UTC, no offset): the ORM reads it back.
        return str(timezone.make_naive(value, UTC))

    def take(self, rows: int) -> None:
        """Nothing to wait for: each job has ended before the caller validates on."""

    def submit(self, job: Callable[[], object]) -> None:
        self._done = job()

    def wait(self):
        done, self._done = self._done, None
        return done

    def check(self, rows: list) -> tuple[dict[str, int], dict[str, str]]:
        cursor = self._cursor
        cursor.execute(f"DELETE FROM {CHUNK_IDS}")
        cursor.executemany(
            f"INSERT INTO {CHUNK_IDS} (id, line) VALUES (%s, %s)", [(r.id, r.line) for r in rows]
        )
        cursor.execute(
            f"SELECT c.id, s.line FROM {CHUNK_IDS} c JOIN {SEEN} s ON s.id = c.id",
        )
        seen = dict(cursor.fetchall())
        cursor.execute(f"INSERT OR IGNORE INTO {SEEN} (id, line) SELECT id, line FROM {CHUNK_IDS}")
        cursor.execute(
            f"SELECT c.id, t.content_hash FROM {CHUNK_IDS} c JOIN {TRAJECTORIES} t ON t.id = c.id"
        )
        return seen, {i: h for i, h in cursor.fetchall() if i not in seen}

    def write(self, rows: list, *, replaced: list[str]) -> None:
        cursor = self._cursor
        if replaced:
            pairs = [(i,) for i in replaced]
            cursor.executemany(f"DELETE FROM {ATOMS} WHERE trajectory_id = %s", pairs)
            cursor.executemany(f"DELETE FROM {TRAJECTORIES} WHERE id = %s", pairs)
        columns = COLUMNS
        marks = ", ".join(["%s"] * len(columns))
        cursor.executemany(
            f"INSERT INTO {TRAJECTORIES} ({_quoted(columns)}) VALUES ({marks})",
            [(*row.payload, row.digest, self._imported_at) for row in rows],
        )
        cursor.executemany(
            f"INSERT INTO {ATOMS} (trajectory_id, atom) VALUES (%s, %s)",
            [(row.id, atom) for row in rows for atom in row.atoms],
        )

    def rules_of_written_cases(self) -> list[str]:
        return _rules_of_written_cases(self._cursor, self._imported_at)

    def finish(self) -> None:
        for table in (SEEN, CHUNK_IDS):
            self._cursor.execute(f"DROP TABLE temp.{table}")

    def close(self) -> None:
        self._cursor.close()


@contextmanager
def corpus_store(imported_at: datetime, *, room: int) -> Iterator["_PostgresStore | _SqliteStore"]:
    """The store of one import; use it inside the import's transaction. `room`: how many rows
    may hold their text at once, those being validated and those not yet sent."""
    kind = _PostgresStore if connection.vendor == "postgresql" else _SqliteStore
    store = kind(imported_at, room=room)
    try:
        yield store
        store.finish()
    finally:
        store.close()
