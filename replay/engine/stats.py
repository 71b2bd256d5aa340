"""A permutation test of treatment − control, stratified by case, and its confidence interval.

Pure numpy: no Django, no clock. `replay.engine.paired` builds the verdicts of semantics §17
on it.

The statistic. Within each stratum (one case) the arm labels are exchangeable under the null
hypothesis "the candidate changes nothing", so the reference distribution comes from
re-drawing which of the stratum's replays were the treatment ones, stratum by stratum, with the
arm sizes kept. The statistic is the sum of the treatment values over all strata, which is the
same test as the weighted mean difference Σ w_s (mean_T − mean_C) / Σ w_s with the
Cochran–Mantel–Haenszel weights w_s = n_T n_C / (n_T + n_C): w_s (1/n_T + 1/n_C) = 1, so the
two differ by a constant fixed by the data. On 0/1 values this is the exact conditional test of
a stratified 2×2×K table (the hypergeometric one); on judged scores it is Pitman's test.

Why not SciPy's `permutation_test`: it has no strata. Permuting across cases would compare a
hard task's treatment with an easy task's control, which is exactly the noise this design is
there to remove. So the re-draws are made here, and SciPy checks them in the tests.

Ties. On 0/1 values (a verifier's outcome) most relabellings tie the observed sum, so the
exact p-value moves in coarse steps and the test spends much less than its level: measured on
the noise bench, 3 cases × 8 repeats per arm promoted a rule lifting success from 0.5 to 0.9
only 85 % of the time at α = 0.05. A stratum may therefore carry a second value per replay
(`treatment_ties`, `control_ties`), and relabellings are ordered lexicographically: the sum of
the first values, then, only among exact ties, the sum of the second. A permutation test is
exact for any statistic that is a function of the labelling and the pooled data, and a
lexicographic order is one (a total preorder on the relabellings), so the p-value keeps
P(p ≤ a) ≤ a at every n; it only reaches levels between the old steps. Ties of both values
still count as "at least as extreme": never anti-conservative. The alternatives considered:
the randomized exact test (a seeded coin among the tied relabellings) has size exactly α but
lets a coin, not the evidence, decide a promotion, which an audit trail cannot defend; mid-p
is not valid. The second values are real measurements of the same replays, so whoever
re-computes a verdict from the journal gets the same p-value.

Exact or Monte Carlo. When the number of relabellings (the product over strata of
C(n_s, n_T,s)) is at most `exact_limit`, every one is enumerated and the p-value is exact.
Otherwise `resamples` relabellings are drawn with a generator seeded by the caller, and the
observed labelling is counted among them, p = (1 + #{T* ≥ T}) / (1 + B), which keeps the test
valid (never anti-conservative) at any B.

The interval. Under a constant-shift model (treatment = control + δ in every case) the test of
"effect = δ" is the same test run on treatment values minus δ. Both the relabelled sums and the
observed sum are linear in δ, so the set of δ the test does not reject comes out in closed form
from the same relabellings (no search): each relabelling j that moves D_j > 0 control replays
into the treatment set rejects δ on one side of t_j = (A − A*_j) / D_j. The bounds are order
statistics of the t_j, consistent with the p-value by construction: the lower bound at level a
exceeds 0 exactly when the one-sided p-value is ≤ a. The shift moves the first values only;
at δ = t_j the second values decide whether δ is rejected, so with ties broken the bounds are
the ends of the closure of the non-rejected set: a bound clear of 0 still means significant,
and a significant test may have its bound at exactly 0 (the end there is open).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import combinations
from typing import TYPE_CHECKING

# NumPy loads with the first test, not with the engine: a command with nothing to decide
# (and the MCP server, and `manage.py check`) never pays for it (tests/unit/test_startup.py).
if TYPE_CHECKING:
    import numpy as np

EXACT_LIMIT = 20_000
RESAMPLES = 9_999
# Sums of floats that are equal in exact arithmetic may differ in the last bits.
_TOL = 1e-9


@dataclass(frozen=True)
class Stratum:
    """The values of one metric on one case, by arm (lower-is-better already negated), and
    optionally a second value per replay, in the same order, that breaks the first one's ties
    (see "Ties" in the module docstring). No second values: ties stay ties."""

    treatment: tuple[float, ...]
    control: tuple[float, ...]
    treatment_ties: tuple[float, ...] = ()
    control_ties: tuple[float, ...] = ()

    def __post_init__(self):
        ties = (len(self.treatment_ties), len(self.control_ties))
        if ties != (0, 0) and ties != (len(self.treatment), len(self.control)):
            raise ValueError("tie-breaking values must be given for every replay or none")


@dataclass(frozen=True)
class ShiftTest:
    effect: float  # CMH-weighted mean of treatment − control over strata
    p_greater: float  # H1: treatment higher
    p_less: float  # H1: treatment lower
    method: str  # "exact" | "monte_carlo"
    relabellings: int  # enumerated or drawn (the observed one included)
    _t: np.ndarray  # sorted thresholds t_j of the relabellings with D_j > 0
    _n0: int  # relabellings with D_j = 0 (the observed one and its copies)

    def lower_bound(self, a: float) -> float:
        """Smallest δ a one-sided test at level a does not reject (−inf: no data can)."""
        m = math.floor(a * self.relabellings + _TOL) - self._n0 + 1
        return -math.inf if m <= 0 else float(self._t[min(m, len(self._t)) - 1])

    def upper_bound(self, a: float) -> float:
        """Largest δ a one-sided test at level a does not reject (+inf: no data can)."""
        m = math.floor(a * self.relabellings + _TOL) - self._n0 + 1
        return math.inf if m <= 0 else float(self._t[len(self._t) - min(m, len(self._t))])


def usable(strata: list[Stratum]) -> list[Stratum]:
    """The strata with at least one replay in each arm: only they carry a comparison."""
    return [s for s in strata if s.treatment and s.control]


def weighted_effect(strata: list[Stratum]) -> float:
    import numpy as np

    weights = [
        len(s.treatment) * len(s.control) / (len(s.treatment) + len(s.control)) for s in strata
    ]
    diffs = [float(np.mean(s.treatment) - np.mean(s.control)) for s in strata]
    return float(np.dot(weights, diffs) / sum(weights))


def weighted_se(strata: list[Stratum]) -> float:
    """The plain standard error of `weighted_effect` from the replays' own spread (sample
    variances; an arm of one replay counts as spread 0). Descriptive: no test rests on it."""
    weights = [_weight(s) for s in strata]
    var = sum(
        w * w * (_var(s.treatment) / len(s.treatment) + _var(s.control) / len(s.control))
        for w, s in zip(weights, strata, strict=True)
    )
    return math.sqrt(var) / sum(weights)


def _weight(s: Stratum) -> float:
    return len(s.treatment) * len(s.control) / (len(s.treatment) + len(s.control))


def _var(values: tuple[float, ...]) -> float:
    import numpy as np

    return float(np.var(values, ddof=1)) if len(values) > 1 else 0.0


def shift_test(
    strata: list[Stratum],
    *,
    seed: int,
    resamples: int = RESAMPLES,
    exact_limit: int = EXACT_LIMIT,
) -> ShiftTest:
    """The stratified permutation test of treatment − control (see the module docstring).

    `strata` must all be `usable`; at least one. The relabellings depend only on the arm sizes
    and the seed, so tests of several metrics on the same replays share them."""
    import numpy as np

    if not strata or usable(strata) != strata:
        raise ValueError("every stratum needs a replay in each arm")
    sizes = tuple((len(s.treatment) + len(s.control), len(s.treatment)) for s in strata)
    chosen, method = relabellings(sizes, seed=seed, resamples=resamples, exact_limit=exact_limit)
    a_star = np.zeros(len(chosen[0]))
    b_star = np.zeros(len(chosen[0]))
    d_star = np.zeros(len(chosen[0]), dtype=np.intp)
    for s, (n, k), picks in zip(strata, sizes, chosen, strict=True):
        a_star += np.array(s.treatment + s.control, dtype=float)[picks].sum(axis=1)
        ties = s.treatment_ties + s.control_ties or (0.0,) * n
        b_star += np.array(ties, dtype=float)[picks].sum(axis=1)
        d_star += (picks >= k).sum(axis=1)
    observed = sum(math.fsum(s.treatment) for s in strata)
    moved = d_star > 0
    t_all = (observed - a_star[moved]) / d_star[moved]
    # Relabellings whose first sum ties the observed one: the second sum decides (≥ counts).
    tied = np.abs(t_all) <= _TOL
    b_gap = b_star[moved] - sum(math.fsum(s.treatment_ties) for s in strata)
    n = len(a_star)
    n0 = int(n - moved.sum())
    greater = np.count_nonzero(t_all < -_TOL) + np.count_nonzero(tied & (b_gap >= -_TOL))
    less = np.count_nonzero(t_all > _TOL) + np.count_nonzero(tied & (b_gap <= _TOL))
    return ShiftTest(
        effect=weighted_effect(strata),
        p_greater=float(n0 + greater) / n,
        p_less=float(n0 + less) / n,
        method=method,
        relabellings=n,
        _t=np.sort(t_all),
        _n0=n0,
    )


@lru_cache(maxsize=512)
def relabellings(
    sizes: tuple[tuple[int, int], ...], *, seed: int, resamples: int, exact_limit: int
) -> tuple[tuple[np.ndarray, ...], str]:
    """Per stratum of (replays n, treatment replays k), which positions form the treatment set
    in each relabelling: an array (relabellings, k) per stratum, rows aligned across strata.
    Positions < k are the observed treatment replays. Either every relabelling ("exact") or
    the observed one followed by `resamples` drawn uniformly ("monte_carlo")."""
    import numpy as np

    count = math.prod(math.comb(n, k) for n, k in sizes)
    if count <= exact_limit:
        grids = np.meshgrid(*[np.arange(math.comb(n, k)) for n, k in sizes], indexing="ij")
        chosen = tuple(_subsets(n, k)[g.ravel()] for (n, k), g in zip(sizes, grids, strict=True))
        return chosen, "exact"
    rng = np.random.default_rng(seed)
    chosen = []
    for n, k in sizes:
        drawn = np.argpartition(rng.random((resamples, n)), k - 1, axis=1)[:, :k]
        chosen.append(np.vstack([np.arange(k)[None, :], drawn]))
    return tuple(chosen), "monte_carlo"


@cache
def _subsets(n: int, k: int) -> np.ndarray:
    import numpy as np

    return np.array(list(combinations(range(n), k)), dtype=np.intp).reshape(-1, k)
