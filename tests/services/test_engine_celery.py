"""Rounds through real Celery workers on Redis and PostgreSQL (semantics §3, §9.1).

Run with both services, e.g.:
    CELERY_BROKER_URL=redis://127.0.0.1:6379/4 DATABASE_URL=postgres://postgres@127.0.0.1:5432/cw_rounds \\
        .venv/bin/python -m pytest tests/test_engine_celery.py
The workers are subprocesses pointed at pytest-django's test database (`test_<name>`), so the
data they see is what the test committed (transactional_db).
"""

import time
from datetime import timedelta
from itertools import pairwise

import pytest
from django.conf import settings
from django.db import connection

from lifecycle.models import JournalEvent, Rule
from lifecycle.services.reports import reports_ingest
from lifecycle.validation import read_jsonl
from replay.models import RoundStatus, ValidationRound
from replay.tasks import round_run_task
from tests.builders import T0, celery_workers, database_url, jsonl, report
from tests.scenarios import corpus, failing, rule

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
SIMULATED = "replay.backends.simulated:replay"


@pytest.fixture(scope="module")
def workers(django_db_setup, django_db_blocker):
    """Two Celery workers on the test database; stopped (by pid) when the module ends."""
    from cauterweb.celery import app

    if connection.vendor != "postgresql" or not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("needs PostgreSQL and Redis")
    app.control.purge()
    env = {
        "DATABASE_URL": database_url(connection.settings_dict),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CAUTERWEB_REPLAY_BACKEND": SIMULATED,
        "CAUTERWEB_REPLAY_DESIGN": "single",
        "CAUTERWEB_ROUND_SCHEDULE_S": "3600",
    }
    with celery_workers(app, prefix="engine-test", count=2, env=env) as procs:
        yield procs


def wait_for(predicate, *, timeout_s: float = 60.0) -> None:
    """Wait for the workers (other processes) to reach a state; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for the workers"
        time.sleep(0.1)


def rescuable(tid: str) -> dict:
    """A failing case the simulated agent gets right when a rule says to pull first."""
    line = failing(tid)
    fault = {"step": 0, "atoms": line["signature"]}
    fix = {"directive_terms": ["pull"], "effect": "rescue", "metrics": {"task_completion": 0.9}}
    line["replay_input"] = {"task": "push", "scope": "git", "fault": fault, "fixes": [fix]}
    return line


def rounds_settled() -> bool:
    return not ValidationRound.objects.filter(status=RoundStatus.RUNNING).exists()


@pytest.mark.usefixtures("workers", "registry_seeded")
def test_two_workers_racing_apply_one_verdict(monkeypatch):  # semantics §3, §9.1
    monkeypatch.undo()  # real kicks, through the broker
    corpus(rescuable("F-1"))
    candidate = rule("R-1")
    for _ in range(8):
        round_run_task.delay(kicked_by="race")
    wait_for(lambda: Rule.objects.get(pk=candidate.pk).state != "candidate")
    wait_for(rounds_settled)
    assert (
        JournalEvent.objects.filter(
            rule_id="R-1", type__in=["rule_promoted", "rule_retired"]
        ).count()
        == 1
    )
    assert Rule.objects.get(pk=candidate.pk).state == "active"
    # Two workers were consuming and every kick was taken (which worker takes which is the
    # broker's choice: one may drain them all while the other polls); the lock turned the
    # losers' into no-ops, so no two rounds ever overlapped.
    from cauterweb.celery import app

    # The verdict can land while the last no-op kicks still wait in the queue, and a loaded
    # worker can miss one inspect's reply: ask until both answer and all eight were taken.
    def taken() -> list[int]:
        stats = app.control.inspect(timeout=2).stats() or {}
        return [w["total"].get("replay.tasks.round_run_task", 0) for w in stats.values()]

    wait_for(lambda: len(counts := taken()) == 2 and sum(counts) >= 8)
    rounds = list(ValidationRound.objects.order_by("started_at"))
    for earlier, later in pairwise(rounds):
        assert earlier.finished_at <= later.started_at


@pytest.mark.usefixtures("workers", "registry_seeded")
def test_a_report_kicks_a_round_on_a_worker_that_journals_the_verdict(monkeypatch):
    monkeypatch.undo()  # semantics §8, §9.1 end to end: report in → round kicked → verdict
    rule("R-9", signature=["tool:kubectl", "error:image_pull_backoff"])
    wait_for(rounds_settled)
    before = ValidationRound.objects.count()
    reports = [report(f"live-{i}", T0 + timedelta(minutes=i)) for i in range(5)]
    reports_ingest(read_jsonl(jsonl(*reports)))
    wait_for(lambda: JournalEvent.objects.filter(rule_id="R-9", type="rule_promoted").exists())
    promoted = JournalEvent.objects.get(rule_id="R-9", type="rule_promoted")
    assert promoted.evidence["validator"] == "forward_trial"
    assert promoted.evidence["trial"]["observed_sessions"] == 5
    assert ValidationRound.objects.count() > before


@pytest.mark.usefixtures("workers", "registry_seeded")
def test_a_rounds_replays_reach_the_workers_as_batches_each_claimed_and_counted_once(settings):
    # docs/semantics.md#s18-batches: the round (here, in this process) sends what it sends
    # together as one task; the workers claim, run, store and signal each batch.
    from replay.models import ReplaySession
    from replay.rounds import round_run
    from tests.scenarios import win

    settings.CAUTERWEB_REPLAY_BACKEND = SIMULATED
    settings.CAUTERWEB_REPLAY_DESIGN = "single"
    settings.CAUTERWEB_REPLAY_CONCURRENCY = 4
    corpus(rescuable("F-1"), rescuable("F-2"), win("S-1"), win("S-2"))
    rule("R-1")
    vround = round_run()
    assert vround.status == RoundStatus.FINISHED
    assert (vround.summary["decided"], vround.summary["promoted"]) == (1, 1)
    # Two failing cases and two protected wins, sent together: one task, not four.
    assert (vround.summary["replays"], vround.summary["replay_tasks"]) == (4, 1)
    rows = ReplaySession.objects.filter(round_id=vround.pk)
    assert [(r.status, r.attempts, r.result["error"]) for r in rows] == [("done", 1, None)] * 4
    cases = JournalEvent.objects.filter(round_id=vround.pk, type="validation_replay_case")
    sessions = [e["replay_session"] for e in cases.values_list("evidence", flat=True)]
    assert sorted(sessions) == sorted(rows.values_list("id", flat=True))  # each counted once
