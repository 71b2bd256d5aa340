"""What a reviewer asks of the engine, from the API or the dashboard: a round now
(semantics §9.1). One function, so a kick is journaled with who asked whichever way it came."""

from lifecycle import journal
from lifecycle.journal import EventType
from lifecycle.states import Actor

from .kick import kick_round


def round_kick(*, actor: Actor, via: str) -> dict:
    """Kick a round and journal who asked, and `via` what (api, dashboard). A kick changes no rule and never raises (a broker
    that is down is in the answer): {"queued": bool, "detail": str}."""
    kicked = kick_round(reason=f"{via}:{actor.name}")
    journal.write(type=EventType.ROUND_KICKED, actor=actor, evidence=kicked)
    return kicked
