"""Operating characteristics of the paired design, fast (docs/semantics.md#s21-3): a vectorised
simulation of the success counts per (case, arm) that mirrors `replay.engine.paired`'s decision
on a pass/fail deciding metric, so a look schedule, a spending function or a futility boundary
can be tried over the whole grid in seconds instead of the quarter of an hour
`bench/bench_noise.py --grid` takes. Prints a table; asserts nothing. Pure: no Django.

    .venv/bin/python bench/oc_paired.py [--rules 4000] [--looks 4,8] [--futility sign] ...
    .venv/bin/python bench/oc_paired.py --tiny

What it mirrors, per look (the engine's own functions where they are pure: `spent_by` for the
levels, `futility_p_rates` for the rates boundary):
- the improvement test: the exact conditional test of the stratified 2×2 tables (the
  permutation test on 0/1 values), its ties broken by task completion — a replay's completion
  is its outcome plus judged noise, so among relabellings that tie on successes the order is
  the noise's, and the p-value is P(S* > s) + V·P(S* = s), V uniform: a randomised test;
- promotion: that p at the look's share of alpha and an effect ≥ the margin, held back before
  the last look while the wins' outcome visibly regresses (`_suspect`: worse than the margin and
  three standard errors);
- the futility boundary at an early look (the sign of the estimate, or the rates test);
- the last look: Holm over the regression family — with one pass/fail failing-case test, one
  on the wins' outcome (task completion carrying the same signal, each counted twice) and the
  wins' three judged metrics (noise only: uniform p-values) — any rejection retires; then
  promotion; then "no improvement" when the effect's upper bound is under the margin (here by
  the normal approximation at the look's level); otherwise pending;
- costs: each look replays the failing cases, then the wins (`wins_follow`) unless the failing
  cases stopped it.
Beyond the engine's options it can also try regression tests at earlier looks
(`--retire-spending`) and a look's wins replayed only when its failing cases would promote, or
at the last look (`--wins defer`). Without options it runs the engine's defaults.
Its figures agree with `bench_noise.py --grid`'s within sampling error
(docs/benchmarks.md#verdicts-under-noise-the-defaults-chosen-over-the-grid);
`tests/unit/test_bench_oc.py` checks its p-values against the engine's. Not mirrored yet: the
engine's regression family in two parts (`holm_weighted`) and its holds of a visible harm at one
standard error before the last look and on the deciding metric at it (docs/semantics.md#s17-4).
Those only hold back or retire more, so its false promotion and futility losses stand for the
engine's; for power and harm retired read `bench_noise.py --grid`, which runs the engine.
Nor the engine's order of a look (`PairedConfig.wins_lead`, the default: the wins first, a
harm on them retiring the rule before its failing cases are replayed): without options it runs
the engine's spending with the wins after the failing cases, so its replay figures are that
order's (more for a rule that breaks a win, fewer for a futility stop).
"""

import argparse
import json
import os
import sys
import time
from functools import cache
from pathlib import Path

import numpy as np
from scipy.special import ndtri
from scipy.stats import hypergeom

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replay.engine import paired, stats  # noqa: E402

REGRESSION_TESTS = 7  # failing: outcome, completion; wins: outcome, completion, 3 judged


@cache
def _null_pmf(n: int, totals: tuple[int, ...]) -> np.ndarray:
    """The distribution of the treatment's successes summed over strata under relabelling: per
    stratum of 2n replays with `total` successes, hypergeometric; convolved."""
    out = np.ones(1)
    for m in totals:
        out = np.convolve(out, hypergeom.pmf(np.arange(n + 1), 2 * n, m, n))
    return out


def randomised_p(t: np.ndarray, c: np.ndarray, n: int, v: np.ndarray) -> tuple:
    """(p greater, p less) of the stratified exact test with ties broken at random (`v`), per
    rule; t, c: successes per (rule, stratum) out of n."""
    totals = np.sort(t + c, axis=1)
    s = t.sum(axis=1)
    greater, less = np.empty(len(t)), np.empty(len(t))
    keys, inverse = np.unique(totals, axis=0, return_inverse=True)
    for j, key in enumerate(keys):
        pmf = _null_pmf(n, tuple(int(x) for x in key))
        cdf = np.concatenate([[0.0], np.cumsum(pmf)])  # cdf[x] = P(S* < x)
        mine = inverse.ravel() == j
        ss = s[mine]
        at = pmf[ss]
        greater[mine] = 1 - cdf[ss + 1] + v[mine] * at
        less[mine] = cdf[ss] + (1 - v[mine]) * at
    return greater, less


@cache
def _rates_p(pairs: tuple, n: int, effect: float) -> float:
    strata = [
        stats.Stratum((1.0,) * t + (0.0,) * (n - t), (1.0,) * c + (0.0,) * (n - c))
        for t, c in pairs
    ]
    return paired.futility_p_rates(strata, effect)


