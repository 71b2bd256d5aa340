"""Verdicts under noise (semantics §17.6): how often each replay design decides right against a
flaky agent. Prints a table; asserts nothing. Pure: no database, no broker.

    .venv/bin/python bench/bench_noise.py [--rules 200] [--json] [--base-rate 0.5] ...

The agent is `replay.backends.simulated.StochasticAgent`: a failing task succeeds `base_rate`
of the time on a re-run with no rule at all, a protected win `win_rate`, and every judged
metric moves by ±`noise` between runs; `outcome_correct` is the outcome verifier's answer
(drop it with `--no-verifier`: the rule's metric, `task_completion`, then decides). Three
classes of simulated rule, `--rules` of each, every rule with its own cases:
- does nothing: the rule changes no success rate;
- helps: failing tasks succeed `good_rate` (0.9) with the rule instead of `base_rate`;
- harms: protected wins succeed half as often (`harm` 0.5) with the rule, failing tasks as
  without it.
Each rule is validated by both designs:
- `single` — semantics §7 as written: one replay per case, treatment only, compared with the
  recorded original through the engine's own scoring (`replay.engine`: deltas, attribution,
  deciding metric, `decide_replay`);
- `paired` — semantics §17: `next_requests` / `decide_paired` until a verdict or until every
  case and arm has had `max_repeats` (then pending: §7.10 hands it to the forward trial).
The load average is printed: the figures do not depend on it, the wall time does.
"""

import argparse
import gc
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")

import django  # noqa: E402

django.setup()  # the simulated agent imports the rule matcher, which lives beside the models

from django.conf import settings  # noqa: E402

from lifecycle.metrics import MetricInfo, Registry  # noqa: E402
from replay import engine  # noqa: E402
from replay.backends.python import ReplayCase, ReplayContext  # noqa: E402
from replay.backends.simulated import StochasticAgent  # noqa: E402
from replay.engine import paired  # noqa: E402

RULE_METRIC = "task_completion"
# The cases as recorded: a failing session (it failed) and a protected win (it succeeded).
RECORDED = {
    "failing": {
        "outcome_correct": 0.0,
        "task_completion": 0.3,
        "coherence": 0.7,
        "tool_correctness": 0.8,
        "argument_correctness": 0.8,
    },
    "win": {
        "outcome_correct": 1.0,
        "task_completion": 0.85,
        "coherence": 0.7,
        "tool_correctness": 0.8,
        "argument_correctness": 0.8,
    },
}
CLASSES = ("does nothing", "helps", "harms")


@dataclass(frozen=True)
class Rule:
    id: str
    agent: StochasticAgent
    cases: tuple[tuple[str, str], ...]  # (case id, "failing" | "win")

    @property
    def as_dict(self) -> dict:
        return {"id": self.id, "scope": "bench", "metric": RULE_METRIC, "signature": []}


def simulated(rule_id, args, base, effect, harm, failing, wins) -> Rule:
    """A rule on its own flaky agent, with `failing` failing cases and `wins` protected wins."""
    agent = StochasticAgent(
        base_rate=base,
        effect=effect,
        win_rate=args.win_rate,
        harm=harm,
        noise=args.noise,
        seed=args.seed,
    )
    cases = tuple((f"{rule_id}/F{j}", "failing") for j in range(failing)) + tuple(
        (f"{rule_id}/W{j}", "win") for j in range(wins)
    )
    return Rule(rule_id, agent, cases)


def registry() -> Registry:
    return Registry(
        {
            name: MetricInfo(name, tier, higher, tuple(aliases))
            for name, tier, higher, aliases in settings.CAUTERWEB_DEFAULT_METRICS
        }
    )


def replay_once(rule: Rule, case_id: str, kind: str, arm: str, repeat: int, verifier: bool):
    """One replay through the simulated backend, exactly as the engine calls it: in the
    control arm the rule tool does not return the candidate (semantics §17.1)."""
    shown = [rule.as_dict] if arm == paired.TREATMENT else []
    recorded = dict(RECORDED[kind])
    if not verifier:
        recorded.pop(engine.OUTCOME_METRIC)
    case = ReplayCase(case_id, kind, {"metrics": recorded}, None, rule.as_dict)
    context = ReplayContext(
        session_id=f"{rule.id}:{case_id}:{arm}:{repeat}",
        rules_for=lambda scope, query: shown,
        arm=arm,
        repeat=repeat,
    )
    session = rule.agent(case, context)
    return session["traces"][-1]["metrics"], rule.id in context.returned


