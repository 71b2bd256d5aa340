"""Running replays: up to `replay_concurrency` at once (semantics §18), under the timeouts of
semantics §9.3.

Two pools with one interface (`submit`, `free`, `busy`, `wait`, `close`):
- `ThreadPool`, the embedded default: a bounded set of threads reused for the whole round.
  The round's own thread watches the deadlines, so no thread is started per case; a harness
  that overruns is abandoned (a thread cannot be killed) and a fresh thread takes its slot.
- `CeleryPool`, with a broker: each replay is a `replay_task` on any worker; the task claims
  its `ReplaySession` row by id, leaves its result there and signals it on the round's Redis
  list, where the round waits for it. A task lost with its worker is counted inconclusive
  once its deadline passes.

Either way a replay comes back as a `RunResult`: the last trace's metrics, the rules its own
rule tool returned, the verifier's answer — plain data the round scores.
"""

import json
import logging
import queue
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import connection, connections
from django.utils import timezone

from lifecycle.models import Rule, RuleRead, Trajectory

from . import cases, lock
from .backends.python import ReplayCase, ReplayContext
from .config import RoundConfig
from .models import ReplaySession, ReplayStatus

logger = logging.getLogger(__name__)

# How often the round looks for a remote harness's started signal, or a Celery task's result
# when the broker is not Redis.
POLL_S = 0.02
# With Redis the round blocks on its results list; it reads the rows this often all the same,
# for a result whose signal was lost.
ROWS_EVERY_S = 1.0
# A round's results list outlives a round that died (its key is deleted when a round ends).
SIGNALS_TTL_S = 3600
# A Celery replay not finished this long after its timeouts allow is counted lost.
LOST_GRACE_S = 60.0


@dataclass(frozen=True)
class Job:
    """One replay to run: a case of a candidate, in an arm, at a repeat."""

    rule_id: str
    case_id: str
    kind: str  # "failing" | "win"
    arm: str
    repeat: int
    session_id: str
    stratum: str = ""  # the active-set version it runs under (docs/semantics.md#s21-1)


@dataclass
class RunResult:
    job: Job
    metrics: dict | None = None  # the last trace's, as returned; None: nothing to score
    error: str | None = None
    env_wait_expired: bool = False
    read: list = field(default_factory=list)  # ids the replay's own rule tool returned
    verifier_answer: float | None = None
    reads_stored: bool = False  # a remote harness's reads were recorded by the API


class RoundContext(ReplayContext):
    """The context of one replay (semantics §14): its arm (§17.1), its capability token
    (only reads through it count, §7.5) and its own clock of the §9.3 timeouts, which start
    when a pool thread picks it up and switch to `replay_timeout_s` at the started signal."""

    def __init__(self, *, job: Job, rules_for, cfg: RoundConfig, token: str = ""):
        super().__init__(
            session_id=job.session_id, rules_for=rules_for, arm=job.arm, repeat=job.repeat
        )
        self.token = token
        self._timeout_s = cfg.replay_timeout_s
        self._env_wait_s = cfg.env_wait_timeout_s
        self.begun: float | None = None

    def begin(self) -> None:
        self.begun = self._clock()
        limit = self._env_wait_s if self._env_wait_s > 0 else self._timeout_s
        self.set_deadline(self.begun + limit if limit > 0 else None)

    def mark_execution_started(self) -> None:
        if self._env_wait_s > 0 and not self.started.is_set():
            now = self._clock()
            self.set_deadline(now + self._timeout_s if self._timeout_s > 0 else None)
        super().mark_execution_started()

    def overdue(self) -> bool:
        return self.begun is not None and self.time_left() <= 0

    def waiting_for_start(self) -> bool:
        return self._env_wait_s > 0 and not self.started.is_set()


