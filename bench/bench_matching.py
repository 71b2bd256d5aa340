"""Bench: matching one rule against 1,000,000 stored trajectories on PostgreSQL (semantics §11,
target < 100 ms).

    .venv/bin/python bench/bench_matching.py [--n 1000000] [--reseed] [--runs 20]

Uses its own database (DATABASE_URL, default postgres://root@127.0.0.1:5432/cw_matching),
created and migrated if missing, and seeded once with COPY (about 4 atoms a trajectory, skewed
like a real corpus: a few very common tools, hundreds of actions, a long tail of errors, a
third of sessions with notices). Seeding is skipped when the table already holds --n rows.

Prints the median and p95 of `matching_trajectories(rule)` fetched to a list of ids — the real
ORM call, the same one replay case selection, the gate and the corpus page use — for rules
from selective to broad, and the plan of the main query.
"""

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://root@127.0.0.1:5432/cw_matching")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")

TOOLS = ["git", "pytest", "pip", "http", "fs", "django", "docker", "kubectl", "shell", "sql"]
TOOL_WEIGHTS = [30, 15, 10, 12, 14, 5, 5, 3, 4, 2]
# One trajectory in PLANT_EVERY is of the F-001 kind (git push rejected as non-fast-forward),
# spread over the id space as real ones would be.
PLANT_EVERY = 500


def ensure_database() -> None:
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    params = {k: v for k, v in (("host", db["HOST"]), ("port", db["PORT"]), ("user", db["USER"]))}
    with psycopg.connect(dbname="postgres", autocommit=True, **params) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db["NAME"]])
        if exists.fetchone() is None:
            conn.execute(f'CREATE DATABASE "{db["NAME"]}"')


def atoms_for(rng: random.Random, n: int) -> tuple[str, list[str], list[str]]:
    """(kind, signature, notices) of generated trajectory n."""
    if n % PLANT_EVERY == 0:
        kind = "failure"
        signature = ["tool:git", "action:git.push", "error:non_fast_forward"]
        return kind, signature, ["breach:task_completion"]
    tool = rng.choices(TOOLS, TOOL_WEIGHTS)[0]
    action = f"action:{tool}.a{int(rng.paretovariate(1.2)) % 40}"
    kind = rng.choices(["failure", "success", "near_miss"], [35, 55, 10])[0]
    signature = [f"tool:{tool}", action]
    if tool == "git" and rng.random() < 0.2:
        signature.append("action:git.push")
    if kind != "success":
        signature.append(f"error:e{int(rng.paretovariate(0.8)) % 3000}")
    notices = []
    if kind == "failure" or rng.random() < 0.1:
        notices.append(
            rng.choice(["breach:task_completion", "stall:coherence", "breach:tool_correctness"])
        )
    return kind, signature, notices


