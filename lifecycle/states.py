"""The rule state machine of semantics §3 as a pure table: who may do what, from which state.

Nothing here touches the database; `lifecycle.services` consults it under a row lock.
"""

from dataclasses import dataclass
from enum import StrEnum


class ActorKind(StrEnum):
    ENGINE = "engine"
    AGENT = "agent"
    EXTRACTOR = "extractor"
    PACK = "pack"
    REVIEWER = "reviewer"


@dataclass(frozen=True)
class Actor:
    """Who asks for a change. `name` is what the journal records as the actor."""

    kind: ActorKind
    name: str

    @classmethod
    def engine(cls) -> "Actor":
        return cls(ActorKind.ENGINE, "engine")

    @classmethod
    def extractor(cls, name: str = "extractor") -> "Actor":
        return cls(ActorKind.EXTRACTOR, name)

    @classmethod
    def agent(cls, name: str) -> "Actor":
        return cls(ActorKind.AGENT, name)

    @classmethod
    def reviewer(cls, name: str) -> "Actor":
        return cls(ActorKind.REVIEWER, name)

    @classmethod
    def pack(cls, name: str) -> "Actor":
        return cls(ActorKind.PACK, name)


class Action(StrEnum):
    RECORD = "record_candidate"
    PROMOTE = "promote"
    RETIRE = "retire"
    RETIRE_BY_REVIEWER = "retire_by_reviewer"
    REQUEUE = "requeue"


# action -> (states it may start from, state it ends in, actor kinds allowed).
# PROMOTE and RETIRE are the engine's alone: no agent, extractor, pack or reviewer can promote,
# not its own rule and not another's (semantics §3).
TRANSITIONS: dict[Action, tuple[frozenset[str], str, frozenset[ActorKind]]] = {
    Action.RECORD: (
        frozenset({""}),
        "candidate",
        frozenset({ActorKind.AGENT, ActorKind.EXTRACTOR, ActorKind.PACK, ActorKind.REVIEWER}),
    ),
    Action.PROMOTE: (frozenset({"candidate"}), "active", frozenset({ActorKind.ENGINE})),
    Action.RETIRE: (frozenset({"candidate"}), "retired", frozenset({ActorKind.ENGINE})),
    Action.RETIRE_BY_REVIEWER: (
        frozenset({"candidate", "active"}),
        "retired",
        frozenset({ActorKind.REVIEWER}),
    ),
    # Re-queue leaves the retired rule as it is and records a new candidate version of it.
    Action.REQUEUE: (frozenset({"retired"}), "retired", frozenset({ActorKind.REVIEWER})),
}


class NotAllowed(Exception):
    """The actor may not take this action at all (HTTP 403)."""


class WrongState(Exception):
    """The rule is not in a state this action starts from (HTTP 409)."""


def check_allowed(action: Action, actor: Actor) -> None:
    _, _, allowed = TRANSITIONS[action]
    if actor.kind not in allowed:
        raise NotAllowed(f"{actor.kind} {actor.name!r} may not {action.value.replace('_', ' ')}")


def next_state(action: Action, current: str) -> str:
    """The state after `action`, or WrongState if it cannot start from `current`."""
    sources, target, _ = TRANSITIONS[action]
    if current not in sources:
        raise WrongState(f"cannot {action.value.replace('_', ' ')} a rule that is {current}")
    return target
