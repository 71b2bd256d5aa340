"""Validation rounds (semantics §7–§10): the I/O around `replay.engine`.

A round takes the round lock, orders the candidates (rotation, §9.2), and for each one either
replays its matching cases through the configured backend or consults its forward trial, asks
the engine for a verdict, and writes it: state changes only through `lifecycle.services`
(which lock and journal), bookkeeping under the same row locks, leaving alone a rule retired by
a reviewer while the round ran (§9.5). Reads are set-based (failing cases are selected for
many candidates at once) and writes batched (verdicts, events and reads at most `FLUSH_S`
apart): a round costs a few statements per batch, not per candidate, whatever the size of the
history.
"""

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from lifecycle import journal
from lifecycle.bulk import insert_many, update_from_values
from lifecycle.journal import EventType
from lifecycle.matching import NEWEST_FIRST, newest_matching_ids
from lifecycle.metrics import Registry, load_registry
from lifecycle.models import (
    JournalEvent,
    Rule,
    RuleRead,
    RuleState,
    Trajectory,
    TrajectoryKind,
)
from lifecycle.scopes import _query_terms, narrows_to, rule_as_dict
from lifecycle.services.rules import Decision, rules_decide
from lifecycle.states import Action, Actor

from . import engine, lock
from .backends.http import HttpBackend
from .backends.python import ReplayCase, ReplayContext, execute, load_callable
from .models import ReplaySession, RoundStatus, ValidationRound
from .trials import trial_counts, trial_of

logger = logging.getLogger(__name__)
ENGINE = Actor.engine()


@dataclass(frozen=True)
class RoundConfig:
    margins: engine.Margins
    min_sessions: int
    max_failing: int
    max_wins: int
    max_attempts: int
    replay_timeout_s: float
    env_wait_timeout_s: float
    budget_s: float
    backend: Any
    verifier: Any

    @property
    def replay_wired(self) -> bool:
        return self.backend is not None

    @classmethod
    def from_settings(cls) -> "RoundConfig":
        return cls(
            margins=engine.Margins(
                promote=settings.CAUTERWEB_RULE_PROMOTE_MARGIN,
                regress=settings.CAUTERWEB_RULE_REGRESS_MARGIN,
            ),
            min_sessions=settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS,
            max_failing=settings.CAUTERWEB_MAX_FAILING_CASES,
            max_wins=settings.CAUTERWEB_MAX_PROTECTED_WINS,
            max_attempts=settings.CAUTERWEB_MAX_REPLAY_ATTEMPTS,
            replay_timeout_s=settings.CAUTERWEB_REPLAY_TIMEOUT_S,
            env_wait_timeout_s=settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S,
            budget_s=settings.CAUTERWEB_VALIDATION_ROUND_BUDGET_S,
            backend=_backend(settings.CAUTERWEB_REPLAY_BACKEND),
            verifier=load_callable(settings.CAUTERWEB_VERIFIER)
            if settings.CAUTERWEB_VERIFIER
            else None,
        )


def _backend(setting: str):
    if not setting:
        return None
    if setting.startswith(("http://", "https://")):
        return HttpBackend(setting)
    return load_callable(setting)


# --- rounds ------------------------------------------------------------------------------------


def round_run(*, kicked_by: str = "", now: datetime | None = None) -> ValidationRound | None:
    """Run one round; None when another round holds the lock (semantics §9.1). Never raises."""
    holder = lock.new_holder()
    try:
        if not lock.acquire(holder):
            return None
    except Exception:
        logger.exception("could not take the round lock")
        return None
    try:
        return _round(holder=holder, kicked_by=kicked_by, now=now or timezone.now())
    finally:
        try:
            lock.release(holder)
        except Exception:
            logger.exception("could not release the round lock; it will expire")


def round_has_work() -> bool:
    """Whether a round would validate anything: is there a candidate? One indexed query."""
    return Rule.objects.filter(state=RuleState.CANDIDATE).exists()


