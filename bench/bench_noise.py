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
        agent = StochasticAgent(
            base_rate=args.base_rate,
            effect=effect,
            win_rate=args.win_rate,
            harm=harm,
            noise=args.noise,
            seed=args.seed,
        )
        rule_id = f"{cls.replace(' ', '-')}-{i}"
        cases = tuple((f"{rule_id}/F{j}", "failing") for j in range(args.failing)) + tuple(
            (f"{rule_id}/W{j}", "win") for j in range(args.wins)
        )
        out.append(Rule(rule_id, agent, cases))
    return out


def measure(args) -> dict:
    reg = registry()
    margins = engine.Margins(promote=args.margin, regress=args.margin)
    # The engine's own defaults, except what the command line sets.
    config = paired.PairedConfig(
        alpha=args.alpha,
        promote_margin=args.margin,
        regress_margin=args.margin,
        max_repeats=args.max_repeats,
        **({"batch": args.batch} if args.batch else {}),
        **({"retire_spending": args.retire_spending} if args.retire_spending else {}),
        **({"futility": args.futility} if args.futility is not None else {}),
    )
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
    parser.add_argument("--max-repeats", type=int, default=8)
    parser.add_argument("--batch", type=int, help="replays per case and arm between looks")
    parser.add_argument("--retire-spending", choices=paired.SPENDINGS, help="for regressions")
    parser.add_argument("--margin", type=float, default=0.05)
    parser.add_argument(
        "--futility",
        action=argparse.BooleanOptionalAction,
        help="retire at an early look whose effect estimate is below zero (non-binding)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-verifier", dest="verifier", action="store_false")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
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
        f"±{args.noise}; alpha {args.alpha}, max repeats {args.max_repeats}, "
        f"batch {args.batch or paired.PairedConfig().batch}, "
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
