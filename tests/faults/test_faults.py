"""Faults on real services (PostgreSQL, Redis, gunicorn, Celery workers as processes): a broker
that is down while agents write, the database connection lost in the middle of requests, a
worker killed in the middle of a round. Whatever happens: no 500, no HTML error page, no lost
report, no decision taken twice. Figures for the same scenarios: bench/bench_faults.py.

    CI=true DATABASE_URL=postgres://…/cw_hard CELERY_BROKER_URL=redis://…/6 \\
        .venv/bin/python -m pytest tests/faults
"""

import json
import os
import threading
from datetime import timedelta
from pathlib import Path

import httpx
import psycopg
import pytest
import redis
from django.conf import settings
from django.db import connection

from cauterweb.celery import app
from lifecycle.journal import EventType
from lifecycle.models import JournalEvent, Report, Rule, TrialEnrolment
from lifecycle.services.reports import reports_ingest
from lifecycle.services.tokens import token_create
from lifecycle.validation import read_jsonl
from replay import lock
from replay.models import RoundStatus, ValidationRound
from replay.tasks import round_run_task
from tests.builders import T0, jsonl, report
from tests.scenarios import corpus, rule
from tests.services.test_engine_celery import rescuable

from .services import (
    Server,
    broker_emptied,
    environment,
    free_port,
    start_blocking_worker,
    start_worker,
    stop,
    wait_until,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.usefixtures("registry_seeded")]
SIMULATED = "replay.backends.simulated:replay"


SERVER_APP = "cw_fault_server"


def database_url(application_name: str = "") -> str:
    db = connection.settings_dict
    user = f"{db['USER']}@" if db.get("USER") else ""
    where = f"{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    return f"postgres://{user}{where}" + (
        f"?application_name={application_name}" if application_name else ""
    )


@pytest.fixture
def agent() -> dict:
    key = token_create(name="repair-bot", role="agent", actor="test").key
    return {"Authorization": f"Bearer {key}"}


def post_report(server: Server, headers: dict, i: int) -> httpx.Response:
    body = json.dumps(report(f"live-{i}", T0 + timedelta(minutes=i)))
    return httpx.post(
        f"{server.url}/api/v1/reports",
        content=body,
        headers={**headers, "Content-Type": "application/json"},
        timeout=30,
    )


def test_writes_go_on_while_the_broker_is_down_and_validation_catches_up(agent):
    rule("C-1", signature=["tool:kubectl", "error:image_pull_backoff"])
    dead_broker = f"redis://127.0.0.1:{free_port()}/6"
    server = Server(environment(database_url=database_url(), broker_url=dead_broker))
    try:
        answers = [post_report(server, agent, i) for i in range(30)]
    finally:
        logged = server.stop()
    assert [a.status_code for a in answers] == [200] * 30
    assert Report.objects.count() == 30
    # Intake enrolled the sessions the trial needs (not the round), and every missed kick is
    # journaled.
    needed = settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS
    assert TrialEnrolment.objects.filter(rule_id="C-1").count() == needed
    kicks = JournalEvent.objects.filter(type=EventType.VALIDATION_KICK_FAILED)
    assert kicks.count() == 30, sorted(k.evidence["kicked_by"] for k in kicks)
    assert "Traceback" not in logged

    # The broker is back: the next kick (beat's, sent here) validates with every report.
    broker_emptied(app, settings.CELERY_BROKER_URL)
    env = environment(
        database_url=database_url(),
        broker_url=settings.CELERY_BROKER_URL,
        CAUTERWEB_REPLAY_BACKEND=SIMULATED,
    )
    worker = start_worker(env, "fault-catch-up")
    try:
        wait_until(lambda: app.control.ping(timeout=0.5), timeout_s=60, what="the worker")
        round_run_task.apply_async(kwargs={"kicked_by": ""}, ignore_result=True)
        wait_until(
            lambda: Rule.objects.get(pk="C-1").state != "candidate", timeout_s=60, what="a verdict"
        )
    finally:
        stop(worker)
        broker_emptied(app, settings.CELERY_BROKER_URL)
    verdict = JournalEvent.objects.get(rule_id="C-1", type__in=["rule_promoted", "rule_retired"])
    assert verdict.evidence["trial"]["observed_sessions"] == needed


