"""Builders for the dashboard tests: rules, journal events and rounds in the agreed evidence
shapes (semantics §10), written straight to the tables so a test reads like the situation it sets up."""

import sys
import types
from datetime import timedelta

from lifecycle.journal import write as journal_write
from lifecycle.models import Rule, Trajectory
from replay.models import ValidationRound

from .factories import T0


def make_rule(rule_id: str, **fields) -> Rule:
    fields.setdefault("trigger", f"when {rule_id} fails with non-fast-forward")
    fields.setdefault("directive", "pull latest changes before pushing")
    fields.setdefault("scope", "git")
    fields.setdefault("metric", "task_completion")
    fields.setdefault("signature", ["action:git.push", "error:non_fast_forward"])
    fields.setdefault("author", "repair-bot")
    fields.setdefault("author_kind", "agent")
    fields.setdefault("recorded_at", T0)
    return Rule.objects.create(id=rule_id, content_hash=rule_id, **fields)


def make_rules(n: int, *, prefix: str = "R", **fields) -> list[Rule]:
    return [
        make_rule(f"{prefix}-{i:04d}", recorded_at=T0 + timedelta(minutes=i), **fields)
        for i in range(n)
    ]


def make_trajectory(tid: str, kind: str = "failure", **fields) -> Trajectory:
    fields.setdefault("task", f"task of {tid}")
    fields.setdefault("signature", ["action:git.push", "error:non_fast_forward"])
    return Trajectory.objects.create(
        id=tid, kind=kind, content_hash=tid, imported_at=T0, started_at=T0, **fields
    )


def case_evidence(
    case: str,
    *,
    kind: str = "failing",
    outcome: str = "scored",
    metrics: dict | None = None,
    deciding_metric: str | None = "task_completion",
    retire_on: tuple = ("outcome_correct", "task_completion"),
    attribution: list | None = None,
    candidate_read: bool = True,
    regressed: bool = False,
    improved: bool = False,
) -> dict:
    metrics = metrics or {"task_completion": (0.2, 0.9)}
    return {
        "case": case,
        "kind": kind,
        "replay_session": f"replay-{case}",
        "candidate_read": candidate_read,
        "outcome": outcome,
        "metrics": {
            name: {"original": o, "replayed": r, "delta": round(r - o, 4)}
            for name, (o, r) in metrics.items()
        },
        "deciding_metric": deciding_metric,
        "retire_on": list(retire_on),
        "attribution": attribution or [],
        "regressed": regressed,
        "improved": improved,
        "error": None,
    }


def replay_case(rule: Rule, round_id: int, evidence: dict, *, at=T0):
    return journal_write(
        type="validation_replay_case",
        actor="engine",
        rule_id=rule.id,
        round_id=round_id,
        evidence=evidence,
        at=at,
    )


def verdict(
    rule: Rule | str, round_id: int, outcome: str, *, validator="replay", reason="", **extra
):
    rule_id = rule if isinstance(rule, str) else rule.id
    return journal_write(
        type="validation_verdict",
        actor="engine",
        rule_id=rule_id,
        round_id=round_id,
        at=T0,
        evidence={
            "outcome": outcome,
            "validator": validator,
            "reason": reason,
            "pending_reason": extra.pop("pending_reason", None),
            "round_budget_exhausted": extra.pop("round_budget_exhausted", False),
            "details": extra,
        },
    )


def make_round(queue: list[str], *, status: str = "finished", **fields) -> ValidationRound:
    fields.setdefault("started_at", T0)
    if status == "finished":
        fields.setdefault("finished_at", T0 + timedelta(seconds=3))
        fields.setdefault(
            "summary",
            {
                "decided": 0,
                "pending": 0,
                "promoted": 0,
                "retired": 0,
                "budget_exhausted": 0,
                "elapsed_s": 3.0,
            },
        )
    return ValidationRound.objects.create(queue=queue, status=status, **fields)


F001_EXTRACTION = {
    "expected": {
        "trigger": "when git push fails with non-fast-forward",
        "directive": "pull latest changes before pushing",
    },
    "extracted": {
        "trigger": "when a push is rejected as non-fast-forward",
        "directive": "fetch and rebase before pushing again",
    },
    "source_case": "F-001",
    "trigger": {
        "token_f1": 0.36,
        "semantic": 0.91,
        "diff": [("keep", "when"), ("delete", "git"), ("insert", "a"), ("keep", "push")],
    },
    "directive": {
        "token_f1": 0.2,
        "semantic": 0.84,
        "diff": [("delete", "pull"), ("insert", "fetch"), ("keep", "before"), ("keep", "pushing")],
    },
    "token_f1": 0.28,
    "semantic": 0.88,
    "signature_agreement": 1.0,
    "verdict": "match",
    "why": "same meaning, reworded",
}


def install_extraction_scoring(monkeypatch, *, for_rule=None, rows=()):
    """Stand in for lifecycle.selectors.extraction with the agreed shapes, so the
    dashboard's rendering is tested apart from the embedding model."""
    fake = types.ModuleType("lifecycle.selectors.extraction")
    fake.extraction_for_rule = lambda rule: (for_rule or {}).get(rule.id)
    fake.extraction_rows = lambda: list(rows)
    monkeypatch.setitem(sys.modules, "lifecycle.selectors.extraction", fake)
    return fake


def gate_result(*, lexical_broken=("S-022", "S-023", "NM-044"), signature_broken=()):
    def report(matcher, broken):
        prevented = ["F-001", "F-002", "F-003", "F-004", "F-005"]
        return {
            "matcher": matcher,
            "failures_prevented": len(prevented),
            "successes_broken": len(broken),
            "near_misses": 1 if matcher == "lexical" else 0,
            "precision": len(prevented) / (len(prevented) + len(broken)),
            "recall": 0.625 if matcher == "lexical" else 1.0,
            "verdict": "INCONCLUSIVE" if broken else "PASS",
            "fired": {
                "prevented": prevented,
                "broken": list(broken),
                "near_misses": ["NM-044"] if matcher == "lexical" else [],
            },
            "family_size": 8 if matcher == "lexical" else 5,
        }

    return {
        "lexical": report("lexical", lexical_broken),
        "signature": report("signature", signature_broken),
    }
