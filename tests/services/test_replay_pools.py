"""The two replay pools (semantics §9.3, §18): a hung harness gives its slot back, a Celery
replay task lost with its worker is counted inconclusive — never lost."""

import threading

import pytest

from replay.backends.python import ReplayCase
from replay.cases import TREATMENT
from replay.config import RoundConfig
from replay.dispatch import CeleryPool, Job, RoundContext, ThreadPool
from replay.models import ReplaySession
from tests.builders import round_config
from tests.scenarios import rule


def config(backend, *, timeout: float = 30.0, concurrency: int = 1) -> RoundConfig:
    return round_config(backend=backend, replay_timeout_s=timeout, concurrency=concurrency)


def job(case_id: str) -> Job:
    return Job("R-1", case_id, "failing", TREATMENT, 0, f"replay:1:R-1:{case_id}")


def case(case_id: str) -> ReplayCase:
    return ReplayCase(case_id, "failing", {}, "task", {"id": "R-1", "scope": "git"})


def test_a_hung_harness_times_out_and_its_slot_runs_the_next_replay():
    release = threading.Event()

    def harness(case, context):
        if case.id == "F-1":
            release.wait(30)
        return {"traces": [{"metrics": {"task_completion": 1.0}}]}

    cfg = config(harness, timeout=0.2)
    pool = ThreadPool(cfg)
    try:
        first = job("F-1")
        pool.submit(first, case("F-1"), RoundContext(job=first, rules_for=lambda s, q: [], cfg=cfg))
        (timed_out,) = pool.wait()
        assert (timed_out.error, timed_out.job.case_id, pool.free()) == (
            "replay timed out",
            "F-1",
            1,
        )
        second = job("F-2")
        pool.submit(
            second, case("F-2"), RoundContext(job=second, rules_for=lambda s, q: [], cfg=cfg)
        )
        (done,) = pool.wait()
        assert (done.error, done.metrics) == (None, {"task_completion": 1.0})
    finally:
        release.set()
        pool.close()


def test_replays_handed_over_at_once_run_one_at_a_time_each_under_its_own_timeout():
    # semantics §9.3, §18: a candidate's replays wait in line at concurrency 1; a hung one is
    # abandoned after its own timeout and its thread takes no other replay.
    release = threading.Event()
    ran: list[tuple[str, int, str]] = []  # (case, thread, "start" | "end")

    def harness(case, context):
        ran.append((case.id, threading.get_ident(), "start"))
        if case.id == "F-1":
            release.wait(30)
        ran.append((case.id, threading.get_ident(), "end"))
        return {"traces": [{"metrics": {"task_completion": 1.0}}]}

    cfg = config(harness, timeout=0.2)
    pool = ThreadPool(cfg)
    try:
        for case_id in ("F-1", "F-2", "F-3"):
            queued = job(case_id)
            pool.submit(
                queued, case(case_id), RoundContext(job=queued, rules_for=lambda s, q: [], cfg=cfg)
            )
        # F-1 may not have been picked up yet; F-2 and F-3 wait for it either way.
        assert pool.free() == -2 and pool.queued()["R-1"] >= 2
        results = []
        while pool.busy():
            results += pool.wait()
        assert [(r.job.case_id, r.error) for r in results] == [
            ("F-1", "replay timed out"),
            ("F-2", None),
            ("F-3", None),
        ]
        release.set()
        hung = ran[0][1]
        deadline = threading.Event()
        while ("F-1", hung, "end") not in ran and not deadline.wait(0.01):
            pass
        deadline.wait(0.1)  # time for the released thread to (wrongly) take another replay
        assert [(c, t == hung, e) for c, t, e in ran] == [
            ("F-1", True, "start"),
            ("F-2", False, "start"),
            ("F-2", False, "end"),
            ("F-3", False, "start"),
            ("F-3", False, "end"),
            ("F-1", True, "end"),
        ]
    finally:
        release.set()
        pool.close()


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


@pytest.mark.django_db
def test_a_replay_task_lost_with_its_worker_is_counted_inconclusive():
    rule("R-1")
    clock, sent = Clock(), []
    pool = CeleryPool(config(None, timeout=30.0, concurrency=2), 1, send=sent.append, clock=clock)
    pool.submit(job("F-1"))
    assert sent == [["replay:1:R-1:F-1"]] and pool.busy() == 1
    clock.now = 30.0 + 60.0 + 1  # past its timeout and the grace: its worker is gone
    (lost,) = pool.wait()
    assert (lost.job.case_id, lost.error) == ("F-1", "the replay task was lost with its worker")
    assert pool.busy() == 0
    assert ReplaySession.objects.get().status == "done"  # a late task finds it taken


