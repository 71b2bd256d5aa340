"""Forward trials against a simulated live population (semantics §20.6), both trial designs side
by side: prints figures, asserts nothing. No database: the decisions are the engine's own pure
functions — `replay.engine.randomized.classify` for the `randomized` design (§20), the very
function a round's verdict comes from, and `replay.engine.decide_trial` for `baseline` (§8).

    .venv/bin/python bench/bench_trials.py [--populations 300] [--seed 1] [--json]

One grid cell is a world: 6 scopes with k candidates each (k = 1, 2 or 3), the candidates in
turn null (they change nothing), good (they cut the target rate of the sessions that are
served them by `size`) or harmful (they raise it by `size`), all in force at once. Sessions
arrive one at a time; each reads 1, 2 or 3 of the scopes (uniformly), is served what its
design serves it, shows the target condition with probability base + the sum of the effects
of the candidates it was served (clipped to [0, 1]), and reports. The world stays the one the
trials started in: a decided candidate is served to nobody after (served to everyone after a
promotion, a good rule would cut the rate the next candidates are measured against, and the
sizes on the grid would no longer be the effects measured). Each design sees the same kind of
worlds:

- `randomized`: on its read a session is assigned to each candidate's arm (treatment with
  probability `allocation`) and served the treatment ones; after every report every trial in
  force is decided — the continuous monitoring a live system does — until all are decided.
- `baseline` (§8): every candidate is served to every session reading its scope; every report
  enrols its session in every candidate's trial until `rule_trial_min_sessions` sessions,
  whatever the scope; the baseline is taken from 200 earlier sessions, each of which showed
  an incident on another metric with probability 0.3 besides the target.

Printed per cell and design: false promotion (nulls promoted), power (good ones promoted),
harm retirement (harmful ones retired), the median sessions to a decision, and the median
treatment sessions exposed to a harmful candidate before it was retired.
"""

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replay import engine  # noqa: E402
from replay.engine import randomized  # noqa: E402

SCOPES = 6
OTHER_NOTICE = 0.3  # baseline design: sessions with an incident on another metric
HISTORY = 200
NULL, GOOD, HARMFUL = 0, 1, 2
CLASSES = ("null", "good", "harmful")


@dataclass(frozen=True)
class Cell:
    base: float
    size: float
    per_scope: int


@dataclass
class Outcome:
    """Per candidate of every population: class, verdict (0 pending, 1 promoted, 2 retired),
    sessions in its trial at the decision, treatment sessions served it by then."""

    kind: np.ndarray
    verdict: np.ndarray
    sessions: np.ndarray
    treated: np.ndarray


def world(cell: Cell, populations: int):
    """(scope of each candidate, class of each, effect of each), candidates in turn null, good
    and harmful across the scopes."""
    count = SCOPES * cell.per_scope
    kind = np.arange(count) % 3
    scope = np.arange(count) // cell.per_scope
    effect = np.select([kind == GOOD, kind == HARMFUL], [-cell.size, cell.size], 0.0)
    return scope, np.broadcast_to(kind, (populations, count)).copy(), effect


def reads(rng, populations: int) -> np.ndarray:
    """Which scopes each population's next session reads: 1, 2 or 3 of them, uniformly."""
    how_many = rng.integers(1, 4, size=(populations, 1))
    rank = np.argsort(np.argsort(rng.random((populations, SCOPES)), axis=1), axis=1)
    return rank < how_many


def run_randomized(cell: Cell, design: randomized.Design, populations: int, rng) -> Outcome:
    scope, kind, effect = world(cell, populations)
    shape = kind.shape
    status = np.zeros(shape, dtype=int)  # 0 in force, 1 promoted, 2 retired
    n_t, b_t, n_c, b_c = (np.zeros(shape) for _ in range(4))
    sessions, treated = np.zeros(shape), np.zeros(shape)
    # Enough sessions for every trial to reach the cap: a session reads 2 of 6 scopes on average.
    for _ in range(int(design.max_sessions * SCOPES / 2 * 1.6)):
        in_force = status == 0
        if not in_force.any():
            break
        read = reads(rng, populations)[:, scope]
        arm_t = rng.random(shape) < design.allocation
        served = read & in_force & arm_t
        p = np.clip(cell.base + (served * effect).sum(axis=1), 0.0, 1.0)
        breached = (rng.random(populations) < p)[:, None]
        exposed = read & in_force
        n_t += exposed & arm_t
        b_t += exposed & arm_t & breached
        n_c += exposed & ~arm_t
        b_c += exposed & ~arm_t & breached
        code = randomized.classify(n_t, b_t, n_c, b_c, design=design)
        decided = in_force & (code != randomized.PENDING)
        status[decided] = np.where(code[decided] == randomized.PROMOTE, 1, 2)
        sessions[decided] = (n_t + n_c)[decided]
        treated[decided] = n_t[decided]
    return Outcome(kind, status, sessions, treated)


