"""Times from outside, parsed as ISO 8601 and kept inside a range every layer can represent.

Python's datetime reaches from year 1 to 9999 in local time only: `0001-01-01T00:00:00+01:00`
parses, then fails when converted to UTC (it is 1 BC there), and `9999-12-31T23:00:00-05:00`
is year 10000 in UTC. PostgreSQL stores both and hands back values Python cannot build, so one
such report made every later read of its session fail. Any time we store is therefore checked
against a sane range, after normalising to UTC, before it reaches the database.

No settings and no database: a plain function over a value.
"""

from datetime import UTC, datetime

from django.utils.dateparse import parse_datetime

# Agents and traces are younger than the Unix epoch; nothing is scheduled past 2200.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
# An ISO 8601 date-time with nanoseconds and an offset is 35 characters; anything much longer is
# not one, and is refused before a parser spends time on it.
MAX_TIME_TEXT = 64


class TimeOutOfRange(ValueError):
    """A well-formed time outside [EARLIEST, LATEST] (UTC)."""


def check_time_range(when: datetime) -> datetime:
    """`when` in UTC (a naive value is taken as UTC), or TimeOutOfRange."""
    if when.tzinfo is None or when.utcoffset() is None:
        when = when.replace(tzinfo=UTC)
    # Converting year 1 or year 9999 with an offset overflows: decide on the year first, with a
    # day's margin either side, and convert only what is near the range.
    if not EARLIEST.year - 1 <= when.year <= LATEST.year:
        raise _out_of_range(when)
    utc = when.astimezone(UTC)
    if not EARLIEST <= utc <= LATEST:
        raise _out_of_range(when)
    return utc


def parse_bounded_time(value: object) -> datetime:
    """An ISO 8601 string → an aware UTC datetime inside the range; ValueError with a message
    that says what was wrong (not a string, not a date-time, or out of range)."""
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 string")
    text = value.strip()
    if len(text) > MAX_TIME_TEXT:
        raise ValueError(f"is not an ISO 8601 date-time (longer than {MAX_TIME_TEXT} characters)")
    try:
        parsed = parse_datetime(text)
    except ValueError as exc:  # well-formed but impossible: 30 February, a 25-hour offset
        raise ValueError(f"{text!r} is not a valid date-time: {exc}") from None
    if parsed is None:
        raise ValueError(f"{text!r} is not an ISO 8601 date-time")
    return check_time_range(parsed)


def _out_of_range(when: datetime) -> TimeOutOfRange:
    return TimeOutOfRange(
        f"{when.isoformat()} is outside the accepted range "
        f"{EARLIEST.isoformat()} .. {LATEST.isoformat()} (UTC)"
    )
