"""Writing what the round decided (semantics §3, §9.5, §10): verdicts that are ready, in one
transaction, as soon as the round has them.

The verdict arrives decided: this module never decides again. Under the rows' locks it only
checks each rule is still a candidate — one a reviewer retired meanwhile is skipped, with no
event — writes the round's events and the candidate's bookkeeping, the replays' reads and
samples, and moves decided rules through `lifecycle.services.rules_decide`.
"""

import queue
import threading
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, connections, transaction

from lifecycle import journal
from lifecycle.bulk import insert_rows, update_from_values
from lifecycle.journal import EventType
from lifecycle.models import Rule, RuleRead, RuleState
from lifecycle.services.rules import Decision, rules_decide
from lifecycle.states import Action, Actor

from . import engine
from .designs import CandidateRun
from .engine.randomized import RandomizedTrial
from .models import ValidationRound

ENGINE = Actor.engine()


@dataclass(eq=False)
class Outcome:
    """One candidate's verdict and its evidence, ready to be written."""

    rule: Rule
    verdict: engine.Verdict
    trial: engine.Trial | RandomizedTrial
    over: bool
    started: dict
    at: datetime
    run: CandidateRun | None = None
    replay: engine.Verdict | None = None
    result: str = ""  # after the write: promote / retire / pending / skipped

    @property
    def attempt_spent(self) -> bool:
        """A replay that ran spends one of `max_replay_attempts` unless it is still gathering
        samples (semantics §7.10, §17.3): a candidate can always reach `max_repeats`."""
        return self.replay is not None and self.replay.attempt_spent


def verdicts_write(
    *, round_id: int, outcomes: list[Outcome], now: datetime, progress: dict | None = None
) -> None:
    """Write ready verdicts in one transaction; sets each outcome's `result`."""
    with transaction.atomic():
        live = dict(
            Rule.objects.select_for_update()
            .filter(pk__in=[o.rule.id for o in outcomes])
            .values_list("id", "state")
        )
        kept = [o for o in outcomes if live.get(o.rule.id) == RuleState.CANDIDATE]
        for o in outcomes:
            o.result = (
                o.verdict.outcome if live.get(o.rule.id) == RuleState.CANDIDATE else "skipped"
            )
        events = [e for o in kept for e in _events(o, round_id, now)]
        decisions = [_decision(o) for o in kept if o.verdict.outcome != "pending"]
        _bookkeeping([o for o in kept if o.verdict.outcome == "pending"], now)
        journal.write_many(events)
        # What the replays read and showed is a fact of their sessions, kept for a skipped
        # rule too.
        runs = [o.run for o in outcomes if o.run is not None]
        insert_rows(
            RuleRead,
            ("session_id", "rule_id", "at", "via"),
            [(sid, rid, now, "replay") for run in runs for sid, rid in run.reads],
        )
        _store_samples(runs, round_id, now)
        if decisions:
            rules_decide(decisions=decisions, actor=ENGINE, round_id=round_id, now=now)
        if progress is not None:
            ValidationRound.objects.filter(pk=round_id).update(progress=progress)


def _store_samples(runs: list[CandidateRun], round_id: int, now: datetime) -> None:
    """Every paired replay of this round, kept for every later round (semantics §17.3), with
    its active-set version (docs/semantics.md#s21-1). A control replay another candidate
    replayed is that candidate's row, stored once (docs/semantics.md#s21-2). An engine
    defect is kept as inconclusive: it took its repeat and is never counted."""
    rows = [
        (run.rule_id, e)
        for run in runs
        if run.is_paired
        for e in run.evidence
        if not e.get("replayed_for")
    ]
    if not rows:
        return
    from .models import ReplaySample

    insert_rows(
        ReplaySample,
        (
            "rule_id",
            "case_id",
            "arm",
            "repeat",
            "round_id",
            "outcome",
            "metrics",
            "candidate_read",
            "replay_session",
            "created_at",
            "active_set",
        ),
        [
            (
                rule_id,
                e["case"],
                e["arm"],
                e["repeat"],
                round_id,
                engine.INCONCLUSIVE if e["outcome"] == engine.ENGINE_DEFECT else e["outcome"],
                e["metrics"] if e["outcome"] == engine.SCORED else {},
                e["candidate_read"],
                e["replay_session"][:160],
                now,
                e.get("stratum", ""),
            )
            for rule_id, e in rows
        ],
    )


def _event(
    type_: EventType, o: Outcome, round_id: int, at: datetime, evidence: dict
) -> journal.Event:
    return journal.event(
        type=type_, at=at, rule_id=o.rule.id, round_id=round_id, actor=ENGINE, evidence=evidence
    )


