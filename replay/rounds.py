"""Validation rounds (semantics §7–§10, §18): the orchestration around the pure engine.

A round takes the round lock, marks failed any round whose worker died, orders the candidates
(rotation, §9.2) and walks them in that order, keeping up to `replay_concurrency` replays in
flight (`replay.dispatch`). A candidate reached after the budget ran out, or without a
backend, gets the forward-trial decision at once. A replayed candidate is decided as soon as
its replays are in (`replay.designs`, the pure engine), and every verdict that is ready is
written before the round waits for the next replay (`replay.verdicts`), so a verdict is never
held back by another candidate's replay and a dead worker loses none that were decided.

Cost per candidate is flat in the size of the queue: the queue's rules, trial counts and atom
counts are read once; then per candidate an indexed "still a candidate?" probe before its
first replay, its share of a case selection made for a chunk of the queue, and its share of a
write.
"""

import gc
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from itertools import islice

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from lifecycle import journal
from lifecycle.journal import EventType
from lifecycle.metrics import load_registry
from lifecycle.models import JournalEvent, Rule, RuleState

from . import cases, engine, lock
from .config import RoundConfig
from .designs import CandidateRun, CaseSpec, SharedControls
from .dispatch import CeleryPool, Job, RunResult, ThreadPool, context_for, open_session
from .kick import kick_after_round
from .models import ReplaySample, ReplaySession, ReplayStatus, RoundStatus, ValidationRound
from .trials import sessions_needed, trial_counts, trial_of
from .verdicts import ENGINE, Outcome, Writer, verdicts_write

logger = logging.getLogger(__name__)

# Ready forward-trial verdicts written together: a few statements per batch, not per rule.
WRITE_BATCH = 500
# The live page's progress is refreshed at most this often while the round waits on replays
# (and with every write); it is for people watching, nothing decides on it.
PROGRESS_EVERY_S = 1.0
# Failing cases are selected for this many candidates of the queue in one statement, and a
# selection is used for at most this long: with fast replays a statement serves a hundred
# candidates; with slow ones each candidate still gets a selection at most a second old, so
# a case imported meanwhile is seen and a rule retired meanwhile is not replayed (§9.5).
SELECT_AHEAD = 100
SELECTION_FRESH_S = 1.0
DEAD_WORKER = "the worker running this round stopped; its lock expired"
LockLost = lock.LockLost


