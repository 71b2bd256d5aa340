"""The verdict of the paired replay design (semantics §17) as plain functions over plain data.

Interface (no Django; the round gathers the samples and writes what these decide):

- `Sample(case_id, case_kind, arm, repeat, metrics)`: one replay of a case in one arm. Pass
  every replay that took a repeat: one that scored nothing (inconclusive, timed out, a
  treatment that did not read the candidate) is a Sample with empty `metrics`, so it counts
  against `max_repeats` and enters no test. Metrics are the replayed last trace's, tiers 0–2,
  as measured. A metric absent from a sample is skipped, never scored as a failure.
- `PairedCase(case_id, case_kind, deciding_metric, retire_on)`: the selected cases, failing
  ones first, in the order their replays are asked for.
- `PairedConfig(alpha, promote_margin, regress_margin, max_repeats, batch, lower_is_better,
  spending, retire_spending, family, resamples, futility, futility_effect, futility_beta,
  wins_follow, wins_lead)`.
- `decide_paired(samples, cases, config) -> PairedVerdict(outcome, reason, pending_reason,
  evidence)`: "promote", "retire" or "pending" (`replay_inconclusive`).
- `next_requests(samples, cases, config) -> [(case_id, arm), ...]`: the next batch, arms
  interleaved; [] when every case and arm has had `max_repeats`. Ask it after a pending
  verdict, run the whole batch, then decide again: a look is one completed batch.

The decision (semantics §17.4), at each look, in this order:
1. *Attributable regression* — "lower under treatment than control", one-sided, on the failing
   cases' `retire_on` metrics and on every metric of the protected wins. `family` says what is
   tested: "pooled" (the default) one test per kind of case and metric, stratified by case;
   "cases" one per case and metric; "both". Holm in two parts (`replay.engine.holm.holm_weighted`):
   the tests of the metric the rule is decided on share `DECIDING_SHARE` (80 %) of the level,
   the other metrics' tests the rest, and a part that rejects everything hands its share on.
   Any rejection retires, naming the metric, the case that lost most, the effect and its
   interval.
2. *Improvement* — the failing cases' deciding metrics, pooled and stratified by case, higher
   under treatment, significant, and an estimated effect ≥ `promote_margin` → promote. Before
   the last look, a promotion waits while an attributable metric visibly regresses (worse than
   `regress_margin` and than 1 standard error; see `_suspect`); at the last look a visible
   harm (2 standard errors) on the deciding metric leaves the rule pending.
3. Every case and arm at `max_repeats` and the effect's upper bound < `promote_margin` →
   retire ("no improvement"); before that, with `futility` (the default), a look whose exact
   test of the success rates rules out a lift of `futility_effect` (`futility_beta`; with
   `futility_beta` None, a look whose estimated effect is below zero) → retire ("no
   improvement … a futility stop", below); otherwise pending `replay_inconclusive`, which at
   the last look says how many more repeats would decide (`more_repeats`).

The test (`replay.engine.stats`): a permutation test stratified by case — arm labels re-drawn
within each case, so a hard case's treatment is never compared with an easy case's control —
exact by enumeration when the relabellings are few (3 cases × 2 repeats: 216), Monte Carlo
with `resamples` draws otherwise, seeded from the case ids and arm sizes, so a verdict is a
function of its inputs. It is valid at any n and makes no normal approximation; on 0/1
metrics it is the exact conditional test of the stratified 2×2 tables. The interval inverts
the same test under a constant-shift model.

Ties broken by the rule's other metrics. A 0/1 deciding metric (the verifier's outcome) ties
most relabellings, and the exact test then spends far less than its level. So each test on a
metric the rule answers for (`_accountable`: the failing cases' deciding and `retire_on`
metrics, §6 and §7.7) orders relabellings by that metric first and, only among exact ties, by
the rule's other accountable metrics of the same replays (`_ties`: e.g. task completion when
the outcome decides). The test stays exact (`replay.engine.stats`, "Ties"); the effect, the
interval and the margin are of the tested metric alone. What it tests is the sharp null "the
candidate changes nothing the rule answers for": a rule that only raised task completion could
win a tie on the outcome, but promotion still needs the outcome's own estimated effect ≥ the
margin. Judged metrics the rule does not answer for break no ties. On the noise bench (1,000
rules per class, seeds 2 and 3, verifier on) this moved a 0.5 → 0.9 rule's promotion from
85.5 % to 90.4 % and 91.2 %, harmful-rule retirement from 89.9 % to 91.5 % and 90.3 %, and
false promotion from 2.6 % to 4.6 % and 4.7 %: the test now spends its level, no more. With
a continuous deciding metric (no verifier) there are no ties to break and nothing changes.

Sequential looks (alpha spending). Looks happen on the batch grid next_requests walks: look k
of K = ceil(max_repeats / batch), k = ceil(most repeats of any case and arm / batch). Look k
spends α·(f(k/K) − f((k−1)/K)) and its tests run at that level. By the union bound the error
over all looks is ≤ α·f(1) = α whatever the correlation between looks, so validity needs no
joint distribution of the looks, which a permutation test does not give. `spending` (for
promotion) and `retire_spending` (for regressions) choose f: "obf" (2 − 2Φ(z_{1−α/2}/√t),
Lan–DeMets O'Brien–Fleming), "pocock" (α·ln(1 + (e − 1)t), Lan–DeMets Pocock), "bonferroni"
(equal shares) or "last" (all of α at the last look, nothing before). Each kind of error —
promoting a rule that changes nothing, retiring a rule that harms nothing — is held at α on
its own.

The spending, and why (bench/bench_noise.py, 500–1,000 simulated rules per class: 3 failing
cases and 2 wins, a failing task re-run succeeding half the time, judged metrics ±0.15):
batches of 4 (then two looks, at 4 and 8 repeats), "obf" for promotion, "last" for
regressions. The repeats and the futility boundary were retuned since over the whole grid
("The defaults over the grid", below).
The union bound charges every look: before ties were broken, a rule lifting success from 0.5
to 0.9 was promoted 85.8 % of the time with one look (all of α at 8 repeats, 80 replays each),
85.5 % with two OBF looks (72 replays when promoted) and 82.6 % with four (61 replays). Two looks keep nearly all the
power and still stop a clear rescue at the first look. A regression on a protected win cannot
be significant before the wins have several replays (2 against 2: p ≥ 1/6), so α spent on
early regression tests is wasted; "last" spends it all where the evidence is, and `_suspect`
keeps an early promotion from riding over a harm that is visible but not yet significant.
Spending a little α on regressions at the first look ("obf", for an early retirement when
harm is overwhelming) was measured too, with ties broken: it retired fewer harmful rules in
all (90.7 % against 91.3 %, 300 rules per class), the last look having less α left, for 77
replays per retired rule instead of 80; "last" stays.

The futility stop by the sign (non-binding; `futility_beta` None, the default until the grid
was measured). At a look before the last, a deciding metric estimated lower under treatment
than under control retires the rule for no improvement. It never promotes and
moves no promotion boundary, so it cannot raise the false-promotion rate (a rule it stops is
one that could only have been promoted later); what it costs is the helpful rules whose first
look happens to run the wrong way. Measured on the noise bench (300 rules per class, seeds
0, 1, 2, verifier on; `--no-futility` against `--futility`): false promotion unchanged (3.3,
5.0, 4.0 %), promotion of a 0.5 → 0.9 rule 91.3 / 95.0 / 91.3 % → 91.0 / 95.0 / 91.0 %,
harmful rules retired 89.3 / 90.7 / 91.3 % → 92.0 / 93.7 / 94.3 % (their failing cases gain
nothing, so about half of them stop at the first look), replays per decided rule 73.7 / 73.2
/ 73.1 → 59.5 / 59.6 / 58.9, pending 34 → 21 %; 1,000 rules, seed 2: 4.6 → 4.5 %, 90.4 →
90.2 %, 91.5 → 94.8 %, 74.0 → 60.7 replays; without a verifier (300 rules, seed 2): 3.7 →
3.7 %, 89.3 → 89.0 %, 90.3 → 93.7 %, 73.4 → 57.6 replays. A stop on the interval instead (retire when
the look's upper bound is under the margin) was measured first: with 4 binary replays per case
and arm that bound is under 0.05 for 1.3 % of rules that change nothing and 2 % of harmful ones
(300 per class), so it saved almost nothing; the sign of the estimate is the boundary with
bite. An estimate of exactly 0 (a rule that changes nothing the metric can see, every arm
alike) does not stop: only the last look's interval retires it.

Wins follow the failing cases (`wins_follow`; the default until the wins led, below). A
look's replays of the failing cases come first; its wins' replays are asked for only if the
failing cases did not stop the rule for futility. Until the wins are in (`behind`) only
the futility stop may decide: no promotion (the wins may hold it back) and no retirement on a regression (the look's evidence
is not complete). The futility stop reads the failing cases alone, and with "last" spending no
regression is tested before the last look, so the verdicts are those of the whole look; what
changes is that a futility stop spends no replay on the wins (3 failing cases and 2 wins: 24
replays instead of 40). On the grid of bench/bench_noise.py (README) it cut the replays per
decided rule at the default selection from about 58 to 52 alone (4 base rates, 60 rules per
class each) with the same error rates.

The wins lead (`wins_lead`, the default, with `retire_spending` "obf"; it overrides
`wins_follow`). Each look replays the wins first and the failing cases then, and the
regressions are tested at every look, not only at the last. A look's regressions are tested
once (`regressions_tested`): at an early look when its wins are in and its failing cases'
replays are not yet (`behind`), at the last look once everything is in; so the union
bound over looks holds as before. Before the last look only a win's regression retires (a
failing case that does worse is left to the futility stop, which says "no improvement"), and a
look whose failing cases are behind neither promotes nor stops for futility. The rows of a
state that tests nothing keep their effects for the holds (`_suspect`) and lose their interval
(the page: "not tested at this look"). A rule that breaks a protected win is then mostly
retired on its second look's wins (56 replays with 3 failing cases and 2 wins, 16 when its
first look's wins show it; 100 with "last"), whether or not it rescues its failing cases; a
futility stop has paid for its look's wins (40 instead of 24). On the grid's default selection
(bench/bench_noise.py, 150 rules a class and base, same seed) the replays per decided rule went
from 84–88 to 71–75 alone and 58–59 to 50 shared by three, power and harm retired unchanged
within sampling error. "pocock" for regressions cut them to 59–63 and 42–43 but left the last
look 0.012 of the level: with one protected win a rule halving it was retired 50–63 % of the
time against 78–85 % (40 rules a base), so "obf", which keeps 0.034 there. The price: a mild
harm (a win's success × 0.75) is retired 57–73 % of the time against 67–79 %, the early looks
having spent some of the level before the last look, where the evidence for a mild harm is.

The futility boundary by a test (`futility_beta`, `futility_effect`; the default, below): an
early look stops only when a test rejects "every failing case is lifted by `futility_effect`" at
`futility_beta` shared equally by the looks before the last (`futility_level`), so that by the
union bound a rule of that lift is stopped for futility at most `futility_beta` of the time in
all: the boundary's error budget, spent on helpful rules only (it never promotes). On a
pass/fail deciding metric (every value 0 or 1: the verifier's outcome) the test is the exact
test of the success rates (`futility_p_rates`): per case and stratum, treatment successes
Binomial(n, p + lift) and control successes Binomial(n, p); the statistic is the treatment's
successes minus the control's, summed over the strata; the p-value is its lower tail at the
least favourable control rates p. With one case and 4 replays per arm it stops only 0 of 4
against 3 or 4 of 4, or 1 of 4 against 4 of 4: a rule lifting the case by 0.2 is stopped at
most about 0.9 % of the time whatever its control rate, one changing nothing about 3.5 %. On any
other metric the test is the look's own permutation test under its shift model (its upper
bound at the futility level below `futility_effect`). That shift model was first used for
every metric and does not fit 0/1 outcomes: with one case, a treatment arm that failed every
replay "ruled out" any positive shift, and on the grid it stopped 5–25 % of the rules lifting
success by 0.2 with one failing case. Over the whole grid (27 cells, 40 independent
rules per class and cell; README, "Verdicts under noise: a futility boundary for pass/fail
outcomes") the rates test lost 0–5.0 % of the +0.2 rules per cell (5 of 1,080) against the
sign's 0–35 %, with the same power and false promotion, but retired 78 % of the rules halving
the wins against 84 % (the sign retires half of them for no improvement before their wins are
tested) for 67 replays per decided rule against 52.

The defaults over the grid: 10 repeats per case and arm, looked at after 4, 8 and 10 (batches
of 4, so the last batch is 2), "obf" for promotion, "last" for regressions (since "obf", with
the wins first: "The wins lead", above), and the rates
futility test (`futility_beta` 0.02, `futility_effect` 0.2: 0.01 at each early look). Chosen
with `bench/oc_paired.py`, which simulates the success counts per case and arm and decides them
with this module's levels, futility test and exact conditional test (its ties broken at
random, as task completion breaks them here), over every cell of the grid at once (1,000
independent rules per class and cell; checked against bench/bench_noise.py). Against the
sign with 8 repeats in looks of 4 it meets the power target for a lift of 0.4 at 3 failing
cases and 2 wins at every base rate 0.2–0.7 (92.8 % at the worst base against 86.2 %) and the
futility-loss target (a +0.2 rule retired for futility: at most 2.2 % in any cell, within
sampling error of its 2 % budget, against up to 17.5 %), retires more rules halving the wins
(97.1 % against 92.6 % at the worst base), with false promotion at most 4.5 % per cell; what
it trades is replays: 82 per decided rule at the default selection against 53 (80 against 52
over the grid), and more candidates left pending after their last look (36 % against 30 %
of all rules there; each says how many more repeats would decide it). Measured alternatives,
same evaluator: 10 repeats with the sign (62 replays, but futility losses up to 25.6 %); 12
repeats in looks of 4 (power 94.7 %, 93 replays; with "pocock" 91.9 % at 82); looks at 4, 8,
10 with "bonferroni" (power 90.2 %, too close to the target, 74 replays); 3, 6, 10 (91.6 %,
80); 5, 10 (92.0 %, 86). No design measured meets the replay targets (≤ 45 alone, ≤ 35 shared
by three candidates) with the power and futility targets: a boundary that retires a +0.2 rule
at most 2 % of the time cannot stop many rules that change nothing early, and power of 90 %
at base 0.2 needs about 10 replays a case and arm. `futility_beta` None and `max_repeats` 8
(`CAUTERWEB_REPLAY_FUTILITY_BETA=0`, `CAUTERWEB_REPLAY_MAX_REPEATS=8`) restore the former
defaults for a team that prefers replays to power.

Interval bounds are at the look's level (repeated confidence intervals): a bound clear of 0
means "significant at this look"; with ties broken, a significant test may report its bound
at exactly 0 (an open end: see `replay.engine.stats`).

Lower-is-better metrics are negated first: every effect is treatment − control with positive
meaning better. Evidence means and spreads are of the metrics as measured.
"""

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from . import stats
from .holm import holm_weighted

