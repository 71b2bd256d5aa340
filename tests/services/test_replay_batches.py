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
    monkeypatch.setattr(dispatch, "READ_AHEAD_S", 10.0)  # nothing opened ahead to read
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
    two_failing_cases_and_a_candidate()
    ok, gone = opened(job("F-1"), job("F-2"))
    Trajectory.objects.filter(pk="F-2").delete()  # its case vanished since it was sent
    assert dispatch.run_batch([ok, gone]) == 2
    assert row(ok).result["metrics"] == {"task_completion": 0.9}
    assert (row(gone).status, row(gone).result["metrics"]) == ("done", None)
    assert row(gone).result["error"].startswith("the replay could not be started: KeyError")


def _kept_after(seconds: float) -> dict:
    import time

    time.sleep(seconds)
    return {"traces": [{"metrics": {"task_completion": 0.9}}]}


def two_failing_cases_and_a_candidate() -> None:
    """F-1 and F-2, R-1 to replay on them, and no round read yet."""
    dispatch.forget_rounds()
    corpus(failing("F-1"), failing("F-2"))
    rule("R-1")


def through(settings, monkeypatch, backend: str, **timings: float) -> None:
    """Replays through this module's `backend`, with the dispatcher's `timings` and no round
    read yet."""
    settings.CAUTERWEB_REPLAY_BACKEND = f"tests.services.test_replay_batches:{backend}"
    for name, value in timings.items():
        monkeypatch.setattr(dispatch, name, value)
    dispatch.forget_rounds()


def staggered(case, context):
    """Replays of a batch that end one after another, 60 ms apart."""
    return _kept_after(0.06 * (context.repeat + 1))


@pytest.mark.django_db
@pytest.mark.usefixtures("signals_dropped")
def test_a_batchs_leases_are_renewed_on_time_while_its_other_replays_finish(settings, monkeypatch):
    # Results every 60 ms, a heartbeat period of 100 ms: the replays still running are beaten
    # all the same (a wait that ends on a result is no reason to skip a beat).
    through(settings, monkeypatch, "staggered", HEARTBEAT_S=0.1)
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


# --- slots handed on by the worker that frees them (docs/semantics.md#s18-batches) -------------


def results(*session_ids: str, attempt: int = 1) -> dict:
    return {sid: (attempt, {"metrics": {"task_completion": 0.5}}) for sid in session_ids}


@pytest.mark.django_db
def test_a_store_takes_as_many_of_its_rounds_queued_replays_as_it_kept_in_the_same_statement(
    django_assert_num_queries,
):
    rule("R-1")
    a, b, c, d, e = opened(*(job(f"F-{i}") for i in range(1, 6)))
    elsewhere = Job("R-1", "F-9", "failing", TREATMENT, 0, "replay:2:R-1:F-9")
    dispatch.open_sessions([elsewhere], 2, status="queued")
    dispatch._claim_all([a, b])
    with django_assert_num_queries(1):
        kept, taken = dispatch._store_and_take(results(a, b), 1)
    # Two kept, two taken in their place (the oldest in line), claimed as a claim claims.
    assert kept == {a, b} and [(t[0], t[-1]) for t in taken] == [(c, 1), (d, 1)]
    assert [(row(s).status, row(s).attempts) for s in (c, d, e)] == [
        ("running", 1),
        ("running", 1),
        ("queued", 0),
    ]
    assert row(c).lease_expires_at > timezone.now() and row(c).claimed_by
    # A result whose attempt lost its lease is not kept, and frees no slot: nothing taken.
    expire(c)
    assert dispatch._claim(c)[-1] == 2  # another delivery holds c now
    assert dispatch._store_and_take(results(c), 1) == (set(), [])
    assert row(e).status == "queued"
    # Only the replays of the round stored: the other round's stays in line.
    kept, taken = dispatch._store_and_take(results(d), 1)
    assert kept == {d} and [t[0] for t in taken] == [e]
    assert dispatch._store_and_take({**results(c, attempt=2), **results(e)}, 1) == ({c, e}, [])
    assert row(elsewhere.session_id).status == "queued" and row(e).status == "done"


