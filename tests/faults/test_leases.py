"""Faults that cost seconds, not minutes (docs/semantics.md#s18-lease,
docs/semantics.md#s9-1-lease), on real services: PostgreSQL, Redis (the shared one for the
broker, a private redis-server where a test pauses or restarts it) and Celery workers as
processes. Whatever happens: nothing lost, nothing decided twice; and the work known lost is
taken up again long before any deadline. Figures for the same scenarios: bench/bench_faults.py.
"""

import os
import time
from datetime import timedelta

import httpx
import psycopg
import pytest
from django.conf import settings
from django.db import connection, transaction

from cauterweb.celery import app
from lifecycle.journal import EventType
from lifecycle.models import JournalEvent, Report
from lifecycle.services.tokens import token_create
from replay import dispatch, lock
from replay.models import EngineLock, ReplaySession, RoundStatus, ValidationRound
from replay.rounds import round_run
from replay.tasks import round_run_task
from tests.builders import T0, report
from tests.scenarios import corpus, failing, rule
from tests.services.test_engine_celery import rescuable

from .services import (
    PrivateRedis,
    Server,
    broker_emptied,
    environment,
    start_blocking_worker,
    start_worker,
    stop,
    wait_until,
)
from .test_faults import SIMULATED, database_url

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.usefixtures("registry_seeded")]
# A lost replay is counted inconclusive after its timeouts and a grace (300 s + 60 s by
# default): every wait below is far shorter, so passing means the loss was found otherwise.
DEADLINE_S = settings.CAUTERWEB_REPLAY_TIMEOUT_S + dispatch.LOST_GRACE_S


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "replay-started"


@pytest.fixture
def private_redis():
    server = PrivateRedis()
    yield server
    server.stop()


def test_a_replay_worker_killed_mid_replay_is_sent_again_within_seconds_and_counts_once(
    marker, monkeypatch
):
    corpus(rescuable("F-1"))
    rule("R-1")
    broker_emptied(app, settings.CELERY_BROKER_URL)
    env = environment(
        database_url=database_url(),
        broker_url=settings.CELERY_BROKER_URL,
        CAUTERWEB_REPLAY_BACKEND=SIMULATED,
        CAUTERWEB_REPLAY_CONCURRENCY="2",
    )
    # The round's worker first (solo: busy with the round, it takes no replay) ...
    rounds = start_worker(env, "fault-round")
    doomed = healthy = None
    try:
        wait_until(lambda: app.control.ping(timeout=0.5), timeout_s=60, what="the worker")
        monkeypatch.undo()  # real kicks through the broker from here on
        round_run_task.delay(kicked_by="fault")
        wait_until(
            lambda: ReplaySession.objects.filter(status="queued").count() >= 2,
            timeout_s=60,
            what="the round to send its first replays",
        )
        # ... then a worker that takes both in one batch (docs/semantics.md#s18-batches): it
        # finishes one, hangs in the other, and is killed running it. The replays the round
        # opened ahead it takes as it stores, and runs: the look ends with the hung one alone.
        doomed = start_blocking_worker(env, marker, "fault-doomed", "blocking_one_replay")
        wait_until(marker.exists, timeout_s=60, what="a replay to start on the doomed worker")
        wait_until(
            lambda: (
                ReplaySession.objects.filter(status="done").exists()
                and not ReplaySession.objects.filter(status="queued").exists()
                and ReplaySession.objects.filter(status="running").count() == 1
            ),
            timeout_s=60,
            what="the other replays of its look to be stored",
        )
        finished = list(ReplaySession.objects.filter(status="done"))
        (lost,) = ReplaySession.objects.filter(status="running")
        os.kill(doomed.pid, 9)
        doomed.wait()
        killed_at = time.monotonic()
        healthy = start_worker(env, "fault-healthy")  # as a supervisor would, at once
        wait_until(
            lambda: not ValidationRound.objects.filter(status=RoundStatus.RUNNING).exists(),
            timeout_s=DEADLINE_S / 3,
            what="the round to end",
        )
        took = time.monotonic() - killed_at
    finally:
        for proc in (rounds, doomed, healthy):
            if proc is not None:
                stop(proc)
        broker_emptied(app, settings.CELERY_BROKER_URL)
    vround = ValidationRound.objects.get()
    assert vround.status == RoundStatus.FINISHED
    assert vround.summary["replays_resent"] == 1
    # One verdict (a first look may leave it pending, §17.3), never two; every replay done
    # with one result, the lost one on its second attempt.
    assert vround.summary["decided"] + vround.summary["pending"] == 1
    verdicts = JournalEvent.objects.filter(rule_id="R-1", type=EventType.VALIDATION_VERDICT)
    assert verdicts.count() == 1
    decisions = JournalEvent.objects.filter(
        rule_id="R-1", type__in=["rule_promoted", "rule_retired"]
    )
    assert decisions.count() == vround.summary["decided"]
    lost.refresh_from_db()
    assert (lost.status, lost.attempts, lost.result["error"]) == ("done", 2, None)
    for one in finished:  # the batch's finished replays: kept, not sent again
        one.refresh_from_db()
        assert (one.status, one.attempts, one.result["error"]) == ("done", 1, None)
    rows = ReplaySession.objects.filter(round_id=vround.pk)
    assert set(rows.values_list("status", flat=True)) == {"done"}
    assert not rows.filter(result__isnull=True).exists()
    cases = JournalEvent.objects.filter(round_id=vround.pk, type=EventType.VALIDATION_REPLAY_CASE)
    sessions = [e["replay_session"] for e in cases.values_list("evidence", flat=True)]
    assert sorted(sessions) == sorted(rows.values_list("id", flat=True))  # each counted once
    assert took < DEADLINE_S / 3, took