TREATMENT, CONTROL = "treatment", "control"
ARMS = (TREATMENT, CONTROL)
FAILING, WIN = "failing", "win"
PROMOTE, RETIRE, PENDING = "promote", "retire", "pending"
REPLAY_INCONCLUSIVE = "replay_inconclusive"
FAMILIES = ("pooled", "cases", "both")
SPENDINGS = ("obf", "pocock", "bonferroni", "last")
# How many standard errors a regression must exceed to hold a promotion back (see _suspect).
# Holding back costs a harmless rule only a later look; 3 let through a rule that rescued its
# failing cases and halved its wins' success (a drop of about 2.3 standard errors at the first
# look) 43–53 % of the time on an agent with uneven cases (docs/semantics.md#s17-4).
VISIBLE_SE = 2.0
# Before the last look the hold is wider: waiting costs a harmless rule a later look only, and
# at the first look a halved win (4 replays an arm) shows about 1.6 standard errors. At 2, a
# rule that rescued its failing cases and halved its wins was promoted there 18–25 % of the
# time on an agent with uneven cases; at 1, 11–16 %, with the same power within sampling error.
EARLY_SE = 1.0
# The share of a look's regression level spent on the metric the rule is decided on (the
# verifier's outcome, or the rule's metric), the rest on the other metrics (`holm_weighted`).
# A win's outcome halved shows on that metric; judged scores (coherence, …) rarely move with
# it, and Holm over all of them alike charged the outcome's test for each.
DECIDING_SHARE = 0.8
TEST_NAME = (
    "permutation test of treatment − control, arm labels re-drawn within each case; ties broken"
    " by the rule's other accountable metrics"
)


