"""Corpus import throughput: time `import_corpus` on N generated trajectories.

    python bench/bench_import.py [--n 100000]                      # temporary SQLite file
    DATABASE_URL=postgres://127.0.0.1/cw_bench python bench/bench_import.py   # PostgreSQL

It migrates the database it is given, imports N trajectories (ids BENCH-…), re-imports the same
file (the idempotent no-op path), then deletes what it wrote. Prints one line a figure.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def corpus_lines(n: int) -> list[str]:
    families = [
        ("git", "git.push", "non_fast_forward"),
        ("pytest", "test.run", "timeout"),
        ("pip", "pkg.install", "resolution_conflict"),
        ("http", "api.call", "status_429"),
        ("fs", "file.read", "enoent"),
        ("django", "db.migrate", "lock_timeout"),
    ]
    lines = []
    for i in range(n):
        tool, action, error = families[i % len(families)]
        kind = ("failure", "success", "near_miss")[i % 3]
        signature = [f"tool:{tool}", f"action:{action}"] + (
            [f"error:{error}"] if kind == "failure" else []
        )
        lines.append(
            json.dumps(
                {
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
            )
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL"):
        os.environ["CAUTERWEB_VAR_DIR"] = tempfile.mkdtemp(prefix="cauterweb-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from lifecycle.models import Trajectory
    from lifecycle.services.corpus import import_corpus

    call_command("migrate", verbosity=0)
    Trajectory.objects.filter(id__startswith="BENCH-").delete()
    lines = corpus_lines(args.n)
    print(f"database: {connection.vendor}, trajectories: {args.n:,}")

    started = time.perf_counter()
    result = import_corpus(lines)
    first = time.perf_counter() - started
    print(
        f"first import:   {first:6.2f} s  ({args.n / first:,.0f} trajectories/s)  {result.as_dict()}"
    )

    started = time.perf_counter()
    result = import_corpus(lines)
    again = time.perf_counter() - started
    print(f"re-import:      {again:6.2f} s  (no-op)  {result.as_dict()}")

    Trajectory.objects.filter(id__startswith="BENCH-").delete()


if __name__ == "__main__":
    main()