def last_trace_metrics(session: Any) -> dict | None:
    """The metrics of the session's last trace (semantics §7.4), or None if there are none."""
    if not isinstance(session, dict):
        return None
    traces = session.get("traces")
    if not isinstance(traces, list) or not traces or not isinstance(traces[-1], dict):
        return None
    metrics = traces[-1].get("metrics")
    if not isinstance(metrics, dict):
        return None
    return {
        k: float(v)
        for k, v in metrics.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


def verify(verifier, session: Any, replay_input: Any) -> float | None:
    """The verifier's verdict as `outcome_correct`; "don't know" (None) or an error counts as
    no answer — it contributes nothing and vetoes nothing (semantics §6)."""
    if verifier is None:
        return None
    try:
        answer = verifier(session, replay_input)
    except Exception:
        logger.exception("the verifier raised; treating it as no answer")
        return None
    try:
        return None if answer is None else min(1.0, max(0.0, float(answer)))
    except (TypeError, ValueError):
        return None


@dataclass
class _Flight:
    job: Job
    case: ReplayCase
    context: RoundContext
    # Set under the pool's lock, one or the other: the round gave up on it (its thread's
    # slot went to a fresh thread), or its thread finished it first.
    abandoned: bool = False
    finished: bool = False


class ThreadPool:
    """`slots` replay threads for the round (semantics §18 in the embedded default).

    More replays than slots may be submitted: they wait in line, unstarted (their timeouts
    start when a thread picks them up), so a candidate's replays are handed over at once and
    its thread runs them one after another without waiting on the round between them. At
    most `slots` run at any moment: a thread whose replay the round gave up on leaves
    instead of taking the next one."""

    queues_ahead = True

    def __init__(self, cfg: RoundConfig, *, slots: int | None = None):
        self.cfg = cfg
        self.slots = slots or cfg.concurrency
        self._todo: queue.Queue = queue.Queue()
        self._done: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._threads = 0
        self._flights: dict[str, _Flight] = {}
        for _ in range(self.slots):
            self._spawn()

    def _spawn(self) -> None:
        with self._lock:
            self._threads += 1
        threading.Thread(target=self._work, name="replay", daemon=True).start()

    def _work(self) -> None:
        while (flight := self._todo.get()) is not None:
            flight.context.begin()
            outcome = self._call(flight)
            # A harness that used the database leaves no connection (nor its locks) behind.
            connections.close_all()
            with self._lock:
                flight.finished = not flight.abandoned
            self._done.put((flight, *outcome))
            if flight.abandoned:  # replaced while it overran: its slot is another thread's
                with self._lock:
                    self._threads -= 1
                return

    def _call(self, flight: _Flight) -> tuple[Any, str | None, float | None]:
        try:
            session = self.cfg.backend(flight.case, flight.context)
        except BaseException as exc:  # a harness may raise anything; the round must survive
            return None, f"{type(exc).__name__}: {exc}", None
        answer = verify(self.cfg.verifier, session, flight.case.replay_input)
        return session, None, answer

    def submit(self, job: Job, case: ReplayCase, context: RoundContext) -> None:
        flight = _Flight(job=job, case=case, context=context)
        self._flights[job.session_id] = flight
        self._todo.put(flight)

    def busy(self) -> int:
        return len(self._flights)

    def free(self) -> int:
        return self.slots - len(self._flights)

    def queued(self) -> dict[str, int]:
        """Replays submitted and not picked up by a thread yet, by candidate."""
        waiting: dict[str, int] = {}
        for f in self._flights.values():
            if f.context.begun is None:
                waiting[f.job.rule_id] = waiting.get(f.job.rule_id, 0) + 1
        return waiting

    def wait(self, *, at_most: float | None = None) -> list[RunResult]:
        """Block until at least one replay finished or ran out of time, or `at_most` seconds
        passed (then []: the round extends its lock and waits again)."""
        until = None if at_most is None else time.monotonic() + at_most
        while True:
            wake = self._next_wake()
            if until is not None:
                left = max(0.0, until - time.monotonic())
                wake = left if wake is None else min(wake, left)
            try:
                item = self._done.get(timeout=wake)
            except queue.Empty:
                item = None
            results = []
            while item is not None:
                results += self._finished(*item)
                item = self._done.get_nowait() if not self._done.empty() else None
            results += self._expired()
            if results or (until is not None and time.monotonic() >= until):
                return results
            self._poll_started()

    def _next_wake(self) -> float | None:
        flights = list(self._flights.values())
        left = [f.context.time_left() for f in flights if f.context.begun is not None]
        # A replay not yet picked up has no deadline yet; a remote one may signal any time.
        if len(left) < len(flights) or (
            self.cfg.remote and any(f.context.waiting_for_start() for f in flights)
        ):
            left.append(POLL_S)
        finite = [t for t in left if t != float("inf")]
        return max(0.0, min(finite)) if finite else None

    def _finished(self, flight, session, error, answer) -> list[RunResult]:
        if flight.abandoned:
            return []
        del self._flights[flight.job.session_id]
        result = RunResult(job=flight.job, error=error, verifier_answer=answer)
        if error is None:
            result.metrics = last_trace_metrics(session)
            if result.metrics is None:
                result.error = "the session has no trace with metrics"
        result.read, result.reads_stored = _reads(flight, self.cfg)
        _close_session(flight.job, self.cfg)
        return [result]

    def _expired(self) -> list[RunResult]:
        out = []
        with self._lock:
            overdue = [f for f in self._flights.values() if not f.finished and f.context.overdue()]
            for flight in overdue:
                flight.abandoned = True
        for flight in overdue:
            del self._flights[flight.job.session_id]
            self._spawn()  # the overrunning thread keeps its harness; the slot goes on
            _close_session(flight.job, self.cfg)
            waiting = flight.context.waiting_for_start()
            error = None if waiting else "replay timed out"
            out.append(RunResult(job=flight.job, error=error, env_wait_expired=waiting))
        return out

    def _poll_started(self) -> None:
        """A remote harness signals through the API: its signal lands in the database."""
        waiting = {
            sid: f
            for sid, f in self._flights.items()
            if f.context.begun and f.context.waiting_for_start()
        }
        if not (self.cfg.remote and waiting):
            return
        started = ReplaySession.objects.filter(pk__in=list(waiting), started_at__isnull=False)
        for sid in started.values_list("pk", flat=True):
            waiting[sid].context.mark_execution_started()

    def close(self) -> None:
        with self._lock:
            self.slots = 0
        for _ in range(self._threads):
            self._todo.put(None)


def _reads(flight: _Flight, cfg: RoundConfig) -> tuple[list[str], bool]:
    """What this replay's rule tool returned. A remote harness read through the API with the
    replay's own token, which recorded each read under this replay alone (`via="replay"`);
    a read recorded under the same session id any other way is not this replay's."""
    if not cfg.remote:
        return list(dict.fromkeys(flight.context.returned)), False
    rows = RuleRead.objects.filter(session_id=flight.job.session_id, via="replay")
    return sorted(set(rows.values_list("rule_id", flat=True))), True


def _close_session(job: Job, cfg: RoundConfig) -> None:
    """A finished replay's token stops working: nothing can read as it any more."""
    if cfg.remote:
        ReplaySession.objects.filter(pk=job.session_id).update(
            status=ReplayStatus.DONE, finished_at=timezone.now()
        )


def open_session(job: Job, round_id: int, *, status: str = ReplayStatus.RUNNING) -> str:
    """The row a remote harness or a replay task reaches this replay through; returns the
    replay's capability token, random and unguessable."""
    token = secrets.token_urlsafe(24)
    ReplaySession.objects.create(
        id=job.session_id,
        rule_id=job.rule_id,
        case_id=job.case_id,
        round_id=round_id,
        kind=job.kind,
        arm=job.arm,
        repeat=job.repeat,
        token=token,
        status=status,
        created_at=timezone.now(),
    )
    return token


def context_for(
    job: Job, *, actives: cases.Actives, rule: Rule, cfg: RoundConfig, token: str = ""
) -> RoundContext:
    rules_for = cases.rule_tool(actives, rule, arm=job.arm)
    return RoundContext(job=job, rules_for=rules_for, cfg=cfg, token=token)


# --- Celery -------------------------------------------------------------------------------------


def results_key(round_id: int) -> str:
    return f"cauterweb:replays:{round_id}"


def _results_redis():
    """Where replay tasks signal their results to the round: the broker, when it is Redis."""
    url = settings.CELERY_BROKER_URL
    return lock.redis_client(url) if url.startswith("redis") else None


class CeleryPool:
    """Replays as Celery tasks on any worker (semantics §18 with a broker).

    A task stores its result in its row, then pushes it on the round's Redis list, where the
    round blocks until one arrives: no query per poll, and no poll delay. The rows are read
    only now and then, for a result whose signal was lost (a worker killed between the two
    steps, Redis unreachable a moment); without Redis they are polled every `POLL_S`."""

    # A task sent is a task any worker may start: never more than the slots.
    queues_ahead = False

    def __init__(
        self,
        cfg: RoundConfig,
        round_id: int,
        *,
        send: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ):
        self.cfg, self.round_id, self._send, self._clock = cfg, round_id, send, clock
        self.slots = cfg.concurrency
        self._flights: dict[str, tuple[Job, float]] = {}
        self._redis = _results_redis()
        self._key = results_key(round_id)
        self._signalled: list[bytes] = []
        self._polled_at = float("-inf")

    def submit(self, job: Job, case: ReplayCase | None = None, context=None) -> None:
        open_session(job, self.round_id, status=ReplayStatus.QUEUED)
        self._flights[job.session_id] = (job, self._clock())
        self._send(job.session_id)

    def busy(self) -> int:
        return len(self._flights)

    def free(self) -> int:
        return self.slots - len(self._flights)

    def queued(self) -> dict[str, int]:
        return {}  # sent: queued or running on a worker, the round cannot tell

    def wait(self, *, at_most: float | None = None) -> list[RunResult]:
        until = None if at_most is None else self._clock() + at_most
        while True:
            results = self._from_signals() + self._from_rows() + self._lost()
            if results or (until is not None and self._clock() >= until):
                return results
            self._block(None if until is None else until - self._clock())

    def _block(self, left: float | None) -> None:
        """Until a signal arrives, or it is time to read the rows again."""
        if self._redis is None:
            time.sleep(POLL_S)
            return
        timeout = ROWS_EVERY_S if left is None else max(0.01, min(left, ROWS_EVERY_S))
        try:
            popped = self._redis.blpop([self._key], timeout=timeout)
        except Exception:
            logger.warning("no replay signals from Redis; reading the rows", exc_info=True)
            self._polled_at = float("-inf")
            time.sleep(POLL_S)
            return
        if popped is not None:
            self._signalled.append(popped[1])

    def _from_signals(self) -> list[RunResult]:
        if self._redis is None:
            return []
        messages, self._signalled = self._signalled, []
        try:
            messages += self._redis.lpop(self._key, 64) or []
        except Exception:
            logger.warning("no replay signals from Redis; reading the rows", exc_info=True)
        out = []
        for message in messages:
            signal = json.loads(message)
            if signal["id"] in self._flights:  # else collected from its row already
                out.append(self._result(signal["id"], signal["result"]))
        return out

    def _from_rows(self) -> list[RunResult]:
        every = POLL_S if self._redis is None else ROWS_EVERY_S
        if not self._flights or self._clock() - self._polled_at < every:
            return []
        self._polled_at = self._clock()
        rows = ReplaySession.objects.filter(
            pk__in=list(self._flights), status=ReplayStatus.DONE, result__isnull=False
        ).values_list("pk", "result")
        return [self._result(sid, stored) for sid, stored in rows]

    def _result(self, sid: str, stored: dict) -> RunResult:
        job, _ = self._flights.pop(sid)
        return RunResult(**{**stored, "job": job})

    def _lost(self) -> list[RunResult]:
        """A task whose worker died never reports: counted inconclusive, never lost."""
        allowed = self.cfg.env_wait_timeout_s + self.cfg.replay_timeout_s + LOST_GRACE_S
        if not (self.cfg.replay_timeout_s > 0):
            return []
        now = self._clock()
        late = [sid for sid, (_, at) in self._flights.items() if now - at > allowed]
        out = []
        for sid in late:
            job, _ = self._flights.pop(sid)
            ReplaySession.objects.filter(pk=sid).update(status=ReplayStatus.DONE)
            out.append(RunResult(job=job, error="the replay task was lost with its worker"))
        return out

    def close(self) -> None:
        if self._redis is not None:
            try:
                self._redis.delete(self._key)
            except Exception:
                logger.warning("could not delete %s; it expires", self._key, exc_info=True)


@lru_cache(maxsize=4)
def _actives_of_round(round_id: int | None) -> cases.Actives:
    """A round's baseline, read once per worker process: it is fixed for the round."""
    return cases.Actives.at_round_start(round_id)


@lru_cache(maxsize=64)
def _rule_of_round(rule_id: str, round_id: int | None) -> Rule:
    """A candidate as its round reads it, once per worker process (its other replays come
    here too); a later round reads it afresh."""
    return Rule.objects.get(pk=rule_id)


@lru_cache(maxsize=256)
def _case_of_round(case_id: str, round_id: int | None) -> Trajectory:
    """A case, once per worker process and round: every candidate of a scope replays the
    same protected wins."""
    return Trajectory.objects.get(pk=case_id)


def _claim(session_id: str) -> tuple | None:
    """Take a queued replay, and read what it is, in one statement; None if another delivery
    of the task took it first."""
    table = ReplaySession._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET status = %s WHERE id = %s AND status = %s "
            "RETURNING rule_id, case_id, kind, arm, repeat, round_id, token",
            [ReplayStatus.RUNNING, session_id, ReplayStatus.QUEUED],
        )
        return cursor.fetchone()