def test_a_killed_round_holder_is_replaced_within_seconds_and_its_round_closed(marker, monkeypatch):
    corpus(rescuable("F-1"))
    rule("R-1")
    broker_emptied(app, settings.CELERY_BROKER_URL)
    env = environment(database_url=database_url(), broker_url=settings.CELERY_BROKER_URL)
    doomed = start_blocking_worker(env, marker, "fault-holder")
    healthy = None
    try:
        wait_until(lambda: app.control.ping(timeout=0.5), timeout_s=60, what="the worker")
        monkeypatch.undo()
        round_run_task.delay(kicked_by="fault")
        wait_until(marker.exists, timeout_s=60, what="the round to reach its replay")
        os.kill(doomed.pid, 9)
        doomed.wait()
        killed_at = time.monotonic()
        healthy = start_worker({**env, "CAUTERWEB_REPLAY_BACKEND": SIMULATED}, "fault-next")
        # One kick, at once: it finds the dead holder's lock still there, and follows up.
        round_run_task.delay(kicked_by="after-kill")
        wait_until(
            lambda: ValidationRound.objects.count() == 2, timeout_s=120, what="the next round"
        )
        next_round_after = time.monotonic() - killed_at
        wait_until(
            lambda: not ValidationRound.objects.filter(status=RoundStatus.RUNNING).exists(),
            timeout_s=120,
            what="the next round to end",
        )
    finally:
        stop(doomed)
        if healthy is not None:
            stop(healthy)
        broker_emptied(app, settings.CELERY_BROKER_URL)
    dead, second = ValidationRound.objects.order_by("id")
    assert dead.status == RoundStatus.FAILED and second.status == RoundStatus.FINISHED
    # Its true cause: the worker that ran it, and when it last renewed its lock.
    assert dead.worker.endswith(f":{doomed.pid}")
    assert f"the worker running this round ({dead.worker}) stopped renewing its lock" in dead.error
    assert second.fence > dead.fence
    assert dead.summary["replays"] == 0  # it hung on its first replay
    # The next round gave R-1 its one verdict (decided, or pending after a first look).
    assert second.summary["decided"] + second.summary["pending"] == 1
    verdicts = JournalEvent.objects.filter(rule_id="R-1", type=EventType.VALIDATION_VERDICT)
    assert list(verdicts.values_list("round_id", flat=True)) == [second.pk]
    decisions = JournalEvent.objects.filter(
        rule_id="R-1", type__in=["rule_promoted", "rule_retired"]
    )
    assert decisions.count() == second.summary["decided"]
    # The lock's time to live and a follow-up kick: seconds, not the minutes of old.
    assert next_round_after < 4 * lock.lock_ttl_s(), next_round_after


