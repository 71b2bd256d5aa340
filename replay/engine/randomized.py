"""The randomized forward trial's decision (semantics §20.4), as plain functions over counts.

Sessions that read a candidate's scope are assigned at random to its treatment arm (served
the candidate) or its control arm (not served it); the outcome of each is whether it showed
the candidate's target condition. The effect is `rate(treatment) − rate(control)`: negative
is fewer breaches, an improvement. A round looks at every trial as often as reports arrive,
so the test must stay valid however often it is looked at and whenever it stops — a
fixed-sample test checked at every report would promote a candidate that does nothing far
more often than alpha.

The test: two one-sided **confidence sequences** for the effect, each at level `alpha`, from
the normal-mixture boundary of Robbins — the one-sided form in Howard, Ramdas, McAuliffe and
Sekhon, "Time-uniform, nonparametric, nonasymptotic confidence sequences" (Annals of
Statistics 49(2), 2021, §3.5 and Proposition 6), used with the plug-in variance of
Waudby-Smith, Arbour, Sinha, Kennedy and Ramdas, "Time-uniform central limit theory and
asymptotic confidence sequences" (Annals of Statistics 52(6), 2024), as experimentation
platforms run it (GrowthBook's and Eppo's sequential tests). With S the sum of the
per-session contributions to the effect and V its variance, the mixture over a half-normal
prior of scale ρ is the test martingale

    M = 2 / sqrt(1 + ρ²V) · exp(u² / 2) · Φ(u),   u = ρ S / sqrt(1 + ρ²V),

and by Ville's inequality M reaches 1/alpha with probability at most alpha, ever. Each bound
is the set of effects that M does not reject; the p-value 1/M is valid at any stopping time.
No library on PyPI has this test for two proportions in a maintained form (`savvi` tests rate
ratios through `cvxpy`; `confseq` is an alpha release with a C++ build), so it is built here
on SciPy's `log_ndtr`; SciPy and numpy are imported inside the functions, not at start-up.

The plug-in variance counts one pseudo-breach and one pseudo-healthy session in each arm, so
a trial of three sessions that all agree is not read as having no variance. The guarantee is
asymptotic; the unit tests and `bench/bench_trials.py` measure the error rates at the sizes
the trials run at (the defaults: at most 400 sessions), across base rates 0.1–0.7.

The decision (`classify`), in this order, with `L` and `U` the lower and upper bounds and `m`
the promote margin: `L > 0` → retire, the candidate made it worse (harm, however few sessions); `U < −m`, with
`promote_after` sessions in each arm → promote (fewer breaches by at least the margin, with
confidence); `L > −m` → retire, the
interval excludes an improvement of the margin; `max_sessions` sessions in the trial →
retire; otherwise pending, with the arms in words and about how many more sessions the
estimate needs.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from . import FORWARD_TRIAL, TRIAL_IN_PROGRESS, Verdict

TREATMENT = "treatment"
CONTROL = "control"
TEST = "one-sided normal-mixture confidence sequences (always valid, asymptotically)"
# The mixture's scale is chosen so the bounds are tightest near this many sessions at a 50%
# breach rate. Smaller stops harm sooner and spends more width later; tuned over the grid of
# bench/bench_trials.py, not on one profile.
TIGHTEST_AT = 100
# Pseudo-sessions per arm and outcome in the plug-in variance (never in the effect).
PSEUDO = 1.0
# Sessions each arm needs before a promotion: the bounds are asymptotic, and the rare early
# crossings of a few dozen sessions were most of the false promotions measured (it halves
# them at a 50% rate; a helpful rule is not promoted that early anyway). Harm and futility
# are never held back.
PROMOTE_AFTER = 20


@dataclass(frozen=True)
class Arm:
    """One arm's sessions with an outcome, how many showed the target condition, and the mean
    of the deciding metric over the sessions whose reports carried it."""

    sessions: int
    breached: int
    value_sessions: int = 0
    value_mean: float | None = None

    @property
    def rate(self) -> float | None:
        return self.breached / self.sessions if self.sessions else None


@dataclass(frozen=True)
class Design:
    alpha: float = 0.05
    allocation: float = 0.5
    max_sessions: int = 400
    margin: float = 0.05
    tightest_at: float = TIGHTEST_AT
    promote_after: int = PROMOTE_AFTER


@dataclass(frozen=True)
class Analysis:
    effect: float | None
    lower: float | None
    upper: float | None
    p_harm: float
    p_improvement: float
    p_no_improvement: float


@dataclass(frozen=True)
class RandomizedTrial:
    """A candidate's randomized trial so far: its two arms, and exposed sessions that have not
    reported yet (shown, never counted)."""

    treatment: Arm
    control: Arm
    design: Design
    unreported: int = 0

    @property
    def enrolled(self) -> int:
        """Sessions in the trial: exposed, with an outcome."""
        return self.treatment.sessions + self.control.sessions

    @cached_property
    def analysis(self) -> Analysis:
        return analyse(self.treatment, self.control, self.design)

    def evidence(self) -> dict:
        a, d = self.analysis, self.design
        return {
            "design": "randomized",
            "test": TEST,
            "alpha": d.alpha,
            "allocation": d.allocation,
            "margin": d.margin,
            "max_sessions": d.max_sessions,
            "arms": {TREATMENT: _arm(self.treatment), CONTROL: _arm(self.control)},
            "effect": _round(a.effect),
            "interval": None if a.lower is None else [_round(a.lower), _round(a.upper)],
            "p_harm": _round(a.p_harm),
            "p_improvement": _round(a.p_improvement),
            "p_no_improvement": _round(a.p_no_improvement),
            "sessions": self.enrolled,
            "unreported": self.unreported,
            "decision": DECISIONS[self.decision],
        }

    @cached_property
    def decision(self) -> int:
        t, c = self.treatment, self.control
        return int(classify(t.sessions, t.breached, c.sessions, c.breached, design=self.design))


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)


def _arm(arm: Arm) -> dict:
    return {
        "sessions": arm.sessions,
        "breached": arm.breached,
        "rate": _round(arm.rate),
        "value_sessions": arm.value_sessions,
        "value_mean": _round(arm.value_mean),
    }


# --- the confidence sequences ----------------------------------------------------------------


def _rho2(alpha: float, tightest_at: float) -> float:
    """The mixture's ρ², so that the boundary is narrowest at intrinsic time `tightest_at`
    (Howard et al. 2021, eq. (16), at the two-sided level 2α that a one-sided α matches)."""
    a = -2 * math.log(2 * alpha)
    return (a + math.log(1 + a)) / tightest_at


def _boundary_u(c):
    """The u ≥ 0 with u²/2 + log Φ(u) = c, element-wise (c ≥ log 2 > 0 here): Newton's method
    from u = sqrt(2c), where log Φ(u) < 0 puts the root above; the function is convex there."""
    import numpy as np
    from scipy.special import log_ndtr

    u = np.sqrt(2 * np.asarray(c, dtype=float))
    for _ in range(8):
        log_cdf = log_ndtr(u)
        mills = np.exp(-(u**2) / 2 - 0.5 * math.log(2 * math.pi) - log_cdf)
        u = u - (u**2 / 2 + log_cdf - c) / (u + mills)
    return u


def _variance(n_t, b_t, n_c, b_c):
    """V, the plug-in variance of the sum of per-session contributions: t² Var(rate_T − rate_C),
    rates taken with PSEUDO pseudo-sessions of each outcome per arm."""
    q_t = (b_t + PSEUDO) / (n_t + 2 * PSEUDO)
    q_c = (b_c + PSEUDO) / (n_c + 2 * PSEUDO)
    t = n_t + n_c
    return t**2 * (q_t * (1 - q_t) / n_t + q_c * (1 - q_c) / n_c)


def half_width(n_t, b_t, n_c, b_c, *, alpha: float, tightest_at: float = TIGHTEST_AT):
    """Half the width of each one-sided bound on the effect, element-wise (numpy arrays or
    numbers; both arms must have sessions)."""
    import numpy as np

    n_t, b_t, n_c, b_c = (np.asarray(x, dtype=float) for x in (n_t, b_t, n_c, b_c))
    rho2 = _rho2(alpha, tightest_at)
    spread = 1 + rho2 * _variance(n_t, b_t, n_c, b_c)
    u = _boundary_u(np.log(np.sqrt(spread) / (2 * alpha)))
    return u * np.sqrt(spread / rho2) / (n_t + n_c)


def bounds(n_t, b_t, n_c, b_c, *, alpha: float, tightest_at: float = TIGHTEST_AT):
    """(effect, lower, upper), element-wise: the effect rate_T − rate_C and its one-sided
    bounds at level `alpha` each, valid however often they are looked at."""
    import numpy as np

    n_t, b_t, n_c, b_c = (np.asarray(x, dtype=float) for x in (n_t, b_t, n_c, b_c))
    effect = b_t / n_t - b_c / n_c
    half = half_width(n_t, b_t, n_c, b_c, alpha=alpha, tightest_at=tightest_at)
    # A difference of two rates lies in [−1, 1]: intersecting with it keeps every guarantee.
    return effect, np.maximum(effect - half, -1.0), np.minimum(effect + half, 1.0)


def p_value(n_t, b_t, n_c, b_c, *, null: float, above: bool, alpha: float, tightest_at=TIGHTEST_AT):
    """The always-valid p-value (1/M, at most 1) against "effect ≤ null" when `above` (the
    alternative is an effect above it), else against "effect ≥ null". `alpha` sets only the
    mixture's scale: the p-value is ≤ alpha exactly when the bound of that level clears
    `null`."""
    import numpy as np
    from scipy.special import log_ndtr

    n_t, b_t, n_c, b_c = (np.asarray(x, dtype=float) for x in (n_t, b_t, n_c, b_c))
    t = n_t + n_c
    rho2 = _rho2(alpha, tightest_at)
    spread = 1 + rho2 * _variance(n_t, b_t, n_c, b_c)
    s = t * (b_t / n_t - b_c / n_c - null) * (1 if above else -1)
    u = np.sqrt(rho2) * s / np.sqrt(spread)
    log_m = math.log(2) - 0.5 * np.log(spread) + u**2 / 2 + log_ndtr(u)
    return np.minimum(1.0, np.exp(-log_m))


def analyse(treatment: Arm, control: Arm, design: Design) -> Analysis:
    if not (treatment.sessions and control.sessions):
        return Analysis(None, None, None, 1.0, 1.0, 1.0)
    counts = (treatment.sessions, treatment.breached, control.sessions, control.breached)
    kw = {"alpha": design.alpha, "tightest_at": design.tightest_at}
    effect, lower, upper = (float(x) for x in bounds(*counts, **kw))
    return Analysis(
        effect=effect,
        lower=lower,
        upper=upper,
        p_harm=float(p_value(*counts, null=0.0, above=True, **kw)),
        p_improvement=float(p_value(*counts, null=-design.margin, above=False, **kw)),
        p_no_improvement=float(p_value(*counts, null=-design.margin, above=True, **kw)),
    )


# --- the decision ----------------------------------------------------------------------------

PENDING, HARM, PROMOTE, NO_IMPROVEMENT, CAPPED = range(5)
# The classification in the evidence, so a reader (the review queue's harm items) need not
# parse the reason.
DECISIONS = ("pending", "harm", "promote", "no_improvement", "capped")


def classify(n_t, b_t, n_c, b_c, *, design: Design):
    """The decision of semantics §20.4 for many trials at once (numpy arrays of counts): one of
    PENDING, HARM, PROMOTE, NO_IMPROVEMENT, CAPPED each. `decide` and the bench both use it."""
    import numpy as np

    n_t, b_t, n_c, b_c = (np.asarray(x, dtype=float) for x in (n_t, b_t, n_c, b_c))
    both = (n_t > 0) & (n_c > 0)
    # An empty arm is given one pretend healthy session, so the arithmetic stays finite;
    # `both` keeps such a trial pending.
    n_t, n_c = np.maximum(n_t, 1), np.maximum(n_c, 1)
    _, lower, upper = bounds(n_t, b_t, n_c, b_c, alpha=design.alpha, tightest_at=design.tightest_at)
    capped = n_t + n_c >= design.max_sessions
    promotable = (upper < -design.margin) & (np.minimum(n_t, n_c) >= design.promote_after)
    return np.select(
        [~both, lower > 0, promotable, lower > -design.margin, capped],
        [PENDING, HARM, PROMOTE, NO_IMPROVEMENT, CAPPED],
        default=PENDING,
    )


def decide(trial: RandomizedTrial) -> Verdict:
    """The verdict of semantics §20.4 on the trial so far, with the arms in words."""
    a, d, code = trial.analysis, trial.design, trial.decision
    if a.effect is None:
        words = f"{_arms_words(trial)}; waiting for sessions in both arms"
        return Verdict("pending", FORWARD_TRIAL, words, TRIAL_IN_PROGRESS)
    figures = f"{_arms_words(trial)}; effect {_interval_words(a)}"
    if code == HARM:
        return Verdict("retire", FORWARD_TRIAL, f"made it worse: {figures}, p {_p(a.p_harm)}")
    if code == PROMOTE:
        return Verdict("promote", FORWARD_TRIAL, f"improved: {figures}, p {_p(a.p_improvement)}")
    if code == NO_IMPROVEMENT:
        reason = f"no improvement of {d.margin:.2f}: {figures}, p {_p(a.p_no_improvement)}"
        return Verdict("retire", FORWARD_TRIAL, reason)
    if code == CAPPED:
        reason = f"no improvement within {d.max_sessions} sessions: {figures}"
        return Verdict("retire", FORWARD_TRIAL, reason)
    return Verdict("pending", FORWARD_TRIAL, f"{figures}; {_to_go_words(trial)}", TRIAL_IN_PROGRESS)


def sessions_to_go(trial: RandomizedTrial) -> tuple[int, bool]:
    """(sessions, capped): about how many more sessions the trial needs for its bounds to
    clear the nearer threshold (promotion below −margin, retirement above it) if the rates
    stay as estimated; capped when that is not before `max_sessions`."""
    a, d = trial.analysis, trial.design
    left = d.max_sessions - trial.enrolled
    distance = abs(a.effect + d.margin)
    if left <= 0 or distance == 0:
        return max(left, 0), True
    t, b = trial.treatment, trial.control
    share_t = t.sessions / trial.enrolled

    def clears(total: int) -> bool:
        n_t = total * share_t
        n_c = total - n_t
        width = half_width(
            n_t, n_t * t.rate, n_c, n_c * b.rate, alpha=d.alpha, tightest_at=d.tightest_at
        )
        return float(width) < distance

    if not clears(d.max_sessions):
        return left, True
    low, high = trial.enrolled, d.max_sessions  # clears(high) holds
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if clears(middle) else (middle, high)
    more = high - trial.enrolled
    if a.effect < -d.margin:  # a promotion also waits for `promote_after` sessions an arm
        short = d.promote_after - min(t.sessions, b.sessions)
        more = max(more, math.ceil(short / min(share_t, 1 - share_t)))
    return min(more, left), more > left


def _signed(x: float) -> str:
    return f"{x:+.2f}".replace("-", "−")


def _interval_words(a: Analysis) -> str:
    return f"{_signed(a.effect)} [{_signed(a.lower)}, {_signed(a.upper)}]"


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def _arms_words(trial: RandomizedTrial) -> str:
    t, c = trial.treatment, trial.control
    return (
        f"treatment {t.sessions} session{'s' if t.sessions != 1 else ''}, {t.breached} breached; "
        f"control {c.sessions}, {c.breached} breached"
    )


def _to_go_words(trial: RandomizedTrial) -> str:
    more, capped = sessions_to_go(trial)
    if capped:
        return f"up to {more} more sessions (the cap of {trial.design.max_sessions})"
    return f"about {more} more session{'s' if more != 1 else ''}"


# --- the interval as it narrowed ---------------------------------------------------------------


def interval_path(outcomes: Sequence[tuple[str, bool]], design: Design) -> list[dict]:
    """The effect and its bounds after each session, from the outcomes in the order they came
    (arm, breached): what the round saw at every look, recomputed. Sessions before both arms
    had one are left out."""
    import numpy as np

    if not outcomes:
        return []
    treated = np.array([arm == TREATMENT for arm, _ in outcomes])
    breached = np.array([bool(b) for _, b in outcomes])
    n_t, b_t = np.cumsum(treated), np.cumsum(treated & breached)
    n_c, b_c = np.cumsum(~treated), np.cumsum(~treated & breached)
    both = (n_t > 0) & (n_c > 0)
    if not both.any():
        return []
    counts = (n_t[both], b_t[both], n_c[both], b_c[both])
    effect, lower, upper = bounds(*counts, alpha=design.alpha, tightest_at=design.tightest_at)
    sessions = np.arange(1, len(outcomes) + 1)[both]
    return [
        {"sessions": int(s), "effect": _round(e), "lower": _round(lo), "upper": _round(hi)}
        for s, e, lo, hi in zip(sessions, effect, lower, upper, strict=True)
    ]
