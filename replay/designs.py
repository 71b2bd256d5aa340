"""One candidate's replays within a round, for either design (semantics §7, §17): which replays
to ask for next, how each result scores, and the replay verdict once no more are wanted.

No database and no clock: the round hands in the cases and the results, and the decisions are
the pure engine's (`replay.engine`, `replay.engine.paired`).
"""

import logging
from dataclasses import dataclass, field

from lifecycle.metrics import Registry

from . import engine
from .cases import TREATMENT
from .config import PAIRED, RoundConfig
from .dispatch import Job, RunResult
from .engine import paired

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CaseSpec:
    """A selected case as the design sees it."""

    id: str
    kind: str  # "failing" | "win"
    metrics: dict  # the recorded original's
    atoms: tuple  # signature + notices


@dataclass(eq=False)
class ControlSlot:
    """One control replay of a case under an active-rule set (docs/semantics.md#s21-2): run
    once, for the candidate that asked first (`owner`), and used by every candidate of the
    same scope replaying that case under that set."""

    owner: str
    sample: paired.Sample | None = None  # None while it runs
    body: dict | None = None  # its `validation_replay_case` evidence, as its owner scored it
    stored: bool = False  # a row already (an earlier round's)
    waiting: list = field(default_factory=list)  # [CandidateRun] that use it once it is in
    # Its result, unscored: its owner failed before scoring it and nobody was waiting; the
    # next candidate that uses it scores it and keeps it as its own.
    result: RunResult | None = None


class SharedControls:
    """The control replays of a round, by (case, active-set version) and repeat
    (docs/semantics.md#s21-2). The round loads each key's stored rows once, before any
    candidate numbers a new repeat of it; a candidate asks for the next repeat it has not
    used yet, which is replayed only when no candidate has replayed or started it."""

    def __init__(self):
        self.slots: dict[tuple[str, str], dict[int, ControlSlot]] = {}

    def loaded(self, key: tuple[str, str]) -> bool:
        return key in self.slots

    def load(self, key: tuple[str, str], rows: list[tuple[int, str, paired.Sample]]) -> None:
        """The stored control samples of `key`: (repeat, owner, sample)."""
        self.slots.setdefault(key, {})
        for repeat, owner, sample in rows:
            self.slots[key].setdefault(repeat, ControlSlot(owner, sample, None, stored=True))

    def slot(self, key: tuple[str, str], repeat: int) -> ControlSlot | None:
        return self.slots.get(key, {}).get(repeat)

    def fill(
        self, key: tuple[str, str], repeat: int, sample: paired.Sample, body: dict
    ) -> list["CandidateRun"]:
        """A control replay came in: every candidate waiting for it uses it now. Returns
        those candidates."""
        slot = self.slots[key][repeat]
        slot.sample, slot.body = sample, body
        waiting, slot.waiting = slot.waiting, []
        for run in waiting:
            run.outstanding -= 1
            run.accept(slot, shared=True)
        return waiting

    def drop(self, key: tuple[str, str], repeat: int) -> None:
        self.slots.get(key, {}).pop(repeat, None)

    def start(self, key: tuple[str, str], repeat: int, owner: str) -> ControlSlot:
        slot = ControlSlot(owner)
        self.slots.setdefault(key, {})[repeat] = slot
        return slot


