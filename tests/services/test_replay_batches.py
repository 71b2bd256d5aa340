"""Replay tasks that take a batch of replays (docs/semantics.md#s18-batches), with every
guarantee of docs/semantics.md#s18-lease kept per replay: a batch claims only the replays no
other attempt holds, a redelivered batch whose replays are done claims nothing, a batch whose
worker died is sent again for its unfinished replays only, each counted once, and each result
lands in its own row, at its own attempt. On SQLite, and on PostgreSQL + Redis (where the
signals go to the round's list); the same through real Celery workers in
tests/services/test_engine_celery.py."""

import json
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from replay import dispatch
from replay.cases import CONTROL, TREATMENT
from replay.dispatch import CeleryPool, Job
from replay.models import ReplaySession
from tests.builders import round_config
from tests.scenarios import corpus, failing, rule


def job(case_id: str, repeat: int = 0, arm: str = TREATMENT) -> Job:
    return Job("R-1", case_id, "failing", arm, repeat, f"replay:1:R-1:{case_id}:{arm}:{repeat}")


def opened(*jobs: Job) -> list[str]:
    dispatch.open_sessions(list(jobs), 1, status="queued")
    return [j.session_id for j in jobs]


def expire(*session_ids: str) -> None:
    ReplaySession.objects.filter(pk__in=session_ids).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


def row(session_id: str) -> ReplaySession:
    return ReplaySession.objects.get(pk=session_id)


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture
def signals_dropped():
    """Replay tasks signal round 1's list on Redis: emptied after the test."""
    yield
    redis = dispatch._results_redis()
    if redis is not None:
        redis.delete(dispatch.results_key(1))


@pytest.mark.django_db
def test_a_batch_claims_only_the_replays_no_other_attempt_holds():
    rule("R-1")
    queued, held, done, lapsed = opened(job("F-1"), job("F-2"), job("F-3"), job("F-4"))
    assert dispatch._claim_all([held, done, lapsed]) != []
    dispatch._store(done, 1, {"metrics": {"task_completion": 1.0}})
    expire(lapsed)  # its worker died: its lease ran out
    claimed = dispatch._claim_all([lapsed, held, queued, done])
    # In the batch's order, each with the attempt it now holds; the held and the done one not.
    assert [(r[0], r[-1]) for r in claimed] == [(lapsed, 2), (queued, 1)]
    assert (row(held).status, row(held).attempts) == ("running", 1)
    assert (row(done).status, row(done).attempts) == ("done", 1)


@pytest.mark.django_db
def test_a_batchs_results_land_in_their_own_rows_at_their_own_attempts():
    rule("R-1")
    a, b, c = opened(job("F-1"), job("F-2"), job("F-3"))
    dispatch._claim_all([a, b, c])
    expire(c)
    assert dispatch._claim(c)[-1] == 2  # another delivery took c over
    kept = dispatch._store_all(
        {
            a: (1, {"metrics": {"task_completion": 0.1}}),
            b: (1, {"metrics": {"task_completion": 0.2}}),
            c: (1, {"metrics": {"task_completion": 0.3}}),  # the attempt that lost it
        }
    )
    assert kept == {a, b}
    assert row(a).result == {"metrics": {"task_completion": 0.1}}
    assert row(b).result == {"metrics": {"task_completion": 0.2}}
    assert (row(c).status, row(c).result) == ("running", None)
    assert dispatch._store_all({c: (2, {"metrics": {"task_completion": 0.9}})}) == {c}
    assert (row(c).status, row(c).result) == ("done", {"metrics": {"task_completion": 0.9}})
    assert row(a).lease_expires_at is None and row(a).finished_at is not None