def run_single(rule: Rule, verifier: bool, reg: Registry, margins: engine.Margins):
    """Semantics §7: one treatment replay per case against the recorded original."""
    scores = []
    retire_on = [engine.OUTCOME_METRIC, RULE_METRIC]
    for case_id, kind in rule.cases:
        replayed, read = replay_once(rule, case_id, kind, paired.TREATMENT, 0, verifier)
        original = {k: v for k, v in RECORDED[kind].items() if verifier or k != "outcome_correct"}
        deltas = engine.metric_deltas(original, replayed, reg)
        outcome = engine.case_outcome(
            env_wait_expired=False, failed=False, deltas=deltas, candidate_read=read
        )
        scores.append(
            engine.score_case(
                case=case_id,
                kind=kind,
                outcome=outcome,
                candidate_read=read,
                deltas=deltas,
                verifier_answered=verifier,
                rule_metric=RULE_METRIC,
                trigger_metric=RULE_METRIC,
                retire_on_metrics=retire_on,
                margins=margins,
            )
        )
    return engine.decide_replay(scores, margins=margins).outcome, len(rule.cases)


def run_paired(rule: Rule, verifier: bool, config: paired.PairedConfig):
    """Semantics §17: batches until a verdict or every repeat is spent."""
    deciding = engine.OUTCOME_METRIC if verifier else RULE_METRIC
    retire_on = frozenset({RULE_METRIC} | ({engine.OUTCOME_METRIC} if verifier else set()))
    cases = [
        paired.PairedCase(c, kind, deciding if kind == "failing" else None, retire_on)
        for c, kind in rule.cases
    ]
    kinds = dict(rule.cases)
    samples: list[paired.Sample] = []
    verdict = None
    while batch := paired.next_requests(samples, cases, config):
        for case_id, arm in batch:
            repeat = sum(1 for s in samples if s.case_id == case_id and s.arm == arm)
            metrics, _ = replay_once(rule, case_id, kinds[case_id], arm, repeat, verifier)
            samples.append(paired.Sample(case_id, kinds[case_id], arm, repeat, metrics))
        verdict = paired.decide_paired(samples, cases, config)
        if verdict.outcome != paired.PENDING:
            break
    return (verdict.outcome if verdict else paired.PENDING), len(samples)


def rules_of(cls: str, n: int, args) -> list[Rule]:
    effect = args.good_rate - args.base_rate if cls == "helps" else 0.0
    harm = args.harm if cls == "harms" else 0.0
    out = []
    for i in range(n):
        rule_id = f"{cls.replace(' ', '-')}-{i}"
        out.append(simulated(rule_id, args, args.base_rate, effect, harm, args.failing, args.wins))
    return out


def measure(args) -> dict:
    reg = registry()
    margins = engine.Margins(promote=args.margin, regress=args.margin)
    # The engine's own defaults, except what the command line sets.
    config = grid_config(args)
    results: dict = {}
    for cls in CLASSES:
        for rule in rules_of(cls, args.rules, args):
            for design, (outcome, replays) in (
                ("single", run_single(rule, args.verifier, reg, margins)),
                ("paired", run_paired(rule, args.verifier, config)),
            ):
                bucket = results.setdefault(design, {}).setdefault(cls, [])
                bucket.append((outcome, replays))
    return results


def rate(rows: list, outcome: str) -> float:
    return sum(1 for o, _ in rows if o == outcome) / len(rows)


def mean_replays(rows: list) -> float | None:
    decided = [n for o, n in rows if o != paired.PENDING]
    return sum(decided) / len(decided) if decided else None