@dataclass(eq=False)
class CandidateRun:
    """The replays of one candidate in one round and what they showed."""

    rule_id: str
    round_id: int
    rule_metric: str
    trigger_metric: str | None
    retire_on: list
    cases: list  # [CaseSpec], failing first
    cfg: RoundConfig
    registry: Registry
    prior: list = field(default_factory=list)  # [paired.Sample] from earlier rounds
    # The active-rule-set version of the candidate's scope this round (docs/semantics.md#s21-1)
    # and the rules in it; every sample of this round is of that stratum.
    stratum: str = ""
    active_rules: tuple = ()
    # The round's control replays, shared by candidates (docs/semantics.md#s21-2); None: this
    # candidate replays its own controls.
    shared: SharedControls | None = None
    # Who replayed each control sample the candidate uses: (case, stratum, repeat) -> rule id.
    control_owners: dict = field(default_factory=dict)
    samples: list = field(default_factory=list)  # [paired.Sample] of this round
    scores: dict = field(default_factory=dict)  # position -> engine.CaseScore (single)
    evidence: list = field(default_factory=list)  # validation_replay_case bodies, in order
    reads: list = field(default_factory=list)  # (replay session, rule id) to record
    outstanding: int = 0
    batches: int = 0
    looks: int = 0  # paired batches asked for in this round
    borrowed: int = 0  # control replays of the last batch taken from the shared set
    last_sample: paired.Sample | None = None  # the sample of the last replay recorded
    _verdict: tuple = (-1, None)  # (samples seen, paired verdict): decided once per look

    @property
    def is_paired(self) -> bool:
        return self.cfg.design == PAIRED

    def next_batch(self) -> list[Job]:
        """The next replays to run; [] when the candidate wants no more this round."""
        if self.outstanding:
            return []
        self.borrowed = 0
        if self.is_paired:
            jobs = self._paired_batch()
        else:
            jobs = [] if self.batches else self._single_batch()
        self.batches += 1
        self.outstanding += len(jobs)
        return jobs

    def _single_batch(self) -> list[Job]:
        # One replay per case, failing cases then wins (semantics §7.2).
        return [
            Job(
                self.rule_id,
                c.id,
                c.kind,
                TREATMENT,
                0,
                f"replay:{self.round_id}:{self.rule_id}:{c.id}",
            )
            for c in self.cases
        ]

    def _paired_batch(self) -> list[Job]:
        # One look is one completed batch; past `looks_per_round` an undecided candidate waits
        # for the next round, so it cannot hold the others back (semantics §17.3).
        everything = self.prior + self.samples
        if self.samples and self.paired_verdict().outcome != paired.PENDING:
            return []
        kinds = {c.id: c.kind for c in self.cases}
        cases, config = self.paired_cases(), self.paired_config()
        requests = paired.next_requests(everything, cases, config)
        # A batch of the kind that leads a look (the failing cases, or the wins with
        # `wins_lead`) starts a look; the other kind's replays that follow complete it.
        first = paired.leading_kind(cases, config) or paired.FAILING
        new_look = any(kinds[case_id] == first for case_id, _ in requests)
        if new_look and self.looks >= self.cfg.looks_per_round:
            return []
        # Treatment repeats are the candidate's own, numbered across strata; control repeats
        # are numbered per (case, stratum), shared by every candidate of that stratum.
        taken: dict[tuple[str, str], int] = {}
        for s in everything:
            key = (s.case_id, s.arm)
            if s.arm == TREATMENT or s.stratum == self.stratum:
                taken[key] = max(taken.get(key, 0), s.repeat + 1)
        jobs = []
        for case_id, arm in requests:
            repeat = taken.get((case_id, arm), 0)
            taken[(case_id, arm)] = repeat + 1
            shared = arm != TREATMENT and self.shared is not None
            if shared and not self._use_shared(case_id, repeat):
                continue  # in already, or started by another candidate: not replayed again
            session = f"replay:{self.round_id}:{self.rule_id}:{case_id}:{arm}:{repeat}"
            job = Job(self.rule_id, case_id, kinds[case_id], arm, repeat, session, self.stratum)
            jobs.append(job)
        self.looks += new_look
        self.borrowed = len(requests) - len(jobs)
        return jobs

    def _use_shared(self, case_id: str, repeat: int) -> bool:
        """Take control repeat `repeat` of the case in this round's stratum from the round's
        shared controls: True when this candidate must replay it (nobody has), False when it
        is in (used at once) or running for another candidate (used when it comes in)."""
        key = (case_id, self.stratum)
        slot = self.shared.slot(key, repeat)
        if slot is None:
            self.shared.start(key, repeat, self.rule_id)
            return True
        if slot.sample is None and slot.result is not None:
            self.adopt(slot, slot.result)
            return False
        if slot.sample is None:
            slot.waiting.append(self)
            self.outstanding += 1
            return False
        self.accept(slot, shared=True)
        return False

    def adopt(self, slot: ControlSlot, result: RunResult) -> None:
        """A shared control replay whose owner failed before scoring it: this candidate
        scores it and keeps it as its own (its row is stored with this candidate's)."""
        case = next(c for c in self.cases if c.id == result.job.case_id)
        sample, body = self.score_paired(case, result)
        slot.owner, slot.sample, slot.body, slot.result = self.rule_id, sample, body, None
        self.samples.append(sample)
        self.evidence.append(body)
        self.control_owners[(sample.case_id, sample.stratum, sample.repeat)] = self.rule_id

    def accept(self, slot: ControlSlot, *, shared: bool) -> None:
        """A control sample of the shared set, in: this candidate uses it. Its evidence names
        the candidate whose replay it was."""
        sample = slot.sample
        self.samples.append(sample)
        self.control_owners[(sample.case_id, sample.stratum, sample.repeat)] = slot.owner
        if shared:
            body = slot.body or {
                "case": sample.case_id,
                "kind": sample.case_kind,
                "arm": sample.arm,
                "repeat": sample.repeat,
                "replay_session": "",
                "candidate_read": False,
                "outcome": engine.SCORED if sample.metrics else engine.INCONCLUSIVE,
                "metrics": dict(sample.metrics),
                "error": None,
                "stratum": sample.stratum,
            }
            self.evidence.append({**body, "replayed_for": slot.owner})

    def control_sources(self) -> dict:
        """Per case, the control samples used and whose replays they were
        (docs/semantics.md#s21-2): {case: {rule id: count}}, this candidate's own included."""
        out: dict[str, dict[str, int]] = {}
        for (case, _, _), owner in sorted(self.control_owners.items()):
            mine = out.setdefault(case, {})
            mine[owner] = mine.get(owner, 0) + 1
        return out

    def record(self, result: RunResult) -> None:
        """Score one finished replay and keep its evidence."""
        self.outstanding -= 1
        if not result.reads_stored:
            self.reads += [(result.job.session_id, rule_id) for rule_id in result.read]
        case = next(c for c in self.cases if c.id == result.job.case_id)
        if self.is_paired:
            body = self._paired_evidence(case, result)
            self.evidence.append(body)
            if result.job.arm != TREATMENT:
                self.control_owners[(case.id, self.stratum, result.job.repeat)] = self.rule_id
        else:
            score, body = self._single_score(case, result)
            self.scores[[c.id for c in self.cases].index(case.id)] = score
            self.evidence.append(body)

    def ordered_evidence(self) -> list[dict]:
        if self.is_paired:
            return self.evidence
        order = {c.id: i for i, c in enumerate(self.cases)}
        return sorted(self.evidence, key=lambda e: order[e["case"]])

    def replay_verdict(self) -> engine.Verdict:
        if not self.cases:
            return engine.decide_replay([], margins=self.cfg.margins)
        if not self.is_paired:
            return engine.decide_replay(
                [self.scores[i] for i in sorted(self.scores)], margins=self.cfg.margins
            )
        verdict = self.paired_verdict()
        pending = verdict.pending_reason or ""
        if verdict.outcome == paired.PENDING:
            pending = engine.paired_pending_reason(
                [e["outcome"] for e in self.evidence if e["arm"] == TREATMENT], pending
            )
        decisive = (verdict.evidence.get("decisive") or {}).get("metric")
        return engine.Verdict(
            verdict.outcome,
            engine.REPLAY,
            verdict.reason,
            pending,
            deciding_metric=decisive,
            gathering=verdict.outcome == paired.PENDING and self.wants_samples(),
        )

    def wants_samples(self) -> bool:
        """Whether a case and arm is still short of `max_repeats` (semantics §17.3)."""
        everything = self.prior + self.samples
        return bool(paired.next_requests(everything, self.paired_cases(), self.paired_config()))

    # --- single (semantics §7) ------------------------------------------------------------------

    def _single_score(self, case: CaseSpec, result: RunResult) -> tuple[engine.CaseScore, dict]:
        replayed = None if result.error or result.env_wait_expired else result.metrics
        verifier_answered = replayed is not None and result.verifier_answer is not None
        if verifier_answered:
            replayed = {**replayed, engine.OUTCOME_METRIC: result.verifier_answer}
        deltas = engine.metric_deltas(case.metrics, replayed or {}, self.registry)
        read = self.rule_id in result.read
        outcome = engine.case_outcome(
            env_wait_expired=result.env_wait_expired,
            failed=replayed is None,
            deltas=deltas,
            candidate_read=read,
        )
        score = engine.score_case(
            case=case.id,
            kind=case.kind,
            outcome=outcome,
            candidate_read=read,
            deltas=deltas,
            verifier_answered=verifier_answered,
            rule_metric=self.rule_metric,
            trigger_metric=self.trigger_metric,
            retire_on_metrics=self.retire_on,
            margins=self.cfg.margins,
            error=result.error,
        )
        body = {
            "case": case.id,
            "kind": case.kind,
            "replay_session": result.job.session_id,
            "candidate_read": read,
            "outcome": outcome,
            "metrics": deltas,
            "deciding_metric": score.deciding_metric,
            "retire_on": self.retire_on,
            "attribution": list(score.attribution),
            "regressed": score.regressed,
            "improved": score.improved,
            "error": result.error,
        }
        return score, body

    # --- paired (semantics §17) -----------------------------------------------------------------

    def paired_config(self) -> paired.PairedConfig:
        return paired.PairedConfig(
            alpha=self.cfg.alpha,
            promote_margin=self.cfg.margins.promote,
            max_repeats=self.cfg.max_repeats,
            lower_is_better=engine.lower_is_better(self.registry),
            futility_beta=self.cfg.futility_beta,
        )

    def paired_cases(self) -> list[paired.PairedCase]:
        return [
            paired.PairedCase(
                case_id=c.id,
                case_kind=c.kind,
                deciding_metric=self._deciding_metric(c) if c.kind == "failing" else None,
                retire_on=frozenset(self.retire_on) if c.kind == "failing" else frozenset(),
            )
            for c in self.cases
        ]

    def _deciding_metric(self, case: CaseSpec) -> str | None:
        """Semantics §6 on what the case was scored on: the verifier's outcome when one is
        wired, the rule's metric, the case's notice metric, else its first scored metric."""
        scored = engine.replay_metrics(case.metrics, self.registry)
        trusted = [engine.OUTCOME_METRIC] if self.cfg.verifier is not None else []
        trusted += [self.rule_metric, engine.signature_metric(case.atoms, self.registry)]
        return next((m for m in trusted if m and m in scored), min(scored, default=None))

    def paired_verdict(self) -> paired.PairedVerdict:
        """The verdict on every sample the rule has, computed once per completed batch."""
        seen, verdict = self._verdict
        if seen != len(self.samples):
            everything = self.prior + self.samples
            verdict = paired.decide_paired(everything, self.paired_cases(), self.paired_config())
            self._verdict = (len(self.samples), verdict)
        return verdict

    def _paired_evidence(self, case: CaseSpec, result: RunResult) -> dict:
        sample, body = self.score_paired(case, result)
        self.samples.append(sample)
        self.last_sample = sample
        return body

    def score_paired(self, case: CaseSpec, result: RunResult) -> tuple[paired.Sample, dict]:
        """One paired replay as a sample of this round's stratum, and its evidence."""
        arm = result.job.arm
        read = self.rule_id in result.read
        replayed = None if result.error or result.env_wait_expired else result.metrics
        if replayed is not None and result.verifier_answer is not None:
            replayed = {**replayed, engine.OUTCOME_METRIC: result.verifier_answer}
        metrics = engine.replay_metrics(replayed or {}, self.registry)
        outcome = engine.arm_outcome(
            arm=arm,
            env_wait_expired=result.env_wait_expired,
            failed=replayed is None,
            scored=bool(metrics),
            candidate_read=read,
        )
        if outcome == engine.ENGINE_DEFECT:
            logger.error(
                "engine defect: the control replay %s was shown candidate %s; not counted",
                result.job.session_id,
                self.rule_id,
            )
        usable = metrics if outcome == engine.SCORED else {}
        sample = paired.Sample(case.id, case.kind, arm, result.job.repeat, usable, self.stratum)
        return sample, {
            "case": case.id,
            "kind": case.kind,
            "arm": arm,
            "repeat": result.job.repeat,
            "replay_session": result.job.session_id,
            "candidate_read": read,
            "outcome": outcome,
            "metrics": metrics,
            "error": result.error,
            "stratum": self.stratum,
        }
