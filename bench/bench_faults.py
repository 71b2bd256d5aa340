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


def _round_env(url: str, **extra: str) -> dict:
    from tests.faults.services import environment

    defaults = {
        "CAUTERWEB_REPLAY_BACKEND": "replay.backends.simulated:replay",
        "CAUTERWEB_REPLAY_CONCURRENCY": "2",
    }
    return environment(
        database_url=url, broker_url=os.environ["CELERY_BROKER_URL"], **{**defaults, **extra}
    )


def _emptied() -> None:
    from cauterweb.celery import app
    from tests.faults.services import broker_emptied

    broker_emptied(app, os.environ["CELERY_BROKER_URL"])


def _timed_round(
    url: str, rule_id: str, *, replay_env: dict | None, marker: Path, kill: bool = False
) -> dict:
    """One round at concurrency 2: a round worker, then a replay worker (with `kill`, killed at
    its first replay and replaced at once by a healthy one). Seconds from kick to end."""
    from cauterweb.celery import app
    from replay.models import ReplaySession, RoundStatus, ValidationRound
    from replay.tasks import round_run_task
    from tests.faults.services import start_worker, stop, wait_until

    env = _round_env(url)
    _emptied()
    procs = [start_worker(env, f"bench-round-{rule_id}")]
    try:
        wait_until(lambda: app.control.ping(timeout=0.5), timeout_s=60, what="the worker")
        before = ValidationRound.objects.count()
        begun = time.perf_counter()
        round_run_task.delay(kicked_by="bench")
        wait_until(
            lambda: ReplaySession.objects.filter(rule_id=rule_id).exists(),
            timeout_s=60,
            what="the round's first replays",
        )
        procs.append(start_worker(replay_env or env, f"bench-replays-{rule_id}"))
        if kill:
            wait_until(marker.exists, timeout_s=60, what="the doomed worker's replay")
            procs[-1].kill()
            procs[-1].wait()
            procs.append(start_worker(env, f"bench-fresh-{rule_id}"))
        wait_until(
            lambda: (
                ValidationRound.objects.count() > before
                and not ValidationRound.objects.filter(status=RoundStatus.RUNNING).exists()
            ),
            timeout_s=600,
            what="the round to end",
        )
        took = time.perf_counter() - begun
    finally:
        for proc in procs:
            stop(proc)
        _emptied()
    vround = ValidationRound.objects.order_by("-id").first()
    return {"took": took, "round": vround}


def replay_worker_killed(url: str) -> None:
    """The cost of a replay worker killed mid-replay (restarted at once) over a calm round."""
    from lifecycle.models import JournalEvent, Rule
    from replay.models import ReplaySession

    marker = ROOT / "var" / "bench-faults-marker"
    marker.parent.mkdir(exist_ok=True)
    runs = {}
    for label, rule_id in (("calm", "K-2"), ("killed", "K-3")):
        Rule.objects.filter(state="candidate").update(state="retired", pending_reason="")
        _seed_replay_candidate(rule_id)
        marker.unlink(missing_ok=True)
        doomed = None
        if label == "killed":
            doomed = _round_env(
                url,
                CAUTERWEB_REPLAY_BACKEND="tests.faults.harness:blocking_replay",
                FAULT_MARKER=str(marker),
            )
        runs[label] = _timed_round(
            url, rule_id, replay_env=doomed, marker=marker, kill=doomed is not None
        )
    killed = runs["killed"]["round"]
    sessions = ReplaySession.objects.filter(round_id=killed.pk)
    twice = sessions.filter(attempts__gt=1).count()
    verdicts = JournalEvent.objects.filter(rule_id="K-3", type="validation_verdict").count()
    print(
        f"replay worker killed mid-replay, a fresh one started at once (concurrency 2): round "
        f"{runs['calm']['took']:.1f} s calm, {runs['killed']['took']:.1f} s with the kill "
        f"(+{runs['killed']['took'] - runs['calm']['took']:.1f} s; lease {_lease_s():g} s); "
        f"{killed.summary.get('replays_resent', 0)} replay sent again, {twice} on a 2nd attempt, "
        f"{sessions.count()} replays each counted once; {verdicts} verdict"
    )