def table(results: dict, args) -> list[tuple[str, str, str, str]]:
    def cell(design, fn):
        return fn(results[design])

    def pct(cls, outcome):
        return lambda r: f"{100 * rate(r[cls], outcome):.1f} %"

    def replays(classes):
        def fn(r):
            value = mean_replays([row for cls in classes for row in r[cls]])
            return "—" if value is None else f"{value:.1f}"

        return fn

    lines = [
        ("does nothing: promoted (false promotion)", pct("does nothing", "promote"), "≤ 5 %"),
        (
            f"helps ({args.base_rate:g} → {args.good_rate:g}): promoted (power)",
            pct("helps", "promote"),
            "≥ 90 %",
        ),
        ("harms (wins halved): retired", pct("harms", "retire"), "≥ 90 %"),
        ("helps: retired", pct("helps", "retire"), ""),
        ("does nothing: retired", pct("does nothing", "retire"), ""),
        ("pending (any class)", lambda r: pending_share(r), ""),
        ("mean replays per decided rule", replays(CLASSES), "≤ 40"),
        ("  … of a promoted helpful rule", replays(["helps"]), ""),
        ("  … of a retired harmful rule", replays(["harms"]), ""),
    ]
    return [(name, cell("single", fn), cell("paired", fn), target) for name, fn, target in lines]


def pending_share(r: dict) -> str:
    rows = [row for cls in CLASSES for row in r[cls]]
    return f"{100 * rate(rows, paired.PENDING):.1f} %"


# --- the grid (docs/semantics.md#s21-3) ------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    base: float
    failing: int
    wins: int


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def grid_classes(args) -> list[tuple[str, float, float]]:
    """(name, effect, harm): a rule that does nothing, helps by each effect, harms by each,
    and one that rescues its failing cases while it breaks the wins (`--mixed`: the usual
    harmful rule — a force push fixes the rejected push and loses a teammate's work)."""
    out = [("null", 0.0, 0.0)]
    out += [(f"helps +{e:g}", e, 0.0) for e in floats(args.effects)]
    out += [(f"harms {h:g}", 0.0, h) for h in floats(args.harms)]
    mixed = floats(args.mixed)
    if mixed:
        out.append((f"rescues +{mixed[0]:g}, harms {mixed[1]:g}", mixed[0], mixed[1]))
    return out


def kinds_of(classes) -> tuple[list[str], list[str], list[str]]:
    """The classes that only help, only harm, and both."""
    helps = [c for c, e, h in classes if e and not h]
    harms = [c for c, e, h in classes if h and not e]
    return helps, harms, [c for c, e, h in classes if e and h]


def run_group(rules: list[Rule], group: Rule, verifier: bool, config: paired.PairedConfig):
    """Candidates replaying the same cases with one shared control arm
    (docs/semantics.md#s21-2): each control replay of (case, repeat) is drawn once, from the
    group's own seed, and used by every candidate that reaches that repeat. Returns per rule
    (outcome, reason, replays alone, control keys used, treatment replays)."""
    deciding = engine.OUTCOME_METRIC if verifier else RULE_METRIC
    retire_on = frozenset({RULE_METRIC} | ({engine.OUTCOME_METRIC} if verifier else set()))
    kinds = dict(group.cases)
    cases = [
        paired.PairedCase(c, kind, deciding if kind == "failing" else None, retire_on)
        for c, kind in group.cases
    ]
    controls: dict[tuple[str, int], dict] = {}
    out = []
    for rule in rules:
        samples: list[paired.Sample] = []
        used, treated, verdict = set(), 0, None
        while batch := paired.next_requests(samples, cases, config):
            for case_id, arm in batch:
                repeat = sum(1 for s in samples if s.case_id == case_id and s.arm == arm)
                if arm == paired.CONTROL:
                    key = (case_id, repeat)
                    if key not in controls:
                        controls[key], _ = replay_once(
                            group, case_id, kinds[case_id], arm, repeat, verifier
                        )
                    metrics = controls[key]
                    used.add(key)
                else:
                    metrics, _ = replay_once(rule, case_id, kinds[case_id], arm, repeat, verifier)
                    treated += 1
                samples.append(paired.Sample(case_id, kinds[case_id], arm, repeat, metrics))
            verdict = paired.decide_paired(samples, cases, config)
            if verdict.outcome != paired.PENDING:
                break
        outcome = verdict.outcome if verdict else paired.PENDING
        out.append((outcome, verdict.reason if verdict else "", len(samples), used, treated))
    return out