@dataclass(frozen=True)
class Sample:
    case_id: str
    case_kind: str  # "failing" | "win"
    arm: str  # "treatment" | "control"
    repeat: int  # 0-based per (case, arm, stratum)
    metrics: Mapping[str, float]
    # The active-rule-set version the replay ran under (docs/semantics.md#s21-1): samples of
    # different strata are never compared with each other.
    stratum: str = ""


@dataclass(frozen=True)
class PairedCase:
    case_id: str
    case_kind: str
    deciding_metric: str | None  # semantics §6, failing cases; None for wins
    retire_on: frozenset[str] = frozenset()  # semantics §7.7, failing cases


@dataclass(frozen=True)
class PairedConfig:
    alpha: float = 0.05
    promote_margin: float = 0.05
    regress_margin: float = 0.05
    max_repeats: int = 10
    batch: int = 4
    lower_is_better: frozenset[str] = frozenset()
    spending: str = "obf"
    retire_spending: str = "obf"
    family: str = "pooled"
    resamples: int = stats.RESAMPLES
    futility: bool = True  # retire at an early look whose effect is clearly short (below)
    # The futility boundary at a look before the last (docs/semantics.md#s21-3). `futility_beta`
    # None: the sign (retire when the estimated effect is below zero). Otherwise (the default,
    # 0.02) retire only when a test rejects "every
    # case is lifted by `futility_effect`" at `futility_beta` spread over the early looks, so a
    # rule of that effect is stopped at most `futility_beta` of the time in all: on a pass/fail
    # deciding metric the exact test of the success rates (`futility_p_rates`), on any other
    # the look's own test under its shift model (upper bound below `futility_effect`).
    futility_effect: float = 0.2
    futility_beta: float | None = 0.02
    # With `wins_lead` False: each look replays the failing cases first and the protected wins
    # only then: a look that stops for futility on the failing cases (whatever the wins would
    # show: no regression is tested before the last look with the "last" spending) spends no
    # replay on the wins.
    wins_follow: bool = True
    # The opposite order (docs/semantics.md#s21-3): each look replays the protected wins first
    # and tests the regressions on them before the failing cases' replays of that look are
    # asked for, so a rule that visibly breaks a win is retired without them. Needs a
    # `retire_spending` that spends before the last look to stop anything early.
    wins_lead: bool = True

    def __post_init__(self):
        if not 0 < self.alpha < 1 or self.max_repeats < 1 or self.batch < 1:
            raise ValueError("alpha must be in (0, 1); max_repeats and batch at least 1")
        if {self.spending, self.retire_spending} - set(SPENDINGS):
            raise ValueError(f"spending must be one of {', '.join(SPENDINGS)}")
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {', '.join(FAMILIES)}")