def _events(o: Outcome, round_id: int, now: datetime) -> list[journal.Event]:
    cases = o.run.ordered_evidence() if o.run else []
    verdict = {
        "outcome": o.verdict.outcome,
        "validator": o.verdict.validator,
        "reason": o.verdict.reason,
        "pending_reason": o.verdict.pending_reason or None,
        "round_budget_exhausted": o.over,
        "details": _details(o, cases),
    }
    return [
        _event(EventType.VALIDATION_CANDIDATE_STARTED, o, round_id, o.at, o.started),
        *[_event(EventType.VALIDATION_REPLAY_CASE, o, round_id, now, case) for case in cases],
        _event(EventType.VALIDATION_VERDICT, o, round_id, now, verdict),
    ]


def _paired_evidence(o: Outcome) -> dict | None:
    if o.run is None or not o.run.is_paired:
        return None
    run = o.run
    evidence = run.paired_verdict().evidence
    owned = [e for e in run.evidence if not e.get("replayed_for")]
    return {
        **evidence,
        "replays_this_round": len(owned),
        # The active rule set this round's replays ran under, and whose replays the control
        # samples were (docs/semantics.md#s21).
        "active_set": {"version": run.stratum, "rules": list(run.active_rules)},
        "controls": run.control_sources(),
    }


def _details(o: Outcome, cases: list[dict]) -> dict:
    replay = None
    if o.replay is not None:
        replay = {
            "outcome": o.replay.outcome,
            "reason": o.replay.reason,
            "pending_reason": o.replay.pending_reason or None,
            "deciding_metric": o.replay.deciding_metric,
            "retire_on": o.run.retire_on if o.run else [],
            "cases": [c["case"] for c in cases],
            "outcomes": [c["outcome"] for c in cases],
        }
        if o.run is not None and o.run.is_paired:
            replay["paired"] = _paired_evidence(o)
    return {
        "trial": o.trial.evidence(),
        "replay_attempts": o.rule.replay_attempts + int(o.attempt_spent),
        "replay": replay,
    }


def _decision(o: Outcome) -> Decision:
    validator = o.verdict.validator
    evidence = {
        "validator": validator,
        "cases": o.run.ordered_evidence() if o.run else [],
        "deciding_metric": o.verdict.deciding_metric,
        "retire_on": o.run.retire_on if o.run else [],
        "trial": o.trial.evidence() if validator == engine.FORWARD_TRIAL else None,
    }
    if validator == engine.REPLAY and o.run is not None and o.run.is_paired:
        evidence["paired"] = _paired_evidence(o)
    action = Action.PROMOTE if o.verdict.outcome == "promote" else Action.RETIRE
    return Decision(
        o.rule.id,
        action,
        o.verdict.reason,
        evidence,
        validator,
        attempts_spent=int(o.attempt_spent),
        attempted=True,
    )


def _bookkeeping(pending: list[Outcome], now: datetime) -> None:
    """The pending candidates' own fields, in one statement: each keeps its own reason (a
    replay's names its case). A decided candidate's are written with its decision, in the
    one row write of `rules_decide`."""
    update_from_values(
        Rule,
        columns=("id", "validator", "spent", "pending_reason", "reason"),
        rows=[
            (
                o.rule.id,
                o.verdict.validator,
                int(o.attempt_spent),
                o.verdict.pending_reason or "",
                o.verdict.reason or "",
            )
            for o in pending
        ],
        assignments={
            "first_attempted_at": "COALESCE({table}.first_attempted_at, %s)",
            "last_validator": "v.validator",
            "replay_attempts": "{table}.replay_attempts + v.spent",
            "pending_reason": "v.pending_reason",
            "verdict_reason": "v.reason",
        },
        params=[connection.ops.adapt_datetimefield_value(now)],
    )


class Writer:
    """Writes ready verdicts as soon as it can (semantics §18).

    On SQLite, which has one writer at a time, the round's own thread writes. Elsewhere a
    thread of its own does, each time taking everything that became ready while it wrote the
    previous batch (group commit): the round never waits on a write, a verdict waits at most
    for the write before it, and a burst of instant verdicts costs one transaction. `write`
    is called with (outcomes, progress); `after` with the outcomes once they are written."""

    def __init__(self, *, write, after, threaded: bool):
        self._write, self._after = write, after
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._thread = None
        if threaded:
            self._thread = threading.Thread(target=self._loop, name="verdicts", daemon=True)
            self._thread.start()

    def put(self, outcomes: list[Outcome], progress: dict | None) -> None:
        self.check()
        if self._thread is None:
            self._write(outcomes, progress)
            self._after(outcomes)
        else:
            self._queue.put((outcomes, progress))

    def _loop(self) -> None:
        try:
            stop = False
            while not stop:
                batch = [self._queue.get()]
                while not self._queue.empty():
                    batch.append(self._queue.get())
                stop = None in batch  # close() puts it last
                items = [item for item in batch if item is not None]
                if items:
                    outcomes = [o for ready, _ in items for o in ready]
                    progress = next((p for _, p in reversed(items) if p is not None), None)
                    self._write(outcomes, progress)
                    self._after(outcomes)
        except BaseException as exc:  # the round re-raises it: it fails, nothing half-written
            self._error = exc
        finally:
            connections.close_all()

    def check(self) -> None:
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Write what is queued, then stop; a failed write fails the round."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
        self.check()
