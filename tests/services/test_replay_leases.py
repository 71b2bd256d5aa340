"""Replay answers checked against the contract, and replay tasks as leased work
(docs/semantics.md#s7-5, docs/semantics.md#s18-lease): an answer out of contract is an
inconclusive replay with its reason; a replay whose worker stopped heartbeating is sent again
and counts once; the attempt that lost its lease stores nothing."""

import math
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from replay import dispatch
from replay.cases import TREATMENT
from replay.dispatch import CeleryPool, Job, OutOfContract, answer_metrics
from replay.models import ReplaySession
from tests.builders import round_config
from tests.scenarios import corpus, failing, rule

SID = "replay:1:R-1:F-1"


def job() -> Job:
    return Job("R-1", "F-1", "failing", TREATMENT, 0, SID)


def session(**metrics) -> dict:
    return {"traces": [{"metrics": {"coherence": 0.5}}, {"metrics": metrics}]}


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (session(task_completion=math.nan), "'task_completion' is nan, not a finite number"),
        (session(task_completion=math.inf), "'task_completion' is inf, not a finite number"),
        (session(task_completion=93.0), "'task_completion' is 93.0, outside [0, 1]"),
        (session(task_completion=-0.1), "'task_completion' is -0.1, outside [0, 1]"),
        (session(task_completion="0.5"), "'task_completion' is '0.5' (str), not a number"),
        (session(task_completion=True), "'task_completion' is True (bool), not a number"),
        ({"traces": []}, "the session has no trace with metrics"),
        ({"traces": [{"metrics": [0.5]}]}, "the session has no trace with metrics"),
        ([1, 2], "the answer is list, not a session object"),
        (None, "the answer is NoneType, not a session object"),
    ],
)
def test_an_answer_out_of_contract_is_refused_with_its_reason(answer, reason):
    with pytest.raises(OutOfContract) as refused:
        answer_metrics(answer)
    assert reason in str(refused.value)


def test_an_answer_in_contract_is_its_last_traces_metrics():
    assert answer_metrics(session(task_completion=1, coherence=0.25)) == {
        "task_completion": 1.0,
        "coherence": 0.25,
    }


def test_a_verifier_answering_nan_or_infinity_gave_no_answer():
    for answer in (math.nan, math.inf, -math.inf, True, "x"):
        assert dispatch.verify(lambda s, i, a=answer: a, {}, None) is None
    assert dispatch.verify(lambda s, i: 0.25, {}, None) == 0.25


def nan_harness(case, context):
    return {"traces": [{"metrics": {"task_completion": float("nan")}}]}


def out_of_range_harness(case, context):
    return {"traces": [{"metrics": {"task_completion": 93.0}}]}


def nan_verifier(session, replay_input):
    return float("nan")


def stored_replay(settings, backend: str, verifier: str = "") -> ReplaySession:
    settings.CAUTERWEB_REPLAY_BACKEND = f"tests.services.test_replay_leases:{backend}"
    settings.CAUTERWEB_VERIFIER = verifier and f"tests.services.test_replay_leases:{verifier}"
    dispatch.forget_rounds()
    corpus(failing("F-1"))
    rule("R-1")
    dispatch.open_session(job(), 1, status="queued")
    try:
        assert dispatch.run_stored(SID) is True
    finally:
        redis = dispatch._results_redis()
        if redis is not None:
            redis.delete(dispatch.results_key(1))
    return ReplaySession.objects.get()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("backend", "reason"),
    [("nan_harness", "is nan, not a finite number"), ("out_of_range_harness", "outside [0, 1]")],
)
def test_a_replay_task_stores_an_answer_out_of_contract_as_inconclusive(settings, backend, reason):
    # On PostgreSQL a NaN in the result was refused by its JSON: the row stayed "running".
    row = stored_replay(settings, backend)
    assert row.status == "done" and row.lease_expires_at is None
    assert row.result["metrics"] is None
    assert row.result["error"].startswith("the harness's answer is out of contract: ")
    assert reason in row.result["error"]


def instant(case, context):
    return {"traces": [{"metrics": {"task_completion": 0.9}}]}


@pytest.mark.django_db
def test_a_nan_verifier_is_stored_as_no_answer(settings):
    row = stored_replay(settings, "instant", "nan_verifier")
    assert row.status == "done"
    assert (row.result["metrics"], row.result["verifier_answer"]) == (
        {"task_completion": 0.9},
        None,
    )


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