def measure_grid(args) -> list[dict]:
    config = grid_config(args)
    cells = [
        Cell(base, failing, wins)
        for base in floats(args.bases)
        for failing in ints(args.failing_cases)
        for wins in ints(args.win_counts)
    ]
    per_case = max(ints(args.per_case))
    out = []
    for cell in cells:
        row = {"base": cell.base, "failing": cell.failing, "wins": cell.wins, "classes": {}}
        for name, effect, harm in grid_classes(args):
            results = []  # per group: run_group's rows
            for g in range(args.groups):
                gid = f"{name}-{cell.base:g}-{cell.failing}-{cell.wins}-g{g}"
                shape = simulated(gid, args, cell.base, effect, harm, cell.failing, cell.wins)
                group = Rule(f"{gid}/control", shape.agent, shape.cases)
                rules = [Rule(f"{gid}/R{i}", shape.agent, shape.cases) for i in range(per_case)]
                results.append(run_group(rules, group, args.verifier, config))
            row["classes"][name] = summarize(results, ints(args.per_case))
        out.append(row)
    return out


def summarize(groups: list[list[tuple]], per_case: list[int]) -> dict:
    """Rates over every rule of every group; replays per decided rule alone, and with k
    candidates per case sharing their control replays (each control replay's cost split
    among the first k candidates of its group that used it)."""
    rows = [r for g in groups for r in g]
    n = len(rows)
    decided = [r for r in rows if r[0] != paired.PENDING]
    promoted = sum(r[0] == paired.PROMOTE for r in rows)
    summary = {
        "rules": n,
        "promoted": promoted / n,
        "promoted_upper95": clopper_pearson_upper(promoted, n),
        "retired": sum(r[0] == paired.RETIRE for r in rows) / n,
        "futility": sum(r[0] == paired.RETIRE and "futility" in r[1] for r in rows) / n,
        "pending": sum(r[0] == paired.PENDING for r in rows) / n,
        "replays": {},
    }
    for k in per_case:
        costs = []
        for g in groups:
            mine = g[:k]
            users: dict = {}
            for r in mine:
                for key in r[3]:
                    users[key] = users.get(key, 0) + 1
            for r in mine:
                if r[0] != paired.PENDING:
                    costs.append(r[4] + sum(1 / users[key] for key in r[3]))
        summary["replays"][k] = sum(costs) / len(costs) if costs else None
    summary["replays_alone"] = sum(r[2] for r in decided) / len(decided) if decided else None
    return summary


def clopper_pearson_upper(successes: int, n: int, level: float = 0.95) -> float:
    """The exact (Clopper–Pearson) one-sided upper confidence bound of a rate: what a cell's
    count of promoted null rules can say about its false-promotion rate. Rules of one group
    share their control replays, so the bound is exact only for independent rules
    (`--per-case 1`)."""
    from scipy.stats import beta  # the bench only: the engine keeps SciPy lazy

    return 1.0 if successes >= n else float(beta.ppf(level, successes + 1, n - successes))


def grid_config(args) -> paired.PairedConfig:
    return paired.PairedConfig(
        alpha=args.alpha,
        promote_margin=args.margin,
        regress_margin=args.margin,
        **({"max_repeats": args.max_repeats} if args.max_repeats else {}),
        **({"batch": args.batch} if args.batch else {}),
        **({"retire_spending": args.retire_spending} if args.retire_spending else {}),
        **({"futility": args.futility} if args.futility is not None else {}),
        **({"futility_effect": args.futility_effect} if args.futility_effect is not None else {}),
        **({"wins_follow": args.wins_follow} if args.wins_follow is not None else {}),
        **({"wins_lead": args.wins_lead} if args.wins_lead is not None else {}),
        **(
            {"futility_beta": None if args.futility_beta <= 0 else args.futility_beta}
            if args.futility_beta is not None
            else {}
        ),
    )


