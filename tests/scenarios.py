"""The engine's scenario kit: a scripted Python replay backend (semantics §14) whose behaviour
each test sets per case, and builders of the corpus lines and candidates the scenarios use. The
`scripted_engine` fixture (tests/conftest.py) wires the backend into the settings."""

from datetime import timedelta

from lifecycle.models import JournalEvent, Rule
from lifecycle.services.corpus import import_corpus
from tests.builders import T0, candidate, jsonl, trajectory

BACKEND = "tests.scenarios:scripted"
SIGNATURE = ["tool:git", "action:git.push", "error:non_fast_forward"]
ORIGINAL = {"outcome_correct": 0.0, "task_completion": 0.3, "coherence": 0.8, "plan_quality": 0.5}
WIN = {"outcome_correct": 1.0, "task_completion": 0.9, "coherence": 0.85}

# case id -> behaviour(case, context) -> session; calls are logged per case id.
SCRIPT: dict = {}
CALLS: list[str] = []


def scripted(case, context):
    CALLS.append(case.id)
    return SCRIPT.get(case.id, read_and_return())(case, context)


def session(metrics: dict) -> dict:
    # An earlier trace that would promote anything: only the last one may be scored (§7.4).
    return {"traces": [{"metrics": {"task_completion": 1.0}}, {"metrics": metrics}]}


def read_and_return(**changes):
    def behaviour(case, context):
        context.mark_execution_started()
        context.rule_tool(scope=case.rule["scope"])
        return session({**case.trajectory["metrics"], **changes})

    return behaviour


def corpus(*lines):
    import_corpus(jsonl(*lines))


def failing(tid, minutes=0, **overrides):
    return trajectory(
        tid,
        "failure",
        signature=SIGNATURE,
        notices=["breach:task_completion"],
        metrics=dict(ORIGINAL),
        started_at=(T0 + timedelta(minutes=minutes)).isoformat(),
        replay_input={"task": "push", "scope": "git"},
        **overrides,
    )


def win(tid, minutes=0, scope="git", **overrides):
    return trajectory(
        tid,
        "success",
        signature=["tool:git", "action:git.status"],
        metrics=dict(WIN),
        started_at=(T0 + timedelta(minutes=minutes)).isoformat(),
        replay_input={"task": "status", "scope": scope},
        **overrides,
    )


def rule(rule_id="R-1", **fields):
    fields.setdefault("signature", SIGNATURE)
    return candidate(rule_id, **fields)


def events(rule_id=None, type_=None):
    qs = JournalEvent.objects.order_by("id")
    if rule_id:
        qs = qs.filter(rule_id=rule_id)
    if type_:
        qs = qs.filter(type=type_)
    return list(qs)


def case_events(rule_id="R-1"):
    return {e.evidence["case"]: e.evidence for e in events(rule_id, "validation_replay_case")}


def state_of(rule_id="R-1"):
    return Rule.objects.get(pk=rule_id)