def expire_lease() -> None:
    ReplaySession.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.django_db
def test_a_claim_takes_a_lease_and_counts_an_attempt():
    rule("R-1")
    dispatch.open_session(job(), 1, status="queued")
    claimed = dispatch._claim(SID)
    assert claimed is not None and claimed[-1] == 1
    row = ReplaySession.objects.get()
    assert (row.status, row.attempts, row.claimed_by != "") == ("running", 1, True)
    assert row.lease_expires_at > timezone.now()
    assert dispatch._claim(SID) is None  # its lease holds: a redelivery does nothing
    expire_lease()
    assert dispatch._claim(SID)[-1] == 2  # its worker died: the next delivery takes it over
    # The attempt that lost the lease stores nothing; the one holding it stores once.
    assert dispatch._store(SID, 1, {"error": "late"}) is False
    assert dispatch._store(SID, 2, {"error": None, "metrics": {"task_completion": 1.0}}) is True
    assert dispatch._store(SID, 2, {"error": "again"}) is False
    assert ReplaySession.objects.get().result["metrics"] == {"task_completion": 1.0}


@pytest.mark.django_db
def test_a_replay_whose_lease_ran_out_is_sent_again_at_once_and_counts_once():
    rule("R-1")
    clock, sent = Clock(), []
    pool = CeleryPool(
        round_config(backend=None, replay_timeout_s=300.0, concurrency=2),
        1,
        send=sent.append,
        clock=clock,
    )
    pool.submit(job())
    dispatch._claim(SID)  # a worker took it ...
    expire_lease()  # ... and died: no heartbeat
    clock.now = 2.0  # seconds later, far from the replay's deadline (300 s + grace)
    assert pool.wait(at_most=0) == []
    assert sent == [[SID], [SID]] and pool.busy() == 1 and pool.resent == 1
    row = ReplaySession.objects.get()
    assert (row.status, row.attempts, row.lease_expires_at) == ("queued", 1, None)
    assert dispatch._store(SID, 1, {"error": "the dead worker's"}) is False
    # The second delivery runs it; the first delivery, redelivered by the broker, does nothing.
    assert dispatch._claim(SID)[-1] == 2
    assert dispatch._claim(SID) is None
    assert dispatch._store(SID, 2, {"metrics": {"task_completion": 1.0}}) is True
    clock.now = 4.0
    (done,) = pool.wait(at_most=0)
    assert (done.job.session_id, done.metrics, pool.busy()) == (SID, {"task_completion": 1.0}, 0)


@pytest.mark.django_db
def test_a_replay_that_loses_its_worker_every_time_is_inconclusive_after_its_attempts():
    rule("R-1")
    clock, sent = Clock(), []
    cfg = round_config(backend=None, replay_timeout_s=300.0, concurrency=2)
    pool = CeleryPool(cfg, 1, send=sent.append, clock=clock)
    pool.submit(job())
    results = []
    for attempt in range(1, dispatch.MAX_ATTEMPTS + 1):
        assert dispatch._claim(SID)[-1] == attempt
        expire_lease()
        clock.now += 2.0
        results += pool.wait(at_most=0)
    (lost,) = results
    assert (
        lost.error
        == f"the replay's worker was lost {dispatch.MAX_ATTEMPTS} times (its lease ran out)"
    )
    assert len(sent) == dispatch.MAX_ATTEMPTS and pool.busy() == 0
    assert ReplaySession.objects.get().status == "done"


@pytest.mark.django_db
def test_a_replay_left_queued_is_sent_again_a_duplicate_claims_nothing():
    rule("R-1")
    clock, sent = Clock(), []
    cfg = round_config(backend=None, replay_timeout_s=300.0, concurrency=2)
    pool = CeleryPool(cfg, 1, send=sent.append, clock=clock)
    pool.submit(job())
    clock.now = dispatch.RESEND_QUEUED_S + 1
    assert pool.wait(at_most=0) == [] and sent == [[SID], [SID]]
    clock.now += 1.0 + dispatch.ROWS_EVERY_S
    assert pool.wait(at_most=0) == [] and sent == [[SID], [SID]]  # backs off


def slow(case, context):
    time.sleep(0.3)
    return instant(case, context)


def clear_worker_caches() -> None:
    dispatch.forget_rounds()


@pytest.fixture
def signals_dropped():
    """A replay task signals round 1's list on Redis: emptied after the test, so that no other
    test collects these results."""
    yield
    redis = dispatch._results_redis()
    if redis is not None:
        redis.delete(dispatch.results_key(1))