def test_a_paused_redis_costs_a_write_its_socket_timeout_and_every_report_is_stored_once(
    private_redis,
):
    rule("C-1", signature=["tool:kubectl", "error:image_pull_backoff"])
    key = token_create(name="repair-bot", role="agent", actor="test").key
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    server = Server(environment(database_url=database_url(), broker_url=private_redis.url))
    took, statuses = [], []
    try:
        with httpx.Client(timeout=30) as client:

            def post(i: int) -> None:
                body = report(f"paused-{i}", T0 + timedelta(minutes=i))
                begun = time.monotonic()
                answer = client.post(f"{server.url}/api/v1/reports", json=body, headers=headers)
                took.append(time.monotonic() - begun)
                statuses.append(answer.status_code)

            post(0)  # the broker up: the server's connection to it is open
            private_redis.pause()
            try:
                for i in range(1, 9):
                    post(i)
            finally:
                private_redis.resume()
            post(9)
    finally:
        logged = server.stop()
    assert statuses == [200] * 10
    assert Report.objects.count() == 10
    assert len(set(Report.objects.values_list("session_id", flat=True))) == 10
    # A hung broker costs a write its 2 s socket timeout once, then the kicks back off; each
    # missed kick is journaled, and the round catches up on the next kick or beat's.
    assert max(took) < 3 * settings.BROKER_TIMEOUT_S, took
    failed = JournalEvent.objects.filter(type=EventType.VALIDATION_KICK_FAILED).count()
    assert failed >= 8  # the last report's kick may still be backing off
    assert "Traceback" not in logged


def test_a_lock_is_neither_carried_across_a_redis_restart_nor_lost_to_a_pause(
    private_redis, settings, tmp_path
):
    persistent = PrivateRedis(persistent_dir=str(tmp_path))
    try:
        settings.CAUTERWEB_LOCK_URL = persistent.url
        dead = lock.acquire("dead-holder")
        assert dead and not lock.acquire("next-holder")
        # The holder dies; its Redis restarts and reloads the lock from its file ...
        persistent.stop()
        persistent.start()
        lock.redis_client.cache_clear()
        begun = time.monotonic()
        # ... where it lives out its short time to live, no longer.
        wait_until(
            lambda: lock.acquire("next-holder"), timeout_s=3 * lock.lock_ttl_s(), what="the lock"
        )
        assert time.monotonic() - begun <= lock.lock_ttl_s() + 2
        assert EngineLock.objects.get().fence == dead + 1
    finally:
        persistent.stop()
        lock.redis_client.cache_clear()

    # A lease whose lock vanished unseen (a Redis restart without persistence, a pause past
    # its TTL) takes it again: no one took the next fencing token meanwhile.
    settings.CAUTERWEB_LOCK_URL = private_redis.url
    fence = lock.acquire("holder-a")
    lease = lock.Lease("holder-a", fence, threaded=False)
    lock.redis_client(private_redis.url).flushall()
    lease._beat()
    assert not lease.lost.is_set()
    assert not lock.acquire("holder-b")
    # Taken by another meanwhile: the lease is lost, and its fenced writes refused.
    lock.redis_client(private_redis.url).flushall()
    assert lock.acquire("holder-b") == fence + 1
    lease._beat()
    with pytest.raises(lock.LockLost):
        lease.check()
    with pytest.raises(lock.LockLost), transaction.atomic():
        lock.fenced(fence)
    lock.release("holder-b")
    lock.redis_client.cache_clear()


def cut_the_rounds_connection(case, context):
    """A harness that terminates the round's own database backend (its pid in FAULT_PID),
    once."""
    pid = os.environ.pop("FAULT_PID", None)
    if pid is None:
        return {"traces": [{"metrics": {**case.trajectory["metrics"], "task_completion": 0.9}}]}
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"],
        dbname=db["NAME"], autocommit=True,
    ) as conn:  # fmt: skip
        conn.execute("SELECT pg_terminate_backend(%s)", [int(pid)])
    return {"traces": [{"metrics": {**case.trajectory["metrics"], "task_completion": 0.9}}]}


def test_a_round_whose_connection_is_cut_records_its_own_end_on_a_fresh_one(settings, monkeypatch):
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.faults.test_leases:cut_the_rounds_connection"
    settings.CAUTERWEB_REPLAY_DESIGN = "single"
    settings.CAUTERWEB_LOCK_URL = ""
    corpus(failing("F-1"))
    rule("R-1", directive="pull first")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        monkeypatch.setenv("FAULT_PID", str(cursor.fetchone()[0]))
    vround = round_run()
    assert vround is not None
    # Not left running for the next round to reap as dead: it recorded its own end.
    assert vround.status in (RoundStatus.FINISHED, RoundStatus.FAILED)
    assert "stopped renewing its lock" not in vround.error
    (finished,) = JournalEvent.objects.filter(
        round_id=vround.pk, type=EventType.VALIDATION_ROUND_FINISHED
    )
    assert finished.evidence["replays"] == vround.summary["replays"] >= 1
    # The lock was released: the next round runs at once and decides what is left, once.
    assert round_run() is not None
    assert (
        JournalEvent.objects.filter(
            rule_id="R-1", type__in=["rule_promoted", "rule_retired"]
        ).count()
        <= 1
    )
