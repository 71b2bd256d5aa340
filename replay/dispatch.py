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
import math
import os
import queue
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, connections
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
# A Celery replay not finished this long after its timeouts allow is counted lost: the last
# resort, for a task the broker itself lost (a worker's death is found by its lease, below).
LOST_GRACE_S = 60.0
# A replay task's lease (docs/semantics.md#s18-lease): a claim holds the replay this long,
# and the worker's heartbeat pushes it out every HEARTBEAT_S while the harness runs. A lease
# that ran out means the worker (or its connection) is gone: the round sends the replay
# again, at most MAX_ATTEMPTS times, and the attempt that lost its lease cannot store.
LEASE_S = 10.0
HEARTBEAT_S = 2.0
MAX_ATTEMPTS = 3
# With a broker, slots that free up while fewer than a batch are free are held back this long
# at most, for more to free up and be sent with them (docs/semantics.md#s18-batches): replays
# sent together end together, so the round's sends, and the tasks, settle at whole batches.
FILL_S = 0.02
# A replay still queued this long after it was sent is sent again (a duplicate finds it
# claimed and does nothing): the message may sit with a worker that died before claiming
# it, until the broker's visibility timeout.
RESEND_QUEUED_S = 15.0


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


class OutOfContract(ValueError):
    """A harness's answer that breaks the session contract (docs/semantics.md#s14): the
    replay is inconclusive with this as its reason, never scored and never stored as sent."""


def _metric_value(name: Any, value: Any) -> float:
    if not isinstance(name, str) or not name:
        raise OutOfContract(f"a metric name is {name!r}, not a non-empty string")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OutOfContract(f"metric {name!r} is {value!r} ({type(value).__name__}), not a number")
    value = float(value)
    if not math.isfinite(value):
        raise OutOfContract(f"metric {name!r} is {value!r}, not a finite number")
    if not 0.0 <= value <= 1.0:
        raise OutOfContract(f"metric {name!r} is {value!r}, outside [0, 1]")
    return value


def answer_metrics(session: Any) -> dict[str, float]:
    """The metrics of the session's last trace (docs/semantics.md#s7-4), checked against the
    contract: a dict with a non-empty `traces` list whose last item has a `metrics` object of
    finite numbers in [0, 1] (docs/semantics.md#s1). Raises `OutOfContract` naming what is
    wrong; NaN, infinities, 93.0 or "0.5" are never scored (nor refused later by PostgreSQL's
    JSON)."""
    if not isinstance(session, dict):
        raise OutOfContract(f"the answer is {type(session).__name__}, not a session object")
    traces = session.get("traces")
    if not isinstance(traces, list) or not traces:
        raise OutOfContract("the session has no trace with metrics")
    last = traces[-1]
    metrics = last.get("metrics") if isinstance(last, dict) else None
    if not isinstance(metrics, dict):
        raise OutOfContract("the session has no trace with metrics")
    return {name: _metric_value(name, value) for name, value in metrics.items()}


def last_trace_metrics(session: Any) -> dict | None:
    """The checked metrics of the session's last trace, or None if it breaks the contract."""
    try:
        return answer_metrics(session)
    except OutOfContract:
        return None


def verify(verifier, session: Any, replay_input: Any) -> float | None:
    """The verifier's verdict as `outcome_correct`; "don't know" (None) or an error counts as
    no answer — it contributes nothing and vetoes nothing (semantics §6). NaN or an infinity
    is no answer either."""
    if verifier is None:
        return None
    try:
        answer = verifier(session, replay_input)
    except Exception:
        logger.exception("the verifier raised; treating it as no answer")
        return None
    try:
        value = None if answer is None or isinstance(answer, bool) else float(answer)
    except (TypeError, ValueError):
        return None
    if value is None or not math.isfinite(value):
        if answer is not None:
            logger.warning("the verifier answered %r; treating it as no answer", answer)
        return None
    return min(1.0, max(0.0, value))


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

    def grow(self, slots: int) -> None:
        """More threads, for a larger batch of a replay task; never fewer."""
        while self.slots < slots:
            self.slots += 1
            self._spawn()

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
            try:
                result.metrics = answer_metrics(session)
            except OutOfContract as exc:
                result.error = f"the harness's answer is out of contract: {exc}"
                result.verifier_answer = None
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
    (token,) = open_sessions([job], round_id, status=status)
    return token


