"""API latency at scale: 10,000 rules over 8 scopes and 100,000 journal events on
PostgreSQL; median server-side time of the calls a live harness makes most.

    python bench/bench_api.py                          # postgres://root@127.0.0.1:5432/cw_api_bench
    DATABASE_URL=postgres://…/other python bench/bench_api.py [--reseed] [--runs 50]
        [--rules 10000] [--events 100000]

Each call goes through Django's test client (middleware, token auth, handler, queries, JSON;
no network) `--runs` times after one warm-up. Round kicks stop at the broker: this measures the
request path, which never waits for a round (semantics §9.4). Prints one line a figure.
"""

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_URL = "postgres://root@127.0.0.1:5432/cw_api_bench"
T0 = datetime(2026, 6, 1, tzinfo=UTC)
SCOPES = ["global", "git", "ci", "docker", "http", "python", "repo:payments", "deploy"]
RULES = 10_000
EVENTS = 100_000


def ensure_database(url: str, *, reseed: bool) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1].split("?")[0]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if reseed:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def seed(rules: int = RULES, events: int = EVENTS) -> None:
    from lifecycle import journal
    from lifecycle.journal import EventType
    from lifecycle.models import Rule

    if Rule.objects.exists():
        return
    seeded = [
        Rule(
            id=f"B-{i:05d}",
            trigger=f"when step {i} of tool{i % 50} fails with error{i % 97}",
            directive=f"retry step {i} after checking tool{i % 50}",
            scope=SCOPES[i % len(SCOPES)],
            metric="task_completion",
            signature=[f"tool:tool{i % 50}", f"error:error{i % 97}"],
            state=("candidate", "active", "retired")[i % 3],
            author="bench",
            author_kind="agent",
            content_hash=f"{i:064x}",
            recorded_at=T0 + timedelta(seconds=i),
        )
        for i in range(rules)
    ]
    Rule.objects.bulk_create(seeded, batch_size=2000)
    journal.write_many(
        [
            journal.event(
                type=EventType.VALIDATION_VERDICT,
                at=T0 + timedelta(seconds=i),
                rule_id=f"B-{i % rules:05d}",
                actor="engine",
                evidence={"outcome": "pending", "reason": "trial: 1/5 sessions observed"},
            )
            for i in range(events)
        ]
    )


def median_ms(call, runs: int) -> float:
    call()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        response = call()
        times.append(time.perf_counter() - start)
        assert response.status_code < 300, response.content[:300]
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--rules", type=int, default=RULES, help="rules seeded (default 10000)")
    parser.add_argument(
        "--events", type=int, default=EVENTS, help="journal events seeded (default 100000)"
    )
    args = parser.parse_args()
    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")
    # The test client speaks plain HTTP: without this every call is a redirect to https.
    os.environ.setdefault("CAUTERWEB_HTTPS", "false")
    ensure_database(url, reseed=args.reseed)

    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from lifecycle.models import ApiToken
    from lifecycle.services.tokens import token_create
    from replay.tasks import round_run_task

    call_command("migrate", verbosity=0)
    seed(args.rules, args.events)
    round_run_task.delay = lambda **kwargs: None
    ApiToken.objects.filter(name="bench").delete()
    client = Client(
        HTTP_HOST="localhost",
        HTTP_AUTHORIZATION=f"Bearer {token_create(name='bench', role='agent', actor='bench').key}",
    )
    # A page deep in the list: the cursor after the first 500 rules (fewer on a tiny seed).
    deep = client.get(f"/api/v1/rules?limit={min(500, args.rules // 2)}").json()["next_cursor"]
    counter = iter(range(10**9))

    def post_report():
        n = next(counter)
        return client.post(
            "/api/v1/reports",
            {
                "session_id": f"bench-{n}",
                "at": (T0 + timedelta(days=1, seconds=n)).isoformat(),
                "notices": ["breach:task_completion"],
                "metrics": {"task_completion": 0.3},
            },
            content_type="application/json",
        )

    figures = {
        "GET /rules?limit=100 (first page)": lambda: client.get("/api/v1/rules?limit=100"),
        "GET /rules?limit=100 (cursor page)": lambda: client.get(
            f"/api/v1/rules?limit=100&cursor={deep}"
        ),
        "GET /rules?state=active&scope=git&limit=100": lambda: client.get(
            "/api/v1/rules?state=active&scope=git&limit=100"
        ),
        "rule tool GET /scopes/git/rules (query, read recorded)": lambda: client.get(
            "/api/v1/scopes/git/rules?session=bench-s&query=tool:tool1 error:error1"
        ),
        "GET /scopes/git (rendered scope file)": lambda: client.get("/api/v1/scopes/git"),
        "GET /journal?limit=100": lambda: client.get("/api/v1/journal?limit=100"),
        "GET /rules/{id} (detail)": lambda: client.get("/api/v1/rules/B-00001"),
        "POST /reports (one report)": post_report,
    }
    print(
        f"{args.rules} rules ({args.rules // 3} active, {args.rules // 3 // len(SCOPES)} per "
        f"scope), {args.events} journal events, median of {args.runs} runs"
    )
    for name, call in figures.items():
        print(f"{median_ms(call, args.runs):8.1f} ms  {name}")


if __name__ == "__main__":
    main()
