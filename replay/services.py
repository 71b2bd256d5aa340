"""Validation rounds (SPEC §7–§10): the I/O around `replay.engine`.

A round takes the round lock, orders the candidates (rotation, §9.2), and for each one either
replays its matching cases through the configured backend or consults its forward trial, asks
the engine for a verdict, and writes it: state changes only through `lifecycle.services`
(which lock and journal), bookkeeping through a conditional UPDATE that leaves alone a rule
retired by a reviewer while the round ran (§9.5). Reads are set-based: a round costs a fixed
number of queries per candidate, whatever the size of the history.
"""

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from lifecycle.matching import matching_trajectories
from lifecycle.metrics import Registry, load_registry
from lifecycle.models import (
    JournalEvent,
    Rule,
    RuleRead,
    RuleState,
    Trajectory,
    TrajectoryKind,
)
from lifecycle.scopes import _query_terms, narrows_to, record_reads, rule_as_dict
from lifecycle.services import journal_write, rule_promote, rule_retire
from lifecycle.states import Actor

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
    """Run one round; None when another round holds the lock (SPEC §9.1). Never raises."""
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


class _Round:
    """What one round knows while it works: its row, config, registry and the active rules
    the replay context shows as the baseline."""

    def __init__(self, vround: ValidationRound, cfg: RoundConfig, holder: str):
        self.row = vround
        self.cfg = cfg
        self.holder = holder
        self.registry: Registry = load_registry()
        self.actives: list[Rule] = []
        self.extended_at = time.monotonic()

    def keep_lock(self) -> None:
        # Extend now and then, not per candidate: a forward-trial candidate takes milliseconds.
        if time.monotonic() - self.extended_at > lock.lock_ttl_s() / 4:
            lock.extend(self.holder)
            self.extended_at = time.monotonic()


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
    summary = {
        "decided": 0,
        "pending": 0,
        "promoted": 0,
        "retired": 0,
        "skipped": 0,
        "budget_exhausted": 0,
        "errors": [],
    }
    try:
        if not cfg.replay_wired:
            _announce_fallback(now)
        journal_write(
            type="validation_round_started",
            actor=ENGINE,
            round_id=vround.pk,
            at=now,
            evidence={"queue": queue, "budget_s": cfg.budget_s, "replay_wired": cfg.replay_wired},
        )
        state = _Round(vround, cfg, holder)
        if cfg.replay_wired:
            state.actives = list(
                Rule.objects.filter(state=RuleState.ACTIVE).order_by("recorded_at", "id")
            )
        rules = Rule.objects.in_bulk(queue)
        counts = trial_counts(queue)
        for rule_id in queue:
            state.keep_lock()
            over = engine.budget_exhausted(
                budget_s=cfg.budget_s, elapsed_s=time.monotonic() - begun
            )
            try:
                outcome = _validate(state, rules[rule_id], counts, over=over)
            except Exception as exc:
                logger.exception("validating %s failed; the round goes on", rule_id)
                summary["errors"].append({"rule": rule_id, "error": f"{type(exc).__name__}: {exc}"})
                continue
            summary["budget_exhausted"] += int(over)
            if outcome == "skipped":
                summary["skipped"] += 1
            elif outcome == "pending":
                summary["pending"] += 1
            else:
                summary["decided"] += 1
                summary["promoted" if outcome == "promote" else "retired"] += 1
        status = RoundStatus.FINISHED
    except Exception as exc:
        logger.exception("validation round %s failed", vround.pk)
        summary["errors"].append({"rule": None, "error": f"{type(exc).__name__}: {exc}"})
        status = RoundStatus.FAILED
    summary["elapsed_s"] = round(time.monotonic() - begun, 4)
    finished = timezone.now()
    journal_write(
        type="validation_round_finished",
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
    """Say once, ever, that the engine works without a replay backend (SPEC §8). Under the
    round lock, so two workers cannot both announce it."""
    if JournalEvent.objects.filter(type="validation_fallback_announced").exists():
        return
    logger.warning(
        "no replay backend configured (CAUTERWEB_REPLAY_BACKEND): candidates are decided by "
        "forward trials only"
    )
    journal_write(
        type="validation_fallback_announced",
        actor=ENGINE,
        at=now,
        evidence={"validator": engine.FORWARD_TRIAL, "why": "no replay backend configured"},
    )


# --- one candidate -----------------------------------------------------------------------------


def _validate(state: _Round, rule: Rule, counts: dict, *, over: bool) -> str:
    """Validate one candidate; returns "promote", "retire", "pending" or "skipped"."""
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
    replay = None
    cases: list[dict] = []
    retire_on: list[str] = []
    if validator == engine.REPLAY:
        # A replay is slow: do not start one for a rule a reviewer retired meanwhile (§9.5).
        if not Rule.objects.filter(pk=rule.pk, state=RuleState.CANDIDATE).exists():
            return "skipped"
        _event("validation_candidate_started", state, rule, started)
        replay, cases, retire_on = _replay(state, rule)
        # Enrolments that arrived during the replay count, and are never overwritten (§9.5).
        trial = trial_of(rule.id, rule.baseline_rate, trial_counts([rule.id]))
    verdict = engine.decide_candidate(
        replay=replay,
        trial=trial,
        over_budget=over,
        min_sessions=cfg.min_sessions,
        margins=cfg.margins,
    )
    return _apply(
        state,
        rule,
        verdict,
        trial=trial,
        over=over,
        replayed=replay is not None,
        cases=cases,
        retire_on=retire_on,
        started=None if replay is not None else started,
        replay=replay,
    )


def _event(type_: str, state: _Round, rule: Rule, evidence: dict) -> None:
    journal_write(
        type=type_, actor=ENGINE, rule_id=rule.id, round_id=state.row.pk, evidence=evidence
    )


def _apply(
    state: _Round,
    rule: Rule,
    verdict: engine.Verdict,
    *,
    trial: engine.Trial,
    over: bool,
    replayed: bool,
    cases: list[dict],
    retire_on: list[str],
    started: dict | None,
    replay: engine.Verdict | None,
) -> str:
    """Write the verdict in one transaction: bookkeeping (only while still a candidate), the
    round's events, and the state change through the lifecycle service."""
    now = timezone.now()
    pending = verdict.outcome == "pending"
    with transaction.atomic():
        claimed = Rule.objects.filter(pk=rule.pk, state=RuleState.CANDIDATE).update(
            first_attempted_at=Coalesce(F("first_attempted_at"), now),
            replay_attempts=F("replay_attempts") + int(replayed),
            last_validator=verdict.validator,
            pending_reason=verdict.pending_reason if pending else "",
            verdict_reason=verdict.reason if pending else F("verdict_reason"),
        )
        if not claimed:
            return "skipped"
        trial_figures = trial.evidence()
        details = {
            "trial": trial_figures,
            "replay_attempts": rule.replay_attempts + int(replayed),
            "replay": None
            if replay is None
            else {
                "outcome": replay.outcome,
                "reason": replay.reason,
                "pending_reason": replay.pending_reason,
                "deciding_metric": replay.deciding_metric,
                "retire_on": retire_on,
                "cases": [c["case"] for c in cases],
                "outcomes": [c["outcome"] for c in cases],
            },
        }
        events = []
        if started is not None:
            events.append(("validation_candidate_started", started))
        events.append(
            (
                "validation_verdict",
                {
                    "outcome": verdict.outcome,
                    "validator": verdict.validator,
                    "reason": verdict.reason,
                    "pending_reason": verdict.pending_reason or None,
                    "round_budget_exhausted": over,
                    "details": details,
                },
            )
        )
        JournalEvent.objects.bulk_create(
            [
                JournalEvent(
                    type=t,
                    at=now,
                    rule_id=rule.id,
                    round_id=state.row.pk,
                    actor=ENGINE.name,
                    evidence=e,
                )
                for t, e in events
            ]
        )
        if pending:
            return "pending"
        evidence = {
            "validator": verdict.validator,
            "cases": cases,
            "deciding_metric": verdict.deciding_metric,
            "retire_on": retire_on,
            "trial": trial_figures if verdict.validator == engine.FORWARD_TRIAL else None,
        }
        change = rule_promote if verdict.outcome == "promote" else rule_retire
        change(
            rule_id=rule.id,
            actor=ENGINE,
            evidence=evidence,
            reason=verdict.reason,
            validator=verdict.validator,
            round_id=state.row.pk,
            now=now,
        )
    if verdict.outcome == "promote":
        rule.state = RuleState.ACTIVE
        state.actives.append(rule)
    return verdict.outcome


# --- replay (SPEC §7) --------------------------------------------------------------------------


def _case_ref(t: Trajectory) -> engine.CaseRef:
    scope = t.replay_input.get("scope") if isinstance(t.replay_input, dict) else None
    return engine.CaseRef(id=t.id, started_at=t.started_at, scope=scope)


def _select_cases(rule: Rule, cfg: RoundConfig, registry: Registry) -> tuple[list, list]:
    newest = (F("started_at").desc(nulls_last=True), "-id")
    failing = list(
        matching_trajectories(
            rule, kinds=[TrajectoryKind.FAILURE], replayable=True, registry=registry
        ).order_by(*newest)[: cfg.max_failing]
    )
    wins_q = Trajectory.objects.filter(kind=TrajectoryKind.SUCCESS, replayable=True)
    wins = list(wins_q.filter(replay_input__scope=rule.scope).order_by(*newest)[: cfg.max_wins])
    if len(wins) < cfg.max_wins:
        wins += list(
            wins_q.exclude(pk__in=[w.pk for w in wins]).order_by(*newest)[
                : cfg.max_wins - len(wins)
            ]
        )
    by_id = {t.id: t for t in failing + wins}
    failing_refs = engine.select_failing_cases(map(_case_ref, failing), limit=cfg.max_failing)
    win_refs = engine.select_protected_wins(
        map(_case_ref, wins), scope=rule.scope, limit=cfg.max_wins
    )
    return [by_id[c.id] for c in failing_refs], [by_id[c.id] for c in win_refs]


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


def _rules_for(actives: list[Rule], candidate: Rule):
    """The replay's rule tool (SPEC §7.3): active rules as the baseline, the candidate under
    test, and no other candidate. Built from rules already in memory so a backend thread never
    touches the database; same narrowing as the live tool (`lifecycle.scopes`)."""
    actives = list(actives)

    def rules(scope: str | None, query: str | None) -> list[dict]:
        active = [r for r in actives if scope is None or r.scope == scope]
        if query and query.strip():
            query_atoms, query_words = _query_terms(query)
            if query_atoms or query_words:
                active = [r for r in active if narrows_to(r, query_atoms, query_words)]
        shown = active + ([candidate] if scope is None or candidate.scope == scope else [])
        return [rule_as_dict(r) for r in shown]

    return rules


def _last_trace_metrics(session: Any) -> dict | None:
    """The metrics of the session's last trace (SPEC §7.4), or None if there are none."""
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


def _replay(state: _Round, rule: Rule) -> tuple[engine.Verdict, list[dict], list[str]]:
    cfg, registry = state.cfg, state.registry
    failing, wins = _select_cases(rule, cfg, registry)
    retire_on = engine.retire_on(
        rule_metric=rule.metric,
        rule_signature=rule.signature,
        failing_case_atoms=[[*t.signature, *t.notices] for t in failing],
        registry=registry,
    )
    if not failing:
        # Nothing to replay the candidate against: the backend is not called (SPEC §7.1).
        return engine.decide_replay([], margins=cfg.margins), [], retire_on
    trigger_metric = engine.signature_metric([*failing[0].signature, *failing[0].notices], registry)
    rule_metric = engine.canonical(rule.metric, registry)
    rules_for = _rules_for(state.actives, rule)
    scores, cases = [], []
    for trajectory, kind in [(t, "failing") for t in failing] + [(t, "win") for t in wins]:
        state.keep_lock()
        score, evidence = _replay_case(
            state, rule, trajectory, kind, rules_for, retire_on, rule_metric, trigger_metric
        )
        scores.append(score)
        cases.append(evidence)
        _event("validation_replay_case", state, rule, evidence)
    return engine.decide_replay(scores, margins=cfg.margins), cases, retire_on


def _replay_case(
    state: _Round,
    rule: Rule,
    trajectory: Trajectory,
    kind: str,
    rules_for,
    retire_on: list[str],
    rule_metric: str,
    trigger_metric: str | None,
) -> tuple[engine.CaseScore, dict]:
    cfg = state.cfg
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
        read = RuleRead.objects.filter(session_id=session_id, rule_id=rule.id).exists()
    else:
        returned = list(dict.fromkeys(context.returned))
        record_reads(session_id=session_id, rule_ids=returned, via="replay")
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
        retire_on_metrics=retire_on,
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
        "retire_on": retire_on,
        "attribution": list(score.attribution),
        "regressed": score.regressed,
        "improved": score.improved,
        "error": error,
    }
    return score, evidence


def _verify(verifier, session: Any, replay_input: Any) -> float | None:
    """The verifier's verdict as `outcome_correct`; "don't know" (None) or an error counts as
    no answer — it contributes nothing and vetoes nothing (SPEC §6)."""
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


# --- standstill (SPEC §9.4) --------------------------------------------------------------------


def _snapshot() -> set:
    return set(
        Rule.objects.values_list(
            "id",
            "state",
            "pending_reason",
            "replay_attempts",
            "last_validator",
            "first_attempted_at",
        )
    )


def rules_summary() -> list[dict]:
    """Every rule as `validate --json` lists it (SPEC §15)."""
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
    """Run rounds until one changes nothing, or until `timeout_s` passes (SPEC §9.4).

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