class _Round:
    """What one round knows while it works: its row, config, registry, the active rules the
    replay context shows as the baseline, and the verdicts not yet written."""

    def __init__(self, vround: ValidationRound, cfg: RoundConfig, holder: str):
        self.row = vround
        self.cfg = cfg
        self.holder = holder
        self.registry: Registry = load_registry()
        # Active rules by scope: the baseline every replay context shows (§7.3).
        self.actives: dict[str, list[Rule]] = {}
        self.wins: dict[str, list[Trajectory]] = {}
        self.unwritten: list[Outcome] = []
        self.unwritten_since = 0.0
        self.live: set[str] = set()
        self.live_at = float("-inf")
        self.queue: list[str] = []
        self.cases: _CasePrefetch | None = None
        self.summary = {
            "decided": 0,
            "pending": 0,
            "promoted": 0,
            "retired": 0,
            "skipped": 0,
            "budget_exhausted": 0,
            "errors": [],
        }
        self.extended_at = time.monotonic()

    def still_candidate(self, rule_id: str) -> bool:
        """Whether a rule is still a candidate, as of at most `STATE_REFRESH_S` ago: one query
        for the whole queue, so a reviewer's retirement is seen before a slow replay starts
        without one query per candidate. The write re-checks under the row lock (§9.5)."""
        if time.monotonic() - self.live_at > STATE_REFRESH_S:
            self.live = set(
                Rule.objects.filter(pk__in=self.queue, state=RuleState.CANDIDATE).values_list(
                    "id", flat=True
                )
            )
            self.live_at = time.monotonic()
        return rule_id in self.live

    def add(self, outcome: "Outcome") -> None:
        if not self.unwritten:
            self.unwritten_since = time.monotonic()
        self.unwritten.append(outcome)

    def due(self) -> bool:
        """Write when the batch is full, or when its oldest verdict has waited `FLUSH_S`."""
        return len(self.unwritten) >= WRITE_BATCH or (
            bool(self.unwritten) and time.monotonic() - self.unwritten_since >= FLUSH_S
        )

    def keep_lock(self) -> None:
        # Extend now and then, not per candidate: a forward-trial candidate takes microseconds.
        if time.monotonic() - self.extended_at > lock.lock_ttl_s() / 4:
            lock.extend(self.holder)
            self.extended_at = time.monotonic()


@dataclass
class Outcome:
    """One candidate's verdict and its evidence, ready to be written."""

    rule: Rule
    verdict: engine.Verdict
    trial: engine.Trial
    over: bool
    started: dict
    replay: engine.Verdict | None = None
    cases: list = field(default_factory=list)
    retire_on: list = field(default_factory=list)
    reads: list = field(default_factory=list)  # (replay session, rule id)
    at: datetime | None = None  # when the candidate was started
    result: str = ""
    shown: bool = False  # already in the round's actives, for the next replays' contexts


# Verdicts are written in batches — a few statements per batch instead of a few per candidate
# (semantics §9: cost linear in candidates, small constant) — of at most WRITE_BATCH, and no later
# than FLUSH_S after the oldest was reached. A real harness spends seconds per replay, so each
# of its verdicts is written as soon as it is reached; a crash loses at most FLUSH_S of work,
# which the next round redoes (nothing half-written: each batch is one transaction).
WRITE_BATCH = 500
FLUSH_S = 0.5
# How stale the round's view of "still a candidate" may be before a replay starts (§9.5).
STATE_REFRESH_S = 0.25