def _terminate_backends(stop_event: threading.Event, killed: list[int]) -> None:
    """Cut the server's connections to the database, again and again, until told to stop: they
    die between and in the middle of its requests."""
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"],
        dbname=db["NAME"],
        autocommit=True,
    ) as conn:
        while not stop_event.wait(0.1):
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                [SERVER_APP],
            ).fetchall()
            killed.append(len(rows))


def test_a_lost_database_connection_is_a_json_503_and_no_report_is_lost(agent):
    # connect_timeout: a connection cut while it is being opened fails fast instead of waiting.
    url = database_url(SERVER_APP) + "&connect_timeout=5"
    server = Server(environment(database_url=url, broker_url=""))
    stop_event, killed = threading.Event(), []
    cutter = threading.Thread(target=_terminate_backends, args=(stop_event, killed))
    statuses: list[int] = []
    try:
        cutter.start()
        for i in range(60):
            # The client does what a 503 asks: try again. Reports are idempotent per
            # (session, at), so a retry of one that did commit changes nothing.
            for _ in range(100):
                answer = post_report(server, agent, i)
                statuses.append(answer.status_code)
                assert answer.headers["content-type"].startswith("application/json")
                assert set(answer.json()) >= {"detail"} or answer.status_code == 200
                if answer.status_code == 200:
                    break
    finally:
        stop_event.set()
        cutter.join()
        logged = server.stop()
    assert set(statuses) <= {200, 503}, statuses
    assert statuses.count(200) == 60
    assert sum(killed) > 0
    assert Report.objects.count() == 60
    assert set(Report.objects.values_list("session_id", flat=True)) == {
        f"live-{i}" for i in range(60)
    }
    assert "Internal Server Error" not in logged


@pytest.fixture
def marker(tmp_path) -> Path:
    return tmp_path / "replay-started"


def test_a_worker_killed_mid_round_loses_nothing_and_decides_once(marker, monkeypatch):
    corpus(rescuable("F-1"))
    rule("R-1")
    broker_emptied(app, settings.CELERY_BROKER_URL)
    env = environment(database_url=database_url(), broker_url=settings.CELERY_BROKER_URL)
    doomed = start_blocking_worker(env, marker, "fault-doomed")
    healthy = None
    try:
        wait_until(lambda: app.control.ping(timeout=0.5), timeout_s=60, what="the worker")
        monkeypatch.undo()  # real kicks through the broker from here on
        round_run_task.delay(kicked_by="fault")
        wait_until(marker.exists, timeout_s=60, what="the round to reach its replay")
        # Reports arrive while the round is stuck; their kicks wait in the queue.
        reports_ingest(read_jsonl(jsonl(*(report(f"s-{i}", T0) for i in range(5)))))
        os.kill(doomed.pid, 9)
        doomed.wait()
        # The dead holder's lease is made to lapse now, so that the kicks queued meanwhile find
        # the lock free; how fast a lease lapses on its own is timed in test_leases.py.
        redis.Redis.from_url(settings.CAUTERWEB_LOCK_URL).pexpire(
            lock._redis_key(lock.ROUND_LOCK), 1
        )
        healthy = start_worker({**env, "CAUTERWEB_REPLAY_BACKEND": SIMULATED}, "fault-healthy")
        round_run_task.delay(kicked_by="after-kill")
        wait_until(
            lambda: Rule.objects.get(pk="R-1").state != "candidate", timeout_s=90, what="a verdict"
        )
    finally:
        stop(doomed)
        if healthy is not None:
            stop(healthy)
        broker_emptied(
            app, settings.CELERY_BROKER_URL
        )  # kicks left queued must not reach another test's workers
    assert (
        JournalEvent.objects.filter(
            rule_id="R-1", type__in=["rule_promoted", "rule_retired"]
        ).count()
        == 1
    )
    assert Rule.objects.get(pk="R-1").state == "active"
    assert Report.objects.count() == 5
    assert ValidationRound.objects.filter(status=RoundStatus.FINISHED).exists()
