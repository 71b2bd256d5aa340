"""Replays spread over real Celery workers on Redis and PostgreSQL (semantics §9.1, §18), and a
worker killed in the middle of a round.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cw_rounds \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/4 .venv/bin/python -m pytest tests/services/test_rounds_celery.py

Three single-process workers on the test database: the round runs on one, its replays on the
others. The harness of a candidate named `gated…` waits for a Redis key the test sets, so the
test decides when those replays end — no sleeps in the test.
"""

import os
import signal
import time

import pytest
from django.conf import settings
from django.db import connection

from lifecycle.models import JournalEvent, Rule
from replay import lock
from replay.models import ReplaySession, RoundStatus, ValidationRound
from replay.tasks import round_run_task
from tests.builders import celery_workers, database_url
from tests.scenarios import corpus, failing, rule, win
from tests.services.test_engine_celery import wait_for

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
GATE = "cauterweb:test:gate"


def _redis():
    import redis

    return redis.Redis.from_url(os.environ.get("CELERY_BROKER_URL", settings.CELERY_BROKER_URL))


def gated(case, context):
    """Instant, except for candidates whose directive says `gated`: those wait for the gate."""
    context.mark_execution_started()
    context.rule_tool(scope=case.rule["scope"])
    if case.rule["directive"].startswith("gated"):
        deadline = time.monotonic() + 120
        while not _redis().exists(GATE) and time.monotonic() < deadline:
            time.sleep(0.05)
    metrics = {**case.trajectory["metrics"], "task_completion": 0.9}
    return {"traces": [{"metrics": metrics}]}


@pytest.fixture(scope="module")
def workers(django_db_setup, django_db_blocker):
    from cauterweb.celery import app

    if connection.vendor != "postgresql" or not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("needs PostgreSQL and Redis")
    app.control.purge()
    env = {
        "DATABASE_URL": database_url(connection.settings_dict),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CAUTERWEB_REPLAY_BACKEND": "tests.services.test_rounds_celery:gated",
        "CAUTERWEB_REPLAY_DESIGN": "single",
        "CAUTERWEB_REPLAY_CONCURRENCY": "2",
        "CAUTERWEB_MAX_PROTECTED_WINS": "1",
        "CAUTERWEB_REPLAY_TIMEOUT_S": "120",
        "CAUTERWEB_ROUND_SCHEDULE_S": "3600",
    }
    with celery_workers(app, prefix="rounds-test", count=3, env=env) as procs:
        yield procs


def verdict_events(rule_id: str) -> list:
    return list(
        JournalEvent.objects.filter(
            rule_id=rule_id, type__in=["rule_promoted", "rule_retired"]
        ).values_list("type", "round_id")
    )


@pytest.mark.usefixtures("registry_seeded")
def test_a_worker_killed_mid_round_loses_no_verdict_and_the_next_round_finishes(
    workers, monkeypatch
):  # semantics §3, §9.1, §18
    _redis().delete(GATE)
    corpus(failing("F-1"), win("S-1"))
    rule("R-1", directive="pull first")
    rule("R-2", directive="gated: pull first")
    rule("R-3", directive="pull before pushing")
    monkeypatch.undo()  # from here on, real kicks through the broker
    round_run_task.delay(kicked_by="fault test")
    # R-1 is decided and written while R-2's replays hang on two other workers.
    wait_for(lambda: verdict_events("R-1"))
    wait_for(lambda: ReplaySession.objects.filter(rule_id="R-2", status="running").count() == 2)
    first = ValidationRound.objects.get()
    host, pid = first.worker.rsplit(":", 1)
    os.kill(int(pid), signal.SIGKILL)
    workers_left = [p for p in workers if p.pid != int(pid)]
    assert len(workers_left) == 2
    _redis().set(GATE, "1")  # the hung replays end; nobody collects them
    # Its lock expires (as it would after its time to live): the next round reaps the round.
    _redis().delete(f"cauterweb:lock:{lock.ROUND_LOCK}")
    round_run_task.delay(kicked_by="after the fault")
    wait_for(lambda: ValidationRound.objects.filter(status=RoundStatus.FINISHED).exists())
    first.refresh_from_db()
    assert first.status == RoundStatus.FAILED
    (finished,) = JournalEvent.objects.filter(round_id=first.pk, type="validation_round_finished")
    assert finished.evidence["promoted"] == 1
    assert "worker" in finished.evidence["errors"][0]["error"]
    second = ValidationRound.objects.get(status=RoundStatus.FINISHED)
    assert verdict_events("R-1") == [("rule_promoted", first.pk)]
    assert verdict_events("R-2") == [("rule_promoted", second.pk)]
    assert verdict_events("R-3") == [("rule_promoted", second.pk)]
    assert set(Rule.objects.values_list("state", flat=True)) == {"active"}
