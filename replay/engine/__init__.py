"""Every decision of the validation engine (semantics §6–§9) as plain functions over plain data.

Nothing here touches the database, a backend or the clock: `replay.rounds` gathers the
facts, asks these functions, and writes what they decided. That is what lets the tests run
every rule of the semantics exhaustively without a database.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from lifecycle.atoms import notice_atoms, notice_metric
from lifecycle.metrics import Registry

REPLAY = "replay"
FORWARD_TRIAL = "forward_trial"

# Per-case outcomes (semantics §7.5).
SCORED = "scored"
INCONCLUSIVE = "inconclusive"
ENV_WAIT_TIMEOUT = "env_wait_timeout"
NOT_EXERCISED = "candidate_not_exercised"
# A control replay shown the candidate (semantics §17.2): the engine's fault, never a sample.
ENGINE_DEFECT = "engine_defect"

# Attribution decisions (semantics §7.7).
ATTRIBUTABLE = "attributable"
NOT_ATTRIBUTABLE = "not_attributable"
IMPROVED = "improved"
WITHIN_MARGIN = "within_margin"

# Pending reasons (semantics §10).
TRIAL_IN_PROGRESS = "trial_in_progress"
NO_MATCHING_REPLAYABLE_CASE = "no_matching_replayable_case"
REPLAY_INCONCLUSIVE = "replay_inconclusive"
ROUND_BUDGET_EXHAUSTED = "round_budget_exhausted"

OUTCOME_METRIC = "outcome_correct"
# Replay scores tiers 0–2 only; tier 3 rollups are too broad to blame on one rule (semantics §1, §7.4).
MAX_REPLAY_TIER = 2


@dataclass(frozen=True)
class Margins:
    promote: float = 0.05
    regress: float = 0.05


@dataclass(frozen=True)
class CaseRef:
    """A stored trajectory as case selection sees it."""

    id: str
    started_at: datetime | None = None
    scope: str | None = None


@dataclass(frozen=True)
class CaseScore:
    """What one replayed case showed (semantics §7.4–§7.7)."""

    case: str
    kind: str  # "failing" | "win"
    outcome: str
    candidate_read: bool = False
    metrics: dict = field(default_factory=dict)  # name -> {"original", "replayed", "delta"}
    deciding_metric: str | None = None
    attribution: tuple = ()  # ({"metric", "delta", "decision", "why"}, ...)
    regressed: bool = False
    improved: bool = False
    error: str | None = None


@dataclass(frozen=True)
class Verdict:
    outcome: str  # "promote" | "retire" | "pending"
    validator: str
    reason: str
    pending_reason: str = ""
    deciding_metric: str | None = None
    # A paired replay still gathering its samples (semantics §17.3): pending, but not an
    # attempt spent, and not the forward trial's to decide (§7.10).
    gathering: bool = False

    @property
    def attempt_spent(self) -> bool:
        """Whether this replay verdict counts as one of `max_replay_attempts` (§7.10)."""
        return not self.gathering


@dataclass(frozen=True)
class Trial:
    enrolled: int
    breached: int
    baseline_rate: float

    @property
    def rate(self) -> float | None:
        return self.breached / self.enrolled if self.enrolled else None

    def evidence(self) -> dict:
        return {
            "trial_rate": self.rate,
            "baseline_rate": self.baseline_rate,
            "observed_sessions": self.enrolled,
        }


# --- rounds (semantics §9.2) ------------------------------------------------------------------------


def rotate(candidates: Sequence[tuple], previous_first: tuple | None) -> list[str]:
    """The order a round takes its candidates in.

    `candidates` are (recorded_at, id) in that order; `previous_first` is the (recorded_at, id)
    of the candidate the previous round started with. A round starts one past it, so with A, B,
    C the rounds go ABC, BCA, CAB — even when the previous first has been decided since."""
    ordered = sorted(candidates)
    start = 0
    if previous_first is not None:
        start = next((i for i, key in enumerate(ordered) if key > previous_first), 0)
    return [rule_id for _, rule_id in ordered[start:] + ordered[:start]]


def follow_up(*, took_over: bool, arrived: int, deferred: int) -> str | None:
    """Why a round that just ended kicks one more at once (docs/semantics.md#s9-1-lease), or
    None: the next report, candidate or periodic kick starts the next round.

    - `took_over`: it closed a dead round. The kicks sent while the dead holder's lease ran
      out found the lock held and were spent; what they asked for may be left undecided.
    - `arrived`: candidates recorded while it ran (not in its queue); their kicks found the
      lock held.
    - `deferred`: it ran out of budget while candidates could still be replayed.
    A follow-up round that does none of these asks for no other: no chain of kicks."""
    if took_over:
        return "took over a dead round"
    if arrived:
        return "candidates arrived during the round"
    if deferred:
        return "out of budget with replays left"
    return None


def budget_exhausted(*, budget_s: float, elapsed_s: float) -> bool:
    """Checked before each candidate; 0 means unlimited (semantics §9.2)."""
    return budget_s > 0 and elapsed_s >= budget_s


def choose_validator(
    *, replay_wired: bool, replay_attempts: int, max_replay_attempts: int, over_budget: bool
) -> str:
    """Replay while it is wired, within budget and not yet tried max times (semantics §7.10, §8)."""
    if replay_wired and not over_budget and replay_attempts < max_replay_attempts:
        return REPLAY
    return FORWARD_TRIAL


# --- case selection (semantics §7.1, §7.2) ----------------------------------------------------------


def _newest_first(cases: Iterable[CaseRef]) -> list[CaseRef]:
    # (started_at, id) descending; a case without a start time counts as the oldest. Read
    # twice, so an iterator is made a list first (else the undated cases were lost).
    cases = list(cases)
    dated = sorted(
        (c for c in cases if c.started_at is not None), key=lambda c: (c.started_at, c.id)
    )
    undated = sorted((c for c in cases if c.started_at is None), key=lambda c: c.id)
    return list(reversed(undated + dated))


def select_failing_cases(matching: Iterable[CaseRef], *, limit: int) -> list[CaseRef]:
    """The replayable failing cases that match the candidate, newest first, at most `limit`."""
    return _newest_first(matching)[:limit]


def select_protected_wins(wins: Iterable[CaseRef], *, scope: str, limit: int) -> list[CaseRef]:
    """Up to `limit` replayable successes, newest first, those of the candidate's scope first."""
    newest = _newest_first(wins)
    return ([c for c in newest if c.scope == scope] + [c for c in newest if c.scope != scope])[
        :limit
    ]


# --- scoring (semantics §6, §7.4–§7.8) --------------------------------------------------------------


def metric_deltas(original: dict, replayed: dict, registry: Registry) -> dict:
    """{metric: {original, replayed, delta}} for every tier 0–2 metric present in both.

    Positive always means better: a lower-is-better metric is negated. A metric absent from
    either side is skipped, never scored as a failure (semantics §6, §7.6)."""
    out = {}
    for name in sorted(set(original) & set(replayed)):
        info = registry.resolve(name)
        if info is None or info.tier > MAX_REPLAY_TIER:
            continue
        before, after = float(original[name]), float(replayed[name])
        delta = after - before if info.higher_is_better else before - after
        out[info.name] = {"original": before, "replayed": after, "delta": round(delta, 6)}
    return out


def replay_metrics(metrics: dict, registry: Registry) -> dict:
    """{canonical metric: value} of the tier 0–2 metrics a replay is scored on (§7.4)."""
    out = {}
    for name, value in sorted(metrics.items()):
        info = registry.resolve(name)
        if info is not None and info.tier <= MAX_REPLAY_TIER:
            out[info.name] = float(value)
    return out


def lower_is_better(registry: Registry) -> frozenset[str]:
    return frozenset(name for name, info in registry.items() if not info.higher_is_better)


def canonical(name: str, registry: Registry) -> str:
    info = registry.resolve(name) if name else None
    return info.name if info else name


def signature_metric(case_atoms: Iterable[str], registry: Registry) -> str | None:
    """The metric named by a case's notice atoms (breach:/stall:/regression:), if any."""
    metrics = sorted({canonical(notice_metric(a), registry) for a in notice_atoms(case_atoms)})
    return metrics[0] if metrics else None


def retire_on(
    *,
    rule_metric: str,
    rule_signature: Iterable[str],
    failing_case_atoms: Iterable[Iterable[str]],
    registry: Registry,
) -> list[str]:
    """The metrics a failing case may be blamed on (semantics §7.7): `outcome_correct`, the rule's
    metric, and the metrics of its failure signatures — the notice atoms of the rule and of the
    failing cases it matched."""
    names = {OUTCOME_METRIC}
    if rule_metric:
        names.add(canonical(rule_metric, registry))
    atoms = set(notice_atoms(rule_signature))
    for case_atoms in failing_case_atoms:
        atoms |= notice_atoms(case_atoms)
    names |= {canonical(notice_metric(a), registry) for a in atoms}
    return sorted(names)


def deciding_metric(
    deltas: dict,
    *,
    verifier_answered: bool,
    rule_metric: str,
    trigger_metric: str | None,
    margins: Margins,
) -> str | None:
    """The first metric in the trust order of semantics §6 that this case has a delta for.

    The verifier's `outcome_correct` counts only when it answered for this case; "don't know"
    contributes nothing and vetoes nothing. With none of them, the metric that moved most past
    the margin counts (None when nothing moved)."""
    order = ([OUTCOME_METRIC] if verifier_answered else []) + [rule_metric, trigger_metric]
    for name in order:
        if name and name in deltas:
            return name
    moved = [
        (abs(d["delta"]), name) for name, d in deltas.items() if abs(d["delta"]) >= margins.promote
    ]
    return max(moved)[1] if moved else None


def attribute(
    deltas: dict, *, kind: str, retire_on_metrics: Iterable[str], margins: Margins
) -> list[dict]:
    """One attribution decision per scored metric (semantics §7.7).

    On a failing case a regression counts only on `retire_on` metrics: a dip elsewhere is
    noise the rule cannot be blamed for. On a protected win any regression counts: a rule that
    breaks a working session is harmful whatever it broke."""
    blamed = set(retire_on_metrics)
    rows = []
    for name, d in sorted(deltas.items()):
        delta = d["delta"]
        if delta <= -margins.regress:
            if kind == "win":
                decision, why = ATTRIBUTABLE, "a protected win regressed on this metric"
            elif name in blamed:
                decision, why = ATTRIBUTABLE, "a retire_on metric regressed past the margin"
            else:
                decision = NOT_ATTRIBUTABLE
                why = "not a retire_on metric: a dip here is not blamed on the rule"
        elif delta >= margins.promote:
            decision, why = IMPROVED, "improved past the promote margin"
        else:
            decision, why = WITHIN_MARGIN, "moved less than the margins"
        rows.append({"metric": name, "delta": delta, "decision": decision, "why": why})
    return rows


def case_outcome(
    *,
    env_wait_expired: bool,
    failed: bool,
    deltas: dict,
    candidate_read: bool,
) -> str:
    """Exactly one outcome per case (semantics §7.5). `failed`: the backend raised or ran out of
    `replay_timeout_s`. No shared metric is as inconclusive as an error: nothing was measured."""
    if env_wait_expired:
        return ENV_WAIT_TIMEOUT
    if failed or not deltas:
        return INCONCLUSIVE
    if not candidate_read:
        return NOT_EXERCISED
    return SCORED


def arm_outcome(
    *, arm: str, env_wait_expired: bool, failed: bool, scored: bool, candidate_read: bool
) -> str:
    """The outcome of one paired replay (semantics §17.2): a treatment replay that did not
    read the candidate is not exercised; a control replay that was shown it is an engine
    defect. Neither is a sample."""
    if env_wait_expired:
        return ENV_WAIT_TIMEOUT
    if failed or not scored:
        return INCONCLUSIVE
    if arm == "control":
        return ENGINE_DEFECT if candidate_read else SCORED
    return SCORED if candidate_read else NOT_EXERCISED


def paired_pending_reason(treatment_outcomes: Sequence[str], pending_reason: str) -> str:
    """Why a paired candidate is pending: when no treatment replay scored, the same reason
    §7.9 gives for a single replay (env wait, not exercised); otherwise the design's own."""
    if not treatment_outcomes or SCORED in treatment_outcomes:
        return pending_reason or REPLAY_INCONCLUSIVE
    if all(o == ENV_WAIT_TIMEOUT for o in treatment_outcomes):
        return ENV_WAIT_TIMEOUT
    if NOT_EXERCISED in treatment_outcomes:
        return NOT_EXERCISED
    return pending_reason or REPLAY_INCONCLUSIVE


def score_case(
    *,
    case: str,
    kind: str,
    outcome: str,
    candidate_read: bool,
    deltas: dict,
    verifier_answered: bool,
    rule_metric: str,
    trigger_metric: str | None,
    retire_on_metrics: Sequence[str],
    margins: Margins,
    error: str | None = None,
) -> CaseScore:
    """The evidence of one case: deciding metric, attribution, regressed, improved."""
    if outcome != SCORED:
        return CaseScore(
            case=case,
            kind=kind,
            outcome=outcome,
            candidate_read=candidate_read,
            metrics=deltas,
            error=error,
        )
    rows = attribute(deltas, kind=kind, retire_on_metrics=retire_on_metrics, margins=margins)
    decider = None
    improved = False
    if kind == "failing":
        decider = deciding_metric(
            deltas,
            verifier_answered=verifier_answered,
            rule_metric=rule_metric,
            trigger_metric=trigger_metric,
            margins=margins,
        )
        improved = decider is not None and deltas[decider]["delta"] >= margins.promote
    return CaseScore(
        case=case,
        kind=kind,
        outcome=outcome,
        candidate_read=candidate_read,
        metrics=deltas,
        deciding_metric=decider,
        attribution=tuple(rows),
        regressed=any(r["decision"] == ATTRIBUTABLE for r in rows),
        improved=improved,
        error=error,
    )


def decide_replay(cases: Sequence[CaseScore], *, margins: Margins) -> Verdict:
    """The replay verdict, in the order of semantics §7.9."""
    if not cases:
        return Verdict(
            "pending", REPLAY, "no matching replayable failing case", NO_MATCHING_REPLAYABLE_CASE
        )
    for c in cases:
        if c.regressed:
            worst = min(
                (r for r in c.attribution if r["decision"] == ATTRIBUTABLE),
                key=lambda r: r["delta"],
            )
            what = "protected win" if c.kind == "win" else "failing case"
            return Verdict(
                "retire",
                REPLAY,
                f"regressed {worst['metric']} by {worst['delta']:+.2f} on {what} {c.case}",
                deciding_metric=worst["metric"],
            )
    for c in cases:
        if c.improved:
            d = c.metrics[c.deciding_metric]["delta"]
            return Verdict(
                "promote",
                REPLAY,
                f"improved {c.deciding_metric} by {d:+.2f} on {c.case}",
                deciding_metric=c.deciding_metric,
            )
    failing = [c for c in cases if c.kind == "failing"]
    scored = [c for c in failing if c.outcome == SCORED]
    if not scored:
        unscored = [c.outcome for c in failing]
        if unscored and all(o == ENV_WAIT_TIMEOUT for o in unscored):
            reason = ENV_WAIT_TIMEOUT
        elif NOT_EXERCISED in unscored:
            reason = NOT_EXERCISED
        else:
            reason = REPLAY_INCONCLUSIVE
        return Verdict("pending", REPLAY, f"replay inconclusive: {reason}", reason)
    decider = next((c.deciding_metric for c in scored if c.deciding_metric), None)
    return Verdict(
        "retire",
        REPLAY,
        "no improvement on " + ", ".join(c.case for c in scored),
        deciding_metric=decider,
    )


# --- forward trials (semantics §8, §20) ---------------------------------------------------------


def decide_trial(trial, *, min_sessions: int, margins: Margins) -> Verdict:
    """The forward trial's verdict: a randomized trial decides by its sequential test
    (semantics §20, `replay.engine.randomized`); a `Trial` by §8 against its baseline."""
    from .randomized import RandomizedTrial, decide

    if isinstance(trial, RandomizedTrial):
        return decide(trial)
    if trial.enrolled < min_sessions:
        return Verdict(
            "pending",
            FORWARD_TRIAL,
            f"trial: {trial.enrolled}/{min_sessions} sessions observed",
            TRIAL_IN_PROGRESS,
        )
    rate = trial.rate
    figures = f"trial rate {rate:.2f} vs baseline {trial.baseline_rate:.2f}"
    # A small tolerance so 0.55 ≤ 0.6 − 0.05 holds despite binary floating point.
    if rate == 0 or rate <= trial.baseline_rate - margins.promote + 1e-9:
        return Verdict("promote", FORWARD_TRIAL, f"improved on baseline: {figures}")
    return Verdict("retire", FORWARD_TRIAL, f"did not improve on baseline: {figures}")


def decide_candidate(
    *,
    replay: Verdict | None,
    trial,
    over_budget: bool,
    min_sessions: int,
    margins: Margins,
) -> Verdict:
    """Combine the replay verdict (if replay ran) with the forward trial — a `Trial` (§8) or a
    `randomized.RandomizedTrial` (§20) — (semantics §7.10, §8, §9.2, §20.7).

    A decisive replay stands, and so does one still gathering its samples: its evidence is
    not complete, so the trial does not pre-empt it (§17.4). Otherwise the trial is consulted
    in the same round: if it can decide, it decides; if not, the candidate keeps the replay's
    pending reason — or `round_budget_exhausted` when the round reached it after its budget
    ran out."""
    if replay is not None and (replay.outcome != "pending" or replay.gathering):
        return replay
    verdict = decide_trial(trial, min_sessions=min_sessions, margins=margins)
    if verdict.outcome != "pending":
        return verdict
    if over_budget:
        return Verdict("pending", FORWARD_TRIAL, verdict.reason, ROUND_BUDGET_EXHAUSTED)
    if replay is not None:
        return Verdict("pending", REPLAY, replay.reason, replay.pending_reason)
    return verdict
