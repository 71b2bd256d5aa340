"""Kicking a round (semantics §9.1): each report and each new candidate asks for one.

A kick never raises: a broker that is down is logged and journaled, and the request that
kicked goes on — the report or candidate is already stored and the periodic schedule picks the
work up. With eager Celery (no broker) the round runs inline; a kick from inside a round is a
no-op because the round lock is taken.
"""

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)

_deferred = threading.local()


def kick_round(*, reason: str) -> dict:
    """Enqueue a round. Returns {"queued": bool, "detail": str}."""
    depth = getattr(_deferred, "depth", 0)
    if depth:
        _deferred.reasons.append(reason)
        return {"queued": False, "detail": "deferred until the bulk load ends"}
    from .tasks import round_run_task

    try:
        round_run_task.delay(kicked_by=reason)
    except Exception as exc:
        logger.warning("could not kick a validation round (%s): %s", reason, exc)
        _journal_kick_failure(reason, exc)
        return {"queued": False, "detail": f"broker unavailable: {exc}"}
    return {"queued": True, "detail": "round queued"}


def _journal_kick_failure(reason: str, exc: Exception) -> None:
    from lifecycle.services import journal_write

    try:
        journal_write(
            type="validation_kick_failed",
            actor="engine",
            evidence={"kicked_by": reason, "error": f"{type(exc).__name__}: {exc}"},
        )
    except Exception:
        logger.exception("could not journal a failed kick either")


@contextmanager
def kicks_deferred() -> Iterator[None]:
    """Suppress per-item kicks during a bulk load; one kick when the outermost block ends."""
    if not getattr(_deferred, "depth", 0):
        _deferred.reasons = []
    _deferred.depth = getattr(_deferred, "depth", 0) + 1
    try:
        yield
    finally:
        _deferred.depth -= 1
        if not _deferred.depth and _deferred.reasons:
            reasons = sorted(set(_deferred.reasons))
            _deferred.reasons = []
            kick_round(reason="bulk:" + ",".join(reasons))
