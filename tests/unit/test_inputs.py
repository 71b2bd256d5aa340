"""The input lines' one definition (lifecycle/inputs.py): the model the API publishes is the model
that checks a line, each field by the check of lifecycle/validation.py, every field at fault
named with its line."""

from datetime import UTC, datetime

import pytest

from cauterweb.api.protocol import batch_body
from lifecycle import limits
from lifecycle.inputs import CandidateIn, ReportIn, candidate_fields, line_fields
from lifecycle.validation import InvalidRule


def errors_of(model, obj, number=7):
    line, errors = line_fields(model, number, obj)
    assert line is None
    assert {e.line for e in errors} == {number}
    return [(e.field, e.message) for e in errors]


def test_a_good_report_line_is_normalised_by_its_checks():
    line, errors = line_fields(
        ReportIn,
        1,
        {
            "session_id": "  s-1 ",
            "at": "2026-06-01T10:00:00",
            "notices": None,
            "metrics": {"task_completion": 1},
            "rules_read": ["R-1", "R-1", "R-2"],
        },
    )
    assert errors == []
    assert line.session_id == "s-1"
    assert line.at == datetime(2026, 6, 1, 10, tzinfo=UTC)
    assert line.notices == [] and line.metrics == {"task_completion": 1.0}
    assert line.rules_read == ["R-1", "R-2"]


def test_every_bad_field_of_a_report_is_named_with_its_checks_message():
    errors = errors_of(
        ReportIn,
        {
            "session_id": "",
            "notices": ["nonsense"],
            "metrics": {"m": 2},
            "rules_read": "R-1",
            "colour": "red",
        },
    )
    fields = dict(errors)
    assert fields["session_id"] == "is required: a string of at most 128 characters"
    assert fields["at"] == "is required (ISO 8601)"
    assert "notices" in fields and fields["metrics"] == "'m' must be in [0, 1], got 2"
    assert fields["rules_read"] == "must be a list of rule ids"
    assert fields["colour"].startswith("unknown field (allowed: at, metrics, notices,")
    too_many = errors_of(
        ReportIn, {"session_id": "s", "at": "2026-06-01", "rules_read": ["R"] * 1_001}
    )
    assert too_many == [("rules_read", "has 1,001 items; the limit is 1,000")]


def test_a_line_that_is_not_an_object_is_named():
    assert errors_of(CandidateIn, ["trigger"]) == [("", "each line must be a JSON object")]


def test_candidate_checks_name_each_field_and_the_first_for_callers_with_arguments():
    errors = errors_of(CandidateIn, {"directive": " ", "tags": ["t"] * 33, "source_case": 3})
    assert errors == [
        ("trigger", "trigger is required (the 'when …' part)"),
        ("directive", "directive is required (the 'do …' part)"),
        ("tags", f"tags has 33 items; the limit is {limits.TAGS}"),
        ("source_case", "source_case must be a string"),
    ]
    with pytest.raises(InvalidRule) as raised:
        candidate_fields(trigger="when x", directive="do y", scope="s" * 129)
    assert raised.value.field == "scope" and "limit" in str(raised.value)
    fields = candidate_fields(trigger=" when x ", directive="do y", tags=["b", "a", "b"])
    assert fields == {
        "trigger": "when x",
        "directive": "do y",
        "scope": "global",
        "metric": "",
        "signature": [],
        "tags": ["a", "b"],
        "source_case": "",
        "source_notice": "",
    }


def test_the_published_body_is_the_checking_model_with_its_bounds():
    body = batch_body(ReportIn, "report")["requestBody"]["content"]["application/json"]["schema"]
    one = body["anyOf"][0]
    assert one["additionalProperties"] is False
    assert set(one["required"]) == {"session_id", "at"}
    assert one["properties"]["rules_read"]["maxItems"] == limits.RULES_READ
    candidate = CandidateIn.model_json_schema()
    assert set(candidate["required"]) == {"trigger", "directive"}
    assert candidate["properties"]["trigger"]["maxLength"] == limits.TRIGGER