def open_sessions(jobs: list[Job], round_id: int, *, status: str) -> list[str]:
    """The rows of replays started together, in one statement; their tokens, in order."""
    now = timezone.now()
    rows = [
        ReplaySession(
            id=job.session_id,
            rule_id=job.rule_id,
            case_id=job.case_id,
            round_id=round_id,
            kind=job.kind,
            arm=job.arm,
            repeat=job.repeat,
            token=secrets.token_urlsafe(24),
            status=status,
            created_at=now,
        )
        for job in jobs
    ]
    _insert(rows)
    return [row.token for row in rows]


def _insert(rows: list[ReplaySession]) -> None:
    """`bulk_create` in one statement, without its transaction: on its own, the INSERT
    commits by itself, one round trip where BEGIN … COMMIT cost two (with a broker, the
    round sends nothing until its rows are in)."""
    fields = ReplaySession._meta.concrete_fields
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    values = [
        f.get_db_prep_save(getattr(row, f.attname), connection) for row in rows for f in fields
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {ReplaySession._meta.db_table} ({columns}) VALUES "
            + ", ".join([one] * len(rows)),
            values,
        )


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


def batches(session_ids: list[str], most: int) -> list[list[str]]:
    """Replays sent together, split into the fewest tasks of at most `most` replays, of sizes
    as even as can be (9 by 4: 3, 3 and 3, not 4, 4 and 1), in order."""
    if not session_ids:
        return []
    tasks = -(-len(session_ids) // max(1, most))
    size, extra = divmod(len(session_ids), tasks)
    out, at = [], 0
    for k in range(tasks):
        step = size + (k < extra)
        out.append(session_ids[at : at + step])
        at += step
    return out


@dataclass
class _Sent:
    job: Job
    at: float  # when it was last sent
    since: float  # when its current attempt began: sent first, or again after a lost lease
    sends: int = 1
    sent: bool = True  # False: opened ahead, in line for a slot (sent, or taken by a worker)


class CeleryPool:
    """Replays as Celery tasks on any worker (semantics §18 with a broker).

    The replays sent together go as batches of at most `cfg.batch` replays, one task each
    (docs/semantics.md#s18-batches): a task claims its batch's replays in one statement, runs
    them at once on its worker, stores the ones that finish together in one statement and
    pushes them on the round's Redis list in one message, where the round blocks until one
    arrives: no query per poll, and no poll delay. Each replay keeps its own row and lease, and
    counts against the slots until its result is back. The rows are read
    once a second all the same (every `POLL_S` without Redis): for a result whose signal was
    lost, and for the replays' leases — a replay whose lease ran out lost its worker or its
    worker's connection, and is sent again at once (docs/semantics.md#s18-lease) instead of
    holding its slot until its deadline.

    A batch is kept opened ahead, unsent: a worker that stores results takes as many of them in
    the same statement and tells the round with the results, so the slots go on without the
    round's INSERT, publish and the task's delivery between two replays (`room`, `_taken`)."""

    # A task sent is a task any worker may start: never more than the slots.
    queues_ahead = False

    def __init__(
        self,
        cfg: RoundConfig,
        round_id: int,
        *,
        send: Callable[[list[str]], None],
        clock: Callable[[], float] = time.monotonic,
    ):
        self.cfg, self.round_id, self._send, self._clock = cfg, round_id, send, clock
        self.slots = cfg.concurrency
        self._flights: dict[str, _Sent] = {}
        self._redis = _results_redis()
        self._key = results_key(round_id)
        self._signalled: list[bytes] = []
        self._polled_at = float("-inf")
        self._fill = min(cfg.batch, self.slots)  # slots sent together once free
        self._held_since: float | None = None
        self._running = 0  # flights sent (or taken): each holds a slot
        self.resent = 0  # replays sent again after their lease ran out (for the summary)
        self.tasks = 0  # replay tasks sent (for the summary)
        self.taken = 0  # replays opened ahead that a worker took as its slots freed up

    def submit(self, job: Job, case: ReplayCase | None = None, context=None) -> None:
        self.submit_all([job])

    def submit_all(self, jobs: list[Job]) -> None:
        """Replays opened together, their rows in one statement: as many as slots are free
        are sent, a task per batch (the oldest opened ahead first); the rest stay ahead, in
        line for the slots that free up (`room`)."""
        if jobs:
            open_sessions(jobs, self.round_id, status=ReplayStatus.QUEUED)
            now = self._clock()
            for job in jobs:
                self._flights[job.session_id] = _Sent(job, now, now, sent=False)
        ahead = self._ahead()
        for batch in batches(ahead[: min(self.free(), len(ahead))], self.cfg.batch):
            for sid in batch:
                self._started(self._flights[sid])
            self.tasks += 1
            self._send(batch)

    def _ahead(self) -> list[str]:
        return [sid for sid, sent in self._flights.items() if not sent.sent]

    def _started(self, sent: _Sent) -> None:
        """A replay opened ahead now holds a slot: sent, or taken by a worker."""
        sent.sent, sent.at, sent.since = True, self._clock(), self._clock()
        self._running += 1

    def room(self) -> int:
        """How many replays the round may open now (docs/semantics.md#s18-batches): one for
        each free slot that no replay opened ahead will fill, and enough to keep a batch
        opened ahead, which a worker takes in the same statement that stores the results of
        the slots it frees."""
        return max(0, self.free() + self._fill - len(self._ahead()))

    def busy(self) -> int:
        return len(self._flights)

    def free(self) -> int:
        """The free slots; none while fewer than a batch are free, replays are in flight and
        the first of them freed less than FILL_S ago (more are about to free up)."""
        free = self.slots - self._running
        if free <= 0 or free >= self._fill or not self._running:
            self._held_since = None
            return max(free, 0)
        if self._held_since is None:
            self._held_since = self._clock()
        return free if self._clock() - self._held_since >= FILL_S else 0

    def queued(self) -> dict[str, int]:
        return {}  # sent: queued or running on a worker, the round cannot tell

    def wait(self, *, at_most: float | None = None) -> list[RunResult]:
        """Results back, or [] once `at_most` passed or slots held back are due to be sent."""
        until = None if at_most is None else self._clock() + at_most
        # Slots held back: back when they are due to be sent (not again once they were due
        # and there was nothing to send: the wait would spin).
        if self._held_since is not None and (due := self._held_since + FILL_S) > self._clock():
            until = due if until is None else min(until, due)
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
            # Every message waiting, up to 64, in one round trip (BLMPOP, Redis 7).
            popped = self._redis.blmpop(timeout, 1, self._key, direction="LEFT", count=64)
        except Exception:
            logger.warning("no replay signals from Redis; reading the rows", exc_info=True)
            self._polled_at = float("-inf")
            time.sleep(min(timeout, ROWS_EVERY_S))
            return
        if popped is not None:
            self._signalled += popped[1]

    def _from_signals(self) -> list[RunResult]:
        """The results a wait popped: a message holds the results a task stored together."""
        messages, self._signalled = self._signalled, []
        out = []
        for message in messages:
            for signal in json.loads(message):
                if signal["id"] not in self._flights:  # collected from its row already
                    continue
                if "taken" in signal:
                    self._taken(signal["id"])
                else:
                    out.append(self._result(signal["id"], signal["result"]))
        return out

    def _taken(self, sid: str) -> None:
        """A worker took this replay opened ahead in place of one it stored: it holds the
        slot that one freed (told together, so the round never counts that slot free)."""
        if not self._flights[sid].sent:
            self.taken += 1
            self._started(self._flights[sid])

    def _from_rows(self) -> list[RunResult]:
        """Results stored without a signal; replays whose lease ran out, sent again (or,
        after MAX_ATTEMPTS, counted inconclusive); replays queued too long, sent again."""
        every = POLL_S if self._redis is None else ROWS_EVERY_S
        if not self._flights or self._clock() - self._polled_at < every:
            return []
        self._polled_at = self._clock()
        now = timezone.now()
        rows = ReplaySession.objects.filter(pk__in=list(self._flights)).values_list(
            "pk", "status", "result", "attempts", "lease_expires_at"
        )
        out, again = [], []
        for sid, status, stored, attempts, lease in rows:
            if status != ReplayStatus.QUEUED:  # a replay opened ahead taken by a worker
                self._taken(sid)
            if status == ReplayStatus.DONE and stored is not None:
                out.append(self._result(sid, stored))
            elif status == ReplayStatus.RUNNING and lease is not None and lease < now:
                out += self._lease_ran_out(sid, attempts, now, again)
            elif status == ReplayStatus.QUEUED and self._stale(sid):
                again.append(sid)
        self._resend(again)
        return out

    def _lease_ran_out(self, sid: str, attempts: int, now, again: list[str]) -> list[RunResult]:
        """Its worker stopped heartbeating: put it back in line, once (a conditional UPDATE
        on the attempt that lost it), to be sent again (with the others of this reading: a
        worker that died with a batch loses its unfinished replays, and only those are sent
        again); or give up after MAX_ATTEMPTS."""
        expired = ReplaySession.objects.filter(
            pk=sid, status=ReplayStatus.RUNNING, attempts=attempts, lease_expires_at__lt=now
        )
        if attempts >= MAX_ATTEMPTS:
            error = f"the replay's worker was lost {attempts} times (its lease ran out)"
            result = {"error": error}
            if expired.update(status=ReplayStatus.DONE, result=result, finished_at=now):
                return [self._result(sid, result)]
            return []
        if expired.update(status=ReplayStatus.QUEUED, lease_expires_at=None, claimed_by=""):
            logger.warning("replay %s: its worker stopped (attempt %s); sent again", sid, attempts)
            self.resent += 1
            again.append(sid)
            self._flights[sid].since = self._clock()
        return []

    def _stale(self, sid: str) -> bool:
        sent = self._flights[sid]
        return sent.sent and self._clock() - sent.at > RESEND_QUEUED_S * sent.sends

    def _resend(self, sids: list[str]) -> None:
        for sid in sids:
            sent = self._flights[sid]
            sent.at, sent.sends = self._clock(), sent.sends + 1
        for batch in batches(sids, self.cfg.batch):
            try:
                self._send(batch)
            except Exception:
                logger.warning("replays %s: could not send them again; tried later", batch)

    def _result(self, sid: str, stored: dict) -> RunResult:
        sent = self._flights.pop(sid)
        self._running -= sent.sent  # one opened ahead whose taking was not told held none
        return RunResult(**{**stored, "job": sent.job})

    def _lost(self) -> list[RunResult]:
        """A task no worker ever reported on (lost by the broker): counted inconclusive once
        its timeouts and a grace passed since its attempt began, never lost."""
        allowed = self.cfg.env_wait_timeout_s + self.cfg.replay_timeout_s + LOST_GRACE_S
        if not (self.cfg.replay_timeout_s > 0):
            return []
        now = self._clock()
        late = [
            sid for sid, sent in self._flights.items() if sent.sent and now - sent.since > allowed
        ]
        out = []
        for sid in late:
            job = self._flights.pop(sid).job
            self._running -= 1
            ReplaySession.objects.filter(pk=sid).update(
                status=ReplayStatus.DONE, lease_expires_at=None, finished_at=timezone.now()
            )
            out.append(RunResult(job=job, error="the replay task was lost with its worker"))
        return out

    def close(self) -> None:
        if self._redis is not None:
            try:
                self._redis.delete(self._key)
            except Exception:
                logger.warning("could not delete %s; it expires", self._key, exc_info=True)


class _RoundReads:
    """What a worker process reads of a round, once: its baseline (fixed for the round), and
    each candidate and case its replays name — a candidate's other replays, and every
    candidate of a scope's protected wins, come here too. The ones a batch names that this
    process has not read yet are read in one statement each; a later round reads afresh."""

    MOST = 1024  # candidates or cases kept per round; past that they are read again

    def __init__(self, round_id: int | None):
        self.round_id = round_id
        self._actives: cases.Actives | None = None
        self.rules: dict[str, Rule] = {}
        self.cases: dict[str, Trajectory] = {}

    def actives(self) -> cases.Actives:
        if self._actives is None:
            self._actives = cases.Actives.at_round_start(self.round_id)
        return self._actives

    def read(self, jobs: list[Job]) -> None:
        self.read_ids({job.rule_id for job in jobs}, {job.case_id for job in jobs})

    def read_ids(self, rule_ids: set[str], case_ids: set[str]) -> None:
        for kept, model, ids in ((self.rules, Rule, rule_ids), (self.cases, Trajectory, case_ids)):
            if len(kept) > self.MOST:
                kept.clear()
            if missing := ids - kept.keys():
                kept.update(model.objects.in_bulk(sorted(missing)))


_rounds_read: dict[int | None, _RoundReads] = {}


def _reads_of(round_id: int | None) -> _RoundReads:
    if round_id not in _rounds_read:
        if len(_rounds_read) >= 4:  # the oldest round's go
            del _rounds_read[next(iter(_rounds_read))]
        _rounds_read[round_id] = _RoundReads(round_id)
    return _rounds_read[round_id]


def forget_rounds() -> None:
    """Read every round afresh (tests, where round ids repeat from database to database)."""
    _rounds_read.clear()


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"[:128]


# --- a replay task's side: a batch of replays (docs/semantics.md#s18-batches) ------------------


@dataclass(frozen=True)
class _Claimed:
    """A replay a task holds: what it is, and the attempt its lease is for (the fence)."""

    job: Job
    round_id: int | None
    token: str
    attempt: int


def _claim(session_id: str) -> tuple | None:
    """One replay's claim (`_claim_all` of one): what it is and its attempt, or None."""
    rows = _claim_all([session_id])
    return rows[0][1:] if rows else None


def _claim_all(session_ids: list[str]) -> list[tuple]:
    """Take a batch's replays, and read what they are, in one statement: each one queued, or
    whose lease ran out (its worker died and the broker handed the task on). Counts an
    attempt each and takes their leases; one another delivery holds, or that is done, is
    not taken. Rows in the batch's order. The task's first statement: it is what finds a
    connection that broke since the last task (`replay_task` skips the health check that cost
    every task a round trip)."""
    rows = _on_a_fresh_connection_once(session_ids[0], "claiming", lambda: _claim_once(session_ids))
    order = {sid: i for i, sid in enumerate(session_ids)}
    return sorted(rows, key=lambda row: order[row[0]])


def _claim_once(session_ids: list[str]) -> list[tuple]:
    table = ReplaySession._meta.db_table
    now = timezone.now()
    ids = ", ".join(["%s"] * len(session_ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET status = %s, attempts = attempts + 1, lease_expires_at = %s, "
            f"claimed_by = %s WHERE id IN ({ids}) "
            "AND (status = %s OR (status = %s AND lease_expires_at < %s)) "
            "RETURNING id, rule_id, case_id, kind, arm, repeat, round_id, token, attempts",
            [
                ReplayStatus.RUNNING,
                now + timedelta(seconds=LEASE_S),
                _worker_name(),
                *session_ids,
                ReplayStatus.QUEUED,
                ReplayStatus.RUNNING,
                now,
            ],
        )
        return cursor.fetchall()


def _fence(leases: dict[str, int]) -> tuple[str, list]:
    """`WHERE` text and parameters matching each replay at the attempt this task holds."""
    text = " OR ".join(["(id = %s AND attempts = %s)"] * len(leases))
    return f"status = %s AND ({text})", [
        ReplayStatus.RUNNING,
        *(x for sid, attempt in leases.items() for x in (sid, attempt)),
    ]


def _beat(leases: dict[str, int]) -> set[str]:
    """Push the leases of a task's unfinished replays out, in one statement; the replays
    whose lease this task still holds (one it lost was sent again by the round, and its
    result will not be stored)."""
    where, params = _fence(leases)
    table = ReplaySession._meta.db_table
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET lease_expires_at = %s WHERE {where} RETURNING id",
                [timezone.now() + timedelta(seconds=LEASE_S), *params],
            )
            return {row[0] for row in cursor.fetchall()}
    except DatabaseError:
        if connection.in_atomic_block:
            raise
        logger.warning("replays %s: heartbeat failed; retrying", ", ".join(leases))
        connection.close()  # the next beat, or the store, opens a fresh one
        return set(leases)


# Once one of a batch's replays finished, the task waits this long at most for the others
# still running before it stores and signals what finished: replays started together end
# together, and then cost one store and one signal (and the round one wake), not one each.
COALESCE_S = 0.01


class _Leases:
    """The leases a task holds (replay → attempt), pushed out every HEARTBEAT_S while any of
    its replays runs (docs/semantics.md#s18-lease), counted from the claim: replays shorter
    than a period write no heartbeat. On time whether or not other replays of the batch
    finished meanwhile."""

    def __init__(self, held: dict[str, int]):
        self.held = held
        self.renewed = time.monotonic()

    def due_in(self) -> float:
        return max(0.0, self.renewed + HEARTBEAT_S - time.monotonic())

    def renew_if_due(self) -> None:
        if self.due_in() > 0:
            return
        if self.held:
            for lost in set(self.held) - _beat(self.held):
                del self.held[lost]  # not pushed again once lost
        self.renewed = time.monotonic()

    def done(self, results: list[RunResult]) -> None:
        for result in results:
            self.held.pop(result.job.session_id, None)


# This long after a task started replays, the round has opened the next batch ahead: the task
# reads their candidates and cases while its own replays run, so that taking them costs no
# read between two replays (docs/semantics.md#s18-batches).
READ_AHEAD_S = 0.03


class _ReadAhead:
    """Once, READ_AHEAD_S after it is armed: the candidates and cases of the replays in line in
    the task's round, read into this process's `_RoundReads` (one statement, and one for each
    of candidates and cases not read yet)."""

    def __init__(self):
        self.round_id: int | None = None
        self.due: float | None = None

    def arm(self, round_id: int | None) -> None:
        if round_id is not None:
            self.round_id, self.due = round_id, time.monotonic() + READ_AHEAD_S

    def due_in(self) -> float:
        return float("inf") if self.due is None else max(0.0, self.due - time.monotonic())

    def run_if_due(self) -> None:
        if self.due is None or self.due_in() > 0:
            return
        self.due = None
        try:
            in_line = ReplaySession.objects.filter(
                round_id=self.round_id, status=ReplayStatus.QUEUED
            ).values_list("rule_id", "case_id")[: _RoundReads.MOST]
            rows = list(in_line)
            _reads_of(self.round_id).read_ids({r for r, _ in rows}, {c for _, c in rows})
        except DatabaseError:  # read when taken instead
            logger.warning("round %s: could not read ahead", self.round_id, exc_info=True)


def _finished_together(
    pool: ThreadPool, leases: _Leases, ahead: _ReadAhead | None = None
) -> list[RunResult]:
    """The next results of the task's replays, the leases of the others renewed meanwhile.
    The task's own thread beats, and reads ahead, between its waits."""
    ahead = ahead or _ReadAhead()
    while not (results := pool.wait(at_most=min(leases.due_in(), ahead.due_in()))):
        leases.renew_if_due()
        ahead.run_if_due()
    until = time.monotonic() + COALESCE_S
    while pool.busy() and (left := until - time.monotonic()) > 0:
        results += pool.wait(at_most=left)
    leases.done(results)
    leases.renew_if_due()
    return results


_workers = threading.local()


def _worker_pool(cfg: RoundConfig, slots: int) -> ThreadPool:
    """The replay threads of this worker thread, reused from task to task (a thread started
    per replay cost more than the bookkeeping around it); a fresh pool for a new
    configuration, more threads for a larger batch. A harness that overruns is abandoned as
    in a round (`ThreadPool`), its slot refilled."""
    held = getattr(_workers, "pool", None)
    if held is not None and held.cfg == cfg:
        held.grow(slots)
        return held
    if held is not None:
        held.close()
    _workers.pool = ThreadPool(cfg, slots=slots)
    return _workers.pool


def _json_safe(stored: dict) -> dict:
    """What PostgreSQL's JSON accepts: a result that is not (a defect, never a harness's
    answer, which was checked) is kept as an inconclusive replay with its reason."""
    try:
        json.dumps(stored, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return {"error": f"the replay's result could not be stored: {exc}"}
    return stored


def _store(session_id: str, attempt: int, stored: dict) -> bool:
    """One replay's store (`_store_all` of one)."""
    return session_id in _store_all({session_id: (attempt, stored)})


def _store_all(results: dict[str, tuple[int, dict]]) -> set[str]:
    """Keep the results, in one statement, of the replays whose attempt still holds them (a
    conditional UPDATE on each replay's attempt: the fence); the ones kept."""
    first = next(iter(results))
    return _on_a_fresh_connection_once(first, "storing", lambda: _store_once(results))


def _store_once(results: dict[str, tuple[int, dict]]) -> set[str]:
    where, params = _fence({sid: attempt for sid, (attempt, _) in results.items()})
    cases_sql, values = _results_case(results)
    table = ReplaySession._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET status = %s, result = CASE id {cases_sql} END, "
            f"finished_at = %s, lease_expires_at = NULL WHERE {where} RETURNING id",
            [ReplayStatus.DONE, *values, timezone.now(), *params],
        )
        return {row[0] for row in cursor.fetchall()}


_CLAIMED = "id, rule_id, case_id, kind, arm, repeat, round_id, token, attempts"


def _store_and_take(results: dict[str, tuple[int, dict]], round_id: int) -> tuple[set, list]:
    """Keep the results, as `_store_all`, and take as many of their round's queued replays as
    were kept, claimed as `_claim_all` claims them, in the same statement
    (docs/semantics.md#s18-batches): the slots the kept replays held go on to those without a
    round trip through the round, and a slot is never held twice — a result not kept (its
    attempt lost its lease) frees nothing. The ids kept, and the rows taken (oldest first)."""
    first = next(iter(results))
    return _on_a_fresh_connection_once(
        first, "storing", lambda: _store_and_take_once(results, round_id)
    )


def _store_and_take_once(results: dict[str, tuple[int, dict]], round_id: int) -> tuple[set, list]:
    where, fence = _fence({sid: attempt for sid, (attempt, _) in results.items()})
    table = ReplaySession._meta.db_table
    now = timezone.now()
    claim = [ReplayStatus.RUNNING, now + timedelta(seconds=LEASE_S), _worker_name()]
    in_line = f"SELECT id FROM {table} WHERE round_id = %s AND status = %s ORDER BY created_at, id"
    cases_sql, values = _results_case(results)
    if connection.vendor == "postgresql":
        # The count of what `kept` stored, as PostgreSQL stored it: a replay the round put
        # back in line meanwhile is neither kept nor counted.
        sql = (
            f"WITH kept AS (UPDATE {table} SET status = %s, result = CASE id {cases_sql} END, "
            f"finished_at = %s, lease_expires_at = NULL WHERE {where} RETURNING id), "
            f"taken AS (UPDATE {table} SET status = %s, attempts = attempts + 1, "
            f"lease_expires_at = %s, claimed_by = %s WHERE id IN ({in_line} "
            "LIMIT (SELECT count(*) FROM kept) FOR UPDATE SKIP LOCKED) "
            f"RETURNING {_CLAIMED}) "
            "SELECT NULL, id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM kept "
            f"UNION ALL SELECT rule_id, {_CLAIMED} FROM taken"
        )
        params = [ReplayStatus.DONE, *values, now, *fence, *claim, round_id, ReplayStatus.QUEUED]
    else:
        # One writer at a time: the count of the replays this attempt holds is what it stores.
        queued = "status = %s"
        sql = (
            f"UPDATE {table} SET status = CASE WHEN {queued} THEN %s ELSE %s END, "
            f"result = CASE id {cases_sql} ELSE result END, "
            f"finished_at = CASE WHEN {queued} THEN finished_at ELSE %s END, "
            f"attempts = CASE WHEN {queued} THEN attempts + 1 ELSE attempts END, "
            f"lease_expires_at = CASE WHEN {queued} THEN %s ELSE NULL END, "
            f"claimed_by = CASE WHEN {queued} THEN %s ELSE claimed_by END "
            f"WHERE ({where}) OR id IN ({in_line} "
            f"LIMIT (SELECT count(*) FROM {table} WHERE {where})) "
            f"RETURNING CASE WHEN status = %s THEN NULL ELSE rule_id END, {_CLAIMED}"
        )
        q = ReplayStatus.QUEUED
        params = [
            *(q, ReplayStatus.RUNNING, ReplayStatus.DONE),
            *values,
            *(q, now, q, q, claim[1], q, claim[2]),
            *fence,
            *(round_id, q),
            *fence,
            ReplayStatus.DONE,
        ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    kept = {row[1] for row in rows if row[0] is None}
    taken = sorted((row[1:] for row in rows if row[0] is not None), key=lambda r: r[0])
    return kept, taken


def _results_case(results: dict[str, tuple[int, dict]]) -> tuple[str, list]:
    """`WHEN id THEN result ...` of a store, and its parameters."""
    json_value = "CAST(%s AS jsonb)" if connection.vendor == "postgresql" else "%s"
    cases_sql = " ".join([f"WHEN %s THEN {json_value}"] * len(results))
    values = [x for sid, (_, stored) in results.items() for x in (sid, json.dumps(stored))]
    return cases_sql, values


def _on_a_fresh_connection_once(session_id: str, doing: str, statement: Callable[[], Any]) -> Any:
    """A replay task's statement; if its connection broke meanwhile (the database restarted,
    the backend was terminated), once more on a fresh one. A claim whose answer was lost
    with its connection finds the replay claimed: its lease runs out and the round sends it
    again, as for a worker that died."""
    try:
        return statement()
    except (OperationalError, InterfaceError):
        if connection.in_atomic_block:
            raise
        logger.warning("replay %s: %s failed; on a fresh connection", session_id, doing)
        connection.close()
    return statement()


def run_stored(session_id: str) -> bool:
    """One replay as a task of one (`run_batch`): whether its result was stored."""
    return run_batch([session_id]) == 1


def run_batch(session_ids: list[str]) -> int:
    """The body of `replay_task` (docs/semantics.md#s18-batches): claim the batch's replays in
    one statement (a redelivered task finds those done or held by another delivery taken and
    runs only the rest, often none), run them at once on this worker's replay threads under
    the same timeouts with their leases kept alive, store each group that finishes together
    in one statement — only the results whose lease is still this attempt's — taking in the
    same statement as many of the round's queued replays, which run on here, and signal them
    to the round in one message. Returns how many results were stored."""
    claimed = [_claimed(row) for row in _claim_all(session_ids)] if session_ids else []
    if not claimed:
        return 0
    task = _Batch(RoundConfig.from_settings(), len(claimed))
    stored = task.keep(task.start(claimed))
    while task.pool.busy():
        stored += task.keep(_finished_together(task.pool, task.leases, task.ahead))
    return stored


class _Batch:
    """A replay task's replays: those it claimed, then those it took as slots freed up."""

    def __init__(self, cfg: RoundConfig, slots: int):
        self.cfg = cfg
        self.pool = _worker_pool(cfg, slots)
        self.by_id: dict[str, _Claimed] = {}
        self.leases = _Leases({})
        self.ahead = _ReadAhead()

    def start(self, claimed: list[_Claimed]) -> list[RunResult]:
        """Onto the replay threads, their leases held; the results of those that could not
        be started."""
        for round_id in {held.round_id for held in claimed}:
            _reads_of(round_id).read([held.job for held in claimed if held.round_id == round_id])
            self.ahead.arm(round_id)
        for held in claimed:
            self.by_id[held.job.session_id] = held
            self.leases.held[held.job.session_id] = held.attempt
        unstarted = [result for held in claimed if (result := _started(self.pool, self.cfg, held))]
        self.leases.done(unstarted)
        return unstarted

    def keep(self, results: list[RunResult]) -> int:
        """Store results that finished together, start the replays taken in their place, and
        signal both to the round; how many were stored."""
        stored = 0
        while results:
            kept, taken, rows = self._store(results)
            results = self.start(taken)
            self._signal(kept, rows, taken)
            stored += len(kept)
        return stored

    def _store(self, results: list[RunResult]) -> tuple[set, list[_Claimed], dict]:
        rows = {}
        for result in results:
            stored = asdict(result)
            del stored["job"]
            attempt = self.by_id[result.job.session_id].attempt
            rows[result.job.session_id] = (attempt, _json_safe(stored))
        rounds = {self.by_id[sid].round_id for sid in rows}
        round_id = next(iter(rounds))
        if len(rounds) == 1 and round_id is not None:
            kept, taken = _store_and_take(rows, round_id)
        else:
            kept, taken = _store_all(rows), []
        for sid in set(rows) - kept:
            logger.warning(
                "replay %s: attempt %s lost its lease; its result is dropped", sid, rows[sid][0]
            )
        return kept, [_claimed(row) for row in taken], rows

    def _signal(self, kept: set, rows: dict, taken: list[_Claimed]) -> None:
        by_round: dict[int | None, list] = {}
        for sid in kept:
            by_round.setdefault(self.by_id[sid].round_id, []).append(
                {"id": sid, "result": rows[sid][1]}
            )
        for held in taken:
            by_round.setdefault(held.round_id, []).append({"id": held.job.session_id, "taken": 1})
        for round_id, signals in by_round.items():
            _signal(round_id, signals)


def _claimed(row: tuple) -> _Claimed:
    session_id, rule_id, case_id, kind, arm, repeat, round_id, token, attempt = row
    job = Job(rule_id, case_id, kind, arm, repeat, session_id)
    return _Claimed(job=job, round_id=round_id, token=token or "", attempt=attempt)


def _started(pool: ThreadPool, cfg: RoundConfig, held: _Claimed) -> RunResult | None:
    """None once the replay is on a replay thread; its inconclusive result if it could not
    be started (its candidate or case no longer readable): that replay alone ends, not the
    rest of its batch."""
    try:
        _submit_claimed(pool, cfg, held)
    except Exception as exc:
        logger.exception("replay %s could not be started", held.job.session_id)
        return RunResult(job=held.job, error=f"the replay could not be started: {exc!r}")
    return None


def _submit_claimed(pool: ThreadPool, cfg: RoundConfig, held: _Claimed) -> None:
    """A claimed replay onto a replay thread: its candidate, case and the round's baseline are
    read once per worker process and round (`_RoundReads`)."""
    job, reads = held.job, _reads_of(held.round_id)
    rule = reads.rules[job.rule_id]
    context = context_for(job, actives=reads.actives(), rule=rule, cfg=cfg, token=held.token)
    case = cases.replay_case(reads.cases[job.case_id], job.kind, rule)
    pool.submit(job, case, context)


def _signal(round_id: int | None, signals: list[dict]) -> None:
    """Tell the round, which blocks on its list, in one message for results stored together
    and the replays taken in their place; if this fails it finds the rows anyway."""
    client = _results_redis()
    if client is None or round_id is None:
        return
    message = json.dumps(signals)
    try:
        client.pipeline(transaction=False).rpush(results_key(round_id), message).expire(
            results_key(round_id), SIGNALS_TTL_S
        ).execute()
    except Exception:
        logger.warning("replays %s: no signal to their round; it reads the rows", len(signals))
