"""Kicking a round (semantics §9.1): each report and each new candidate asks for one.

A kick never raises: a broker that is down is logged and journaled, and the request that
kicked goes on — the report or candidate is already stored and the periodic schedule picks the
work up. With eager Celery (no broker) the round runs inline; a kick from inside a round is a
no-op because the round lock is taken.
"""

import logging

logger = logging.getLogger(__name__)


def kick_on_work(sender, *, reason: str, **kwargs) -> None:
    """What the engine does when the lifecycle announces work (`lifecycle.signals.work_arrived`,
    connected in replay/apps.py): kick a round."""
    kick_round(reason=reason)


def kick_round(*, reason: str) -> dict:
    """Enqueue a round. Returns {"queued": bool, "detail": str}."""
    from .tasks import round_run_task

    try:
        round_run_task.delay(kicked_by=reason)
    except Exception as exc:
        logger.warning("could not kick a validation round (%s): %s", reason, exc)
        _journal_kick_failure(reason, exc)
        return {"queued": False, "detail": f"broker unavailable: {exc}"}
    return {"queued": True, "detail": "round queued"}


def _journal_kick_failure(reason: str, exc: Exception) -> None:
    from lifecycle import journal
    from lifecycle.journal import EventType

    try:
        journal.write(
            type=EventType.VALIDATION_KICK_FAILED,
            actor="engine",
            evidence={"kicked_by": reason, "error": f"{type(exc).__name__}: {exc}"},
        )
    except Exception:
        logger.exception("could not journal a failed kick either")