def run_stored(session_id: str) -> bool:
    """The body of `replay_task`: claim the replay (a redelivered task finds it claimed and
    does nothing), run it in this worker under the same timeouts, store the result and
    signal it to the round."""
    claimed = _claim(session_id)
    if claimed is None:
        return False
    rule_id, case_id, kind, arm, repeat, round_id, token = claimed
    rule = _rule_of_round(rule_id, round_id)
    cfg = RoundConfig.from_settings()
    job = Job(rule_id, case_id, kind, arm, repeat, session_id)
    context = context_for(
        job, actives=_actives_of_round(round_id), rule=rule, cfg=cfg, token=token or ""
    )
    pool = ThreadPool(cfg, slots=1)
    try:
        pool.submit(job, cases.replay_case(_case_of_round(case_id, round_id), kind, rule), context)
        (result,) = pool.wait()
    finally:
        pool.close()
    stored = asdict(result)
    del stored["job"]
    ReplaySession.objects.filter(pk=session_id).update(
        status=ReplayStatus.DONE, result=stored, finished_at=timezone.now()
    )
    _signal(round_id, session_id, stored)
    return True


def _signal(round_id: int | None, session_id: str, stored: dict) -> None:
    """Tell the round, which blocks on its list; if this fails it finds the row anyway."""
    client = _results_redis()
    if client is None or round_id is None:
        return
    message = json.dumps({"id": session_id, "result": stored})
    try:
        client.pipeline(transaction=False).rpush(results_key(round_id), message).expire(
            results_key(round_id), SIGNALS_TTL_S
        ).execute()
    except Exception:
        logger.warning("replay %s: no signal to its round; it reads the row", session_id)