def _lease_s() -> float:
    from replay import dispatch

    return dispatch.LEASE_S


def worker_killed(url: str) -> None:
    """A round's holder killed mid-round: how long until the next round starts (one kick sent
    at once finds the dead holder's lock and follows up)."""
    from cauterweb.celery import app
    from lifecycle.models import JournalEvent, Rule
    from replay import lock
    from replay.models import ValidationRound
    from replay.tasks import round_run_task
    from tests.faults.services import environment, start_worker, stop, wait_until

    marker = ROOT / "var" / "bench-faults-marker"
    marker.parent.mkdir(exist_ok=True)
    marker.unlink(missing_ok=True)
    Rule.objects.filter(state="candidate").update(state="retired", pending_reason="")
    _seed_replay_candidate("K-1")
    _emptied()
    env = environment(database_url=url, broker_url=os.environ["CELERY_BROKER_URL"])
    doomed = start_worker(
        {**env, "CAUTERWEB_REPLAY_BACKEND": "tests.faults.harness:blocking_replay",
         "FAULT_MARKER": str(marker)},
        "bench-doomed",
    )  # fmt: skip
    healthy = None
    try:
        wait_until(lambda: app.control.ping(timeout=0.5), timeout_s=60, what="the worker")
        before = ValidationRound.objects.count()
        round_run_task.delay(kicked_by="bench")
        wait_until(marker.exists, timeout_s=60, what="the round to reach its replay")
        doomed.kill()
        doomed.wait()
        begun = time.perf_counter()
        healthy = start_worker(
            {**env, "CAUTERWEB_REPLAY_BACKEND": "replay.backends.simulated:replay"}, "bench-healthy"
        )
        round_run_task.delay(kicked_by="bench-after-kill")
        wait_until(
            lambda: ValidationRound.objects.count() > before + 1,
            timeout_s=300,
            what="the next round",
        )
        next_round = time.perf_counter() - begun
    finally:
        if healthy is not None:
            stop(healthy)
        stop(doomed)
        _emptied()
    dead = ValidationRound.objects.order_by("id")[before]
    verdicts = JournalEvent.objects.filter(rule_id="K-1", type="validation_verdict").count()
    print(
        f"round holder killed mid-round: the next round started {next_round:.1f} s later "
        f"(lock TTL {lock.lock_ttl_s():g} s, a fresh worker's start-up included); the dead round "
        f"{dead.status}: {dead.error!r}; {verdicts} verdict(s) so far"
    )


def redis_paused(url: str, key: str, pause_s: float) -> None:
    """POST /reports while the broker is paused (SIGSTOP) for `pause_s`: the slowest call."""
    import httpx

    from lifecycle.models import Report
    from tests.faults.services import PrivateRedis, Server, environment

    redis_server = PrivateRedis()
    server = Server(environment(database_url=url, broker_url=redis_server.url))
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    took, statuses, n = [], [], 0
    try:
        with httpx.Client(timeout=60) as client:

            def post() -> None:
                nonlocal n
                body = {"session_id": f"paused-{n}", "at": (T0 + timedelta(seconds=n)).isoformat()}
                n += 1
                begun = time.perf_counter()
                statuses.append(
                    client.post(
                        f"{server.url}/api/v1/reports", json=body, headers=headers
                    ).status_code
                )
                took.append(time.perf_counter() - begun)

            post()
            redis_server.pause()
            until = time.monotonic() + pause_s
            try:
                while time.monotonic() < until:
                    post()
            finally:
                redis_server.resume()
            post()
    finally:
        server.stop()
        redis_server.stop()
    stored = Report.objects.filter(session_id__startswith="paused-").count()
    print(
        f"redis paused {pause_s:g} s: {n} reports, {statuses.count(200)} × 200, {stored} stored "
        f"once; slowest call {max(took):.2f} s, {percentiles(took)}"
    )