def round_run(
    *,
    kicked_by: str = "",
    now: datetime | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ValidationRound | None:
    """Run one round; None when another round holds the lock (semantics §9.1). Never raises.
    `on_progress(written, queued)` is called after each write (the CLI's progress bar)."""
    holder = lock.new_holder()
    try:
        fence = lock.acquire(holder)
    except Exception:
        logger.exception("could not take the round lock")
        return None
    if not fence:
        return None
    # A heartbeat thread renews the lock, except where another connection cannot see this
    # one's rows (SQLite, a caller's transaction): there the round renews it as it goes.
    threaded = connection.vendor != "sqlite" and not connection.in_atomic_block
    lease = lock.Lease(holder, fence, threaded=threaded).start()
    try:
        took_over = bool(rounds_reap(now=timezone.now()))
        vround = _round(
            lease=lease, kicked_by=kicked_by, now=now or timezone.now(), on_progress=on_progress
        )
        kick_after_round(vround, took_over=took_over)
        return vround
    finally:
        lease.stop()
        try:
            lock.release(holder)
        except Exception:
            logger.exception("could not release the round lock; it will expire")


def round_has_work() -> bool:
    """Whether a round would validate anything: is there a candidate? One indexed query.
    Automatic kicks (`tasks.round_run_task`) skip a round without work, which would only
    journal that it started and finished."""
    return Rule.objects.filter(state=RuleState.CANDIDATE).exists()


def rounds_reap(*, now: datetime) -> list[int]:
    """Close the rounds still `running` while we hold the lock (semantics §9.1): their worker
    died and its lock expired. Each is marked failed with its true cause (which worker, when
    its lease was last renewed) and its counts, its `validation_round_finished` journaled,
    and its replays closed: their tokens stop working and a late result is not stored. What
    it decided was written as it was decided; the next round takes up the rest."""
    reaped = []
    for round_id, worker, renewed, fence in ValidationRound.objects.filter(
        status=RoundStatus.RUNNING
    ).values_list("pk", "worker", "lease_renewed_at", "fence"):
        closed = _close_replays(round_id, now)
        summary = _summary_of(round_id)
        summary["errors"] = [{"rule": None, "error": _dead_cause(worker, renewed, fence)}]
        summary["replays_closed"] = closed
        if _finish(round_id, summary, RoundStatus.FAILED, now):
            reaped.append(round_id)
    return reaped


def _dead_cause(worker: str, renewed: datetime | None, fence: int | None) -> str:
    if renewed is None:
        return DEAD_WORKER
    at = renewed.isoformat(timespec="seconds")
    return (
        f"the worker running this round ({worker or 'unknown'}) stopped renewing its lock "
        f"(fencing token {fence}) after {at}; its lock expired"
    )


def _close_replays(round_id: int, now: datetime) -> int:
    """A dead round's replays still queued or running: done, without a result."""
    return ReplaySession.objects.filter(
        round_id=round_id, status__in=[ReplayStatus.QUEUED, ReplayStatus.RUNNING]
    ).update(status=ReplayStatus.DONE, finished_at=now, lease_expires_at=None)


def _summary_of(round_id: int) -> dict:
    """A dead round's summary, from the verdicts it wrote and the replays it ran."""
    outcomes = [
        e["outcome"]
        for e in JournalEvent.objects.filter(
            round_id=round_id, type=EventType.VALIDATION_VERDICT
        ).values_list("evidence", flat=True)
    ]
    decided = sum(o != "pending" for o in outcomes)
    replay_cases = JournalEvent.objects.filter(
        round_id=round_id, type=EventType.VALIDATION_REPLAY_CASE
    ).count()
    sessions = ReplaySession.objects.filter(round_id=round_id).count()
    return {
        "decided": decided,
        "pending": len(outcomes) - decided,
        "promoted": outcomes.count("promote"),
        "retired": outcomes.count("retire"),
        "skipped": 0,
        "budget_exhausted": 0,
        "replays": max(replay_cases, sessions),
    }


def _finish(
    round_id: int, summary: dict, status: str, at: datetime, progress: dict | None = None
) -> bool:
    """End a round once: the status moves from running and the event is journaled together
    (a round reaped while it still ran does not finish a second time)."""
    final = {} if progress is None else {"progress": progress}
    with transaction.atomic():
        changed = ValidationRound.objects.filter(pk=round_id, status=RoundStatus.RUNNING).update(
            **final,
            finished_at=at,
            status=status,
            summary=summary,
            error="\n".join(e["error"] for e in summary.get("errors", [])),
        )
        if changed:
            journal.write(
                type=EventType.VALIDATION_ROUND_FINISHED,
                actor=ENGINE,
                round_id=round_id,
                at=at,
                evidence=summary,
            )
    return bool(changed)


def _queue() -> list[str]:
    """The candidates in this round's order (semantics §9.2 rotation)."""
    candidates = list(
        Rule.objects.filter(state=RuleState.CANDIDATE)
        .order_by("recorded_at", "id")
        .values_list("recorded_at", "id")
    )
    previous = ValidationRound.objects.order_by("-id").values_list("queue", flat=True).first()
    previous_first = None
    if previous:
        previous_first = (
            Rule.objects.filter(pk=previous[0]).values_list("recorded_at", "id").first()
        )
    return engine.rotate(candidates, previous_first)


def _round(*, lease: lock.Lease, kicked_by: str, now: datetime, on_progress) -> ValidationRound:
    cfg = RoundConfig.from_settings()
    queue = _queue()
    vround = ValidationRound.objects.create(
        started_at=now,
        queue=queue,
        budget_s=cfg.budget_s,
        replay_wired=cfg.replay_wired,
        kicked_by=kicked_by[:64],
        worker=f"{socket.gethostname()}:{os.getpid()}"[:128],
        fence=lease.fence,
        lease_renewed_at=timezone.now(),
    )
    lease.on_beat = lambda: ValidationRound.objects.filter(pk=vround.pk).update(
        lease_renewed_at=timezone.now()
    )
    work = Round(vround, cfg, lease, on_progress)
    status = RoundStatus.FINISHED
    try:
        if not cfg.replay_wired:
            _announce_fallback(now)
        journal.write(
            type=EventType.VALIDATION_ROUND_STARTED,
            actor=ENGINE,
            round_id=vround.pk,
            at=now,
            evidence={"queue": queue, "budget_s": cfg.budget_s, "replay_wired": cfg.replay_wired},
        )
        work.run()
    except Exception as exc:
        logger.exception("validation round %s failed", vround.pk)
        work.summary["errors"].append({"rule": None, "error": f"{type(exc).__name__}: {exc}"})
        status = RoundStatus.FAILED
    work.summary["elapsed_s"] = round(time.monotonic() - work.begun, 4)
    if isinstance(work.pool, CeleryPool):
        work.summary["replays_resent"] = work.pool.resent
        work.summary["replay_tasks"] = work.pool.tasks
        work.summary["replays_taken"] = work.pool.taken  # docs/semantics.md#s18-batches
    _finish_surely(vround.pk, work.summary, status, work.progress())
    vround.refresh_from_db()
    return vround


def _finish_surely(round_id: int, summary: dict, status: str, progress: dict) -> None:
    """A round records its own end, on a fresh connection if the one it ran on broke (a cut
    connection is often why it failed); only if that fails too is it left to be reaped."""
    for last in (False, True):
        try:
            _finish(round_id, summary, status, timezone.now(), progress)
            return
        except DatabaseError:
            if last or connection.in_atomic_block:
                raise
            logger.warning("round %s: recording its end on a fresh connection", round_id)
            connection.close()


def _announce_fallback(now: datetime) -> None:
    """Say once, ever, that the engine works without a replay backend (semantics §8). Under
    the round lock, so two workers cannot both announce it."""
    if JournalEvent.objects.filter(type=EventType.VALIDATION_FALLBACK_ANNOUNCED).exists():
        return
    logger.warning(
        "no replay backend configured (CAUTERWEB_REPLAY_BACKEND): candidates are decided by "
        "forward trials only"
    )
    journal.write(
        type=EventType.VALIDATION_FALLBACK_ANNOUNCED,
        actor=ENGINE,
        at=now,
        evidence={"validator": engine.FORWARD_TRIAL, "why": "no replay backend configured"},
    )


def _pool(cfg: RoundConfig, round_id: int):
    """Threads in the embedded default (and at concurrency 1: one replay at a time, in this
    process, as semantics §7.4 has it); Celery tasks on every worker with a broker."""
    from lifecycle.follow_ups import celery_app

    app = celery_app()
    if cfg.concurrency > 1 and not app.conf.task_always_eager:
        # By name (the app registers it): replay/tasks.py calls this module.
        replay_task = app.tasks["replay.tasks.replay_task"]
        return CeleryPool(
            cfg, round_id, send=lambda ids: replay_task.apply_async(kwargs={"session_ids": ids})
        )
    return ThreadPool(cfg)


class Round:
    """What one round knows while it works."""

    def __init__(self, row: ValidationRound, cfg: RoundConfig, lease: lock.Lease, on_progress):
        self.row, self.cfg, self.lease, self.on_progress = row, cfg, lease, on_progress
        self.begun = time.monotonic()
        self.registry = load_registry()
        self.waiting = deque(row.queue)  # not reached yet
        self.runs: dict[str, tuple[CandidateRun, Outcome]] = {}  # replaying, in queue order
        self.todo: dict[str, deque[Job]] = {}
        self.ready: list[Outcome] = []
        # The cases of the candidates replaying, by candidate: dropped when one concludes, so
        # what the round holds does not grow with its queue.
        self.cases_of: dict[str, dict] = {}
        self.wins: dict = {}
        self.selected: dict[str, list] = {}  # failing cases of candidates not reached yet
        self.selected_at = float("-inf")
        # Control replays by (case, active-set version), shared by the round's candidates
        # (docs/semantics.md#s21-2).
        self.shared = SharedControls()
        self.pool: ThreadPool | CeleryPool | None = None
        self.handed = self.written = 0  # verdicts given to the writer / written
        self.progress_at = self.begun
        self.summary = dict.fromkeys(
            ("decided", "pending", "promoted", "retired", "skipped", "budget_exhausted", "replays"),
            0,
        )
        self.summary["errors"] = []

    def run(self) -> None:
        queue = self.row.queue
        self.rules = Rule.objects.in_bulk(queue)
        self.counts = trial_counts(queue)
        if self.cfg.replay_wired:
            self.actives = cases.Actives.at_round_start()
            replaying = [
                r for r in self.rules.values() if r.replay_attempts < self.cfg.max_attempts
            ]
            self.atoms = cases.atom_counts(replaying)
        with _collector_spared():
            self.walk()

    def walk(self) -> None:
        """Dispatch in queue order, score what comes back, hand ready verdicts to the writer."""
        self.pool = _pool(self.cfg, self.row.pk)
        # Inline on SQLite (one writer at a time), and inside a caller's transaction, whose
        # rows only this connection sees.
        threaded = connection.vendor != "sqlite" and not connection.in_atomic_block
        self.writer = Writer(write=self.write, after=self.written_out, threaded=threaded)
        try:
            while True:
                self.keep_lock()
                self.writer.check()
                # Decided verdicts go to the writer before the next replays start.
                self.flush()
                self.dispatch()
                if not self.pool.busy():
                    break
                self.flush()
                self.publish()
                # Woken at least four times a lock period: a lost lease stops the round within
                # seconds (and without a heartbeat thread the round renews it itself).
                for result in self.pool.wait(at_most=lock.lock_ttl_s() / 4):
                    self.guarded(result.job.rule_id, self.on_result, result)
                    if result.job.arm == cases.CONTROL and self.cfg.design == "paired":
                        self.guarded(result.job.rule_id, self.shared_in, result)
            self.flush()
        finally:
            self.pool.close()
            self.writer.close()

    def keep_lock(self) -> None:
        """Stop if the lease is lost (its heartbeat renews it while any replay runs)."""
        self.lease.check()

    def guarded(self, rule_id: str, step, *args) -> None:
        """A failure with one candidate is logged and journaled in the summary; the round
        goes on with the others (semantics §9.1)."""
        try:
            step(*args)
        except LockLost:
            raise
        except Exception as exc:
            logger.exception("validating %s failed; the round goes on", rule_id)
            self.summary["errors"].append(
                {"rule": rule_id, "error": f"{type(exc).__name__}: {exc}"}
            )
            self.runs.pop(rule_id, None)
            dropped = self.todo.pop(rule_id, None) or ()
            self.cases_of.pop(rule_id, None)
            self.release([job for job in dropped if job.arm == cases.CONTROL])

    def release(self, jobs: list[Job]) -> None:
        """Shared control replays a failed candidate will never run: forgotten, so that a
        candidate waiting for one asks for it again (and runs it) at its next batch."""
        for job in jobs:
            key = (job.case_id, job.stratum)
            slot = self.shared.slot(key, job.repeat)
            if slot is None or slot.sample is not None:
                continue
            self.shared.drop(key, job.repeat)
            for waiter in slot.waiting:
                if self.runs.get(waiter.rule_id, (None,))[0] is waiter:
                    waiter.outstanding -= 1
                    if not waiter.outstanding:
                        self.guarded(waiter.rule_id, self.advance, waiter.rule_id)

    # --- dispatch, in queue order (semantics §9.2, §18) -----------------------------------------

    def dispatch(self) -> None:
        if isinstance(self.pool, CeleryPool):
            self.send()
            return
        while self.pool.free() > 0 and (job := self.next_job()) is not None:
            self.submit(job)
            if self.pool.queues_ahead:
                # The rest of the candidate's batch waits in the pool's line: its thread runs
                # them one after another, the round is not woken in between to hand each over.
                rest = self.todo[job.rule_id]
                while rest:
                    self.submit(rest.popleft())

    def next_job(self) -> Job | None:
        for rule_id in self.runs:
            if self.todo[rule_id]:
                return self.todo[rule_id].popleft()
        while self.waiting:
            rule_id = self.waiting.popleft()
            self.guarded(rule_id, self.start, rule_id)
            if len(self.ready) >= WRITE_BATCH:
                self.flush()
            if self.todo.get(rule_id):
                return self.todo[rule_id].popleft()
        return None

    def send(self) -> None:
        """Celery: a replay for every free slot, and a batch opened ahead for the slots that
        free up next, opened together (their rows in one statement)."""
        jobs: list[Job] = []
        while self.pool.room() > len(jobs) and (job := self.next_job()) is not None:
            jobs.append(job)
        self.summary["replays"] += len(jobs)
        self.pool.submit_all(jobs)

    def submit(self, job: Job) -> None:
        self.summary["replays"] += 1
        rule, trajectory = self.rules[job.rule_id], self.cases_of[job.rule_id][job.case_id]
        token = open_session(job, self.row.pk) if self.cfg.remote else ""
        context = context_for(job, actives=self.actives, rule=rule, cfg=self.cfg, token=token)
        self.pool.submit(job, cases.replay_case(trajectory, job.kind, rule), context)

    def start(self, rule_id: str) -> None:
        """Reach a candidate: the forward trial decides at once; a replay starts unless a
        reviewer retired the rule meanwhile (semantics §9.5)."""
        rule, cfg = self.rules[rule_id], self.cfg
        over = engine.budget_exhausted(
            budget_s=cfg.budget_s, elapsed_s=time.monotonic() - self.begun
        )
        validator = engine.choose_validator(
            replay_wired=cfg.replay_wired,
            replay_attempts=rule.replay_attempts,
            max_replay_attempts=cfg.max_attempts,
            over_budget=over,
        )
        trial = trial_of(rule.id, rule.baseline_rate, self.counts)
        started = {
            "validator": validator,
            "replay_attempts": rule.replay_attempts,
            "sessions_observed": trial.enrolled,
            "sessions_needed": sessions_needed(trial, min_sessions=cfg.min_sessions),
            "round_budget_exhausted": over,
        }
        outcome = Outcome(
            rule=rule, verdict=None, trial=trial, over=over, started=started, at=timezone.now()
        )
        if validator == engine.FORWARD_TRIAL:
            outcome.verdict = self.decide(outcome)
            self.ready.append(outcome)
            return
        outcome.run = self.candidate_run(rule)
        # A rule a reviewer retired meanwhile selects no case; only then is it asked apart.
        if not outcome.run.cases and not _still_candidate(rule_id):
            self.summary["skipped"] += 1
            self.cases_of.pop(rule_id, None)
            return
        self.runs[rule_id] = (outcome.run, outcome)
        self.todo[rule_id] = deque()
        self.advance(rule_id)

    def advance(self, rule_id: str) -> None:
        """A candidate with nothing outstanding: its next batch, or its verdict. A batch whose
        replays were all in the shared controls already is decided on at once."""
        run, _ = self.runs[rule_id]
        while not run.outstanding:
            over = engine.budget_exhausted(
                budget_s=self.cfg.budget_s, elapsed_s=time.monotonic() - self.begun
            )
            # A round out of budget starts no new look; the first look is still handed out
            # (the budget was checked when the candidate was reached).
            jobs = [] if over and run.batches else run.next_batch()
            self.todo[rule_id].extend(jobs)
            if not jobs and not run.outstanding and not run.borrowed:
                self.conclude(rule_id)
                return

    def candidate_run(self, rule: Rule) -> CandidateRun:
        cfg = self.cfg
        failing = self.failing_of(rule)
        wins = (
            cases.protected_wins(rule.scope, limit=cfg.max_wins, cache=self.wins) if failing else []
        )
        self.cases_of[rule.id] = {t.id: t for t in failing + wins}
        specs = [
            CaseSpec(t.id, kind, t.metrics, (*t.signature, *t.notices))
            for kind, group in (("failing", failing), ("win", wins))
            for t in group
        ]
        paired_run = cfg.design == "paired" and bool(failing)
        stratum = self.actives.version(rule.scope) if paired_run else ""
        prior, owners = self.prior_samples(rule.id, specs, stratum) if paired_run else ([], {})
        return CandidateRun(
            rule_id=rule.id,
            round_id=self.row.pk,
            rule_metric=engine.canonical(rule.metric, self.registry),
            trigger_metric=engine.signature_metric(specs[0].atoms, self.registry)
            if failing
            else None,
            retire_on=engine.retire_on(
                rule_metric=rule.metric,
                rule_signature=rule.signature,
                failing_case_atoms=[s.atoms for s in specs if s.kind == "failing"],
                registry=self.registry,
            ),
            cases=specs,
            cfg=cfg,
            registry=self.registry,
            prior=prior,
            control_owners=owners,
            stratum=stratum,
            active_rules=tuple(self.actives.ids(rule.scope)) if paired_run else (),
            shared=self.shared if paired_run else None,
        )

    def prior_samples(
        self, rule_id: str, selected: list[CaseSpec], stratum: str
    ) -> tuple[list, dict]:
        """The rule's samples from earlier rounds on the cases selected now (semantics §17.3):
        its own treatment replays, of every stratum, and the control replays it uses — of
        each (case, stratum) with treatment replays, as many as those (the first, by repeat),
        whoever replayed them (docs/semantics.md#s21-2). Loads the shared controls of those
        strata and of this round's, once per round. Two queries. Returns the samples and who
        replayed each control sample, by (case, stratum, repeat)."""
        from .engine import paired
        from .models import Arm

        kinds = {c.id: c.kind for c in selected}
        treatment = [
            paired.Sample(case, kinds[case], Arm.TREATMENT, repeat, _scored(outcome, metrics), v)
            for case, v, repeat, outcome, metrics in ReplaySample.objects.filter(
                rule_id=rule_id, case_id__in=list(kinds), arm=Arm.TREATMENT
            ).values_list("case_id", "active_set", "repeat", "outcome", "metrics")
        ]
        used: dict[tuple[str, str], int] = {}
        for s in treatment:
            used[(s.case_id, s.stratum)] = used.get((s.case_id, s.stratum), 0) + 1
        wanted = set(used) | {(case, stratum) for case in kinds}
        missing = {key for key in wanted if not self.shared.loaded(key)}
        if missing:
            rows: dict[tuple[str, str], list] = {key: [] for key in missing}
            query = ReplaySample.objects.filter(
                case_id__in=sorted({c for c, _ in missing}),
                active_set__in=sorted({v for _, v in missing}),
                arm=Arm.CONTROL,
            ).values_list("case_id", "active_set", "repeat", "rule_id", "outcome", "metrics")
            for case, v, repeat, owner, outcome, metrics in query:
                if (case, v) in rows:
                    sample = paired.Sample(
                        case, kinds[case], Arm.CONTROL, repeat, _scored(outcome, metrics), v
                    )
                    rows[(case, v)].append((repeat, owner, sample))
            for key, found in rows.items():
                self.shared.load(key, found)
        controls = []
        for (case, v), n in sorted(used.items()):
            for repeat in range(n):
                slot = self.shared.slot((case, v), repeat)
                if slot is not None and slot.sample is not None:
                    controls.append((slot.sample, slot.owner))
        owners = {(s.case_id, s.stratum, s.repeat): o for s, o in controls}
        return treatment + [s for s, _ in controls], owners

    def failing_of(self, rule: Rule) -> list:
        """The candidate's failing cases, from a selection made with those of the next
        candidates that may replay, in queue order (one statement for the chunk)."""
        stale = time.monotonic() - self.selected_at > SELECTION_FRESH_S
        if stale or rule.id not in self.selected:
            ahead = (
                self.rules[r]
                for r in self.waiting
                if self.rules[r].replay_attempts < self.cfg.max_attempts
            )
            chunk = [rule, *islice(ahead, _select_ahead() - 1)]
            found = cases.failing_cases(
                chunk, limit=self.cfg.max_failing, counts=self.atoms, registry=self.registry
            )
            # The protected wins of the chunk's scopes in the same pass (§7.2).
            cases.protected_wins_read(
                [r.scope for r in chunk if found.get(r.id)],
                limit=self.cfg.max_wins,
                cache=self.wins,
            )
            self.selected = {r.id: found.get(r.id, []) for r in chunk}
            self.selected_at = time.monotonic()
        return self.selected.pop(rule.id)

    # --- results and verdicts --------------------------------------------------------------------

    def on_result(self, result: RunResult) -> None:
        job = result.job
        run = self.runs[job.rule_id][0] if job.rule_id in self.runs else None
        if run is None:  # its candidate failed meanwhile
            return
        run.record(result)
        if job.arm == cases.CONTROL and run.is_paired:
            self.shared_in(result)  # before the owner moves on: it may conclude
        if not run.outstanding:
            self.advance(job.rule_id)

    def shared_in(self, result: RunResult) -> None:
        """A control replay came in: it is the shared set's now (docs/semantics.md#s21-2), and
        every candidate waiting for it uses it. Scored by its owner, or by a candidate
        waiting for it when its owner failed meanwhile."""
        job = result.job
        slot = self.shared.slot((job.case_id, job.stratum), job.repeat)
        if slot is None or slot.sample is not None:
            return
        live = [w for w in slot.waiting if self.runs.get(w.rule_id, (None,))[0] is w]
        owner = self.runs[job.rule_id][0] if job.rule_id in self.runs else None
        last = owner.last_sample if owner is not None else None
        key = (job.case_id, job.stratum)
        if last is not None and (last.case_id, last.arm, last.repeat, last.stratum) == (
            job.case_id,
            job.arm,
            job.repeat,
            job.stratum,
        ):
            sample, body = last, owner.evidence[-1]
        elif live:
            # Its owner failed: the first candidate waiting for it scores it and keeps it.
            live[0].outstanding -= 1
            live[0].adopt(slot, result)
            sample, body = slot.sample, slot.body
            if not live[0].outstanding:
                self.guarded(live[0].rule_id, self.advance, live[0].rule_id)
            live = live[1:]
        else:
            # Its owner failed and nobody waits yet: the next candidate to use it scores it.
            slot.result, slot.waiting = result, []
            return
        slot.waiting = live
        for waiter in self.shared.fill(key, job.repeat, sample, body):
            if not waiter.outstanding:
                self.guarded(waiter.rule_id, self.advance, waiter.rule_id)

    def conclude(self, rule_id: str) -> None:
        run, outcome = self.runs.pop(rule_id)
        self.todo.pop(rule_id, None)
        self.cases_of.pop(rule_id, None)
        outcome.replay = run.replay_verdict()
        if outcome.replay.outcome == "pending":
            # Evidence that arrived during the replays counts (semantics §9.5).
            outcome.trial = trial_of(rule_id, outcome.rule.baseline_rate, trial_counts([rule_id]))
        outcome.verdict = self.decide(outcome)
        self.ready.append(outcome)

    def decide(self, o: Outcome) -> engine.Verdict:
        return engine.decide_candidate(
            replay=o.replay,
            trial=o.trial,
            over_budget=o.over,
            min_sessions=self.cfg.min_sessions,
            margins=self.cfg.margins,
        )

    def flush(self) -> None:
        """Hand every verdict that is ready to the writer, before the round waits."""
        if not self.ready:
            return
        # The live page's progress rides along when it is due (one statement fewer otherwise).
        due = time.monotonic() - self.progress_at >= PROGRESS_EVERY_S or not self.handed
        progress = self.progress() if due else None
        ready, self.ready = self.ready, []
        self.handed += len(ready)
        self.writer.put(ready, progress)
        if due:
            self.progress_at = time.monotonic()

    def write(self, outcomes: list[Outcome], progress: dict | None) -> None:
        # Fenced: written only while the lock's token is still this round's, in one
        # transaction with the check (docs/semantics.md#s9-1-lease).
        with transaction.atomic():
            lock.fenced(self.lease.fence)
            verdicts_write(
                round_id=self.row.pk, outcomes=outcomes, now=timezone.now(), progress=progress
            )

    def written_out(self, outcomes: list[Outcome]) -> None:
        for o in outcomes:
            _count(self.summary, o)
        self.written += len(outcomes)
        if self.on_progress is not None:
            self.on_progress(self.written, len(self.row.queue))

    def progress(self) -> dict:
        """Replays queued / running / done per candidate in flight (semantics §18)."""
        in_flight = {}
        in_line = self.pool.queued() if self.pool is not None else {}
        for rule_id, (run, _) in self.runs.items():
            queued = len(self.todo.get(rule_id, ())) + in_line.get(rule_id, 0)
            in_flight[rule_id] = {
                "queued": queued,
                "running": run.outstanding - queued,
                "done": len(run.evidence),
            }
        return {
            "candidates": len(self.row.queue),
            "waiting": len(self.waiting),
            "written": self.handed + len(self.ready),
            "replays": self.summary["replays"],
            "in_flight": in_flight,
        }

    def publish(self) -> None:
        """Progress while the round waits on long replays (every write carries it too)."""
        if time.monotonic() - self.progress_at < PROGRESS_EVERY_S:
            return
        self.progress_at = time.monotonic()
        try:
            ValidationRound.objects.filter(pk=self.row.pk).update(progress=self.progress())
        except DatabaseError:
            # For people watching only: a harness holding the database (SQLite) delays it.
            logger.info("round %s: progress not written this time", self.row.pk)


@contextmanager
def _collector_spared() -> Iterator[None]:
    """Objects alive when the walk starts (the process's own, the queue's rules) are frozen
    until it ends, so a full collection walks only what the round made since: it walked
    them all again and again. The collector stays on, unlike an import's
    (`lifecycle.services.corpus`): a round lasts as long as its replays, and the cycles it
    makes meanwhile must still be freed."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _select_ahead() -> int:
    """Candidates a selection is made for. SQLite selects with a statement per candidate, in
    process: selecting ahead saves nothing there, and what a selection gone stale held for
    the next candidates was selected for nothing (most of it, with slow replays)."""
    return SELECT_AHEAD if connection.vendor == "postgresql" else 1


def _still_candidate(rule_id: str) -> bool:
    return Rule.objects.filter(pk=rule_id, state=RuleState.CANDIDATE).exists()


def _scored(outcome: str, metrics: dict) -> dict:
    from .models import SampleOutcome

    return metrics if outcome == SampleOutcome.SCORED else {}


def _count(summary: dict, o: Outcome) -> None:
    summary["budget_exhausted"] += int(o.over)
    if o.result == "skipped":
        summary["skipped"] += 1
    elif o.result == "pending":
        summary["pending"] += 1
    else:
        summary["decided"] += 1
        summary["promoted" if o.result == "promote" else "retired"] += 1


# --- standstill (semantics §9.4) ----------------------------------------------------------------


def _snapshot() -> set:
    """What a round can change: the candidates' own fields (a decided one drops out), and the
    replay samples kept (a candidate gathering them changes no field, semantics §17.3)."""
    newest = ReplaySample.objects.order_by("-id").values_list("id", flat=True).first()
    return {
        ("samples", newest),
        *Rule.objects.filter(state=RuleState.CANDIDATE).values_list(
            "id",
            "state",
            "pending_reason",
            "replay_attempts",
            "last_validator",
            "first_attempted_at",
        ),
    }


def rules_summary() -> list[dict]:
    """Every rule as `validate --json` lists it (semantics §15)."""
    return [
        {
            "id": rule.id,
            "state": rule.state,
            "pending_reason": rule.pending_reason or None,
            "replay_attempts": rule.replay_attempts,
            "validator": rule.last_validator or None,
            "reason": rule.verdict_reason or rule.pending_text,
        }
        for rule in Rule.objects.order_by("recorded_at", "id").only(
            "id",
            "state",
            "pending_reason",
            "replay_attempts",
            "last_validator",
            "verdict_reason",
            "first_attempted_at",
            "recorded_at",
        )
    ]


def run_until_settled(*, timeout_s: float, on_progress=None) -> dict:
    """Run rounds until one changes nothing, or until `timeout_s` passes (semantics §9.4).

    A round in flight is never cancelled: the timeout is checked between rounds. When another
    worker holds the round lock, wait for it and go on."""
    deadline = time.monotonic() + timeout_s
    rounds = 0
    settled = False
    while time.monotonic() < deadline:
        before = _snapshot()
        vround = round_run(kicked_by="standstill", on_progress=on_progress)
        if vround is None:
            time.sleep(0.1)
            continue
        rounds += 1
        if _snapshot() == before:
            settled = True
            break
    return {"rounds": rounds, "settled": settled, "rules": rules_summary()}