def rates_p(t: np.ndarray, c: np.ndarray, n: int, effect: float) -> np.ndarray:
    """The engine's exact futility test of the success rates, per rule (cached by counts)."""
    pairs = np.sort(t * (n + 1) + c, axis=1)
    keys, inverse = np.unique(pairs, axis=0, return_inverse=True)
    values = [
        _rates_p(tuple((int(x) // (n + 1), int(x) % (n + 1)) for x in key), n, effect)
        for key in keys
    ]
    return np.asarray(values)[inverse.ravel()]


def weighted(t: np.ndarray, c: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Effect (equal weights: equal arms) and `stats.weighted_se` of 0/1 values."""
    effect = (t - c).mean(axis=1) / n
    if n < 2:
        return effect, np.zeros(len(t))
    var = (t * (n - t) + c * (n - c)) / (n * (n - 1)) / n  # sample variances ddof=1, / n
    return effect, np.sqrt(var.sum(axis=1)) / t.shape[1]


def simulate(cell: dict, design: dict, rules: int, rng: np.random.Generator) -> dict:
    """Outcomes and replays of `rules` independent rules of one class in one cell."""
    base, failing, wins, effect, harm = (cell[k] for k in ("base", "F", "W", "effect", "harm"))
    looks, alpha, margin = design["looks"], design["alpha"], design["margin"]
    m = looks[-1]
    treat_f = rng.random((rules, failing, m)) < min(1.0, base + effect)
    ctrl_f = rng.random((rules, failing, m)) < base
    treat_w = rng.random((rules, wins, m)) < design["win_rate"] * (1 - harm)
    ctrl_w = rng.random((rules, wins, m)) < design["win_rate"]
    outcome = np.full(rules, "pending", dtype=object)
    futile = np.zeros(rules, bool)
    replays = np.zeros(rules)
    alive = np.ones(rules, bool)
    k_count, before, before_r, prev = len(looks), 0.0, 0.0, 0
    wins_at = np.zeros(rules, int)  # repeats per arm the wins have had
    for k, n in enumerate(looks, start=1):
        spent = paired.spent_by(k / k_count, alpha=alpha, spending=design["spending"])
        level, before = spent - before, spent
        spent_r = paired.spent_by(k / k_count, alpha=alpha, spending=design["retire_spending"])
        level_r, before_r = spent_r - before_r, spent_r
        last = k == k_count
        idx = np.flatnonzero(alive)
        replays[idx] += 2 * failing * (n - prev)
        t, c = treat_f[idx, :, :n].sum(axis=2), ctrl_f[idx, :, :n].sum(axis=2)
        v = rng.random(len(idx))
        p_up, p_down = randomised_p(t, c, n, v)
        est, se = weighted(t, c, n)
        stop = np.zeros(len(idx), bool)
        if not last and design["futility"] == "sign":
            stop = est < 0
        elif not last and design["futility"] == "rates":
            beta = design["beta"] / (k_count - 1)
            stop = rates_p(t, c, n, design["futility_effect"]) <= beta
        outcome[idx[stop]], futile[idx[stop]] = "retire", True
        keep = ~stop
        go = idx[keep]
        t, c, p_up, p_down, est, se = (x[keep] for x in (t, c, p_up, p_down, est, se))
        ready = (p_up <= level) & (est >= margin - 1e-9)
        # Which rules replay their wins at this look: every one ("follow"), or only those the
        # failing cases would promote, and every one at the last look ("defer").
        wins_now = np.ones(len(go), bool) if design["wins"] == "follow" else (ready | last)
        replays[go[wins_now]] += 2 * wins * (n - wins_at[go[wins_now]])
        wins_at[go[wins_now]] = n
        tw, cw = treat_w[go, :, :n].sum(axis=2), ctrl_w[go, :, :n].sum(axis=2)
        w_est, w_se = weighted(tw, cw, n)
        decided = np.zeros(len(go), bool)
        if level_r > 0:
            _, w_down = randomised_p(tw, cw, n, rng.random(len(go)))
            noise = rng.random((len(go), 3)).min(axis=1)
            smallest = np.minimum(np.minimum(p_down, w_down), noise)
            harmed = wins_now & (smallest <= level_r / REGRESSION_TESTS)
            outcome[go[harmed]] = "retire"
            decided |= harmed
        suspect = (w_est <= -np.maximum(margin, 3 * w_se)) & (not last)
        promote = ~decided & wins_now & ready & ~suspect
        outcome[go[promote]] = "promote"
        decided |= promote
        if last:
            upper = est + ndtri(1 - level) * se
            short = ~decided & (upper < margin)
            outcome[go[short]] = "retire"
            decided |= short
        alive[go[decided]] = False
        alive[idx[stop]] = False
        prev = n
    return {"outcome": outcome, "futile": futile, "replays": replays}


def summary(result: dict) -> dict:
    o = result["outcome"]
    decided = o != "pending"
    return {
        "promoted": float(np.mean(o == "promote")),
        "retired": float(np.mean(o == "retire")),
        "futility": float(np.mean(result["futile"])),
        "pending": float(np.mean(~decided)),
        "replays": float(result["replays"][decided].mean()) if decided.any() else None,
    }


CLASSES = {
    "null": (0.0, 0.0),
    "helps +0.2": (0.2, 0.0),
    "helps +0.4": (0.4, 0.0),
    "harms 0.25": (0.0, 0.25),
    "harms 0.5": (0.0, 0.5),
}


def grid(design: dict, args) -> list[dict]:
    rows = []
    for base in args.bases:
        for failing in args.failing_cases:
            for wins in args.win_counts:
                row = {"base": base, "F": failing, "W": wins, "classes": {}}
                for name, (effect, harm) in CLASSES.items():
                    cell = {"base": base, "F": failing, "W": wins, "effect": effect, "harm": harm}
                    rng = np.random.default_rng(
                        [
                            args.seed,
                            int(base * 100),
                            failing,
                            wins,
                            int(effect * 10),
                            int(harm * 100),
                        ]
                    )
                    row["classes"][name] = summary(simulate(cell, design, args.rules, rng))
                rows.append(row)
    return rows


def overall(rows: list[dict]) -> dict:
    def pick(name, key):
        return [r["classes"][name][key] for r in rows]

    reps = [
        np.mean([v["replays"] for v in r["classes"].values() if v["replays"] is not None])
        for r in rows
    ]
    return {
        "false_promotion_max": max(pick("null", "promoted")),
        "futility_losses_max": {h: max(pick(h, "futility")) for h in ("helps +0.2", "helps +0.4")},
        "power_min_+0.4": min(pick("helps +0.4", "promoted")),
        "harms_0.5_retired_min": min(pick("harms 0.5", "retired")),
        "replays_mean": float(np.mean(reps)),
        "replays_max": float(np.max(reps)),
    }


def table(rows: list[dict]) -> list[str]:
    head = (
        "| base | F | W | false prom. | power +0.2 | power +0.4 | ret. harms 0.25 | ret. harms 0.5"
    )
    head += " | fut. losses +0.2 | fut. losses +0.4 | pending | replays/decided |"
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        cl = r["classes"]
        reps = [v["replays"] for v in cl.values() if v["replays"] is not None]
        pend = np.mean([v["pending"] for v in cl.values()])
        cells = [
            f"{r['base']:g}",
            str(r["F"]),
            str(r["W"]),
            *(
                f"{100 * cl[n][k]:.1f}"
                for n, k in (
                    ("null", "promoted"),
                    ("helps +0.2", "promoted"),
                    ("helps +0.4", "promoted"),
                    ("harms 0.25", "retired"),
                    ("harms 0.5", "retired"),
                    ("helps +0.2", "futility"),
                    ("helps +0.4", "futility"),
                )
            ),
            f"{100 * pend:.1f}",
            f"{np.mean(reps):.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def design_of(args) -> dict:
    return {
        "looks": args.looks,
        "alpha": args.alpha,
        "margin": args.margin,
        "spending": args.spending,
        "futility": args.futility,
        "beta": args.beta,
        "futility_effect": args.futility_effect,
        "win_rate": args.win_rate,
        "retire_spending": args.retire_spending,
        "wins": args.wins,
    }


def main() -> None:
    def floats(s):
        return [float(x) for x in s.split(",") if x]

    def ints(s):
        return [int(x) for x in s.split(",") if x]

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rules", type=int, default=4000, help="independent rules a class/cell")
    engine = paired.PairedConfig()
    looks = list(range(engine.batch, engine.max_repeats, engine.batch)) + [engine.max_repeats]
    parser.add_argument("--looks", type=ints, default=looks, help="repeats per arm at each look")
    parser.add_argument("--spending", default=engine.spending, choices=paired.SPENDINGS)
    parser.add_argument(
        "--futility",
        default="rates" if engine.futility_beta else "sign",
        choices=("sign", "rates", "none"),
    )
    parser.add_argument("--beta", type=float, default=engine.futility_beta or 0.02)
    parser.add_argument(
        "--retire-spending", default=engine.retire_spending, choices=paired.SPENDINGS
    )
    parser.add_argument("--wins", default="follow", choices=("follow", "defer"))
    parser.add_argument("--futility-effect", type=float, default=engine.futility_effect)
    parser.add_argument("--alpha", type=float, default=engine.alpha)
    parser.add_argument("--margin", type=float, default=engine.promote_margin)
    parser.add_argument("--win-rate", type=float, default=1.0)
    parser.add_argument("--bases", type=floats, default=[0.2, 0.5, 0.7])
    parser.add_argument("--failing-cases", type=ints, default=[1, 3, 5])
    parser.add_argument("--win-counts", type=ints, default=[1, 2, 3])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="a few rules on two cells (CI)")
    args = parser.parse_args()
    if args.tiny:
        args.rules, args.bases, args.failing_cases, args.win_counts = 50, [0.5], [1, 3], [2]
    started = time.process_time()
    rows = grid(design_of(args), args)
    cpu = time.process_time() - started
    load = os.getloadavg()
    if args.json:
        print(json.dumps({"design": design_of(args), "cells": rows, "overall": overall(rows)}))
        return
    print(f"design {design_of(args)}; {args.rules} independent rules a class and cell")
    print("\n".join(table(rows)))
    print(json.dumps(overall(rows)))
    print(f"{cpu:.1f} s CPU; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
