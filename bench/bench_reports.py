"""Report intake at scale (semantics §2, §8) on PostgreSQL: prints figures, asserts nothing.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cw_reports_bench python bench/bench_reports.py

- one report taken in (store + trials, `reports_ingest`, one transaction) with 100 and with
  10,000 candidates in force, and 10 more: under `randomized` (semantics §20) the report's
  session was exposed to those 10 and the report writes their outcomes; under `baseline` (§8)
  the 10,000 trials are full and the 10 still need sessions. Median wall, CPU and statements
  of `--runs` reports (target: 10,000 ≤ 1.2× 100), for each design;
- `POST /reports` through Django's test client (middleware, token auth, JSON, the same
  intake), one worker, for `--seconds`, with 10,000 candidates in force (target ≥ 150/s).
Round kicks stop at the broker: the request path never waits for a round (semantics §9.4).
The database named in DATABASE_URL is created if missing, wiped and reused: never point it at
real data. Each figure is printed with the load average when it was taken.
"""

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/cw_reports_bench"
T0 = datetime(2026, 6, 1, tzinfo=UTC)
OPEN = 10


def ensure_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1].split("?")[0]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def add_candidates(prefix: str, count: int, *, full: bool) -> None:
    """`count` candidates on task_completion; with `full`, each trial already holds its
    `rule_trial_min_sessions` sessions (the steady state of a busy system)."""
    from django.conf import settings

    from lifecycle.models import Rule, TrialEnrolment

    Rule.objects.bulk_create(
        [
            Rule(
                id=f"{prefix}-{i:05d}",
                trigger=f"when step {i} fails",
                directive=f"retry step {i}",
                metric="task_completion",
                author="bench",
                author_kind="agent",
                content_hash=f"{prefix}{i}",
                recorded_at=T0,
            )
            for i in range(count)
        ],
        batch_size=5000,
    )
    if full:
        sessions = settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS
        TrialEnrolment.objects.bulk_create(
            [
                TrialEnrolment(
                    rule_id=f"{prefix}-{i:05d}",
                    session_id=f"old-{n}",
                    enrolled_at=T0,
                    updated_at=T0,
                )
                for i in range(count)
                for n in range(sessions)
            ],
            batch_size=5000,
        )


class Meter:
    def __init__(self):
        from django.db import connection

        self.connection = connection
        self.statements = 0

    def _count(self, execute, sql, params, many, context):
        self.statements += 1
        return execute(sql, params, many, context)

    def __enter__(self):
        self._hook = self.connection.execute_wrapper(self._count)
        self._hook.__enter__()
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu
        self._hook.__exit__(*exc)


def one_report(n: int, *, session: str) -> str:
    return json.dumps(
        {
            "session_id": session,
            "at": (T0 + timedelta(days=1, seconds=n)).isoformat(),
            "notices": ["breach:task_completion"],
            "metrics": {"task_completion": 0.4},
            "rules_read": ["FULL-00001"],
        }
    )


def expose(sessions: list[str], rule_ids: list[str]) -> None:
    """The sessions read the candidates' scope: one exposure each, arms alternating (semantics
    §20.1; made directly, the read is not what is timed)."""
    from lifecycle.models import Exposure

    Exposure.objects.bulk_create(
        [
            Exposure(
                rule_id=rule_id,
                session_id=session,
                arm="treatment" if k % 2 else "control",
                exposed_at=T0,
            )
            for session in sessions
            for k, rule_id in enumerate(rule_ids)
        ],
        batch_size=5000,
    )


def bench_one_report(runs: int, counter) -> list[Meter]:
    """Each timed report meets OPEN fresh candidates (made before the timer starts): under
    `baseline` their trials need sessions, so it both skips the full trials and enrols into
    the open ones; under `randomized` its session was exposed to them, so it writes their
    outcomes."""
    from django.conf import settings

    from lifecycle.models import Exposure, Rule, TrialEnrolment
    from lifecycle.services.reports import reports_ingest
    from lifecycle.validation import read_jsonl

    randomized = settings.CAUTERWEB_TRIAL_DESIGN == "randomized"
    meters = []
    for _ in range(runs):
        n = next(counter)
        Rule.objects.filter(id__startswith="OPEN").update(state="retired")
        add_candidates(f"OPEN{n}", OPEN, full=False)
        if randomized:
            expose([f"live-{n}"], [f"OPEN{n}-{i:05d}" for i in range(OPEN)])
        with Meter() as meter:
            reports_ingest(read_jsonl([one_report(n, session=f"live-{n}")]))
        meters.append(meter)
        if randomized:
            done = Exposure.objects.filter(session_id=f"live-{n}", reported_at__isnull=False)
        else:
            done = TrialEnrolment.objects.filter(session_id=f"live-{n}")
        assert done.count() == OPEN
    Rule.objects.filter(id__startswith="OPEN").update(state="retired")
    return meters