def grid_table(cells: list[dict], args) -> list[str]:
    """One line per cell: false promotion, power per effect, harm retired per harm, futility
    losses of helpful rules, replays per decided rule alone and shared by k per case."""
    helps, harms, mixed = kinds_of(grid_classes(args))
    ks = ints(args.per_case)
    head = (
        ["base", "F", "W", "false promotion", "its 95 % upper bound"]
        + [f"power {c.split()[1]}" for c in helps]
        + [f"retired, {c}" for c in harms]
        + [f"{c}: promoted / retired" for c in mixed]
        + [f"futility losses {c.split()[1]}" for c in helps]
        + [f"replays/decided k={k}" for k in ks]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def pct(x):
        return f"{100 * x:.1f}"

    for cell in cells:
        cl = cell["classes"]
        replays = []
        for k in ks:
            values = [v["replays"][k] for v in cl.values() if v["replays"][k] is not None]
            replays.append(f"{sum(values) / len(values):.1f}" if values else "—")
        row = (
            [
                f"{cell['base']:g}",
                str(cell["failing"]),
                str(cell["wins"]),
                pct(cl["null"]["promoted"]),
                pct(cl["null"]["promoted_upper95"]),
            ]
            + [pct(cl[c]["promoted"]) for c in helps]
            + [pct(cl[c]["retired"]) for c in harms]
            + [f"{pct(cl[c]['promoted'])} / {pct(cl[c]['retired'])}" for c in mixed]
            + [pct(cl[c]["futility"]) for c in helps]
            + replays
        )
        lines.append("| " + " | ".join(row) + " |")
    return lines


def grid_overall(cells: list[dict], args) -> dict:
    """The worst cell for each target, and the means over the grid."""
    helps, harms, mixed = kinds_of(grid_classes(args))
    ks = ints(args.per_case)

    def mean(xs):
        xs = [x for x in xs if x is not None]
        return sum(xs) / len(xs) if xs else None

    return {
        "false_promotion_max": max(c["classes"]["null"]["promoted"] for c in cells),
        "false_promotion_mean": mean([c["classes"]["null"]["promoted"] for c in cells]),
        "false_promotion_upper95_max": max(c["classes"]["null"]["promoted_upper95"] for c in cells),
        "futility_losses_max": {h: max(c["classes"][h]["futility"] for c in cells) for h in helps},
        "power_mean": {h: mean([c["classes"][h]["promoted"] for c in cells]) for h in helps},
        "power_min": {h: min(c["classes"][h]["promoted"] for c in cells) for h in helps},
        "harm_retired_mean": {h: mean([c["classes"][h]["retired"] for c in cells]) for h in harms},
        "harm_retired_min": {h: min(c["classes"][h]["retired"] for c in cells) for h in harms},
        "mixed_promoted_max": {m: max(c["classes"][m]["promoted"] for c in cells) for m in mixed},
        "mixed_retired_min": {m: min(c["classes"][m]["retired"] for c in cells) for m in mixed},
        "replays_per_decided": {
            k: mean([v["replays"][k] for c in cells for v in c["classes"].values()]) for k in ks
        },
    }


def grid_main(args) -> None:
    gc.freeze()
    started = time.perf_counter()
    cells = measure_grid(args)
    elapsed = time.perf_counter() - started
    overall = grid_overall(cells, args)
    load = os.getloadavg()
    rules = args.groups * max(ints(args.per_case))
    if args.json:
        out = {"settings": vars(args), "cells": cells, "overall": overall}
        print(json.dumps(out | {"elapsed_s": elapsed, "load": load}, indent=2))
        return
    config = grid_config(args)
    print(
        f"grid: {rules} rules per class and cell ({args.groups} groups of "
        f"{max(ints(args.per_case))} candidates sharing cases); win success {args.win_rate}, "
        f"judged noise ±{args.noise}; alpha {config.alpha}, max repeats {config.max_repeats}, "
        f"batch {config.batch}, futility {config.futility} (effect {config.futility_effect}, "
        f"beta {config.futility_beta}), wins follow {config.wins_follow}, wins lead "
        f"{config.wins_lead}, retire spending "
        f"{config.retire_spending}; verifier {'on' if args.verifier else 'off'}; "
        f"seed {args.seed}"
    )
    for line in grid_table(cells, args):
        print(line)
    print(json.dumps(overall, indent=1))
    print(f"{elapsed:.1f} s; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rules", type=int, default=200, help="simulated rules per class")
    parser.add_argument("--base-rate", type=float, default=0.5)
    parser.add_argument("--good-rate", type=float, default=0.9)
    parser.add_argument("--win-rate", type=float, default=1.0)
    parser.add_argument("--harm", type=float, default=0.5)
    parser.add_argument("--noise", type=float, default=0.15)
    parser.add_argument("--failing", type=int, default=3)
    parser.add_argument("--wins", type=int, default=2)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--max-repeats", type=int, help="replays per case and arm in all")
    parser.add_argument("--batch", type=int, help="replays per case and arm between looks")
    parser.add_argument("--retire-spending", choices=paired.SPENDINGS, help="for regressions")
    parser.add_argument("--margin", type=float, default=0.05)
    parser.add_argument(
        "--futility",
        action=argparse.BooleanOptionalAction,
        help="retire at an early look whose effect estimate is below zero (non-binding)",
    )
    parser.add_argument("--futility-effect", type=float, help="the effect a futility stop protects")
    parser.add_argument(
        "--futility-beta",
        type=float,
        help="how often in all it may stop a rule of that effect: the exact test of the success"
        " rates on a pass/fail metric (0: the sign boundary)",
    )
    parser.add_argument(
        "--wins-follow",
        action=argparse.BooleanOptionalAction,
        help="replay a look's wins only once its failing cases did not stop it for futility",
    )
    parser.add_argument(
        "--wins-lead",
        action=argparse.BooleanOptionalAction,
        help="replay a look's wins first and test the regressions before its failing cases",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-verifier", dest="verifier", action="store_false")
    parser.add_argument("--json", action="store_true")
    grid = parser.add_argument_group("grid (docs/semantics.md#s21-3)")
    grid.add_argument("--grid", action="store_true", help="run the grid of agents instead")
    grid.add_argument("--groups", type=int, default=20, help="groups per class and cell")
    grid.add_argument("--bases", default="0.2,0.5,0.7", help="failing-task re-run success")
    grid.add_argument("--effects", default="0.2,0.4", help="lifts of a helpful rule")
    grid.add_argument("--harms", default="0.25,0.5", help="shares of win success a harm takes")
    grid.add_argument(
        "--mixed",
        default="0.4,0.5",
        help="a rule that lifts its failing cases by the first and takes the second share of"
        " the wins' success ('' for none)",
    )
    grid.add_argument("--failing-cases", default="1,3,5")
    grid.add_argument("--win-counts", default="1,2,3")
    grid.add_argument("--per-case", default="1,2,3", help="candidates sharing cases")
    args = parser.parse_args()
    if args.grid:
        grid_main(args)
        return
    # Objects that live for the whole run are moved out of the collector's way, so that a
    # collection costs microseconds, not tens of milliseconds.
    gc.freeze()
    started = time.perf_counter()
    results = measure(args)
    elapsed = time.perf_counter() - started
    rows = table(results, args)
    load = os.getloadavg()
    if args.json:
        out = {"settings": vars(args), "rows": rows, "elapsed_s": elapsed, "load": load}
        print(json.dumps(out, indent=2))
        return
    print(
        f"{args.rules} rules per class; {args.failing} failing cases, {args.wins} wins; "
        f"failing re-run success {args.base_rate}, wins {args.win_rate}; judged noise "
        f"±{args.noise}; alpha {args.alpha}, max repeats {grid_config(args).max_repeats}, "
        f"batch {grid_config(args).batch}, "
        f"margin {args.margin}; verifier {'on' if args.verifier else 'off'}"
    )
    width = max(len(r[0]) for r in rows)
    print(f"| {'':{width}} | single | paired | target |")
    print(f"|{'-' * (width + 2)}|--------|--------|--------|")
    for name, single, paired_cell, target in rows:
        print(f"| {name:{width}} | {single} | {paired_cell} | {target} |")
    print(f"{elapsed:.1f} s; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
