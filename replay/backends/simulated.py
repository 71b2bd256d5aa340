"""A SIMULATED agent for demos, tests and benches — not a real harness, and it proves nothing
about a real agent. It lets the demo show the strong path (semantics §7, §17) working without
any model.

Configure it with `CAUTERWEB_REPLAY_BACKEND=replay.backends.simulated:replay`. To validate for
real, point that setting at your own harness instead (docs/engine.md).

It reads each trajectory's `replay_input`:

    {"task": str, "scope": str | null,
     "fault": {"step": int, "atoms": [...]} | null,
     "fixes": [{"directive_terms": [...], "effect": "rescue" | "harm", "metrics": {...}}],
     "hazards": [{"atoms": [...], "directive_terms": [...], "metrics": {...}}]}

It walks the recorded steps. At the fault state (failing cases) or at each hazard state (wins)
it asks the rule tool for rules, as a real agent would, with the state's atoms as the query;
it applies the first returned rule whose signature matches the state (the same
`rule_matches` as everywhere else; the candidate under test before active rules), and takes the first fix or hazard whose `directive_terms`
all appear in that rule's directive. Without one the session scores as recorded.

Seeded noise (seed: case id + rule id, so every run is the same) of about ±0.15 is added to the
tier 3 metrics and, on failing cases, to `coherence`, so the demo shows attribution refusing
to blame a rule for noise (§7.7). Wins keep their coherence exact: on a protected win any dip
counts as harm (§7.7), and a simulator must not invent harm.

The arm (semantics §17.1): in the control arm the candidate under test never fires, even if
the rule tool returned it — control is the session without the rule. The noise does not depend
on the arm or the repeat, so this default agent is deterministic: every repeat of a case in an
arm is the same, and treatment and control differ by exactly what the rule did.

`StochasticAgent` is the other mode, for tests and `bench/bench_noise.py`: a flaky agent whose
failing tasks succeed `base_rate` of the time on a re-run with no rule at all, whose wins
succeed `win_rate` of the time, and whose judged metrics move by ±`noise` between runs. A
candidate read in the treatment arm adds `effect` to the failing tasks' success rate and takes
the fraction `harm` of the wins' success away. Each replay draws from its own generator seeded
by (seed, case, rule, arm, repeat), so results do not depend on the order or concurrency of
the replays. Configure it with `CAUTERWEB_REPLAY_BACKEND=replay.backends.simulated:flaky`
(the defaults below: a rule that does nothing), or build your own instance.
"""

import hashlib
import random
import re
from dataclasses import dataclass

from django.conf import settings

from lifecycle.matching import rule_matches

NOISE = 0.15


def _noisy_metrics(kind: str) -> frozenset[str]:
    tier3 = {name for name, tier, *_ in settings.CAUTERWEB_DEFAULT_METRICS if tier == 3}
    return frozenset(tier3 | ({"coherence"} if kind == "failing" else set()))


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9_.\-]+", text.lower()))


def _terms_in(terms: list[str], directive: str) -> bool:
    words = _words(directive)
    return all(term.lower() in words or term.lower() in directive.lower() for term in terms)


def _firing_rule(rules: list[dict], state_atoms: list[str]) -> dict | None:
    # The provisional rule first: it is the one whose effect is measured, and it must not get
    # the credit (or the blame) for an active rule's directive.
    provisional = [r for r in rules if r.get("state") == "candidate"]
    for rule in provisional + [r for r in rules if r.get("state") != "candidate"]:
        metric = rule.get("metric") or ""
        if rule_matches(
            rule_signature=list(rule.get("signature") or []),
            rule_metric=metric,
            trajectory_atoms=state_atoms,
            family=frozenset({metric}) if metric else frozenset(),
        ):
            return rule
    return None


def _in_force(context, rules: list[dict], candidate_id: str) -> list[dict]:
    """The rules that can fire: in the control arm the candidate is not one of them."""
    if context.arm == "control":
        return [r for r in rules if r["id"] != candidate_id]
    return rules


def _consult(
    context, scope, state_atoms: list[str], options: list[dict], candidate_id: str
) -> tuple[dict, dict]:
    """Ask the rule tool at one state; (rule that fired or {}, option it applied or {})."""
    rules = context.rule_tool(scope=scope, query=" ".join(state_atoms))
    rule = _firing_rule(_in_force(context, rules, candidate_id), state_atoms)
    if rule is None:
        return {}, {}
    option = next(
        (o for o in options if _terms_in(o.get("directive_terms") or [], rule["directive"])), {}
    )
    return rule, option


