"""What the engine does when the lifecycle announces work: kick a round (semantics §9.1)."""

from .kick import kick_round


def kick_on_work(sender, *, reason: str, **kwargs) -> None:
    kick_round(reason=reason)