def _round(*, holder: str, kicked_by: str, now: datetime) -> ValidationRound:
    cfg = RoundConfig.from_settings()
    begun = time.monotonic()
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
    queue = engine.rotate(candidates, previous_first)
    vround = ValidationRound.objects.create(
        started_at=now,
        queue=queue,
        budget_s=cfg.budget_s,
        replay_wired=cfg.replay_wired,
        kicked_by=kicked_by[:64],
    )
    state = _Round(vround, cfg, holder)
    summary = state.summary
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
        if cfg.replay_wired:
            for active in Rule.objects.filter(state=RuleState.ACTIVE).order_by("recorded_at", "id"):
                state.actives.setdefault(active.scope, []).append(active)
        rules = Rule.objects.in_bulk(queue)
        counts = trial_counts(queue)
        state.queue = queue
        state.cases = _CasePrefetch(state, queue, rules)
        for rule_id in queue:
            state.keep_lock()
            over = engine.budget_exhausted(
                budget_s=cfg.budget_s, elapsed_s=time.monotonic() - begun
            )
            try:
                _validate(state, rules[rule_id], counts, over=over)
            except Exception as exc:
                logger.exception("validating %s failed; the round goes on", rule_id)
                summary["errors"].append({"rule": rule_id, "error": f"{type(exc).__name__}: {exc}"})
            if state.due():
                _write(state)
        _write(state)
        status = RoundStatus.FINISHED
    except Exception as exc:
        logger.exception("validation round %s failed", vround.pk)
        summary["errors"].append({"rule": None, "error": f"{type(exc).__name__}: {exc}"})
        status = RoundStatus.FAILED
    summary["elapsed_s"] = round(time.monotonic() - begun, 4)
    finished = timezone.now()
    journal.write(
        type=EventType.VALIDATION_ROUND_FINISHED,
        actor=ENGINE,
        round_id=vround.pk,
        at=finished,
        evidence=summary,
    )
    ValidationRound.objects.filter(pk=vround.pk).update(
        finished_at=finished,
        status=status,
        summary=summary,
        error="\n".join(e["error"] for e in summary["errors"]),
    )
    vround.refresh_from_db()
    return vround


def _announce_fallback(now: datetime) -> None:
    """Say once, ever, that the engine works without a replay backend (semantics §8). Under the
    round lock, so two workers cannot both announce it."""
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


# --- one candidate -----------------------------------------------------------------------------


def _validate(state: _Round, rule: Rule, counts: dict, *, over: bool) -> None:
    """Decide one candidate and queue its verdict for the next batch write."""
    cfg = state.cfg
    validator = engine.choose_validator(
        replay_wired=cfg.replay_wired,
        replay_attempts=rule.replay_attempts,
        max_replay_attempts=cfg.max_attempts,
        over_budget=over,
    )
    trial = trial_of(rule.id, rule.baseline_rate, counts)
    started = {
        "validator": validator,
        "replay_attempts": rule.replay_attempts,
        "sessions_observed": trial.enrolled,
        "sessions_needed": cfg.min_sessions,
        "round_budget_exhausted": over,
    }
    outcome = Outcome(
        rule=rule, verdict=None, trial=trial, over=over, started=started, at=timezone.now()
    )
    if validator == engine.REPLAY:
        # A replay is slow: do not start one for a rule a reviewer retired meanwhile (§9.5).
        if not state.still_candidate(rule.id):
            state.summary["skipped"] += 1
            return
        _replay(state, outcome)
    _decide(outcome, cfg)
    if outcome.verdict.outcome == "promote" and outcome.replay is not None:
        # The next candidates' replays see it as active (§7.3) before the batch is written; a
        # decisive replay stands whatever the trial says, so the write cannot undo it — only a
        # reviewer can, and then `_write` takes it back out.
        _show(state, outcome)
    state.add(outcome)


def _decide(o: Outcome, cfg: RoundConfig) -> None:
    o.verdict = engine.decide_candidate(
        replay=o.replay,
        trial=o.trial,
        over_budget=o.over,
        min_sessions=cfg.min_sessions,
        margins=cfg.margins,
    )


def _show(state: _Round, o: Outcome) -> None:
    """Put a promoted rule among the round's actives, as the rule tool shows an active rule."""
    o.rule.state = RuleState.ACTIVE
    if not o.shown:
        state.actives.setdefault(o.rule.scope, []).append(o.rule)
        o.shown = True