def replay(case, context) -> dict:
    spec = case.replay_input if isinstance(case.replay_input, dict) else {}
    scope = spec.get("scope")
    original = {k: float(v) for k, v in (case.trajectory.get("metrics") or {}).items()}
    context.mark_execution_started()

    steps = case.trajectory.get("steps") or []
    applied: list[dict] = []
    metrics = dict(original)
    if case.kind == "failing" and spec.get("fault"):
        fault = spec["fault"]
        atoms, fixes = list(fault.get("atoms") or []), spec.get("fixes") or []
        rule, fix = _consult(context, scope, atoms, fixes, case.rule["id"])
        if fix:
            metrics.update(fix.get("metrics") or {})
            applied.append(
                {
                    "at_step": fault.get("step"),
                    "rule": rule["id"],
                    "effect": fix.get("effect", "rescue"),
                }
            )
    elif case.kind == "win":
        for hazard in spec.get("hazards") or []:
            atoms = list(hazard.get("atoms") or [])
            rule, hit = _consult(context, scope, atoms, [hazard], case.rule["id"])
            if hit:
                metrics.update(hit.get("metrics") or {})
                applied.append({"rule": rule["id"], "effect": "harm"})

    seed = hashlib.sha256(f"{case.id}|{case.rule['id']}".encode()).digest()
    rng = random.Random(int.from_bytes(seed[:8], "big"))
    for name in sorted(_noisy_metrics(case.kind) & set(metrics)):
        metrics[name] = min(1.0, max(0.0, metrics[name] + rng.uniform(-NOISE, NOISE)))
    metrics = {k: round(v, 3) for k, v in metrics.items()}
    return {
        "simulated": True,
        "traces": [
            # The pass as recorded, then the pass with the rule in force: the last one is scored.
            {"metrics": original, "steps": len(steps)},
            {"metrics": metrics, "steps": len(steps), "applied": applied},
        ],
    }


# --- the stochastic mode ----------------------------------------------------------------------

# Metrics that follow the task's success; every other metric is a judged score with noise.
OUTCOME_METRIC = "outcome_correct"
COMPLETION_METRIC = "task_completion"
# Where task_completion sits for a task that succeeded / failed, before the judge's noise.
COMPLETION_LEVEL = {True: 0.85, False: 0.3}
# What a replay reports when the recorded case carries no tier 0–2 metric at all.
DEFAULT_METRICS = {
    OUTCOME_METRIC: 0.0,
    COMPLETION_METRIC: 0.3,
    "coherence": 0.7,
    "tool_correctness": 0.8,
    "argument_correctness": 0.8,
}


@dataclass(frozen=True)
class StochasticAgent:
    """A flaky agent (see the module docstring): callable as a replay backend."""

    base_rate: float = 0.5
    effect: float = 0.0
    win_rate: float = 1.0
    harm: float = 0.0
    noise: float = NOISE
    seed: int = 0

    def success_rate(self, *, kind: str, in_force: bool) -> float:
        if kind == "win":
            rate = self.win_rate * (1 - self.harm) if in_force else self.win_rate
        else:
            rate = self.base_rate + self.effect if in_force else self.base_rate
        return min(1.0, max(0.0, rate))

    def __call__(self, case, context) -> dict:
        context.mark_execution_started()
        rules = context.rule_tool(scope=case.rule.get("scope"), query=None)
        in_force = any(
            r["id"] == case.rule["id"] for r in _in_force(context, rules, case.rule["id"])
        )
        rng = random.Random(self._seed(case, context))
        success = rng.random() < self.success_rate(kind=case.kind, in_force=in_force)
        recorded = _replay_metrics(case.trajectory.get("metrics") or {})
        metrics = self.metrics(recorded or DEFAULT_METRICS, success=success, rng=rng)
        return {"simulated": True, "traces": [{"metrics": metrics, "success": success}]}

    def metrics(self, recorded: dict, *, success: bool, rng: random.Random) -> dict:
        """One pass's metrics: the outcome is the success itself, task completion follows it,
        and every judged score moves by up to ±noise around what was recorded."""
        out = {}
        for name in sorted(recorded):
            if name == OUTCOME_METRIC:
                out[name] = 1.0 if success else 0.0
                continue
            centre = COMPLETION_LEVEL[success] if name == COMPLETION_METRIC else recorded[name]
            value = centre + rng.uniform(-self.noise, self.noise)
            out[name] = round(min(1.0, max(0.0, value)), 3)
        return out

    def _seed(self, case, context) -> int:
        key = f"{self.seed}|{case.id}|{case.rule['id']}|{context.arm}|{context.repeat}"
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def _replay_metrics(metrics: dict) -> dict:
    tiers = {name: tier for name, tier, *_ in settings.CAUTERWEB_DEFAULT_METRICS}
    return {k: float(v) for k, v in metrics.items() if tiers.get(k, 3) <= 2}


# A flaky agent and a rule that does nothing: what the paired design must not promote.
flaky = StochasticAgent()