@pytest.mark.django_db
def test_a_batch_whose_worker_died_is_sent_again_for_its_unfinished_replays_each_counted_once():
    rule("R-1")
    clock, sent = Clock(), []
    pool = CeleryPool(
        round_config(replay_timeout_s=300.0, concurrency=4, batch=4),
        1,
        send=sent.append,
        clock=clock,
    )
    jobs = [job(f"F-{i}") for i in range(4)]
    pool.submit_all(jobs)
    a, b, c, d = ids = [j.session_id for j in jobs]
    assert sent == [ids] and pool.tasks == 1
    dispatch._claim_all(ids)  # a worker took the batch ...
    assert dispatch._store_all({a: (1, {"error": None}), b: (1, {"error": None})}) == {a, b}
    expire(c, d)  # ... and died running c and d: no heartbeat
    clock.now = 2.0  # seconds later, far from the replays' deadline (300 s + grace)
    back = pool.wait(at_most=0)  # a and b from their rows (their signal was lost with it)
    assert sorted(r.job.session_id for r in back) == [a, b]
    assert sent == [ids, [c, d]] and pool.resent == 2 and pool.busy() == 2
    # The broker hands the dead worker's batch on: it takes what is in line again, c and d,
    # and the batch sent again finds them taken.
    assert [(r[0], r[-1]) for r in dispatch._claim_all(ids)] == [(c, 2), (d, 2)]
    assert dispatch._claim_all([c, d]) == []
    assert dispatch._store_all({c: (2, {"error": None}), d: (2, {"error": None})}) == {c, d}
    clock.now = 4.0
    back += pool.wait(at_most=0)
    assert sorted(r.job.session_id for r in back) == sorted(ids)  # each once
    assert pool.busy() == 0
    assert [row(s).attempts for s in ids] == [1, 1, 2, 2]


@pytest.mark.django_db
def test_the_replays_sent_together_go_as_the_fewest_batches_of_even_sizes():
    assert dispatch.batches(list("abcdefghi"), 4) == [list("abc"), list("def"), list("ghi")]
    assert dispatch.batches(list("abcdefgh"), 8) == [list("abcdefgh")]
    assert dispatch.batches(list("abc"), 1) == [["a"], ["b"], ["c"]]
    assert dispatch.batches([], 8) == []


@pytest.mark.django_db
def test_slots_freed_fewer_than_a_batch_are_held_back_a_moment_for_more():
    rule("R-1")
    clock = Clock()
    pool = CeleryPool(round_config(concurrency=4, batch=4), 1, send=lambda ids: None, clock=clock)
    pool._polled_at = float("inf")  # the rows are read below, by hand
    jobs = [job(f"F-{i}") for i in range(4)]
    pool.submit_all(jobs)
    ReplaySession.objects.filter(pk=jobs[0].session_id).update(status="done", result={})
    pool._polled_at = float("-inf")
    assert len(pool.wait(at_most=0)) == 1
    assert pool.free() == 0  # one free: held back for the other three
    clock.now = dispatch.FILL_S / 2
    assert pool.free() == 0
    clock.now = dispatch.FILL_S
    assert pool.free() == 1  # no longer: sent alone
    ReplaySession.objects.filter(pk__in=[j.session_id for j in jobs[1:]]).update(
        status="done", result={}
    )
    pool._polled_at = float("-inf")
    assert len(pool.wait(at_most=0)) == 3
    assert pool.free() == 4  # a whole batch free: at once, and nothing in flight


@pytest.mark.django_db
def test_slots_held_back_end_a_wait_when_due_and_not_again_once_nothing_was_sent():
    import time

    rule("R-1")
    pool = CeleryPool(round_config(concurrency=4, batch=4), 1, send=lambda ids: None)
    pool._polled_at = float("inf")  # the rows are not read in this test
    pool.submit_all([job("F-1"), job("F-2")])
    assert pool.free() == 0  # two free: held back
    began = time.monotonic()
    assert pool.wait(at_most=5.0) == []  # back when they are due, not after 5 s
    assert time.monotonic() - began < 1.0
    assert pool.free() == 2
    # Nothing was sent (the round had nothing left): the next wait blocks, it does not spin.
    began = time.monotonic()
    assert pool.wait(at_most=0.2) == []
    assert time.monotonic() - began >= 0.19
    pool.close()