def summary(meters: list[Meter]) -> str:
    wall = statistics.median(m.wall for m in meters) * 1000
    cpu = statistics.median(m.cpu for m in meters) * 1000
    statements = statistics.median(m.statements for m in meters)
    return f"{wall:6.1f} ms wall, {cpu:5.1f} ms CPU, {statements:.0f} statements"


def server_cpu_s() -> float | None:
    """CPU seconds of this connection's PostgreSQL backend so far, read from /proc when the
    server runs on this machine (None otherwise): a request's cost on the server's side."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_post_reports(seconds: float, counter) -> tuple[float, float, float, float | None]:
    """Requests per second of one worker posting one report at a time; its CPU per request,
    and the database server's (None when it cannot be read); ms a request."""
    from django.test import Client

    from lifecycle.models import ApiToken
    from lifecycle.services.tokens import token_create

    ApiToken.objects.filter(name="bench").delete()
    key = token_create(name="bench", role="agent", actor="bench").key
    client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {key}")

    from django.conf import settings
    from django.db import connection

    from lifecycle.models import Rule

    first = next(counter)
    if settings.CAUTERWEB_TRIAL_DESIGN == "randomized":
        # Enough sessions for any run, each exposed to 10 candidates in force.
        add_candidates(f"POST{first}", OPEN, full=False)
        sessions = [f"api-{n}" for n in range(first + 1, first + 1 + int(seconds * 1000))]
        expose(sessions, [f"POST{first}-{i:05d}" for i in range(OPEN)])
        connection.cursor().execute("ANALYZE lifecycle_exposure")

    def post():
        n = next(counter)
        body = one_report(n, session=f"api-{n}")
        response = client.post(
            "/api/v1/reports", body, content_type="application/json", secure=True
        )
        assert response.status_code == 200, (
            response.status_code,
            response.headers,
            response.content[:300],
        )

    post()
    server = server_cpu_s()
    done, started, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - started < seconds:
        post()
        done += 1
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    server = None if server is None else server_cpu_s() - server
    Rule.objects.filter(id__startswith="POST").update(state="retired")
    per_server = None if server is None else server / done * 1000
    return done / wall, cpu / done * 1000, per_server, wall / done * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument(
        "--designs",
        nargs="+",
        choices=("randomized", "baseline"),
        default=["randomized", "baseline"],
        help="forward-trial designs to measure (semantics §20, §8)",
    )
    args = parser.parse_args()
    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")
    os.environ["CAUTERWEB_REPLAY_BACKEND"] = ""
    ensure_database(url)

    import django

    django.setup()
    from itertools import count

    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from replay.tasks import round_run_task

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        # The journal refuses TRUNCATE (its trigger); the bench database's owner lets this
        # session skip triggers, the one way to reset it.
        cursor.execute("SET session_replication_role = replica")
        cursor.execute(
            "TRUNCATE lifecycle_trialenrolment, lifecycle_exposure, lifecycle_ruleread, "
            "lifecycle_report, "
            "lifecycle_journalevent, lifecycle_rule, lifecycle_apitoken CASCADE"
        )
        cursor.execute("SET session_replication_role = DEFAULT")
    round_run_task.delay = lambda **kwargs: None
    counter = count()
    add_candidates("FULL", 100, full=True)
    add_candidates("MORE", 9_900, full=True)
    connection.cursor().execute("ANALYZE")
    for design in args.designs:
        settings.CAUTERWEB_TRIAL_DESIGN = design
        print(f"{design} trials: one report in, median of {args.runs}; {os.cpu_count()} CPUs")
        bench_design(args, counter)


def bench_design(args, counter) -> None:
    from lifecycle.models import Rule

    bench_one_report(3, counter)  # warm-up: connection, caches
    # The two sizes alternate, one report each, so they share the machine's load: the 9,900
    # extra candidates leave and re-enter force between reports (untimed).
    meters: dict[int, list[Meter]] = {100: [], 10_000: []}
    for _ in range(args.runs):
        for size, state in ((100, "retired"), (10_000, "candidate")):
            Rule.objects.filter(id__startswith="MORE").update(state=state)
            meters[size] += bench_one_report(1, counter)
    for size, kept in meters.items():
        print(f"  {size:>6,} candidates in force (+{OPEN} open): {summary(kept)}  load {load()}")
    ratio = statistics.median(m.wall for m in meters[10_000]) / statistics.median(
        m.wall for m in meters[100]
    )
    print(f"  ratio 10,000 / 100: {ratio:.2f} (wall)")
    rate, cpu, server, per_request = bench_post_reports(args.seconds, counter)
    on_server = "n/a" if server is None else f"{server:.1f} ms"
    print(
        f"  POST /reports, one worker, 10,000 candidates in force: {rate:.0f}/s "
        f"({per_request:.1f} ms a request; CPU a request: {cpu:.1f} ms this process, "
        f"{on_server} the database server)  load {load()}"
    )


if __name__ == "__main__":
    main()
