"""The round as a Celery task (semantics §9.1): thin — one call into the engine."""

from celery import shared_task


@shared_task(name="replay.tasks.round_run_task", ignore_result=True)
def round_run_task(*, kicked_by: str = "") -> int | None:
    from .services import round_run

    vround = round_run(kicked_by=kicked_by)
    return vround.pk if vround else None