def together(case, context):
    """Replays that end together: each waits until every replay of its batch has begun."""
    together.begun.wait(timeout=10)
    return {"traces": [{"metrics": {"task_completion": 0.9}}]}


@pytest.mark.django_db
@pytest.mark.usefixtures("signals_dropped")
def test_a_batchs_bookkeeping_is_the_same_few_statements_whatever_its_size(
    settings, monkeypatch, django_assert_max_num_queries
):
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_replay_batches:together"
    monkeypatch.setattr(dispatch, "COALESCE_S", 10.0)  # ended together, even on a busy machine
    dispatch.forget_rounds()
    corpus(failing("F-1"), failing("F-2"))
    rule("R-1")
    first = opened(job("F-1", 0), job("F-1", 0, CONTROL), job("F-2", 0))
    together.begun = threading.Barrier(3)
    # The claim, the round's active rules, the batch's candidate and its cases (one statement
    # each), the results (one): five, where a task of one replay was two to five each.
    with django_assert_max_num_queries(5):
        assert dispatch.run_batch(first) == 3
    again = opened(*(job(c, r) for c in ("F-1", "F-2") for r in (1, 2, 3)))
    together.begun = threading.Barrier(6)
    with django_assert_max_num_queries(2):  # read already: the claim and the store
        assert dispatch.run_batch(again) == 6
    assert {r.status for r in ReplaySession.objects.all()} == {"done"}
    assert all(r.result["metrics"] == {"task_completion": 0.9} for r in ReplaySession.objects.all())
    with django_assert_max_num_queries(1):  # redelivered: its replays are done, it claims none
        assert dispatch.run_batch(again) == 0
    redis = dispatch._results_redis()
    if redis is not None:  # one message for each batch's results, stored together
        messages = [json.loads(m) for m in redis.lrange(dispatch.results_key(1), 0, -1)]
        assert [sorted(s["id"] for s in m) for m in messages] == [sorted(first), sorted(again)]


@pytest.mark.django_db
@pytest.mark.usefixtures("signals_dropped")
def test_a_replay_that_cannot_be_started_ends_alone_not_its_batch(settings):
    from lifecycle.models import Trajectory

    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_replay_leases:instant"
    dispatch.forget_rounds()
    corpus(failing("F-1"), failing("F-2"))
    rule("R-1")
    ok, gone = opened(job("F-1"), job("F-2"))
    Trajectory.objects.filter(pk="F-2").delete()  # its case vanished since it was sent
    assert dispatch.run_batch([ok, gone]) == 2
    assert row(ok).result["metrics"] == {"task_completion": 0.9}
    assert (row(gone).status, row(gone).result["metrics"]) == ("done", None)
    assert row(gone).result["error"].startswith("the replay could not be started: KeyError")


def staggered(case, context):
    """Replays of a batch that end one after another, 60 ms apart."""
    import time

    time.sleep(0.06 * (context.repeat + 1))
    return {"traces": [{"metrics": {"task_completion": 0.9}}]}


@pytest.mark.django_db
@pytest.mark.usefixtures("signals_dropped")
def test_a_batchs_leases_are_renewed_on_time_while_its_other_replays_finish(settings, monkeypatch):
    # Results every 60 ms, a heartbeat period of 100 ms: the replays still running are beaten
    # all the same (a wait that ends on a result is no reason to skip a beat).
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_replay_batches:staggered"
    monkeypatch.setattr(dispatch, "HEARTBEAT_S", 0.1)
    dispatch.forget_rounds()
    corpus(failing("F-1"))
    rule("R-1")
    beats = []
    real = dispatch._beat
    monkeypatch.setattr(dispatch, "_beat", lambda held: beats.append(sorted(held)) or real(held))
    sessions = opened(*(job("F-1", r) for r in range(8)))
    assert dispatch.run_batch(sessions) == 8
    assert len(beats) >= 3, beats
    # Each beat renews only the replays still running; the last one runs through them all.
    assert all(sessions[-1] in held for held in beats)
    assert len(beats[-1]) < len(beats[0])