@dataclass(frozen=True)
class PairedVerdict:
    outcome: str  # "promote" | "retire" | "pending"
    reason: str
    pending_reason: str | None
    evidence: dict


@dataclass(frozen=True)
class Look:
    index: int  # 1-based
    count: int
    level: float  # the error rate this look may spend
    spent: float  # cumulative, this look included


# --- looks and spending ------------------------------------------------------------------------


def spent_by(t: float, *, alpha: float, spending: str) -> float:
    """Cumulative error rate allowed by information fraction t ∈ [0, 1]."""
    t = min(max(t, 0.0), 1.0)
    if t == 0:
        return 0.0
    if spending == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    if spending == "last":
        return alpha if t >= 1 else 0.0
    if spending == "obf":
        # SciPy's normal cdf and quantile (what scipy.stats.norm calls), loaded only here:
        # scipy.stats alone cost every command and worker 0.8 s at start-up.
        from scipy.special import ndtr, ndtri

        return float(2 - 2 * ndtr(ndtri(1 - alpha / 2) / math.sqrt(t)))
    return alpha * t


def look(samples: Sequence[Sample], config: PairedConfig, spending: str | None = None) -> Look:
    """Which look of the batch grid these samples are, and the level it may spend."""
    count = math.ceil(config.max_repeats / config.batch)
    most = max(_repeats_taken(samples).values(), default=0)
    k = min(max(math.ceil(most / config.batch), 1), count)
    spend = config.alpha, spending or config.spending
    before = spent_by((k - 1) / count, alpha=spend[0], spending=spend[1])
    spent = spent_by(k / count, alpha=spend[0], spending=spend[1])
    return Look(index=k, count=count, level=spent - before, spent=spent)


def _repeats_taken(samples: Iterable[Sample]) -> dict[tuple[str, str], int]:
    """Replays per (case, arm), over every stratum: `max_repeats` bounds them all together, so
    a change of active set never buys a candidate more replays."""
    taken: dict[tuple[str, str], set[tuple[str, int]]] = {}
    for s in samples:
        taken.setdefault((s.case_id, s.arm), set()).add((s.stratum, s.repeat))
    return {key: len(repeats) for key, repeats in taken.items()}


# --- next batch --------------------------------------------------------------------------------