def _write(state: _Round) -> None:
    """Write the pending outcomes in one transaction: bookkeeping only for rules still
    candidates (one retired by a reviewer meanwhile is skipped, §9.5), the round's events, and
    the state changes through `lifecycle.services.rules_decide`."""
    outcomes, state.unwritten = state.unwritten, []
    if not outcomes:
        return
    now = timezone.now()
    round_id = state.row.pk
    with transaction.atomic():
        live = {
            rid: (rule_state, attempts)
            for rid, rule_state, attempts in Rule.objects.select_for_update()
            .filter(pk__in=[o.rule.id for o in outcomes])
            .values_list("id", "state", "replay_attempts")
        }
        # Enrolments that arrived while a candidate was replayed count, and are never
        # overwritten (§9.5): its trial is read again now, under the rule's row lock.
        replayed = [o for o in outcomes if o.replay is not None]
        if replayed:
            fresh = trial_counts([o.rule.id for o in replayed])
            for o in replayed:
                o.trial = trial_of(o.rule.id, o.rule.baseline_rate, fresh)
                _decide(o, state.cfg)
        keep, events, decisions = [], [], []
        # What the replays read is a fact of their sessions, kept even for a skipped rule.
        reads = [read for o in outcomes for read in o.reads]
        for o in outcomes:
            rule_state, attempts = live.get(o.rule.id, (None, 0))
            if rule_state != RuleState.CANDIDATE:
                o.result = "skipped"
                continue
            pending = o.verdict.outcome == "pending"
            keep.append(o.rule.id)
            o.result = o.verdict.outcome
            trial_figures = o.trial.evidence()
            events.append(
                _journal(EventType.VALIDATION_CANDIDATE_STARTED, o, round_id, o.at, o.started)
            )
            events += [
                _journal(EventType.VALIDATION_REPLAY_CASE, o, round_id, now, case)
                for case in o.cases
            ]
            events.append(
                _journal(
                    EventType.VALIDATION_VERDICT,
                    o,
                    round_id,
                    now,
                    {
                        "outcome": o.verdict.outcome,
                        "validator": o.verdict.validator,
                        "reason": o.verdict.reason,
                        "pending_reason": o.verdict.pending_reason or None,
                        "round_budget_exhausted": o.over,
                        "details": _details(o, attempts + int(o.replay is not None)),
                    },
                )
            )
            if not pending:
                decisions.append(
                    Decision(
                        rule_id=o.rule.id,
                        action=Action.PROMOTE if o.verdict.outcome == "promote" else Action.RETIRE,
                        reason=o.verdict.reason,
                        validator=o.verdict.validator,
                        evidence={
                            "validator": o.verdict.validator,
                            "cases": o.cases,
                            "deciding_metric": o.verdict.deciding_metric,
                            "retire_on": o.retire_on,
                            "trial": trial_figures
                            if o.verdict.validator == engine.FORWARD_TRIAL
                            else None,
                        },
                    )
                )
        _bookkeeping(keep, outcomes, now)
        journal.write_many(events)
        insert_many(
            [RuleRead(session_id=sid, rule_id=rid, at=now, via="replay") for sid, rid in reads]
        )
        if decisions:
            rules_decide(decisions=decisions, actor=ENGINE, round_id=round_id, now=now)
    for o in outcomes:
        if o.result == "promote":
            _show(state, o)
        elif o.shown:  # a reviewer retired it before the write: no longer shown
            state.actives[o.rule.scope].remove(o.rule)
            o.rule.state = live.get(o.rule.id, (RuleState.RETIRED, 0))[0]
        _count(state.summary, o)


def _bookkeeping(ids: list[str], outcomes: list[Outcome], now: datetime) -> None:
    """The candidates' own fields, in one statement for the batch: each pending candidate
    keeps its own reason (a replay's names its case)."""
    kept = set(ids)
    rows = []
    for o in outcomes:
        if o.rule.id not in kept:
            continue
        pending = o.verdict.outcome == "pending"
        rows.append(
            (
                o.rule.id,
                o.verdict.validator,
                int(o.replay is not None),
                pending,
                (o.verdict.pending_reason or "") if pending else "",
                (o.verdict.reason or "") if pending else "",
            )
        )
    # A decided rule's reason and state are `rules_decide`'s to write.
    update_from_values(
        Rule,
        columns=("id", "validator", "replayed", "pending", "pending_reason", "reason"),
        rows=rows,
        assignments={
            "first_attempted_at": "COALESCE({table}.first_attempted_at, %s)",
            "last_validator": "v.validator",
            "replay_attempts": "{table}.replay_attempts + v.replayed",
            "pending_reason": "CASE WHEN v.pending THEN v.pending_reason "
            "ELSE {table}.pending_reason END",
            "verdict_reason": "CASE WHEN v.pending THEN v.reason ELSE {table}.verdict_reason END",
        },
        params=[connection.ops.adapt_datetimefield_value(now)],
    )