def seed(n: int) -> None:
    import json

    from django.db import connection

    from lifecycle.models import Trajectory, TrajectoryAtom

    rng = random.Random(20261202)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            f"TRUNCATE {TrajectoryAtom._meta.db_table}, {Trajectory._meta.db_table} CASCADE"
        )
        # Bench database only: skip per-row foreign-key triggers while COPY loads 3M atoms.
        cursor.execute("SET session_replication_role = replica")
    raw = connection.connection  # the psycopg connection, for COPY
    traj_cols = (
        "id, kind, task, steps, outcome, metrics, signature, notices, session_id, started_at, "
        "corpus, replayable, meta, content_hash, imported_at"
    )
    chunk = 50_000
    with raw.cursor() as cur:
        for start in range(0, n, chunk):
            traj_lines, atom_lines = [], []
            for i in range(start, min(n, start + chunk)):
                kind, signature, notices = atoms_for(rng, i)
                tid = f"B-{i:07d}"
                day = 1 + (i * 7919) % 365
                traj_lines.append(
                    "\t".join(
                        [
                            tid,
                            kind,
                            "generated session",
                            "[]",
                            "null",
                            '{"task_completion": 0.5}',
                            json.dumps(signature),
                            json.dumps(notices),
                            f"s-{i}",
                            f"2026-{1 + day % 12:02d}-{1 + day % 28:02d}T10:00:00+00",
                            "bench",
                            "t" if i % 7 else "f",
                            "{}",
                            "0" * 64,
                            "2026-12-01T00:00:00+00",
                        ]
                    )
                )
                atom_lines.extend(f"{tid}\t{a}" for a in dict.fromkeys(signature + notices))
            with cur.copy(f"COPY {Trajectory._meta.db_table} ({traj_cols}) FROM STDIN") as copy:
                copy.write("\n".join(traj_lines) + "\n")
            with cur.copy(
                f"COPY {TrajectoryAtom._meta.db_table} (trajectory_id, atom) FROM STDIN"
            ) as copy:
                copy.write("\n".join(atom_lines) + "\n")
            print(f"  seeded {min(n, start + chunk):>9,} trajectories", end="\r", flush=True)
    raw.commit()
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = DEFAULT")
        cursor.execute(f"VACUUM ANALYZE {Trajectory._meta.db_table}")
        cursor.execute(f"VACUUM ANALYZE {TrajectoryAtom._meta.db_table}")
    print(f"\n  seeded {n:,} trajectories in {time.perf_counter() - started:.1f}s")


def timed(fn, runs: int) -> tuple[float, float, int]:
    fn()  # warm the cache and the plan
    samples, size = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        size = len(fn())
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1], size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.db.models import F

    if connection.vendor != "postgresql":
        sys.exit("this bench needs PostgreSQL: set DATABASE_URL=postgres://…")
    ensure_database()
    call_command("migrate", interactive=False, verbosity=0)

    from lifecycle.matching import matching_trajectories
    from lifecycle.models import Rule, Trajectory, TrajectoryAtom

    stored = Trajectory.objects.count()
    if args.reseed or stored != args.n:
        print(f"seeding {args.n:,} trajectories into {settings.DATABASES['default']['NAME']} …")
        seed(args.n)
    atoms = TrajectoryAtom.objects.count()
    print(f"{args.n:,} trajectories, {atoms:,} atoms, PostgreSQL {connection.pg_version}")

    def rule(signature, metric=""):
        return Rule(id="R-BENCH", trigger="t", directive="d", signature=signature, metric=metric)

    f001 = rule(["tool:git", "action:git.push", "error:non_fast_forward"])
    cases = [
        ("F-001 rule (tool:git, action:git.push, error:non_fast_forward)", f001, {}),
        (
            "  … replay selection: failures, replayable, newest 3",
            f001,
            {"kinds": ["failure"], "replayable": True, "newest": 3},
        ),
        ("one error atom of the long tail", rule(["error:e40"]), {}),
        ("one common error atom (broad)", rule(["error:e2"]), {}),
        ("tool:git + action:git.push (broad)", rule(["tool:git", "action:git.push"]), {}),
        ("notice fallback: stall:coherence (broad)", rule(["stall:coherence"]), {}),
    ]
    print(f"\n{'rule':<66} {'matches':>8} {'median ms':>10} {'p95 ms':>8}")
    for label, r, opts in cases:
        newest = opts.pop("newest", None)

        def fetch(r=r, opts=opts, newest=newest):
            qs = matching_trajectories(r, **opts)
            if newest:
                # The engine's own ordering (replay.cases): newest first, undated last.
                qs = qs.order_by(F("started_at").desc(nulls_last=True), "-id")[:newest]
            return list(qs.values_list("id", flat=True))

        median, p95, size = timed(fetch, args.runs)
        print(f"{label:<66} {size:>8,} {median:>10.1f} {p95:>8.1f}")

    with connection.cursor() as cursor:
        sql, params = (
            matching_trajectories(f001).values_list("id", flat=True).query.sql_with_params()
        )
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, params)
        print("\nplan of the F-001 query:")
        for (line,) in cursor.fetchall():
            print("  " + line)


if __name__ == "__main__":
    main()
