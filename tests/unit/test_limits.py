"""The published limits: checks that name the field, and docs that state every one."""

from pathlib import Path

import pytest

from lifecycle import limits
from lifecycle.limits import TooLarge, check_count, check_json_size, check_length, head, json_size

DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_a_text_at_its_limit_passes_and_one_character_more_is_refused_naming_the_field():
    assert check_length("x" * limits.TRIGGER, field="trigger", limit=limits.TRIGGER)
    with pytest.raises(TooLarge) as info:
        check_length("x" * (limits.TRIGGER + 1), field="trigger", limit=limits.TRIGGER)
    assert (info.value.field, info.value.limit) == ("trigger", limits.TRIGGER)
    assert str(info.value) == "trigger is 2,001 characters; the limit is 2,000"


def test_characters_are_counted_not_bytes():
    assert check_length("é" * 10, field="task", limit=10)


def test_counts_are_bounded():
    check_count(["a"] * limits.TAGS, field="tags", limit=limits.TAGS)
    with pytest.raises(TooLarge, match="tags has 33 items; the limit is 32"):
        check_count(["a"] * (limits.TAGS + 1), field="tags", limit=limits.TAGS)


def test_json_is_measured_as_stored():
    assert json_size({"a": "é"}) == len('{"a":"é"}'.encode())
    check_json_size({"k": "x" * 100}, field="meta", limit=108)
    with pytest.raises(TooLarge, match="meta is 109 bytes as JSON; the limit is 108"):
        check_json_size({"k": "x" * 101}, field="meta", limit=108)


def test_the_duplicate_check_reads_a_bounded_head_of_any_stored_text():
    assert head("x" * 25_000_000) == "x" * limits.DUPLICATE_TEXT
    assert head("short") == "short"
    assert limits.DUPLICATE_COMPARE > 0


def test_identifier_limits_are_the_width_of_their_columns():
    from lifecycle.models import Report, Rule, Trajectory

    pairs = [
        (limits.RULE_ID, Rule, "id"),
        (limits.SCOPE, Rule, "scope"),
        (limits.METRIC_NAME, Rule, "metric"),
        (limits.SOURCE_CASE, Rule, "source_case"),
        (limits.SOURCE_NOTICE, Rule, "source_notice"),
        (limits.TRAJECTORY_ID, Trajectory, "id"),
        (limits.CORPUS_NAME, Trajectory, "corpus"),
        (limits.SESSION_ID, Trajectory, "session_id"),
        (limits.SESSION_ID, Report, "session_id"),
    ]
    for limit, model, name in pairs:
        assert model._meta.get_field(name).max_length == limit, (model, name)


@pytest.mark.parametrize("field, limit", sorted(limits.TEXT_LIMITS.items()))
def test_every_limit_is_published_in_the_api_docs(field, limit):
    assert f"| `{field}` | {limit:,} |" in DOCS.read_text()
