"""Plain builders for test data: a corpus line, a candidate, a report."""

import json
from datetime import UTC, datetime, timedelta

from lifecycle.services.rules import rule_record_candidate
from lifecycle.states import Actor

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def trajectory(tid: str, kind: str = "failure", **overrides) -> dict:
    line = {
        "id": tid,
        "kind": kind,
        "task": f"task of {tid}",
        "steps": [{"tool": "git", "input": "git push", "output": "", "error": None}],
        "outcome": {"status": "failed" if kind == "failure" else "ok"},
        "metrics": {"task_completion": 0.2 if kind == "failure" else 0.9, "coherence": 0.8},
        "signature": ["tool:git", "action:git.push"],
        "started_at": (
            T0 + timedelta(minutes=int("".join(c for c in tid if c.isdigit()) or 0))
        ).isoformat(),
    }
    line.update(overrides)
    return line


def jsonl(*objects) -> list[str]:
    return [json.dumps(o) + "\n" for o in objects]


def candidate(
    rule_id: str | None = None,
    *,
    actor: Actor | None = None,
    trigger: str = "when git push fails with non-fast-forward",
    directive: str = "pull latest changes before pushing",
    **fields,
):
    fields.setdefault("scope", "git")
    fields.setdefault("metric", "task_completion")
    fields.setdefault("signature", ["action:git.push", "error:non_fast_forward"])
    rule, _ = rule_record_candidate(
        actor=actor or Actor.agent("repair-bot"),
        trigger=trigger,
        directive=directive,
        rule_id=rule_id,
        **fields,
    )
    return rule


def report(session_id: str, at: datetime, notices=(), metrics=None, rules_read=()) -> dict:
    return {
        "session_id": session_id,
        "at": at.isoformat(),
        "notices": list(notices),
        "metrics": metrics or {"task_completion": 0.8},
        "rules_read": list(rules_read),
    }
