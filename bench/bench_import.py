"""Corpus import throughput and memory.

    python bench/bench_import.py [--n 100000]                      # temporary SQLite file
    DATABASE_URL=postgres://127.0.0.1/cw_bench python bench/bench_import.py   # PostgreSQL

It migrates the database it is given, imports N trajectories (ids BENCH-…), re-imports the same
file (the idempotent no-op path), then deletes what it wrote.

    DATABASE_URL=postgres://127.0.0.1/cw_bench python bench/bench_import.py --vs-copy \
        [--sizes 100000,1000000] [--runs 3] [--shape small|demo] [--baseline DIR]
    python bench/bench_import.py --python-cpu [--runs 3] [--lines 50000] [--baseline DIR]

`--vs-copy` (PostgreSQL only) puts `import_corpus` beside the physical limit: raw `COPY` of the
very rows the import stores (dumped from a database it filled) into the same tables and
indexes. Every run gets a fresh database cloned from a migrated template and runs in a child
process, so each figure has its own peak memory (ru_maxrss); the two kinds of run alternate so
they share the machine's load. Printed per run: wall time, CPU of the client process and of the
PostgreSQL backend serving it (both on this host), peak RSS, and the load average when it
started; then medians of wall and CPU time (all the work of both processes against COPY's,
and the bound the pipeline would have with two free CPUs). A last child measures Python's own
peak (tracemalloc) against the memory one chunk of rows holds. With `--baseline DIR` (a
checkout of older code, e.g. a second git worktree), that code's import runs too, between the
COPY and import runs, so old and new share the same window of load.

`--python-cpu` measures the Python side alone, with no database: decoding, validation,
serialisation, hashing and the COPY text joined for the writer, in CPU time per line (best of
5 over 50,000 lines in memory), which the machine's load disturbs far less than wall time.
With `--baseline`, the older checkout's code is measured by this script, alternately.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FAMILIES = [
    ("git", "git.push", "non_fast_forward"),
    ("pytest", "test.run", "timeout"),
    ("pip", "pkg.install", "resolution_conflict"),
    ("http", "api.call", "status_429"),
    ("fs", "file.read", "enoent"),
    ("django", "db.migrate", "lock_timeout"),
]


def small_line(i: int) -> dict:
    tool, action, error = FAMILIES[i % len(FAMILIES)]
    kind = ("failure", "success", "near_miss")[i % 3]
    signature = [f"tool:{tool}", f"action:{action}"] + (
        [f"error:{error}"] if kind == "failure" else []
    )
    return {
        "id": f"BENCH-{i:07d}",
        "kind": kind,
        "task": f"bench task {i} using {tool}",
        "steps": [{"tool": tool, "input": f"{action} #{i}", "output": "ok"}],
        "outcome": {"status": "ok" if kind != "failure" else "failed"},
        "metrics": {"task_completion": (i % 100) / 100, "coherence": 0.8},
        "signature": signature,
        "notices": ["breach:task_completion"] if kind == "failure" else [],
        "started_at": f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:00:00+00:00",
    }


def demo_lines() -> list[dict]:
    path = ROOT / "lifecycle" / "fixtures" / "demo" / "corpus.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def corpus_lines(n: int, shape: str = "small"):
    """N corpus lines (str, newline-terminated), generated lazily."""
    demo = demo_lines() if shape == "demo" else None
    for i in range(n):
        line = dict(demo[i % len(demo)], id=f"BENCH-{i:07d}") if demo else small_line(i)
        yield json.dumps(line) + "\n"


def write_corpus(n: int, shape: str, directory: Path) -> Path:
    path = directory / f"corpus-{shape}-{n}.jsonl"
    if not path.exists():
        with open(path, "w") as out:
            out.writelines(corpus_lines(n, shape))
    return path


# ---- the plain mode: first import and re-import, on the database given --------------------


def plain(args) -> None:
    if not os.environ.get("DATABASE_URL"):
        os.environ["CAUTERWEB_VAR_DIR"] = tempfile.mkdtemp(prefix="cauterweb-bench-")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from lifecycle.models import Trajectory
    from lifecycle.services.corpus import import_corpus

    call_command("migrate", verbosity=0)
    Trajectory.objects.filter(id__startswith="BENCH-").delete()
    path = write_corpus(args.n, args.shape, Path(tempfile.mkdtemp(prefix="cw-import-")))
    print(f"database: {connection.vendor}, trajectories: {args.n:,}, load {load()}")
    for label in ("first import", "re-import"):
        started, cpu = time.perf_counter(), time.process_time()
        with open(path, "rb") as lines:
            result = import_corpus(lines)
        wall = time.perf_counter() - started
        print(
            f"{label + ':':15} {wall:6.2f} s  (CPU {time.process_time() - cpu:5.2f} s, "
            f"{args.n / wall:,.0f} trajectories/s)  {result.as_dict()}"
        )
    Trajectory.objects.filter(id__startswith="BENCH-").delete()
    shutil.rmtree(path.parent)


# ---- --vs-copy: children measure, the parent clones databases and prints --------------------


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def backend_cpu(conn) -> float:
    """CPU seconds the PostgreSQL backend serving `conn` has used (it runs on this host)."""
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child_copy(url: str, trajectories: Path, atoms: Path) -> dict:
    import psycopg

    from lifecycle.services.corpus_store import COLUMNS

    with psycopg.connect(url) as conn:
        server = backend_cpu(conn)
        base = rss_mb()
        started, cpu = time.perf_counter(), time.process_time()
        with conn.cursor() as cursor:
            for table, columns, path in (
                ("lifecycle_trajectory", ", ".join(COLUMNS), trajectories),
                ("lifecycle_trajectoryatom", "trajectory_id, atom", atoms),
            ):
                with (
                    cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,
                    open(path, "rb") as data,
                ):
                    while block := data.read(1 << 20):
                        copy.write(block)
        conn.commit()
        wall = time.perf_counter() - started
        server = backend_cpu(conn) - server
    return figures(wall, time.process_time() - cpu, server, base)


def figures(wall: float, cpu: float, server: float, base_mb: float) -> dict:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"wall": wall, "cpu": cpu, "server": server, "rss": peak, "base": base_mb}


def django_child(url: str):
    from django.db import connection

    connection.ensure_connection()
    return connection


def child_import(url: str, corpus: Path) -> dict:
    connection = django_child(url)
    from lifecycle.services.corpus import import_corpus

    server = backend_cpu(connection.connection)
    base = rss_mb()
    started, cpu = time.perf_counter(), time.process_time()
    with open(corpus, "rb") as lines:
        result = import_corpus(lines)
    wall = time.perf_counter() - started
    server = backend_cpu(connection.connection) - server
    assert result.created > 0, result.as_dict()
    return figures(wall, time.process_time() - cpu, server, base)


def child_memory(url: str, corpus: Path) -> dict:
    """Python's peak during the import (tracemalloc) and what one chunk of rows holds."""
    import tracemalloc
    from itertools import islice

    django_child(url)
    from lifecycle.services.corpus import CHUNK, _read, _validate_chunk, import_corpus
    from lifecycle.services.corpus_store import _PostgresStore

    class Unlimited:
        """A chunk as the PostgreSQL store receives it, with room for all of it."""

        copy_text = True
        time_text = staticmethod(_PostgresStore.time_text)
        row_tail = f"\t{time_text(datetime.now(UTC))}\n".encode()

        def take(self, rows: int) -> None:
            pass

    tracemalloc.start()
    with open(corpus, "rb") as lines:
        before = tracemalloc.get_traced_memory()[0]
        rows = _validate_chunk(_read(islice(lines, CHUNK)), Unlimited())
        chunk = tracemalloc.get_traced_memory()[0] - before
        del rows
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    with open(corpus, "rb") as lines:
        import_corpus(lines)
    peak = tracemalloc.get_traced_memory()[1] - before
    return {"chunk": chunk, "peak": peak, "chunk_lines": CHUNK}