@pytest.mark.django_db
@pytest.mark.usefixtures("signals_dropped")
def test_a_replay_tasks_bookkeeping_is_a_few_statements(settings, django_assert_max_num_queries):
    # A worker reads a round's active rules, a candidate and a case once: a replay is then a
    # claim (which reads what the replay is) and a fenced store, whatever the harness.
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_replay_leases:instant"
    clear_worker_caches()
    corpus(failing("F-1"))
    rule("R-1")
    dispatch.open_sessions([job()], 1, status="queued")
    with django_assert_max_num_queries(5):  # claim, active rules, candidate, case, store
        assert dispatch.run_stored(SID) is True
    # Opened once the first was stored (one queued then would have been taken in its place,
    # docs/semantics.md#s18-batches).
    again = Job("R-1", "F-1", "failing", TREATMENT, 1, f"{SID}:1")
    dispatch.open_sessions([again], 1, status="queued")
    with django_assert_max_num_queries(2):  # claim, store
        assert dispatch.run_stored(again.session_id) is True


@pytest.mark.django_db
@pytest.mark.usefixtures("signals_dropped")
def test_a_replay_beats_its_lease_only_once_it_outlives_a_period(settings, monkeypatch):
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_replay_leases:slow"
    clear_worker_caches()
    corpus(failing("F-1"))
    rule("R-1")
    beats = []
    real = dispatch._beat
    monkeypatch.setattr(dispatch, "_beat", lambda *a: beats.append(real(*a)) or beats[-1])
    dispatch.open_session(job(), 1, status="queued")
    monkeypatch.setattr(dispatch, "HEARTBEAT_S", 1.0)  # longer than the replay: no beat
    assert dispatch.run_stored(SID) is True and beats == []
    ReplaySession.objects.update(status="queued", result=None, lease_expires_at=None)
    monkeypatch.setattr(dispatch, "HEARTBEAT_S", 0.05)
    assert dispatch.run_stored(SID) is True
    assert len(beats) >= 2 and all(beats)
    assert ReplaySession.objects.get().result["metrics"] == {"task_completion": 0.9}


@pytest.mark.django_db
@pytest.mark.usefixtures("signals_dropped")
def test_an_attempt_that_lost_its_lease_stops_beating_and_stores_nothing(settings, monkeypatch):
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_replay_leases:slow"
    clear_worker_caches()
    corpus(failing("F-1"))
    rule("R-1")
    beats = []

    def taken_over_then_beat(leases):
        # Meanwhile the round sent it again and another worker claimed it.
        ReplaySession.objects.update(attempts=leases[SID] + 1)
        beats.append(dispatch_beat(leases))
        return beats[-1]

    dispatch_beat = dispatch._beat
    monkeypatch.setattr(dispatch, "_beat", taken_over_then_beat)
    monkeypatch.setattr(dispatch, "HEARTBEAT_S", 0.05)
    dispatch.open_session(job(), 1, status="queued")
    assert dispatch.run_stored(SID) is False
    assert beats == [set()]  # not pushed again once lost
    row = ReplaySession.objects.get()
    assert (row.status, row.result) == ("running", None)


def test_a_replay_tasks_statement_is_tried_once_more_on_a_fresh_connection(monkeypatch):
    # What the health check between tasks did, for the replay task, without a round trip.
    from django.db import OperationalError

    tried, closed = [], []
    monkeypatch.setattr(dispatch.connection, "close", lambda: closed.append(True))

    def claim():
        tried.append(True)
        if len(tried) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return ("R-1",)

    assert dispatch._on_a_fresh_connection_once(SID, "claiming", claim) == ("R-1",)
    assert (len(tried), closed) == (2, [True])

    def broken():
        raise OperationalError("the database is down")

    with pytest.raises(OperationalError):  # twice: the task fails, its lease runs out
        dispatch._on_a_fresh_connection_once(SID, "claiming", broken)


def test_only_tasks_that_reconnect_themselves_skip_the_check_between_tasks(monkeypatch):
    import django.db

    from cauterweb.celery import _connections_between_tasks
    from replay.tasks import replay_task, round_run_task

    checked = []
    monkeypatch.setattr(django.db, "close_old_connections", lambda: checked.append(True))
    _connections_between_tasks(sender=replay_task)
    assert checked == []
    _connections_between_tasks(sender=round_run_task)
    assert checked == [True]
