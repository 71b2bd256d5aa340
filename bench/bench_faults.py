"""Faults on real services, with figures: what a client sees while the broker is down, while
the database connections are cut, after a worker dies mid-round; and what the duplicate check
costs beside a 25 MB rule kept from before the text limits.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cw_hard_bench \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/6 python bench/bench_faults.py [--reports 100]

The database is dropped and created afresh (never point this at real data); the server is
gunicorn (1 worker, 4 threads) and the workers are Celery processes, all on this machine.
Prints one line a figure; tests/faults/ asserts the same scenarios' outcomes.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
T0 = datetime(2026, 6, 1, tzinfo=UTC)
SERVER_APP = "cw_bench_server"


def fresh_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1].split("?")[0]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"


def post_reports(server, key: str, n: int, prefix: str, retry: bool = False) -> dict:
    import httpx

    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    took, statuses, tries = [], [], []
    with httpx.Client(timeout=30) as client:
        for i in range(n):
            body = json.dumps(
                {"session_id": f"{prefix}-{i}", "at": (T0 + timedelta(seconds=i)).isoformat()}
            )
            begun, attempts = time.perf_counter(), 0
            while True:
                attempts += 1
                answer = client.post(f"{server.url}/api/v1/reports", content=body, headers=headers)
                statuses.append(answer.status_code)
                if answer.status_code == 200 or not retry:
                    break
            took.append(time.perf_counter() - begun)
            tries.append(attempts)
    return {"took": took, "statuses": statuses, "tries": tries}


def broker_down(url: str, key: str, n: int) -> None:
    from lifecycle.journal import EventType
    from lifecycle.models import JournalEvent, Report
    from tests.faults.services import Server, environment, free_port

    for label, broker in (
        ("broker up", os.environ["CELERY_BROKER_URL"]),
        ("broker down", f"redis://127.0.0.1:{free_port()}/6"),
    ):
        before = Report.objects.count()
        failed_before = JournalEvent.objects.filter(type=EventType.VALIDATION_KICK_FAILED).count()
        server = Server(environment(database_url=url, broker_url=broker))
        try:
            result = post_reports(server, key, n, label.replace(" ", "-"))
        finally:
            server.stop()
        errors = sum(1 for s in result["statuses"] if s != 200)
        failed = JournalEvent.objects.filter(type=EventType.VALIDATION_KICK_FAILED).count()
        print(
            f"{label}: {n} reports, {errors} failed requests, "
            f"{Report.objects.count() - before} stored, {failed - failed_before} kick failures "
            f"journaled; {percentiles(result['took'])} a report"
        )


def connections_cut(url: str, key: str, n: int) -> None:
    import psycopg

    from lifecycle.models import Report
    from tests.faults.services import Server, environment

    server = Server(environment(database_url=f"{url}?application_name={SERVER_APP}", broker_url=""))
    stop, cuts = threading.Event(), []

    def cut() -> None:
        with psycopg.connect(url.replace("postgres://", "postgresql://"), autocommit=True) as conn:
            while not stop.wait(0.1):
                cuts.extend(
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE application_name = %s",
                        [SERVER_APP],
                    ).fetchall()
                )

    cutter = threading.Thread(target=cut)
    cutter.start()
    try:
        result = post_reports(server, key, n, "cut", retry=True)
    finally:
        stop.set()
        cutter.join()
        logged = server.stop()
    statuses = result["statuses"]
    stored = Report.objects.filter(session_id__startswith="cut-").count()
    print(
        f"connections cut every 100 ms: {len(cuts)} connections cut during {n} reports; "
        f"{statuses.count(200)} × 200, {statuses.count(503)} × 503 (JSON), "
        f"{sum(1 for s in statuses if s not in (200, 503))} other; "
        f"{stored} of {n} stored; at most {max(result['tries'])} tries for one report; "
        f"{percentiles(result['took'])} to success; "
        f"{logged.count('Internal Server Error')} server errors logged"
    )


def worker_killed(url: str) -> None:
    import redis
    from django.conf import settings

    from cauterweb.celery import app
    from lifecycle.models import JournalEvent, Rule
    from replay import lock
    from replay.tasks import round_run_task
    from tests.faults.services import environment, start_worker, stop, wait_until

    marker = ROOT / "var" / "bench-faults-marker"
    marker.parent.mkdir(exist_ok=True)
    marker.unlink(missing_ok=True)
    _seed_replay_candidate()
    app.control.purge()
    env = environment(database_url=url, broker_url=os.environ["CELERY_BROKER_URL"])
    doomed = start_worker(
        {**env, "CAUTERWEB_REPLAY_BACKEND": "tests.faults.harness:blocking_replay",
         "FAULT_MARKER": str(marker)},
        "bench-doomed",
    )  # fmt: skip
    wait_until(lambda: app.control.ping(timeout=0.5), timeout_s=60, what="the worker")
    round_run_task.delay(kicked_by="bench")
    wait_until(marker.exists, timeout_s=60, what="the round to reach its replay")
    doomed.kill()
    doomed.wait()
    ttl_ms = redis.Redis.from_url(settings.CAUTERWEB_LOCK_URL).pttl(
        lock._redis_key(lock.ROUND_LOCK)
    )
    redis.Redis.from_url(settings.CAUTERWEB_LOCK_URL).pexpire(lock._redis_key(lock.ROUND_LOCK), 1)
    begun = time.perf_counter()
    healthy = start_worker(
        {**env, "CAUTERWEB_REPLAY_BACKEND": "replay.backends.simulated:replay"}, "bench-healthy"
    )
    try:
        round_run_task.delay(kicked_by="bench-after-kill")
        wait_until(
            lambda: Rule.objects.get(pk="K-1").state != "candidate", timeout_s=120, what="a verdict"
        )
    finally:
        stop(healthy)
    verdicts = JournalEvent.objects.filter(
        rule_id="K-1", type__in=["rule_promoted", "rule_retired"]
    ).count()
    print(
        f"worker killed mid-round: lock had {ttl_ms / 1000:.0f} s left (expiry brought forward); "
        f"verdict {time.perf_counter() - begun:.1f} s after a fresh worker started "
        f"(its start-up included); {verdicts} verdict event(s)"
    )


def _seed_replay_candidate() -> None:
    from lifecycle.services.corpus import import_corpus
    from lifecycle.services.rules import rule_record_candidate
    from lifecycle.states import Actor

    signature = ["tool:git", "action:git.push", "error:non_fast_forward"]
    fault = {"step": 0, "atoms": signature}
    fix = {"directive_terms": ["pull"], "effect": "rescue", "metrics": {"task_completion": 0.9}}
    line = {
        "id": "F-K1", "kind": "failure", "task": "push", "outcome": {"status": "failed"},
        "steps": [{"tool": "git", "input": "git push", "output": "", "error": "rejected"}],
        "metrics": {"task_completion": 0.2, "coherence": 0.8}, "signature": signature,
        "notices": ["breach:task_completion"], "started_at": T0.isoformat(),
        "replay_input": {"task": "push", "scope": "git", "fault": fault, "fixes": [fix]},
    }  # fmt: skip
    import_corpus([json.dumps(line)])
    rule_record_candidate(
        actor=Actor.agent("bench"), rule_id="K-1", trigger="when git push fails as non-fast-forward",
        directive="pull latest changes before pushing", scope="git", metric="task_completion",
        signature=signature,
    )  # fmt: skip


def huge_rule_duplicate_check() -> None:
    from lifecycle.models import Rule
    from lifecycle.services.duplicates import rule_check_duplicate

    Rule.objects.create(
        id="HUGE-1", trigger="when " + "w" * 25_000_000, directive="do " + "d" * 25_000_000,
        scope="huge", signature=["error:x"], author="bench", author_kind="agent",
        content_hash="huge", recorded_at=T0,
    )  # fmt: skip
    Rule.objects.create(
        id="SMALL-1", trigger="when the tool fails with x", directive="retry once",
        scope="huge", signature=["error:x"], author="bench", author_kind="agent",
        content_hash="small", recorded_at=T0 + timedelta(seconds=1),
    )  # fmt: skip
    begun = time.perf_counter()
    rule_check_duplicate(rule_id="SMALL-1")
    print(
        f"duplicate check of a 40-character candidate beside a 50 MB rule: "
        f"{(time.perf_counter() - begun) * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=100)
    args = parser.parse_args()
    url = os.environ["DATABASE_URL"]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")
    fresh_database(url)
    import django

    django.setup()
    from lifecycle.services.tokens import token_create

    key = token_create(name="bench-agent", role="agent", actor="bench").key
    print(f"load: {os.getloadavg()[0]:.2f} (1-minute average, {os.cpu_count()} CPUs)")
    broker_down(url, key, args.reports)
    connections_cut(url, key, args.reports)
    worker_killed(url)
    huge_rule_duplicate_check()


if __name__ == "__main__":
    main()