def next_requests(
    samples: Sequence[Sample], cases: Sequence[PairedCase], config: PairedConfig
) -> list[tuple[str, str]]:
    """The next batch: each case is topped up to the next multiple of `batch` repeats (never past
    `max_repeats`) in both arms, handed out T, C, T, C … so that drift in the agent or its
    environment hits both arms alike. [] when every case and arm is at `max_repeats`."""
    taken = _repeats_taken(samples)
    wanted = {}
    for case in cases:
        have = {arm: taken.get((case.case_id, arm), 0) for arm in ARMS}
        # The grid point just above the arm that is behind: a batch cut short (a round out of
        # budget) is completed before a new one starts, and the arms stay level.
        goal = min(config.max_repeats, (min(have.values()) // config.batch + 1) * config.batch)
        wanted[case.case_id] = {arm: min(config.batch, max(0, goal - have[arm])) for arm in ARMS}
    first = leading_kind(cases, config)
    if first is not None:
        # One kind's replays of a look come first, the other's then, up to the first kind's
        # level: the failing cases' unless they alone stopped the rule (`wins_follow`,
        # `behind`), or the wins' unless they alone retired it (`wins_lead`).
        wanted = _second_kind(wanted, taken, cases, first)
    out = []
    for _ in range(config.batch):
        for case in cases:
            for arm in ARMS:
                if wanted[case.case_id][arm]:
                    wanted[case.case_id][arm] -= 1
                    out.append((case.case_id, arm))
    return out


def leading_kind(cases: Sequence[PairedCase], config: PairedConfig) -> str | None:
    """The kind of case whose replays start each look: WIN with `wins_lead` (when both kinds
    are selected), FAILING with `wins_follow` (when there is a failing case), else None (every
    case of a look at once)."""
    kinds = {c.case_kind for c in cases}
    if config.wins_lead and kinds >= {FAILING, WIN}:
        return WIN
    return FAILING if config.wins_follow and FAILING in kinds else None


def _second_kind(wanted: dict, taken: dict, cases: Sequence[PairedCase], first: str) -> dict:
    """`wanted` with the other kind's cases asked for only up to the level the `first` kind's
    have in both arms, and nothing of the first kind while the other is short of it."""
    level = min(
        taken.get((c.case_id, arm), 0) for c in cases if c.case_kind == first for arm in ARMS
    )
    short = {
        c.case_id: {arm: max(0, level - taken.get((c.case_id, arm), 0)) for arm in ARMS}
        for c in cases
        if c.case_kind != first
    }
    if any(any(arms.values()) for arms in short.values()):
        return {c.case_id: short.get(c.case_id, dict.fromkeys(ARMS, 0)) for c in cases}
    return wanted | {case_id: dict.fromkeys(ARMS, 0) for case_id in short}


# --- the decision ------------------------------------------------------------------------------


def decide_paired(
    samples: Sequence[Sample], cases: Sequence[PairedCase], config: PairedConfig
) -> PairedVerdict:
    """The verdict of semantics §17.4 on every sample the rule has (see the module docstring)."""
    promote_look = look(samples, config)
    retire_look = look(samples, config, config.retire_spending)
    values = _values(samples, config.lower_is_better)
    regressions = _regressions(values, cases, config, retire_look.level)
    early = promote_look.index < promote_look.count
    beta = futility_level(config, promote_look) if config.futility and early else None
    improvement = _improvement(values, cases, config, promote_look.level, beta)
    done = not next_requests(samples, cases, config)
    lead, partial = _stage(samples, cases, config)
    if partial and improvement is not None:
        improvement["significant"] = False
    evidence = _evidence(samples, cases, config, promote_look, retire_look)
    # Before the wins' replays of a look are in, only a futility stop may decide; with the
    # wins first, before the failing cases' are in, only a regression (`regressions_tested`).
    tested, regressions = _charged(regressions, partial, lead, early)
    evidence |= {"regressions": regressions, "improvement": improvement} | (
        {"regressions_tested": tested} if lead else {}
    )
    blamed = [
        r for r in regressions if r["rejected"] and tested and (not early or r["kind"] == WIN)
    ]
    if blamed:
        worst = _strongest(blamed)
        evidence["decisive"] = {"case": worst["case"], "metric": worst["metric"]}
        return PairedVerdict(RETIRE, _regression_reason(worst), None, evidence)
    if improvement is not None:
        evidence["decisive"] = {"case": None, "metric": improvement["metric"]}
        # At the last look only the deciding metric's visible harm holds a promotion: a noise
        # dip on one of a win's judged scores is then as likely as not somewhere.
        deciding = {c.deciding_metric for c in cases if c.case_kind == FAILING}
        watched = [r for r in regressions if not done or r["metric"] in deciding]
        suspect = _suspect(watched, config.regress_margin, VISIBLE_SE if done else EARLY_SE)
        if improvement["significant"] and improvement["effect"] >= config.promote_margin:
            if suspect is None:
                reason = f"improved {improvement['metric']}: {_figures(improvement)}"
                return PairedVerdict(PROMOTE, reason, None, evidence)
            evidence["held_back_by"] = {"case": suspect["case"], "metric": suspect["metric"]}
        if done and improvement["ci"][1] < config.promote_margin:
            reason = (
                f"no improvement on {improvement['metric']}: {_figures(improvement)}; the "
                f"upper bound stays below the margin {config.promote_margin:.2f} after "
                f"{config.max_repeats} repeats per case"
            )
            return PairedVerdict(RETIRE, reason, None, evidence)
        stop = futility_stop(improvement, config)
        if config.futility and not done and early and not (lead and partial) and stop:
            evidence["futility_test"], evidence["futility_bound"], short = stop
            reason = (
                f"no improvement on {improvement['metric']}: {_figures(improvement)}; {short} "
                f"at look {promote_look.index} of {promote_look.count} (a futility stop)"
            )
            return PairedVerdict(RETIRE, reason, None, evidence)
    reason = _pending_reason(samples, cases, config, improvement, done)
    if "held_back_by" in evidence:
        held = evidence["held_back_by"]
        row = next(
            r for r in regressions if (r["case"], r["metric"]) == (held["case"], held["metric"])
        )
        wait = (
            "not shown significant after the last look, nor ruled out"
            if done
            else reason.split("; ", 1)[1]
        )
        reason = (
            f"improved {improvement['metric']} ({_interval(improvement)}), but {row['metric']} "
            f"looks worse on {row['case']} ({_interval(row)}); {wait}"
        )
    return PairedVerdict(PENDING, reason, REPLAY_INCONCLUSIVE, evidence)


def futility_stop(improvement: dict, config: PairedConfig) -> tuple[str, float, str] | None:
    """Whether an early look stops for futility (`PairedConfig`), as (the boundary, the figure
    it read, what it says): "sign", an estimate below 0; "rates", the exact test of the success
    rates rejecting the lift (its worst-case p is reported); "shift", the look's upper bound at
    the futility level below the lift (the bound is reported). None: go on."""
    if config.futility_beta is None:
        return ("sign", 0.0, "worse under treatment") if improvement["effect"] < 0 else None
    beta = improvement.get("futility_beta")  # absent at the last look
    lift = f"a lift of {config.futility_effect:g} ruled out at level {beta:.3g}" if beta else ""
    if "futility_p" in improvement:
        p = improvement["futility_p"]
        if p > beta:
            return None
        return ("rates", p, f"{lift} (exact test of the success rates, p {p:.3g})")
    upper = improvement.get("futility_upper")
    if upper is None or upper >= config.futility_effect:
        return None
    return ("shift", upper, f"{lift} (upper bound {_signed(upper)})")


def futility_level(config: PairedConfig, at: Look) -> float | None:
    """The level of this look's futility test: `futility_beta` shared equally by the looks
    before the last, so that by the union bound a rule lifting every case by `futility_effect`
    is stopped at most `futility_beta` of the time over all of them. None: the sign boundary."""
    if config.futility_beta is None:
        return None
    return config.futility_beta / max(at.count - 1, 1)


# How finely the pass/fail futility test searches the control success rates for its worst case.
RATE_STEP = 0.02


def futility_p_rates(strata: Sequence[stats.Stratum], effect: float) -> float:
    """The exact p-value of "every case's success rate is lifted by `effect`" against a look
    that reads lower, for a pass/fail (0/1) metric (docs/semantics.md#s21-3).

    Each stratum's treatment successes are Binomial(n, p + effect) and its control successes
    Binomial(n, p), p the case's unknown control rate; the statistic is the treatment's
    successes minus the control's, summed over the strata, and the p-value is its lower tail
    at the least favourable rates: searched on a grid of p 0.02 apart in [0, 1 − effect], from
    the worst rate common to every stratum then one stratum at a time until no stratum's
    change raises it. Unlike a shift of every score by the same amount, this fits 0/1
    outcomes: one case failing 4 times of 4 under treatment does not rule out a lift of 0.2
    (a case succeeding 0.2 of the time with the rule fails 4 times in a row 41 % of the time)."""
    import numpy as np

    rates = np.arange(0.0, 1.0 - effect + 1e-9, RATE_STEP)
    pmfs = [_difference_pmfs(len(s.treatment), len(s.control), rates, effect) for s in strata]
    # Index of "treatment − control successes ≤ observed" in the convolved pmf of every stratum.
    at = round(sum(sum(s.treatment) - sum(s.control) + len(s.control) for s in strata))

    def tail(rows):
        return float(np.cumsum(_convolved(rows))[min(at, sum(len(r) - 1 for r in rows))])

    common = max(range(len(rates)), key=lambda g: tail([m[g] for m in pmfs]))
    pick, best = [common] * len(pmfs), tail([m[common] for m in pmfs])
    moved = len(pmfs) > 1
    while moved:
        moved = False
        for j, rows in enumerate(pmfs):
            rest = np.cumsum(_convolved([m[pick[i]] for i, m in enumerate(pmfs) if i != j]))
            # P(rest + D_j ≤ at) for every rate of stratum j at once: Σ_d P(D_j = d) P(rest ≤ at − d).
            index = at - np.arange(rows.shape[1])
            below = np.where(index < 0, 0.0, rest[np.clip(index, 0, len(rest) - 1)])
            tails = rows @ below
            g = int(np.argmax(tails))
            if tails[g] > best + 1e-12:
                pick[j], best, moved = g, float(tails[g]), True
    return min(best, 1.0)


def _difference_pmfs(n_t: int, n_c: int, rates, effect: float):
    """Per control rate p (rows), the pmf of treatment − control successes, shifted by n_c."""
    import numpy as np
    from scipy.stats import binom  # its 0.8 s paid once a process, by a pass/fail futility test

    def binomial(n, p):
        return binom.pmf(np.arange(n + 1), n, p[:, None])

    treated, control = binomial(n_t, np.minimum(rates + effect, 1.0)), binomial(n_c, rates)
    return np.array([np.convolve(t, c[::-1]) for t, c in zip(treated, control, strict=True)])


def _convolved(rows):
    import numpy as np

    out = np.ones(1)
    for row in rows:
        out = np.convolve(out, row)
    return out


def _binary(strata: Sequence[stats.Stratum]) -> bool:
    return all(v in (0.0, 1.0) for s in strata for v in (*s.treatment, *s.control))


def behind(samples: Sequence[Sample], cases: Sequence[PairedCase], kind: str) -> bool:
    """Whether a case of `kind` has fewer replays, in an arm, than every case of the other kind
    has in both: the look's other kind is in and its `kind` replays are still to come. WIN
    behind (`PairedConfig.wins_follow`): such a look may stop for futility; it neither promotes
    nor retires on a regression. FAILING behind (`PairedConfig.wins_lead`): such a look may
    retire on a protected win's regression only (`regressions_tested`)."""
    taken = _repeats_taken(samples)
    levels = {FAILING: [], WIN: []}
    for c in cases:
        levels[c.case_kind].extend(taken.get((c.case_id, a), 0) for a in ARMS)
    other = levels[WIN if kind == FAILING else FAILING]
    return bool(levels[kind] and other) and min(levels[kind]) < min(other)


def _charged(regressions: list[dict], partial: bool, lead: bool, early: bool):
    """(whether this state of a look tests the regressions (`regressions_tested`), the rows).
    With the wins first, the rows of a state that does not are kept for the holds (`_suspect`
    reads their effects and spreads) and for the page, which shows a row without an interval
    as "not tested at this look"; nothing in them is rejected."""
    tested = regressions_tested(partial, lead, early)
    if tested or not lead:
        return tested, regressions
    return tested, [r | {"ci": [None, None], "rejected": False} for r in regressions]


def _stage(samples, cases, config: PairedConfig) -> tuple[bool, bool]:
    """(wins first, the look's second kind still to come): see `leading_kind`."""
    lead = leading_kind(cases, config) == WIN
    return lead, behind(samples, cases, FAILING if lead else WIN)


def regressions_tested(partial: bool, lead: bool, early: bool) -> bool:
    """Whether this state of a look may retire on a regression. Each look tests the
    regressions once, at the level it spends (the union bound over looks needs no more):
    with the wins first (`lead`), an early look when its wins are in and its failing cases'
    replays are not (`partial`), the last look when everything is in; otherwise a look once
    its wins are in. Before the last look only a protected win's regression retires: a
    failing case that does worse under treatment is the futility stop's to retire, for no
    improvement (`decide_paired`)."""
    if lead:
        return partial if early else not partial
    return not partial


def _suspect(regressions: list[dict], margin: float, se: float) -> dict | None:
    """The regression that visibly harms, if any: estimated worse than the regress margin and
    than `se` standard errors of its own replays' spread (`EARLY_SE` before the last look,
    `VISIBLE_SE` at it).

    Two replays per arm can never make one protected win's regression significant (the
    smallest p-value a 2-against-2 permutation test can give is 1/6), while three failing
    cases can make an improvement so (1/216). So an early look could promote a rule that
    plainly breaks a win before that harm could be shown. Such a promotion waits, until the
    last look, for the batches that show the harm significant (retire) or wash it out
    (promote). A noise-sized dip does not hold it back. Waiting only moves a promotion to a
    later look, which has its own share of alpha: the error rates stay as spent. A harm on
    the deciding metric still visible at the last look and still not significant leaves the
    rule pending: the replays neither showed nor ruled it out, and a promotion would serve it
    to every session (docs/semantics.md#s17-4)."""
    worse = [r for r in regressions if r["effect"] <= -max(margin, se * r["se"])]
    return min(worse, key=lambda r: (r["effect"], r["case"], r["metric"])) if worse else None


def _evidence(samples, cases, config: PairedConfig, promote: Look, retire: Look) -> dict:
    return {
        "design": "paired",
        "test": TEST_NAME,
        "correction": (
            f"Holm over the regression tests ({config.family}), {DECIDING_SHARE:.0%} of the "
            "level on the deciding metric's"
        ),
        "alpha": config.alpha,
        "look": promote.index,
        "looks": promote.count,
        "spending": {"promote": config.spending, "retire": config.retire_spending},
        "alpha_look": {"promote": promote.level, "retire": retire.level},
        "alpha_spent": {"promote": promote.spent, "retire": retire.spent},
        "replays": len(samples),
        "cases": _summary(samples, cases),
        # JSON objects keep no order in PostgreSQL's jsonb: the cases' order, said explicitly.
        "case_order": [c.case_id for c in cases],
        "decisive": None,
    }


def _values(samples: Iterable[Sample], lower_is_better: frozenset[str]) -> dict:
    """{case: {stratum: {arm: [{metric: value}, ...]}}}, one dict per scored replay in repeat
    order, oriented so that higher is better. Kept per replay so that a tie-breaking metric
    stays paired with the replay it was measured on; kept per stratum (the active rule set
    the replay ran under, docs/semantics.md#s21-1) so that a treatment is only ever compared
    with a control of its own baseline."""
    out: dict[str, dict[str, dict[str, list[dict[str, float]]]]] = {}
    for s in sorted(samples, key=lambda s: (s.case_id, s.stratum, s.arm, s.repeat)):
        if s.metrics:
            oriented = {
                name: -float(v) if name in lower_is_better else float(v)
                for name, v in s.metrics.items()
            }
            arms = out.setdefault(s.case_id, {}).setdefault(s.stratum, {})
            arms.setdefault(s.arm, []).append(oriented)
    return out


def _accountable(cases: Sequence[PairedCase]) -> frozenset[str]:
    """The metrics the rule answers for (semantics §6, §7.7): the failing cases' deciding and
    `retire_on` metrics. Only they break each other's ties (see `_ties`)."""
    names = set()
    for case in cases:
        if case.case_kind == FAILING:
            names |= set(case.retire_on) | ({case.deciding_metric} - {None})
    return frozenset(names)


def _strata(
    values: dict, case_ids: Iterable[str], metric: str, ties: Sequence[str] = ()
) -> list[tuple[str, str, stats.Stratum]]:
    """The usable strata of `metric` over these cases: one per (case, active-set version) with
    a value in each arm (docs/semantics.md#s21-1), with the `ties` metrics folded into one
    tie-breaking value per replay (`_ties`). (case, version, stratum) triples."""
    out = []
    for case_id in case_ids:
        for version, by_arm in sorted(values.get(case_id, {}).items()):
            arms = [[r for r in by_arm.get(arm, ()) if metric in r] for arm in ARMS]
            if not all(arms):
                continue
            broken = _ties(arms[0] + arms[1], ties)
            k = len(arms[0])
            stratum = stats.Stratum(
                treatment=tuple(r[metric] for r in arms[0]),
                control=tuple(r[metric] for r in arms[1]),
                treatment_ties=broken[:k],
                control_ties=broken[k:],
            )
            out.append((case_id, version, stratum))
    return out


def _ties(replays: list[dict[str, float]], names: Sequence[str]) -> tuple[float, ...]:
    """One tie-breaking value per replay: the mean of the `names` it has, each rescaled to
    [0, 1] over the case's replays of both arms (so a metric in milliseconds and a score weigh
    alike), a missing one at that metric's mean. Rescaling and filling use the pooled replays
    only, which no relabelling changes: the permutation test stays exact. () when no metric
    varies, so ties stay ties."""
    import numpy as np

    columns = []
    for name in names:
        seen = [r[name] for r in replays if name in r]
        low, high = min(seen, default=0.0), max(seen, default=0.0)
        if high - low <= 1e-12:
            continue
        fill = (float(np.mean(seen)) - low) / (high - low)
        columns.append([(r[name] - low) / (high - low) if name in r else fill for r in replays])
    if not columns:
        return ()
    return tuple(float(x) for x in np.mean(columns, axis=0))


def _test(
    strata: Sequence[tuple[str, str, stats.Stratum]], config: PairedConfig
) -> stats.ShiftTest:
    # The seed comes from which replays are compared, not from their values: fixed per
    # comparison, reproducible anywhere, and shared by the metrics measured on the same replays.
    # A stratum of the default (unversioned) active set keys as the case alone, as it always did.
    key = "|".join(
        f"{c}{'@' + v if v else ''}:{len(s.treatment)}:{len(s.control)}" for c, v, s in strata
    )
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return stats.shift_test([s for _, _, s in strata], seed=seed, resamples=config.resamples)


def _regression_family(values: dict, cases: Sequence[PairedCase], family: str) -> list[tuple]:
    """(kind, case ids, metric) of every regression test (semantics §7.7): on failing cases the
    `retire_on` metrics, on protected wins every metric measured. "pooled": one test per kind
    and metric, stratified by case; "cases": one per case and metric; "both": the two."""
    by_kind: dict[tuple[str, str], list[str]] = {}
    for case in cases:
        if case.case_kind == WIN:
            metrics = {
                m
                for by_arm in values.get(case.case_id, {}).values()
                for arm in ARMS
                for r in by_arm.get(arm, ())
                for m in r
            }
        else:
            metrics = set(case.retire_on)
        for metric in metrics:
            by_kind.setdefault((case.case_kind, metric), []).append(case.case_id)
    tests = []
    for (kind, metric), ids in sorted(by_kind.items()):
        if family in ("pooled", "both"):
            tests.append((kind, tuple(ids), metric))
        if family in ("cases", "both") and not (family == "both" and len(ids) == 1):
            tests += [(kind, (case_id,), metric) for case_id in ids]
    return tests


def _regressions(values: dict, cases: Sequence[PairedCase], config: PairedConfig, level: float):
    rows = []
    accountable = _accountable(cases)
    for kind, ids, metric in _regression_family(values, cases, config.family):
        ties = sorted(accountable - {metric}) if metric in accountable else []
        strata = _strata(values, ids, metric, ties)
        if not strata:
            continue
        per_case: dict[str, list[stats.Stratum]] = {}
        for c, _, s in strata:
            per_case.setdefault(c, []).append(s)
        by_case = {c: round(stats.weighted_effect(ss), 6) for c, ss in per_case.items()}
        row = {
            "kind": kind,
            "metric": metric,
            "cases": list(by_case),
            "case": min(by_case, key=lambda c: (by_case[c], c)),  # the most harmed
            "by_case": by_case,
            "se": round(stats.weighted_se([s for _, _, s in strata]), 6),
            "strata": len(strata),
        }
        rows.append(row | _result(_test(strata, config), level, "less"))
    if rows:
        deciding = {c.deciding_metric for c in cases if c.case_kind == FAILING} - {None}
        reject, p_holm = holm_weighted(
            [r["p_value"] for r in rows],
            alpha=level,
            first=[r["metric"] in deciding for r in rows],
            share=DECIDING_SHARE,
        )
        for row, rejected, adjusted in zip(rows, reject, p_holm, strict=True):
            row["p_holm"] = float(adjusted)
            row["rejected"] = bool(rejected)
    return rows


def _improvement(
    values: dict, cases: Sequence[PairedCase], config: PairedConfig, level: float, beta=None
):
    """The deciding metric pooled over the failing cases, stratified by case. Cases usually
    share one deciding metric; when they do not, each stratum is its own case's metric and the
    evidence names them all. `beta`: the level of this look's futility test, if it has one."""
    strata, names = [], set()
    accountable = _accountable(cases)
    for case in cases:
        if case.case_kind == FAILING and case.deciding_metric:
            ties = sorted(accountable - {case.deciding_metric})
            mine = _strata(values, [case.case_id], case.deciding_metric, ties)
            strata += mine
            names |= {case.deciding_metric} if mine else set()
    if not strata:
        return None
    cases_seen = list(dict.fromkeys(c for c, _, _ in strata))
    row = {
        "metric": "+".join(sorted(names)),
        "cases": cases_seen,
        "strata": len(strata),
        "se": round(stats.weighted_se([s for _, _, s in strata]), 6),
    }
    result = _test(strata, config)
    row |= _result(result, level, "greater")
    row["significant"] = row["p_value"] <= level
    if beta is not None:
        row["futility_beta"] = beta
        tested = [st for _, _, st in strata]
        if _binary(tested):
            row["futility_p"] = round(futility_p_rates(tested, config.futility_effect), 6)
        else:
            row["futility_upper"] = _finite(result.upper_bound(beta))
    return row


def _result(result: stats.ShiftTest, level: float, side: str) -> dict:
    return {
        "effect": round(result.effect, 6),
        "ci": [_finite(result.lower_bound(level)), _finite(result.upper_bound(level))],
        "ci_level": round(1 - 2 * level, 6),
        "alternative": side,
        "p_value": result.p_greater if side == "greater" else result.p_less,
        "method": result.method,
        "relabellings": result.relabellings,
    }


def _finite(x: float) -> float | None:
    # JSON has no infinity: an unbounded side of the interval is null.
    return None if math.isinf(x) else round(x, 6)


def _signed(x: float | None, infinite: str = "") -> str:
    # A real minus sign: these sentences are read by people, on pages and in the journal.
    return infinite if x is None else f"{x:+.2f}".replace("-", "−")


def _interval(row: dict) -> str:
    low, high = _signed(row["ci"][0], "−∞"), _signed(row["ci"][1], "+∞")
    return f"effect {_signed(row['effect'])} [{low}, {high}]"


def _figures(row: dict) -> str:
    if "p_holm" in row:
        return f"{_interval(row)}, Holm-adjusted p {row['p_holm']:.3g}"
    return f"{_interval(row)}, p {row['p_value']:.3g}"


def _regression_reason(row: dict) -> str:
    """The evidence a reviewer can check on the rule's page first: the case that lost most,
    the metric and that case's effect (treatment − control in its row of the matrix), then
    the test that rejected, pooled over the cases it covered (docs/semantics.md#s21-3)."""
    what = "protected win" if row["kind"] == WIN else "failing case"
    if len(row["cases"]) == 1:
        return f"regressed {row['metric']} on {what} {row['case']}: {_figures(row)}"
    worst = _signed(row["by_case"][row["case"]])
    pooled = f"pooled over {what}s {', '.join(row['cases'])}: {_figures(row)}"
    return f"regressed {row['metric']} on {what} {row['case']} ({worst}); {pooled}"


def _strongest(rows: list[dict]) -> dict:
    """The rejected regression to name: the smallest adjusted p-value, then the largest loss
    on one case (what the page's matrix shows), then a fixed order."""
    return min(
        rows,
        key=lambda r: (r["p_holm"], r["by_case"][r["case"]], r["effect"], r["case"], r["metric"]),
    )


def more_repeats(improvement: dict | None, config: PairedConfig) -> int | None:
    """About how many more repeats per case and arm would decide a rule left inconclusive at
    its last look (docs/semantics.md#s21-3): an interval narrows as 1/√n, so the repeats at
    which it would clear 0 (an estimate at or past the margin: promote) or fall under the
    margin (an estimate short of it: retire), if the estimate held. None when it cannot say."""
    if improvement is None or None in improvement["ci"]:
        return None
    low, high = improvement["ci"]
    effect, half = improvement["effect"], (high - low) / 2
    target = effect if effect >= config.promote_margin else config.promote_margin - effect
    if half <= 0 or target <= 0:
        return None
    return max(1, math.ceil(config.max_repeats * (half / target) ** 2) - config.max_repeats)


def _pending_reason(samples, cases, config: PairedConfig, improvement, done: bool) -> str:
    if done:
        need = "the interval still holds the margin after the last look"
        more = more_repeats(improvement, config)
        if more is not None:
            need += (
                f"; about {more} more repeats per case and arm would decide "
                f"(replay_max_repeats {config.max_repeats} → {config.max_repeats + more})"
            )
    else:
        taken = _repeats_taken(samples)
        fewest = min((taken.get((c.case_id, a), 0) for c in cases for a in ARMS), default=0)
        need = f"needs more samples: {fewest} of {config.max_repeats} repeats per case"
    if improvement is None:
        return f"no comparison on the deciding metric yet; {need}"
    return f"{_interval(improvement)}; {need}"


def _summary(samples: Sequence[Sample], cases: Sequence[PairedCase]) -> dict:
    """Per case and arm: replays, and n, mean and sd of each metric as measured."""
    import numpy as np

    out = {}
    for case in cases:
        arms = {}
        for arm in ARMS:
            mine = [s for s in samples if s.case_id == case.case_id and s.arm == arm]
            metrics = {}
            for name in sorted({m for s in mine for m in s.metrics}):
                xs = [float(s.metrics[name]) for s in mine if name in s.metrics]
                sd = float(np.std(xs, ddof=1)) if len(xs) > 1 else None
                metrics[name] = {
                    "n": len(xs),
                    "mean": round(float(np.mean(xs)), 6),
                    "sd": None if sd is None else round(sd, 6),
                }
            arms[arm] = {"replays": len(mine), "metrics": metrics}
        out[case.case_id] = {"kind": case.case_kind, "arms": arms}
        mine = [s for s in samples if s.case_id == case.case_id]
        versions = sorted({s.stratum for s in mine})
        if versions != [""]:
            # Per active-set version, the replays of each arm (docs/semantics.md#s21-1).
            out[case.case_id]["strata"] = {
                v: {arm: sum(s.stratum == v and s.arm == arm for s in mine) for arm in ARMS}
                for v in versions
            }
    return out