def _count(summary: dict, o: Outcome) -> None:
    summary["budget_exhausted"] += int(o.over)
    if o.result == "skipped":
        summary["skipped"] += 1
    elif o.result == "pending":
        summary["pending"] += 1
    else:
        summary["decided"] += 1
        summary["promoted" if o.result == "promote" else "retired"] += 1


def _journal(type_: EventType, o: Outcome, round_id: int, now: datetime, evidence: dict):
    return journal.event(
        type=type_,
        at=now,
        rule_id=o.rule.id,
        round_id=round_id,
        actor=ENGINE,
        evidence=evidence,
    )


def _details(o: Outcome, replay_attempts: int) -> dict:
    return {
        "trial": o.trial.evidence(),
        "replay_attempts": replay_attempts,
        "replay": None
        if o.replay is None
        else {
            "outcome": o.replay.outcome,
            "reason": o.replay.reason,
            "pending_reason": o.replay.pending_reason or None,
            "deciding_metric": o.replay.deciding_metric,
            "retire_on": o.retire_on,
            "cases": [c["case"] for c in o.cases],
            "outcomes": [c["outcome"] for c in o.cases],
        },
    }


# --- replay (semantics §7) --------------------------------------------------------------------------


def _case_ref(t: Trajectory) -> engine.CaseRef:
    scope = t.replay_input.get("scope") if isinstance(t.replay_input, dict) else None
    return engine.CaseRef(id=t.id, started_at=t.started_at, scope=scope)


def _failing_cases(rule: Rule, state: _Round) -> list[Trajectory]:
    """The candidate's matching replayable failing cases, newest first (semantics §7.1)."""
    by_id = state.cases.failing(rule)
    refs = engine.select_failing_cases(map(_case_ref, by_id.values()), limit=state.cfg.max_failing)
    return [by_id[c.id] for c in refs]


