"""The pure transition table of semantics §3: who may do what, from which state."""

import pytest

from lifecycle.states import (
    TRANSITIONS,
    Action,
    Actor,
    ActorKind,
    NotAllowed,
    WrongState,
    check_allowed,
    next_state,
)

NON_ENGINE = [
    Actor.agent("bot"),
    Actor.extractor(),
    Actor.pack("pack@1"),
    Actor.reviewer("rita"),
]


@pytest.mark.parametrize("actor", NON_ENGINE, ids=lambda a: a.kind)
@pytest.mark.parametrize("action", [Action.PROMOTE, Action.RETIRE])
def test_only_the_engine_decides_on_evidence(action, actor):
    # semantics §3: no agent, extractor, pack or reviewer can promote, not even their own rule.
    with pytest.raises(NotAllowed):
        check_allowed(action, actor)
    check_allowed(action, Actor.engine())


def test_no_actor_kind_but_the_engine_can_promote():
    # semantics §3, spelled out over the whole table so a new actor kind cannot slip in.
    _, _, allowed = TRANSITIONS[Action.PROMOTE]
    assert allowed == frozenset({ActorKind.ENGINE})


@pytest.mark.parametrize("actor", [Actor.agent("bot"), Actor.engine(), Actor.extractor()])
def test_only_a_reviewer_retires_by_hand_or_requeues(actor):
    for action in (Action.RETIRE_BY_REVIEWER, Action.REQUEUE):
        with pytest.raises(NotAllowed):
            check_allowed(action, actor)


@pytest.mark.parametrize(
    ("action", "current", "expected"),
    [
        (Action.PROMOTE, "candidate", "active"),
        (Action.RETIRE, "candidate", "retired"),
        (Action.RETIRE_BY_REVIEWER, "candidate", "retired"),
        (Action.RETIRE_BY_REVIEWER, "active", "retired"),
        (Action.REQUEUE, "retired", "retired"),
    ],
)
def test_allowed_transitions(action, current, expected):
    assert next_state(action, current) == expected


@pytest.mark.parametrize(
    ("action", "current"),
    [
        (Action.PROMOTE, "active"),
        (Action.PROMOTE, "retired"),
        (Action.RETIRE, "active"),
        (Action.RETIRE, "retired"),
        (Action.RETIRE_BY_REVIEWER, "retired"),
        (Action.REQUEUE, "candidate"),
        (Action.REQUEUE, "active"),
    ],
)
def test_refused_transitions(action, current):
    with pytest.raises(WrongState):
        next_state(action, current)
