"""Celery tasks (semantics §9.1, §18): thin — each takes ids and makes one call."""

from celery import shared_task


@shared_task(name="replay.tasks.round_run_task", ignore_result=True)
def round_run_task(*, kicked_by: str = "") -> int | None:
    from .kick import kick_after_holder
    from .rounds import round_has_work, round_run

    # Every report and candidate batch kicks a round, and beat kicks one every minute: with no
    # candidate there is nothing to decide, and a round would only journal that it started and
    # finished (two events per report under load). An idle kick writes nothing.
    if not round_has_work():
        return None
    vround = round_run(kicked_by=kicked_by)
    if vround is None:  # another round holds the lock, or held it until it died
        kick_after_holder()
    return vround.pk if vround else None


# Acknowledged when it ends, and handed back to the broker if its worker dies: a delivery
# of a batch whose replays are done, or whose leases another attempt holds, claims nothing
# and ends; one whose worker died mid-batch runs only the replays not done
# (docs/semantics.md#s18-lease), so a redelivery is harmless. Its claim and its store each
# try once more on a fresh connection, so it skips the health check between tasks (a round
# trip before every task; cauterweb/celery.py).
@shared_task(
    name="replay.tasks.replay_task",
    ignore_result=True,
    acks_late=True,
    reject_on_worker_lost=True,
    reconnects_itself=True,
)
def replay_task(*, session_ids: list[str]) -> int:
    """A batch of a round's replays, on whichever worker is free; their results go to their
    rows. Returns how many it stored."""
    from .dispatch import run_batch

    return run_batch(session_ids)
