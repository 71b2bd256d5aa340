"""Times are parsed as ISO 8601 and refused outside 1970 .. 2200 (UTC), edge offsets included."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from lifecycle.validation import (
    EARLIEST,
    LATEST,
    MAX_TIME_TEXT,
    TimeOutOfRange,
    check_time_range,
    parse_time,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-12-03T08:00:00Z", datetime(2026, 12, 3, 8, tzinfo=UTC)),
        ("2026-12-03T08:00:00+02:00", datetime(2026, 12, 3, 6, tzinfo=UTC)),
        ("2026-12-03T08:00:00", datetime(2026, 12, 3, 8, tzinfo=UTC)),
        ("2026-12-03 08:00:00.5-05:30", datetime(2026, 12, 3, 13, 30, 0, 500000, tzinfo=UTC)),
        ("2026-12-03", datetime(2026, 12, 3, tzinfo=UTC)),
        ("  2026-12-03T08:00:00Z  ", datetime(2026, 12, 3, 8, tzinfo=UTC)),
        ("1970-01-01T00:00:00Z", EARLIEST),
        ("1970-01-01T01:00:00+01:00", EARLIEST),
        ("2200-01-01T00:00:00Z", LATEST),
        ("2199-12-31T19:00:00-05:00", LATEST),
    ],
)
def test_it_accepts_times_in_range_and_answers_in_utc(text, expected):
    parsed = parse_time(text)
    assert parsed == expected
    assert parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "text",
    [
        "0001-01-01T00:00:00+01:00",
        "0001-01-01T00:00:00Z",
        "0001-01-01T00:00:00-01:00",
        "9999-12-31T23:00:00-05:00",
        "9999-12-31T23:59:59.999999Z",
        "9999-12-31T23:59:59+14:00",
        "1969-12-31T23:59:59Z",
        "1970-01-01T00:59:59+01:00",
        "2200-01-01T00:00:01Z",
        "2199-12-31T23:00:00-01:01",
        "1900-06-01T00:00:00",
    ],
)
def test_it_refuses_times_outside_the_range_with_a_clear_message(text):
    with pytest.raises(TimeOutOfRange) as info:
        parse_time(text)
    assert (
        "outside the accepted range 1970-01-01T00:00:00+00:00 .. 2200-01-01T00:00:00+00:00"
        in str(info.value)
    )


@pytest.mark.parametrize(
    "value, words",
    [
        (None, "must be an ISO 8601 string"),
        (1733212800, "must be an ISO 8601 string"),
        ("yesterday", "is not an ISO 8601 date-time"),
        ("", "is not an ISO 8601 date-time"),
        ("2026-02-30T00:00:00Z", "is not a valid date-time"),
        ("2026-12-03T00:00:00+25:00", "is not a valid date-time"),
        ("2026-12-03T00:00:00Z" + "0" * MAX_TIME_TEXT, "longer than"),
    ],
)
def test_it_refuses_what_is_not_a_time(value, words):
    with pytest.raises(ValueError) as info:
        parse_time(value)
    assert not isinstance(info.value, TimeOutOfRange)
    assert words in str(info.value)


def test_datetimes_already_built_are_checked_the_same_way():
    edge = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    with pytest.raises(TimeOutOfRange):
        check_time_range(edge)
    with pytest.raises(TimeOutOfRange):
        check_time_range(datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))))
    assert check_time_range(datetime(2000, 1, 1)) == datetime(2000, 1, 1, tzinfo=UTC)
