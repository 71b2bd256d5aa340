"""Kicking a round (semantics §9.1): each report and each new candidate asks for one.

A kick never raises: a broker that is down is logged and journaled, and the request that
kicked goes on — the report or candidate is already stored and the periodic schedule picks the
work up. With eager Celery (no broker) the round runs inline; a kick from inside a round is a
no-op because the round lock is taken.
"""

import logging
import threading
import time

from . import engine

logger = logging.getLogger(__name__)

# After a kick failed, this process does not try the broker again for this long: a hung broker
# costs one request its 2 s socket timeout, not every request (docs/deploy.md). The kicks
# skipped meanwhile are journaled as failed all the same; beat's next kick catches up.
BROKER_BACKOFF_S = 5.0
_down = {"until": 0.0, "error": ""}
_down_lock = threading.Lock()

# At most one follow-up kick is waiting at any moment (docs/semantics.md#s9-1-lease).
FOLLOW_UP_KEY = "cauterweb:round:follow-up"


def kick_on_work(sender, *, reason: str, **kwargs) -> None:
    """What the engine does when the lifecycle announces work (`lifecycle.signals.work_arrived`,
    connected in replay/apps.py): kick a round."""
    kick_round(reason=reason)


def kick_round(*, reason: str) -> dict:
    """Enqueue a round. Returns {"queued": bool, "detail": str}."""
    from lifecycle.follow_ups import celery_app

    # Only a real broker backs off (an eager kick runs the round in this process).
    broker = not celery_app().conf.task_always_eager
    with _down_lock:
        until, error = _down["until"], _down["error"]
    if broker and time.monotonic() < until:
        exc = BrokerBackingOff(f"not tried: a kick failed {BROKER_BACKOFF_S:g} s ago ({error})")
        _journal_kick_failure(reason, exc)
        return {"queued": False, "detail": f"broker unavailable: {exc}"}
    try:
        _round_task().delay(kicked_by=reason)
    except Exception as exc:
        logger.warning("could not kick a validation round (%s): %s", reason, exc)
        if broker:
            with _down_lock:
                _down["until"] = time.monotonic() + BROKER_BACKOFF_S
                _down["error"] = f"{type(exc).__name__}: {exc}"[:200]
        _journal_kick_failure(reason, exc)
        return {"queued": False, "detail": f"broker unavailable: {exc}"}
    return {"queued": True, "detail": "round queued"}


class BrokerBackingOff(Exception):
    """A kick not sent: the broker failed a moment ago in this process."""


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


def kick_after_holder() -> bool:
    """A kick that found the round lock held: kick again in half a lock period, so a round
    starts within seconds of its holder's death (its lock expires unrenewed) and work
    recorded during a round is not left for the periodic schedule. Only with the lock in
    Redis, whose key keeps the kicks of a busy intake from multiplying; a healthy holder
    costs one no-op task per period. Never raises; True if a follow-up was queued."""
    from django.conf import settings

    from lifecycle.follow_ups import celery_app

    if celery_app().conf.task_always_eager or not settings.CAUTERWEB_LOCK_URL.startswith("redis"):
        return False
    return _follow_up("follow-up")


def kick_after_round(vround, *, took_over: bool) -> bool:
    """A round that ended with work a further round can do now (`engine.follow_up`) queues
    one, on commit; the round being single-flight, that is one kick per round at most, and
    none while another follow-up waits. Never raises; True if one was asked for."""
    from django.db import transaction

    from lifecycle.follow_ups import celery_app

    # Eager (the embedded default), a kick would run the round inside this one's caller;
    # there `validate --until-settled` and the next request's kick go on.
    if celery_app().conf.task_always_eager:
        return False
    try:
        why = engine.follow_up(
            took_over=took_over, arrived=_arrived(vround.queue), deferred=_deferred(vround)
        )
    except Exception:
        logger.exception("could not tell whether round %s needs a follow-up", vround.pk)
        return False
    if why is None:
        return False
    transaction.on_commit(lambda: _follow_up(f"follow-up: {why}"))
    return True


def _arrived(queue: list[str]) -> int:
    """Candidates not in the round's queue: recorded while it ran."""
    from lifecycle.models import Rule, RuleState

    queued = set(queue)
    live = Rule.objects.filter(state=RuleState.CANDIDATE).values_list("pk", flat=True)
    return sum(pk not in queued for pk in live.iterator())


def _deferred(vround) -> int:
    """After a round out of budget: candidates a replay could still decide."""
    from django.conf import settings

    from lifecycle.models import Rule, RuleState

    if not (vround.replay_wired and vround.summary.get("budget_exhausted")):
        return 0
    return Rule.objects.filter(
        state=RuleState.CANDIDATE, replay_attempts__lt=settings.CAUTERWEB_MAX_REPLAY_ATTEMPTS
    ).count()


def _follow_up(kicked_by: str) -> bool:
    """One round in half a lock period. With the lock in Redis at most one such kick waits at
    a time (a key that lives a little less than the delay)."""
    from django.conf import settings

    from . import lock

    url = settings.CAUTERWEB_LOCK_URL
    delay = lock.lock_ttl_s() / 2
    try:
        waiting = url.startswith("redis") and not lock.redis_client(url).set(
            FOLLOW_UP_KEY, 1, nx=True, px=int(delay * 900)
        )
        if waiting:
            return False
        _round_task().apply_async(kwargs={"kicked_by": kicked_by[:64]}, countdown=delay)
    except Exception as exc:
        logger.warning("could not queue a follow-up round (%s); beat will kick one", exc)
        return False
    return True


def _round_task():
    """The round's task by name (the app registers it, lifecycle/follow_ups.py): replay/tasks.py
    calls this module, so this module does not import it."""
    from lifecycle.follow_ups import celery_app

    return celery_app().tasks["replay.tasks.round_run_task"]
