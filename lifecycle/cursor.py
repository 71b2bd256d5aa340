"""The one keyset cursor of the project, shared by the API and the dashboard's pages.

A cursor is opaque to its reader: the values of the sort key of the last row shown (a time and an
id, or a round number), as a JSON list in unpadded URL-safe base64. Times are written in UTC ISO
form, so the same position always encodes to the same text. A page never counts and never
offsets: the next page is an index range scan from the cursor, whatever the depth.
"""

import base64
import binascii
import json
from datetime import UTC, datetime

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

# A cursor is a short position; anything longer is not one of ours.
MAX_CURSOR = 200


class InvalidCursor(ValueError):
    """Not a cursor this project made (the caller should follow the page links)."""


def encode_cursor(*values: datetime | int | str) -> str:
    plain = [v.astimezone(UTC).isoformat() if isinstance(v, datetime) else v for v in values]
    text = json.dumps(plain, ensure_ascii=False, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _typed(value, kind: type):
    if kind is datetime:
        try:
            moment = parse_datetime(value) if isinstance(value, str) else None
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise InvalidCursor("not a position")
        return moment
    # bool is an int to Python, never to a cursor.
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InvalidCursor("not a position")
    return value


def decode_cursor(raw: str, kinds: tuple[type, ...]) -> tuple:
    """The values of a cursor, checked against `kinds` (e.g. (datetime, int)); raises
    InvalidCursor for anything else."""
    if not raw or len(raw) > MAX_CURSOR:
        raise InvalidCursor("not a position")
    try:
        values = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        raise InvalidCursor("not a position") from None
    if not isinstance(values, list) or len(values) != len(kinds):
        raise InvalidCursor("not a position")
    return tuple(_typed(value, kind) for value, kind in zip(values, kinds, strict=True))


def after(
    rows: QuerySet, *, fields: tuple[str, str], position: tuple, descending: bool
) -> QuerySet:
    """`rows` strictly past `position` on the two-column key `fields`, in the given direction.
    The redundant plain bound on the first column is what lets PostgreSQL start an index range
    scan there: it does not derive one from the OR alone."""
    first, second = fields
    value, tie = position
    op = "lt" if descending else "gt"
    return rows.filter(
        Q(**{f"{first}__{op}": value}) | Q(**{first: value, f"{second}__{op}": tie}),
        **{f"{first}__{op}e": value},
    )


def page(rows: list, limit: int, key) -> tuple[list, str | None]:
    """rows holds up to limit + 1 items: the extra one only says there is a next page, whose
    cursor is `key(last row shown)`."""
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, encode_cursor(*key(rows[-1]))