def instant(case, context):
    context.mark_execution_started()
    return {"traces": [{"metrics": {"task_completion": 0.9}}]}


@pytest.mark.django_db
def test_a_replay_task_claims_its_replay_once_and_stores_its_result(settings):
    from replay import dispatch
    from tests.scenarios import corpus, failing

    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_replay_pools:instant"
    dispatch.forget_rounds()
    corpus(failing("F-1"))
    rule("R-1")
    dispatch.open_session(job("F-1"), 1, status="queued")
    try:
        assert dispatch.run_stored("replay:1:R-1:F-1") is True
        assert dispatch.run_stored("replay:1:R-1:F-1") is False  # a redelivery finds it taken
    finally:
        redis = dispatch._results_redis()
        if redis is not None:
            redis.delete(dispatch.results_key(1))
    row = ReplaySession.objects.get()
    assert (row.status, row.result["metrics"], row.result["error"]) == (
        "done",
        {"task_completion": 0.9},
        None,
    )


@pytest.mark.django_db
def test_replays_sent_together_open_their_rows_in_one_statement_and_go_as_batches(
    django_assert_num_queries,
):
    # docs/semantics.md#s18-batches: a task per batch of at most `batch` replays; each replay
    # still one row, one slot.
    rule("R-1")
    sent = []
    pool = CeleryPool(round_config(concurrency=8, batch=4), 1, send=sent.append)
    jobs = [job(f"F-{i}") for i in range(8)]
    with django_assert_num_queries(1):
        pool.submit_all(jobs)
    ids = [j.session_id for j in jobs]
    assert sent == [ids[:4], ids[4:]] and pool.free() == 0 and pool.busy() == 8
    rows = ReplaySession.objects.order_by("id")
    assert [(r.status, r.round_id) for r in rows] == [("queued", 1)] * 8
    assert len({r.token for r in rows}) == 8  # each its own capability


@pytest.mark.django_db
def test_a_result_whose_signal_was_lost_is_read_from_its_row():
    rule("R-1")
    pool = CeleryPool(config(None, concurrency=2), 1, send=lambda ids: None)
    pool.submit(job("F-1"))
    ReplaySession.objects.update(status="done", result={"metrics": {"task_completion": 1.0}})
    (done,) = pool.wait(at_most=5.0)
    assert (done.job.case_id, done.metrics, pool.busy()) == ("F-1", {"task_completion": 1.0}, 0)


@pytest.mark.redis
@pytest.mark.django_db
def test_a_result_signalled_on_the_rounds_list_is_collected_before_its_row_says_so():
    import json

    from replay import dispatch

    rule("R-1")
    pool = CeleryPool(config(None, concurrency=2), 1, send=lambda ids: None)
    pool.submit(job("F-1"))
    message = [{"id": "replay:1:R-1:F-1", "result": {"metrics": {"task_completion": 1.0}}}]
    dispatch._results_redis().rpush(dispatch.results_key(1), json.dumps(message))
    try:
        (done,) = pool.wait(at_most=5.0)
    finally:
        pool.close()
    assert (done.job.case_id, done.metrics) == ("F-1", {"task_completion": 1.0})
    assert ReplaySession.objects.get().result is None  # it came through Redis, not the row


class SignalsList:
    """The round's Redis list, recording the calls the round makes."""

    def __init__(self, *messages: str):
        self.messages, self.calls = list(messages), []

    def blmpop(self, timeout, numkeys, key, *, direction, count):
        self.calls.append("blmpop")
        popped, self.messages = self.messages[:count], self.messages[count:]
        return (key, popped) if popped else None


@pytest.mark.django_db
def test_a_wait_pops_every_signal_waiting_in_one_round_trip():
    import json

    rule("R-1")
    pool = CeleryPool(config(None, concurrency=4), 1, send=lambda ids: None)
    pool.submit_all([job("F-1"), job("F-2"), job("F-3")])
    pool._polled_at = float("inf")  # the rows are not read in this test

    def done(*case_ids):
        return json.dumps(
            [
                {"id": f"replay:1:R-1:{c}", "result": {"metrics": {"task_completion": 1.0}}}
                for c in case_ids
            ]
        )

    # Two tasks' messages: one holds the two results its task stored together.
    pool._redis = SignalsList(done("F-1", "F-2"), done("F-3"))
    assert sorted(r.job.case_id for r in pool.wait(at_most=5.0)) == ["F-1", "F-2", "F-3"]
    assert pool._redis.calls == ["blmpop"] and pool.busy() == 0