def child_python(url: str, path: Path) -> dict:
    """CPU per line of the import's Python side with the database out of the way: decoding,
    validation, serialisation and hashing (the caller's thread), and the worker's joining of the
    COPY text (into a writer that drops it). Robust to the machine's load, unlike wall time.
    The code measured is that of `--code` (this checkout, or the `--baseline` one)."""
    import gc
    from itertools import islice

    from lifecycle.services import corpus, corpus_store

    class Copy:
        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            pass

        def write(self, data) -> None:
            pass

    class Cursor:
        def copy(self, statement: str) -> Copy:
            return Copy()

    # The store without its connection: only the methods that format and send rows are used.
    store = corpus_store._PostgresStore.__new__(corpus_store._PostgresStore)
    store._imported_at = store.time_text(datetime.now(UTC))
    store.row_tail = f"\t{store._imported_at}\n".encode()
    store._room, store._held, store._taken = corpus_store._Room(2**40), 0, 0
    read = getattr(corpus, "_read", corpus.read_lines)  # older code: `read_lines`
    with open(path, "rb") as f:
        lines = list(islice(f, PYTHON_LINES))
    gc.disable()
    best = []
    for _ in range(5):
        cpu = time.process_time()
        numbered = read(lines)
        while True:
            rows, errors, last = corpus._validate_chunk(numbered, store)
            if not last:
                break
            store._copy_trajectories(Cursor(), rows)
            store._copy_atoms(Cursor(), rows)
        best.append((time.process_time() - cpu) / len(lines))
    return {"us_per_line": [round(b * 1e6, 2) for b in best]}