def nan_answers(url: str) -> None:
    """A harness answering NaN (failing cases) and 93.0 (protected wins) at concurrency 2."""
    from lifecycle.models import JournalEvent, Rule
    from replay.models import ReplaySession

    Rule.objects.filter(state="candidate").update(state="retired", pending_reason="")
    _seed_replay_candidate("K-4")
    marker = ROOT / "var" / "bench-faults-marker"
    env = _round_env(url, CAUTERWEB_REPLAY_BACKEND="tests.faults.harness:nan_replay")
    run = _timed_round(url, "K-4", replay_env=env, marker=marker)
    cases = JournalEvent.objects.filter(round_id=run["round"].pk, type="validation_replay_case")
    outcomes = [e["outcome"] for e in cases.values_list("evidence", flat=True)]
    stuck = ReplaySession.objects.filter(rule_id="K-4").exclude(status="done").count()
    print(
        f"NaN / out-of-range answers: round {run['took']:.1f} s, {len(outcomes)} replays, "
        f"{outcomes.count('inconclusive')} inconclusive with a reason, {stuck} slots stuck"
    )


def _seed_replay_candidate(rule_id: str = "K-1") -> None:
    from lifecycle.services.corpus import import_corpus
    from lifecycle.services.rules import rule_record_candidate
    from lifecycle.states import Actor

    signature = ["tool:git", "action:git.push", "error:non_fast_forward"]
    fault = {"step": 0, "atoms": signature}
    fix = {"directive_terms": ["pull"], "effect": "rescue", "metrics": {"task_completion": 0.9}}
    line = {
        "id": f"F-{rule_id}", "kind": "failure", "task": "push", "outcome": {"status": "failed"},
        "steps": [{"tool": "git", "input": "git push", "output": "", "error": "rejected"}],
        "metrics": {"task_completion": 0.2, "coherence": 0.8}, "signature": signature,
        "notices": ["breach:task_completion"], "started_at": T0.isoformat(),
        "replay_input": {"task": "push", "scope": "git", "fault": fault, "fixes": [fix]},
    }  # fmt: skip
    import_corpus([json.dumps(line)])
    rule_record_candidate(
        actor=Actor.agent("bench"), rule_id=rule_id, trigger="when git push fails as non-fast-forward",
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


ALL = (
    "broker-down",
    "connections-cut",
    "redis-paused",
    "nan-answers",
    "replay-worker-killed",
    "round-holder-killed",
    "huge-rule",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=100)
    parser.add_argument("--pause", type=float, default=30.0, help="seconds Redis is paused")
    parser.add_argument(
        "--only", default="", help="comma-separated scenarios (default: all): " + ",".join(ALL)
    )
    args = parser.parse_args()
    only = set(filter(None, args.only.split(","))) or set(ALL)
    url = os.environ["DATABASE_URL"]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")
    fresh_database(url)
    import django

    django.setup()
    from lifecycle.services.tokens import token_create

    key = token_create(name="bench-agent", role="agent", actor="bench").key
    print(f"load: {os.getloadavg()[0]:.2f} (1-minute average, {os.cpu_count()} CPUs)")
    steps = {
        "broker-down": lambda: broker_down(url, key, args.reports),
        "connections-cut": lambda: connections_cut(url, key, args.reports),
        "redis-paused": lambda: redis_paused(url, key, args.pause),
        "nan-answers": lambda: nan_answers(url),
        "replay-worker-killed": lambda: replay_worker_killed(url),
        "round-holder-killed": lambda: worker_killed(url),
        "huge-rule": huge_rule_duplicate_check,
    }
    for name in ALL:
        if name in only:
            steps[name]()
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