def run_baseline(cell: Cell, min_sessions: int, margin: float, populations: int, rng) -> Outcome:
    scope, kind, effect = world(cell, populations)
    shape = kind.shape
    target = rng.random((populations, HISTORY)) < cell.base
    other = rng.random((populations, HISTORY)) < OTHER_NOTICE
    noticed = (target | other).sum(axis=1)
    baseline_rate = np.where(noticed > 0, target.sum(axis=1) / np.maximum(noticed, 1), 1.0)
    breached, treated = np.zeros(shape), np.zeros(shape)
    for _ in range(min_sessions):
        read = reads(rng, populations)[:, scope]
        p = np.clip(cell.base + (read * effect).sum(axis=1), 0.0, 1.0)
        breached += (rng.random(populations) < p)[:, None]
        treated += read
    margins = engine.Margins(promote=margin)
    status = np.zeros(shape, dtype=int)
    for r in range(populations):
        for c in range(shape[1]):
            trial = engine.Trial(min_sessions, int(breached[r, c]), float(baseline_rate[r]))
            verdict = engine.decide_trial(trial, min_sessions=min_sessions, margins=margins)
            status[r, c] = {"promote": 1, "retire": 2}.get(verdict.outcome, 0)
    return Outcome(kind, status, np.full(shape, float(min_sessions)), treated)


def figures(outcome: Outcome) -> dict:
    def share(kind: int, verdict: int) -> float:
        return float((outcome.verdict[outcome.kind == kind] == verdict).mean())

    decided = outcome.verdict != 0
    harm_retired = (outcome.kind == HARMFUL) & (outcome.verdict == 2)
    return {
        "false_promotion": share(NULL, 1),
        "power": share(GOOD, 1),
        "harm_retired": share(HARMFUL, 2),
        "good_retired": share(GOOD, 2),
        "undecided": float((~decided).mean()),
        "median_sessions": float(np.median(outcome.sessions[decided])) if decided.any() else None,
        "median_harm_treated": float(np.median(outcome.treated[harm_retired]))
        if harm_retired.any()
        else None,
    }


def grid(bases, sizes, per_scope) -> list[Cell]:
    """Every (base rate, size, candidates per scope) where both effects stay in [0, 1]."""
    return [
        Cell(base, size, k)
        for base in bases
        for size in sizes
        for k in per_scope
        if base - size >= -1e-9 and base + size <= 1 + 1e-9
    ]


def percent(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:5.1f} %"


def number(x: float | None) -> str:
    return "—" if x is None else f"{x:5.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--populations", type=int, default=300, help="worlds per grid cell")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bases", type=float, nargs="+", default=[0.1, 0.3, 0.5, 0.7])
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.1, 0.2, 0.3])
    parser.add_argument("--per-scope", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--allocation", type=float, default=0.5)
    parser.add_argument("--max-sessions", type=int, default=400)
    parser.add_argument("--margin", type=float, default=0.05)
    parser.add_argument("--min-sessions", type=int, default=5, help="baseline design (§8)")
    parser.add_argument("--tightest-at", type=float, default=randomized.TIGHTEST_AT)
    parser.add_argument("--json", action="store_true", help="one JSON document")
    args = parser.parse_args()
    design = randomized.Design(
        alpha=args.alpha,
        allocation=args.allocation,
        max_sessions=args.max_sessions,
        margin=args.margin,
        tightest_at=args.tightest_at,
    )
    rng = np.random.default_rng(args.seed)
    rows, started = [], time.perf_counter()
    for cell in grid(args.bases, args.sizes, args.per_scope):
        rows.append(
            {
                **cell.__dict__,
                "randomized": figures(run_randomized(cell, design, args.populations, rng)),
                "baseline": figures(
                    run_baseline(cell, args.min_sessions, args.margin, args.populations, rng)
                ),
            }
        )
        if not args.json:
            print_row(rows[-1])
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    if args.json:
        print(json.dumps({"design": design.__dict__, "cells": rows}, indent=1))
        return
    print(
        f"{args.populations} worlds a cell, seed {args.seed}, {time.perf_counter() - started:.0f} s"
        f", load {load}"
    )
    for name in ("randomized", "baseline"):
        print(f"worst over the grid, {name}: " + worst(rows, name))


def print_row(row: dict) -> None:
    head = f"base {row['base']:.1f} size {row['size']:.1f} k {row['per_scope']}"
    for name in ("randomized", "baseline"):
        f = row[name]
        print(
            f"{head}  {name:10}  null promoted {percent(f['false_promotion'])}  "
            f"good promoted {percent(f['power'])}  harmful retired {percent(f['harm_retired'])}  "
            f"good retired {percent(f['good_retired'])}  undecided {percent(f['undecided'])}  "
            f"median sessions {number(f['median_sessions'])}  "
            f"harm: treated {number(f['median_harm_treated'])}"
        )
        head = " " * len(head)


def worst(rows: list[dict], name: str) -> str:
    def extreme(key: str, pick):
        values = [r[name][key] for r in rows if r[name][key] is not None]
        return pick(values) if values else None

    return (
        f"null promoted ≤ {percent(extreme('false_promotion', max))}, "
        f"good promoted ≥ {percent(extreme('power', min))}, "
        f"harmful retired ≥ {percent(extreme('harm_retired', min))}, "
        f"median treated before a harmful one retired ≤ "
        f"{number(extreme('median_harm_treated', max))}"
    )


if __name__ == "__main__":
    main()
