"""Reads of validation rounds for the API (semantics §9): its rounds list, newest first, paged
with the project's one cursor. The dashboard's round pages read through replay/selectors.py."""

from lifecycle import cursor

from .models import ValidationRound

ROUND_FIELDS = (
    "id",
    "status",
    "started_at",
    "finished_at",
    "queue",
    "budget_s",
    "replay_wired",
    "summary",
    "error",
    "kicked_by",
)


def rounds_page(*, position: str | None, limit: int) -> tuple[list[dict], str | None]:
    """(rounds as plain dicts, next cursor), newest first. Raises InvalidCursor."""
    rounds = ValidationRound.objects.order_by("-id")
    if position:
        (before,) = cursor.decode_cursor(position, (int,))
        rounds = rounds.filter(id__lt=before)
    rows, next_cursor = cursor.page(list(rounds[: limit + 1]), limit, lambda r: (r.id,))
    return [{f: getattr(r, f) for f in ROUND_FIELDS} for r in rows], next_cursor
