"""A SIMULATED agent for demos and tests — not a real harness, and it proves nothing about a
real agent. It lets the demo show the strong path (semantics §7) working without any model.

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
"""

import hashlib
import random
import re

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


def _consult(context, scope, state_atoms: list[str], options: list[dict]) -> tuple[dict, dict]:
    """Ask the rule tool at one state; (rule that fired or {}, option it applied or {})."""
    rules = context.rule_tool(scope=scope, query=" ".join(state_atoms))
    rule = _firing_rule(rules, state_atoms)
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
        rule, fix = _consult(
            context, scope, list(fault.get("atoms") or []), spec.get("fixes") or []
        )
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
            rule, hit = _consult(context, scope, list(hazard.get("atoms") or []), [hazard])
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
