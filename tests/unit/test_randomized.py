"""The randomized forward trial's decision (semantics §20.4) and assignment (§20.1), pure: no
database. Fixed arms give an exact verdict and p-value; the closed form of the test martingale
is checked against numerical integration of its mixture; and the error rate under a look after
every session is measured by simulation with a fixed seed."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from lifecycle.assignment import CONTROL, TREATMENT, arm_for
from replay import engine
from replay.engine import randomized as R
from replay.engine.randomized import Arm, Design, RandomizedTrial, decide

DEFAULT = Design()


def trial(t: tuple[int, int], c: tuple[int, int], design: Design = DEFAULT) -> RandomizedTrial:
    return RandomizedTrial(Arm(*t), Arm(*c), design)


def mixture_p_value(n_t, b_t, n_c, b_c, *, null, above, alpha, tightest_at=R.TIGHTEST_AT):
    """1/M by integrating exp(λS − λ²V/2) against the half-normal prior of scale ρ numerically:
    the definition the closed form must match."""
    rho2 = R._rho2(alpha, tightest_at)
    v = float(R._variance(n_t, b_t, n_c, b_c))
    s = (n_t + n_c) * (b_t / n_t - b_c / n_c - null) * (1 if above else -1)
    sigma = math.sqrt(rho2)

    def integrand(lam):
        return math.exp(lam * s - lam**2 * v / 2) * 2 * stats.norm.pdf(lam, scale=sigma)

    m, _ = integrate.quad(integrand, 0, np.inf, limit=200)
    return min(1.0, 1 / m)


@pytest.mark.parametrize(
    ("t", "c", "null", "above"),
    [
        ((31, 6), (29, 14), -0.05, False),
        ((200, 40), (200, 100), -0.05, False),
        ((20, 17), (20, 9), 0.0, True),
        ((12, 3), (15, 4), -0.05, True),
        ((80, 40), (75, 37), 0.0, True),
    ],
)
def test_the_p_value_is_the_mixture_martingale_of_its_definition(t, c, null, above):
    closed = float(R.p_value(*t, *c, null=null, above=above, alpha=0.05))
    assert closed == pytest.approx(
        mixture_p_value(*t, *c, null=null, above=above, alpha=0.05), rel=1e-6
    )


@pytest.mark.parametrize(
    ("t", "c", "outcome", "reason"),
    [
        (
            (200, 40),
            (200, 100),
            "promote",
            "improved: treatment 200 sessions, 40 breached; control 200, 100 breached; "
            "effect −0.30 [−0.43, −0.17], p 1.2e-06",
        ),
        (
            (40, 34),
            (40, 12),
            "retire",
            "made it worse: treatment 40 sessions, 34 breached; control 40, 12 breached; "
            "effect +0.55 [+0.29, +0.81], p 1.6e-06",
        ),
        (
            (20, 17),
            (20, 9),
            "retire",
            "no improvement of 0.05: treatment 20 sessions, 17 breached; control 20, 9 breached; "
            "effect +0.40 [−0.01, +0.81], p 0.029",
        ),
        (
            (200, 100),
            (200, 100),
            "retire",
            "no improvement within 400 sessions: treatment 200 sessions, 100 breached; "
            "control 200, 100 breached; effect +0.00 [−0.14, +0.14]",
        ),
        (
            (31, 6),
            (29, 14),
            "pending",
            "treatment 31 sessions, 6 breached; control 29, 14 breached; "
            "effect −0.29 [−0.62, +0.04]; about 52 more sessions",
        ),
        (
            (0, 0),
            (4, 2),
            "pending",
            "treatment 0 sessions, 0 breached; control 4, 2 breached; "
            "waiting for sessions in both arms",
        ),
    ],
)
def test_fixed_arms_give_an_exact_verdict(t, c, outcome, reason):
    verdict = decide(trial(t, c))
    assert (verdict.outcome, verdict.reason, verdict.validator) == (
        outcome,
        reason,
        "forward_trial",
    )
    assert verdict.pending_reason == ("trial_in_progress" if outcome == "pending" else "")
    # The engine's entry point for any forward trial decides the same.
    assert engine.decide_trial(trial(t, c), min_sessions=5, margins=engine.Margins()) == verdict


def test_a_bound_clears_a_value_exactly_when_its_p_value_is_at_most_alpha():
    rng = np.random.default_rng(3)
    n_t, n_c = rng.integers(1, 200, 2000), rng.integers(1, 200, 2000)
    b_t, b_c = rng.binomial(n_t, 0.4), rng.binomial(n_c, 0.5)
    _, lower, upper = R.bounds(n_t, b_t, n_c, b_c, alpha=0.05)
    for null in (0.0, -0.05):
        p_above = R.p_value(n_t, b_t, n_c, b_c, null=null, above=True, alpha=0.05)
        p_below = R.p_value(n_t, b_t, n_c, b_c, null=null, above=False, alpha=0.05)
        clear = np.abs(p_above - 0.05) > 1e-9
        assert ((lower > null) == (p_above < 0.05))[clear].all()
        clear = np.abs(p_below - 0.05) > 1e-9
        assert ((upper < null) == (p_below < 0.05))[clear].all()


def test_the_vectorised_decision_is_the_verdicts():
    rng = np.random.default_rng(4)
    n_t, n_c = rng.integers(0, 220, 300), rng.integers(0, 220, 300)
    b_t, b_c = rng.binomial(n_t, 0.35), rng.binomial(n_c, 0.5)
    codes = R.classify(n_t, b_t, n_c, b_c, design=DEFAULT)
    words = {R.PENDING: "pending", R.PROMOTE: "promote"}
    for i in range(300):
        verdict = decide(trial((n_t[i], b_t[i]), (n_c[i], b_c[i])))
        assert verdict.outcome == words.get(int(codes[i]), "retire")


def test_the_estimate_of_sessions_to_go_is_when_the_same_rates_decide():
    pending = trial((31, 6), (29, 14))
    more, capped = R.sessions_to_go(pending)
    assert (more, capped) == (52, False)
    share = 31 / 60

    def at(total: int) -> str:
        n_t = round(total * share)
        n_c = total - n_t
        return decide(trial((n_t, round(n_t * 6 / 31)), (n_c, round(n_c * 14 / 29)))).outcome

    assert at(60 + more + 2) == "promote"
    assert at(60 + more // 2) == "pending"


def test_the_interval_path_ends_where_the_counts_are_and_narrows():
    rng = np.random.default_rng(5)
    outcomes = [
        (TREATMENT if rng.random() < 0.5 else CONTROL, bool(rng.random() < 0.5)) for _ in range(300)
    ]
    path = R.interval_path(outcomes, DEFAULT)
    assert [p["sessions"] for p in path] == list(range(301 - len(path), 301))
    treated = [b for arm, b in outcomes if arm == TREATMENT]
    held_out = [b for arm, b in outcomes if arm == CONTROL]
    analysis = trial((len(treated), sum(treated)), (len(held_out), sum(held_out))).analysis
    assert path[-1]["lower"] == pytest.approx(analysis.lower, abs=1e-6)
    assert path[-1]["upper"] == pytest.approx(analysis.upper, abs=1e-6)
    widths = [p["upper"] - p["lower"] for p in path]
    assert widths[-1] < widths[len(widths) // 4] < widths[0]


def looks(base_t: float, base_c: float, *, trials: int, sessions: int, seed: int):
    """Counts after every session of `trials` simulated trials: arrays (trials, sessions)."""
    rng = np.random.default_rng(seed)
    treated = rng.random((trials, sessions)) < 0.5
    breached = rng.random((trials, sessions)) < np.where(treated, base_t, base_c)
    return (
        np.cumsum(treated, axis=1),
        np.cumsum(treated & breached, axis=1),
        np.cumsum(~treated, axis=1),
        np.cumsum(~treated & breached, axis=1),
    )


def first_decisions(counts, design: Design) -> np.ndarray:
    codes = R.classify(*counts, design=design)
    decided = codes != R.PENDING
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), -1)
    return np.where(first >= 0, codes[np.arange(len(codes)), first], R.PENDING)


@pytest.mark.parametrize("base", [0.2, 0.5])
def test_a_candidate_that_changes_nothing_is_promoted_at_most_alpha_of_the_time(base):
    # A look after every one of 400 sessions: the always-valid test keeps its level...
    counts = looks(base, base, trials=1500, sessions=400, seed=11)
    promoted = (first_decisions(counts, DEFAULT) == R.PROMOTE).mean()
    assert promoted <= 0.05
    # ...where a fixed-sample z-test of "improvement above the margin", looked at as often,
    # would not: that is the error the sequential test exists to prevent.
    n_t, b_t, n_c, b_c = (x.astype(float) for x in counts)
    ok = (n_t > 4) & (n_c > 4)
    p_t, p_c = b_t / np.maximum(n_t, 1), b_c / np.maximum(n_c, 1)
    se = np.sqrt(p_t * (1 - p_t) / np.maximum(n_t, 1) + p_c * (1 - p_c) / np.maximum(n_c, 1))
    naive = ok & (p_t - p_c + 1.645 * se < 0)
    assert naive.any(axis=1).mean() > 2 * 0.05


def test_the_targets_of_spec_20_hold_at_the_defaults():
    good = first_decisions(looks(0.2, 0.5, trials=600, sessions=400, seed=12), DEFAULT)
    assert (good == R.PROMOTE).mean() >= 0.9
    counts = looks(0.8, 0.5, trials=600, sessions=400, seed=13)
    harmful = first_decisions(counts, DEFAULT)
    assert (harmful == R.PROMOTE).sum() == 0
    assert np.isin(harmful, [R.HARM, R.NO_IMPROVEMENT, R.CAPPED]).mean() >= 0.9


def test_assignment_is_stable_independent_and_keeps_the_allocation():
    key = b"an installation's secret"
    first = [arm_for("C-1", f"s-{n}", allocation=0.5, key=key) for n in range(20_000)]
    assert first == [arm_for("C-1", f"s-{n}", allocation=0.5, key=key) for n in range(20_000)]
    share = first.count(TREATMENT) / len(first)
    assert stats.binomtest(first.count(TREATMENT), len(first), 0.5).pvalue > 0.001, share
    other = [arm_for("C-2", f"s-{n}", allocation=0.5, key=key) for n in range(20_000)]
    agree = sum(a == b for a, b in zip(first, other, strict=True))
    assert stats.binomtest(agree, len(first), 0.5).pvalue > 0.001
    quarter = [arm_for("C-1", f"s-{n}", allocation=0.25, key=key) for n in range(20_000)]
    assert stats.binomtest(quarter.count(TREATMENT), 20_000, 0.25).pvalue > 0.001
    elsewhere = [arm_for("C-1", f"s-{n}", allocation=0.5, key=b"another") for n in range(1000)]
    assert elsewhere != first[:1000]


@pytest.mark.parametrize(
    "treatment, control, decision",
    [
        ((60, 50), (60, 20), "harm"),
        ((60, 5), (60, 40), "promote"),
        ((1, 0), (1, 0), "pending"),
    ],
)
def test_the_evidence_names_the_decision_so_readers_need_not_parse_the_reason(
    treatment, control, decision
):
    from lifecycle.review_items import retired_on_harm

    evidence = trial(treatment, control).evidence()
    assert evidence["decision"] == decision
    assert retired_on_harm({"trial": evidence}) is (decision == "harm")