def run_child(mode: str, url: str, *paths: Path, root: Path = ROOT) -> dict:
    """A child of this script, or of the same script in another checkout (`--baseline`); the
    `python` child is always this script's, run on the other checkout's code."""
    script = (ROOT if mode == "python" else root) / "bench" / "bench_import.py"
    command = [sys.executable, str(script), "--child", mode, "--url", url, *map(str, paths)]
    if mode == "python":
        command += ["--code", str(root)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=root)
    if done.returncode:
        sys.exit(f"{mode} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class Databases:
    """A migrated template database and throw-away clones of it."""

    def __init__(self, url: str):
        import psycopg

        self.base, self.name = url.rsplit("/", 1)
        self.admin = psycopg.connect(f"{self.base}/postgres", autocommit=True)
        self.template = f"{self.name}_template"
        self.drop(self.template)
        self.admin.execute(f'CREATE DATABASE "{self.template}"')
        env = {**os.environ, "DATABASE_URL": self.url(self.template)}
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"

    def drop(self, name: str) -> None:
        self.admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def fresh(self) -> str:
        name = f"{self.name}_run"
        self.drop(name)
        self.admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        return self.url(name)


def dump_rows(databases: Databases, corpus: Path, directory: Path) -> tuple[Path, Path]:
    """The rows an import stores, as COPY text: raw COPY writes exactly these."""
    import psycopg

    url = databases.fresh()
    run_child("import", url, corpus)
    paths = (directory / f"{corpus.stem}.trajectories", directory / f"{corpus.stem}.atoms")
    from lifecycle.services.corpus_store import COLUMNS

    with psycopg.connect(url) as conn, conn.cursor() as cursor:
        for (table, columns), path in zip(
            (
                ("lifecycle_trajectory", ", ".join(COLUMNS)),
                ("lifecycle_trajectoryatom", "trajectory_id, atom"),
            ),
            paths,
            strict=True,
        ):
            with (
                cursor.copy(f"COPY {table} ({columns}) TO STDOUT") as copy,
                open(path, "wb") as out,
            ):
                for block in copy:
                    out.write(block)
    return paths


def line(label: str, f: dict, started_load: str) -> str:
    return (
        f"  {label:7} {f['wall']:7.2f} s  CPU client {f['cpu']:6.2f} s  server "
        f"{f['server']:6.2f} s  peak RSS {f['rss']:7.1f} MB (+{f['rss'] - f['base']:.1f} "
        f"over {f['base']:.0f} before)  load {started_load}"
    )


def print_medians(kept: dict) -> None:
    """Wall times, then CPU: the wall time under load measures the wait for a CPU as much as
    the work. The CPU ratio is all the work the import makes both processes do against raw
    COPY's; the bound is what the pipeline would take with two CPUs free (the slower of its
    two processes, each on its own CPU)."""
    m = {
        k: {f: statistics.median(r[f] for r in v) for f in ("wall", "cpu", "server")}
        for k, v in kept.items()
    }
    copy = m.pop("copy")
    # A tiny run's COPY can take less than a clock tick of CPU: no ratio then, not a crash.
    copy_cpu = copy["cpu"] + copy["server"] or float("nan")
    for kind, imp in m.items():
        print(
            f"  median: COPY {copy['wall']:.2f} s, {kind} {imp['wall']:.2f} s, "
            f"ratio {imp['wall'] / copy['wall']:.2f} (wall)"
        )
        print(
            f"  CPU: {kind} {imp['cpu']:.2f} s Python + {imp['server']:.2f} s PostgreSQL = "
            f"{(imp['cpu'] + imp['server']) / copy_cpu:.2f}x COPY's {copy_cpu:.2f} s; with two "
            f"free CPUs bound by {max(imp['cpu'], imp['server']) / copy_cpu:.2f}x"
        )


# Lines the `python` child measures (read into memory first, so the file is out of the way).
PYTHON_LINES = 50_000


def python_cpu(args) -> None:
    """The Python side alone, CPU per line, this code and the baseline's alternately."""
    directory = Path(tempfile.mkdtemp(prefix="cw-import-"))
    # The child reads at most PYTHON_LINES of the file: `--lines` makes a smaller one (CI's).
    lines = min(args.lines, PYTHON_LINES)
    corpus = write_corpus(lines, args.shape, directory)
    print(f"Python side of the import, CPU per line, best of 5 over {lines:,} lines")
    roots = [("import", ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
    for _ in range(args.runs):
        for kind, root in roots:
            started_load = load()
            got = run_child("python", "", corpus, root=root)["us_per_line"]
            runs = ", ".join(f"{x:.1f}" for x in got)
            print(f"  {kind:8} {min(got):5.1f} µs a line ({runs})  load {started_load}")
    shutil.rmtree(directory)


def vs_copy(args) -> None:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        sys.exit("--vs-copy needs PostgreSQL: set DATABASE_URL=postgres://…")
    directory = Path(tempfile.mkdtemp(prefix="cw-import-"))
    databases = Databases(url)
    print(
        f"raw COPY vs import_corpus, shape {args.shape}, median of {args.runs}, {os.cpu_count()} CPUs"
    )
    for n in [int(s) for s in args.sizes.split(",")]:
        corpus = write_corpus(n, args.shape, directory)
        trajectories, atoms = dump_rows(databases, corpus, directory)
        print(f"{n:,} trajectories, file {corpus.stat().st_size / 2**20:.0f} MB")
        runs = [
            ("copy", "copy", (trajectories, atoms), ROOT),
            ("import", "import", (corpus,), ROOT),
        ]
        if args.baseline:
            runs.append(("baseline", "import", (corpus,), args.baseline))
        kept = {kind: [] for kind, *_ in runs}
        for _ in range(args.runs):
            for kind, mode, paths, root in runs:
                started_load = load()
                f = run_child(mode, databases.fresh(), *paths, root=root)
                kept[kind].append(f)
                print(line(kind, f, started_load))
        print_medians(kept)
        for kind, _, _, root in runs[1:]:
            started_load = load()
            memory = run_child("memory", databases.fresh(), corpus, root=root)
            print(
                f"  tracemalloc, {kind}: one chunk ({memory['chunk_lines']:,} lines) holds "
                f"{memory['chunk'] / 2**20:.1f} MB; peak during the import "
                f"{memory['peak'] / 2**20:.1f} MB = {memory['peak'] / memory['chunk']:.2f} "
                f"chunks  load {started_load}"
            )
        for path in (trajectories, atoms):
            path.unlink()
    databases.drop(f"{databases.name}_run")
    databases.drop(databases.template)
    shutil.rmtree(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--shape", choices=("small", "demo"), default="small")
    parser.add_argument("--vs-copy", action="store_true")
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="with --vs-copy: a checkout of older code whose import runs between these, "
        "so old and new are measured in the same window",
    )
    parser.add_argument(
        "--python-cpu",
        action="store_true",
        help="the Python side alone (no database), CPU per line; with --baseline alternately",
    )
    parser.add_argument(
        "--lines",
        type=int,
        default=PYTHON_LINES,
        help=f"with --python-cpu: lines measured (default and most {PYTHON_LINES:,})",
    )
    parser.add_argument("--child", choices=("copy", "import", "memory", "python"))
    parser.add_argument("--code", type=Path, help="with --child python: the checkout measured")
    parser.add_argument("--url")
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")
    if args.code:
        sys.path.insert(0, str(args.code))
    if args.child or args.vs_copy:
        import django

        if args.url:
            os.environ["DATABASE_URL"] = args.url
        django.setup()
    if args.child:
        child = {
            "copy": child_copy,
            "import": child_import,
            "memory": child_memory,
            "python": child_python,
        }[args.child]
        print(json.dumps(child(args.url, *args.paths)))
    elif args.python_cpu:
        python_cpu(args)
    elif args.vs_copy:
        vs_copy(args)
    else:
        plain(args)


if __name__ == "__main__":
    main()