@pytest.mark.django_db
@pytest.mark.usefixtures("signals_dropped")
def test_a_task_runs_on_the_replays_it_takes_and_signals_them_with_the_results(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_replay_leases:instant"
    two_failing_cases_and_a_candidate()
    first, *rest = opened(job("F-1"), job("F-2"), job("F-1", 1))
    # Sent alone, it frees one slot at a time and takes one replay each time: all three run
    # here, one after another, each claimed once.
    assert dispatch.run_batch([first]) == 3
    assert [(row(s).status, row(s).attempts) for s in [first, *rest]] == [("done", 1)] * 3
    assert all(row(s).result["metrics"] == {"task_completion": 0.9} for s in [first, *rest])
    assert dispatch.run_batch(rest) == 0  # their own task, delivered late, claims none
    redis = dispatch._results_redis()
    if redis is not None:  # each result told with the replay taken in its place
        messages = [json.loads(m) for m in redis.lrange(dispatch.results_key(1), 0, -1)]
        told = [[(s["id"], "taken" if "taken" in s else "result") for s in m] for m in messages]
        x, y = (m[1][0] for m in told[:2])  # taken in line order (opened together: by id)
        assert {x, y} == set(rest) and told == [
            [(first, "result"), (x, "taken")],
            [(x, "result"), (y, "taken")],
            [(y, "result")],
        ]


@pytest.mark.django_db
def test_the_round_keeps_a_batch_ahead_and_a_replay_taken_holds_the_slot_its_result_freed():
    rule("R-1")
    clock, sent = Clock(), []
    pool = CeleryPool(round_config(concurrency=4, batch=4), 1, send=sent.append, clock=clock)
    pool._polled_at = float("inf")  # the rows are read below, by hand
    assert pool.room() == 8  # four free slots, and a batch opened ahead
    jobs = [job(f"F-{i}") for i in range(8)]
    pool.submit_all(jobs)
    ids = [j.session_id for j in jobs]
    assert sent == [ids[:4]] and (pool.free(), pool.busy(), pool.room()) == (0, 8, 0)
    # A worker stores two results and takes two replays opened ahead in the same statement;
    # its message tells both: the slots the two freed are held by the two taken.
    dispatch._claim_all(ids[:4])
    kept, taken = dispatch._store_and_take(results(*ids[:2]), 1)
    pool._signalled = [
        json.dumps(
            [{"id": s, "result": {"error": None}} for s in kept]
            + [{"id": t[0], "taken": 1} for t in taken]
        )
    ]
    assert sorted(r.job.session_id for r in pool.wait(at_most=0)) == ids[:2]
    assert (pool.free(), pool.taken, pool.room()) == (0, 2, 2)  # two more may be opened ahead
    # Another stores two and takes the other two, its message lost: the rows tell the same.
    kept, taken = dispatch._store_and_take(results(*ids[2:4]), 1)
    assert [t[0] for t in taken] == ids[6:]
    pool._polled_at = float("-inf")
    assert sorted(r.job.session_id for r in pool.wait(at_most=0)) == ids[2:4]
    assert (pool.free(), pool.taken, pool.busy()) == (0, 4, 4) and sent == [ids[:4]]
    # Replays opened ahead that no worker took go in the next task, the oldest first, once
    # slots are free (a store that took nothing: nothing was in line when it ran).
    more = [job(f"F-{i}", 1) for i in range(3)]
    pool.submit_all(more)  # no slot free: all three ahead
    assert sent == [ids[:4]] and pool.room() == 1
    assert dispatch._store_all(results(*ids[4:])) == set(ids[4:])
    pool._polled_at = float("-inf")
    assert len(pool.wait(at_most=0)) == 4 and pool.free() == 4
    pool.submit_all([])
    assert sent == [ids[:4], [j.session_id for j in more]] and pool.busy() == 3


class Counted:
    """A harness that counts the replays running at once, across every worker thread, and
    the replays their rows say are held (claimed or taken, not stored yet)."""

    def __init__(self):
        self.lock, self.now, self.most, self.runs, self.held = threading.Lock(), 0, 0, 0, 0

    def __call__(self, case, context):
        import time

        held = ReplaySession.objects.filter(status="running").count()
        with self.lock:
            self.now, self.runs = self.now + 1, self.runs + 1
            self.most, self.held = max(self.most, self.now), max(self.held, held)
        try:
            context.mark_execution_started()
            context.rule_tool(
                scope=case.rule["scope"], query=" ".join(case.trajectory["signature"])
            )
            time.sleep(0.03)
            return {"traces": [{"metrics": {"task_completion": 0.9}}]}
        finally:
            with self.lock:
                self.now -= 1


counted = Counted()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_round_whose_workers_take_replays_ahead_never_runs_more_than_its_slots(
    settings, monkeypatch
):
    # Workers on threads of this process, each task on its own: the round opens a batch
    # ahead, the workers take it as they store; at no moment more than 4 replays run, and
    # each replay runs and counts once.
    from django.db import connections

    from replay import rounds
    from replay.config import RoundConfig
    from replay.rounds import round_run
    from tests.scenarios import win

    corpus(failing("F-1"), failing("F-2"), failing("F-3"), win("S-1"), win("S-2"))
    for i in range(6):
        rule(f"R-{i}")
    # Set once the candidates are in (the rounds their recording kicks decide none).
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_replay_batches:counted"
    settings.CAUTERWEB_REPLAY_DESIGN = "single"
    settings.CAUTERWEB_REPLAY_CONCURRENCY = 4
    settings.CAUTERWEB_REPLAY_BATCH = 2
    dispatch.forget_rounds()

    def worker(ids: list[str]) -> None:
        try:
            dispatch.run_batch(ids)
        finally:
            connections.close_all()

    def pool(cfg: RoundConfig, round_id: int):
        send = lambda ids: threading.Thread(target=worker, args=(ids,)).start()  # noqa: E731
        return CeleryPool(cfg, round_id, send=send)

    monkeypatch.setattr(rounds, "_pool", pool)
    vround = round_run()
    assert vround.summary["decided"] == 6 and vround.summary["errors"] == [], vround.summary
    rows = ReplaySession.objects.filter(round_id=vround.pk)
    assert (
        counted.most <= 4
        and counted.held <= 4
        and counted.runs == rows.count() == vround.summary["replays"]
    )
    assert {(r.status, r.attempts) for r in rows} == {("done", 1)}
    # Some replays went on a task of their own, the others were taken: fewer tasks than a
    # task per batch of 2.
    assert vround.summary["replay_tasks"] < rows.count() / 2 and vround.summary["replays_taken"] > 0


def lasting(case, context):
    """A replay that lasts 0.2 s."""
    return _kept_after(0.2)


@pytest.mark.django_db
@pytest.mark.usefixtures("signals_dropped")
def test_a_task_reads_the_replays_opened_ahead_while_its_own_run(settings, monkeypatch):
    # The candidate and case of the replay it will take are read while its replay runs, not
    # between the two.
    through(settings, monkeypatch, "lasting", READ_AHEAD_S=0.05)
    corpus(failing("F-1"), failing("F-2"))
    rule("R-1")
    (first,) = opened(job("F-1"))
    opened(job("F-2", 1))  # the round's next replay, opened ahead
    reads = []
    real = dispatch._RoundReads.read_ids

    def spied(self, rule_ids, case_ids):
        reads.append((sorted(set(case_ids) - self.cases.keys()), row(first).status))
        return real(self, rule_ids, case_ids)

    monkeypatch.setattr(dispatch._RoundReads, "read_ids", spied)
    assert dispatch.run_batch([first]) == 2  # it took the one opened ahead, and ran it
    assert (["F-2"], "running") in reads  # read while the first still ran
    assert (["F-2"], "done") not in reads  # not when it was taken