class _CasePrefetch:
    """Failing cases for the candidate at hand and the next ones in the queue, selected in
    one statement (`newest_matching_ids`) and loaded in one more.

    A selection is used only while fresh (`FRESH_S`), so a trajectory imported while a slow
    harness replays is seen by the next candidate. The look-ahead adapts: it doubles (to
    `MAX_AHEAD`) while selections are used up fresh — an instant backend — and shrinks when
    they go stale unused — a harness taking seconds per replay, which then gets its cases
    selected one candidate at a time, as late as possible."""

    FRESH_S = 0.5
    MAX_AHEAD = 128

    def __init__(self, state: _Round, queue: list[str], rules: dict[str, Rule]):
        self.state, self.queue, self.rules = state, queue, rules
        self.position = {rule_id: i for i, rule_id in enumerate(queue)}
        self.ahead = 1
        self.selected: dict[str, dict[str, Trajectory]] = {}
        self.selected_at = float("-inf")

    def failing(self, rule: Rule) -> dict[str, Trajectory]:
        fresh = time.monotonic() - self.selected_at <= self.FRESH_S
        if fresh and rule.id in self.selected:
            return self.selected.pop(rule.id)
        if self.selected_at > float("-inf"):
            unused = bool(self.selected) and not fresh
            self.ahead = max(1, self.ahead // 2) if unused else min(self.MAX_AHEAD, self.ahead * 2)
        self._select(rule)
        return self.selected.pop(rule.id)

    def _select(self, rule: Rule) -> None:
        cfg = self.state.cfg
        start = self.position.get(rule.id, len(self.queue))
        batch = [rule] + [
            self.rules[rule_id]
            for rule_id in self.queue[start + 1 :]
            if self.rules[rule_id].replay_attempts < cfg.max_attempts
        ][: self.ahead - 1]
        ids = newest_matching_ids(
            batch,
            kinds=[TrajectoryKind.FAILURE],
            replayable=True,
            limit=cfg.max_failing,
            registry=self.state.registry,
        )
        loaded = Trajectory.objects.in_bulk({i for found in ids.values() for i in found})
        self.selected = {
            rule_id: {i: loaded[i] for i in found if i in loaded} for rule_id, found in ids.items()
        }
        self.selected_at = time.monotonic()


def _protected_wins(scope: str, state: _Round) -> list[Trajectory]:
    """The same for every candidate of a scope: fetched once per scope and round."""
    if scope not in state.wins:
        limit = state.cfg.max_wins
        wins = Trajectory.objects.filter(kind=TrajectoryKind.SUCCESS, replayable=True)
        rows = list(wins.filter(replay_input__scope=scope).order_by(*NEWEST_FIRST)[:limit])
        if len(rows) < limit:
            rows += list(
                wins.exclude(pk__in=[w.pk for w in rows]).order_by(*NEWEST_FIRST)[
                    : limit - len(rows)
                ]
            )
        by_id = {t.id: t for t in rows}
        refs = engine.select_protected_wins(map(_case_ref, rows), scope=scope, limit=limit)
        state.wins[scope] = [by_id[c.id] for c in refs] if limit else []
    return state.wins[scope]


def _trajectory_dict(t: Trajectory) -> dict:
    return {
        "id": t.id,
        "kind": t.kind,
        "task": t.task,
        "steps": t.steps,
        "outcome": t.outcome,
        "metrics": t.metrics,
        "signature": t.signature,
        "notices": t.notices,
        "session_id": t.session_id,
        "started_at": t.started_at.isoformat() if t.started_at else None,
        "corpus": t.corpus,
        "replayable": t.replayable,
        "replay_input": t.replay_input,
        "meta": t.meta,
    }


def _rules_for(actives: dict[str, list[Rule]], candidate: Rule):
    """The replay's rule tool (semantics §7.3): active rules as the baseline, the candidate under
    test, and no other candidate. Built from rules already in memory so a backend thread never
    touches the database; same narrowing as the live tool (`lifecycle.scopes`)."""
    # A snapshot: rules promoted later in the round do not change a replay already running.
    by_scope = {name: list(rules) for name, rules in actives.items()}

    def rules(scope: str | None, query: str | None) -> list[dict]:
        if scope is None:
            active = sorted(
                (r for rules in by_scope.values() for r in rules),
                key=lambda r: (r.recorded_at, r.id),
            )
        else:
            active = by_scope.get(scope, [])
        if query and query.strip():
            query_atoms, query_words = _query_terms(query)
            if query_atoms or query_words:
                active = [r for r in active if narrows_to(r, query_atoms, query_words)]
        shown = active + ([candidate] if scope is None or candidate.scope == scope else [])
        return [rule_as_dict(r) for r in shown]

    return rules


def _last_trace_metrics(session: Any) -> dict | None:
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


def _replay(state: _Round, o: Outcome) -> None:
    """Replay the candidate's cases one at a time (semantics §7) and put the evidence on `o`."""
    rule, cfg, registry = o.rule, state.cfg, state.registry
    failing = _failing_cases(rule, state)
    o.retire_on = engine.retire_on(
        rule_metric=rule.metric,
        rule_signature=rule.signature,
        failing_case_atoms=[[*t.signature, *t.notices] for t in failing],
        registry=registry,
    )
    if not failing:
        # Nothing to replay the candidate against: the backend is not called (semantics §7.1).
        o.replay = engine.decide_replay([], margins=cfg.margins)
        return
    wins = _protected_wins(rule.scope, state)
    trigger_metric = engine.signature_metric([*failing[0].signature, *failing[0].notices], registry)
    rule_metric = engine.canonical(rule.metric, registry)
    rules_for = _rules_for(state.actives, rule)
    scores = []
    for trajectory, kind in [(t, "failing") for t in failing] + [(t, "win") for t in wins]:
        state.keep_lock()
        score, evidence = _replay_case(
            state, o, trajectory, kind, rules_for, rule_metric, trigger_metric
        )
        scores.append(score)
        o.cases.append(evidence)
    o.replay = engine.decide_replay(scores, margins=cfg.margins)


def _replay_case(
    state: _Round,
    o: Outcome,
    trajectory: Trajectory,
    kind: str,
    rules_for,
    rule_metric: str,
    trigger_metric: str | None,
) -> tuple[engine.CaseScore, dict]:
    cfg, rule = state.cfg, o.rule
    session_id = f"replay:{state.row.pk}:{rule.id}:{trajectory.id}"
    context = ReplayContext(session_id=session_id, rules_for=rules_for)
    remote = getattr(cfg.backend, "remote_reads", False)
    poll_started = None
    if remote:
        ReplaySession.objects.update_or_create(
            pk=session_id,
            defaults={"rule": rule, "case_id": trajectory.id, "created_at": timezone.now()},
        )

        def poll_started() -> bool:
            return ReplaySession.objects.filter(pk=session_id, started_at__isnull=False).exists()

    replay_input = (
        trajectory.replay_input if trajectory.replay_input is not None else trajectory.task
    )
    case = ReplayCase(
        id=trajectory.id,
        kind=kind,
        trajectory=_trajectory_dict(trajectory),
        replay_input=replay_input,
        rule=rule_as_dict(rule),
    )
    run = execute(
        cfg.backend,
        case,
        context,
        replay_timeout_s=cfg.replay_timeout_s,
        env_wait_timeout_s=cfg.env_wait_timeout_s,
        poll_started=poll_started,
    )
    if remote:
        # The harness read through the API, which recorded the reads itself.
        read = RuleRead.objects.filter(session_id=session_id, rule_id=rule.id).exists()
    else:
        returned = list(dict.fromkeys(context.returned))
        o.reads += [(session_id, rid) for rid in returned]
        read = rule.id in returned

    error = run.error
    replayed = None
    if not run.failed and not run.env_wait_expired:
        replayed = _last_trace_metrics(run.session)
        if replayed is None:
            error = "the session has no trace with metrics"
    verifier_answered = False
    if replayed is not None and cfg.verifier is not None:
        answer = _verify(cfg.verifier, run.session, replay_input)
        if answer is not None:
            replayed[engine.OUTCOME_METRIC] = answer
            verifier_answered = True
    deltas = engine.metric_deltas(trajectory.metrics, replayed or {}, state.registry)
    outcome = engine.case_outcome(
        env_wait_expired=run.env_wait_expired,
        failed=run.failed or replayed is None,
        deltas=deltas,
        candidate_read=read,
    )
    score = engine.score_case(
        case=trajectory.id,
        kind=kind,
        outcome=outcome,
        candidate_read=read,
        deltas=deltas,
        verifier_answered=verifier_answered,
        rule_metric=rule_metric,
        trigger_metric=trigger_metric,
        retire_on_metrics=o.retire_on,
        margins=cfg.margins,
        error=error,
    )
    evidence = {
        "case": trajectory.id,
        "kind": kind,
        "replay_session": session_id,
        "candidate_read": read,
        "outcome": outcome,
        "metrics": deltas,
        "deciding_metric": score.deciding_metric,
        "retire_on": o.retire_on,
        "attribution": list(score.attribution),
        "regressed": score.regressed,
        "improved": score.improved,
        "error": error,
    }
    return score, evidence


def _verify(verifier, session: Any, replay_input: Any) -> float | None:
    """The verifier's verdict as `outcome_correct`; "don't know" (None) or an error counts as
    no answer — it contributes nothing and vetoes nothing (semantics §6)."""
    try:
        answer = verifier(session, replay_input)
    except Exception:
        logger.exception("the verifier raised; treating it as no answer")
        return None
    if answer is None:
        return None
    try:
        return min(1.0, max(0.0, float(answer)))
    except (TypeError, ValueError):
        return None


# --- standstill (semantics §9.4) --------------------------------------------------------------------


def _snapshot() -> set:
    """What a round can change: the candidates' own fields (a decided one drops out)."""
    return set(
        Rule.objects.filter(state=RuleState.CANDIDATE).values_list(
            "id",
            "state",
            "pending_reason",
            "replay_attempts",
            "last_validator",
            "first_attempted_at",
        )
    )


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


def run_until_settled(*, timeout_s: float) -> dict:
    """Run rounds until one changes nothing, or until `timeout_s` passes (semantics §9.4).

    A round in flight is never cancelled: the timeout is checked between rounds. When another
    worker holds the round lock, wait for it and go on."""
    deadline = time.monotonic() + timeout_s
    rounds = 0
    settled = False
    while time.monotonic() < deadline:
        before = _snapshot()
        vround = round_run(kicked_by="standstill")
        if vround is None:
            time.sleep(0.1)
            continue
        rounds += 1
        if _snapshot() == before:
            settled = True
            break
    return {"rounds": rounds, "settled": settled, "rules": rules_summary()}
