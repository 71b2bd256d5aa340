"""Candidates and reports in (semantics §2, §3, §5, §15): all-or-nothing, every bad line named."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from lifecycle.models import JournalEvent, Report, Rule, RuleRead
from lifecycle.services.candidates import candidates_record
from lifecycle.states import Actor
from lifecycle.validation import ImportRejected, numbered, read_jsonl
from replay.intake import reports_ingest

from ..builders import T0, candidate, jsonl, report

pytestmark = pytest.mark.django_db

GOOD = {
    "id": "C-001",
    "trigger": "when git push fails with non-fast-forward",
    "directive": "pull latest changes before pushing",
    "scope": "git",
    "metric": "task_completion",
    "signature": ["action:git.push", "error:non_fast_forward"],
    "tags": ["git"],
    "source_case": "F-001",
}


def test_candidates_are_recorded_with_their_given_ids():
    result, rules = candidates_record(
        read_jsonl(jsonl(GOOD, {**GOOD, "id": None, "scope": "global"})), actor=Actor.extractor()
    )
    assert result.as_dict() == {"created": 2, "unchanged": 0, "updated": 0}
    rule = Rule.objects.get(pk="C-001")
    assert (rule.author, rule.author_kind, rule.source_case) == ("extractor", "extractor", "F-001")
    assert rules[1].id.startswith("R-")


def test_a_candidate_file_with_a_bad_line_records_nothing():
    lines = jsonl(
        GOOD,
        {**GOOD, "id": "C-002", "metric": "vibes"},
        {**GOOD, "id": "C-003", "trigger": ""},
        {**GOOD, "id": "C-001", "bogus": 1},
    )
    with pytest.raises(ImportRejected) as exc:
        candidates_record(read_jsonl(lines), actor=Actor.extractor())
    assert {(e.line, e.field) for e in exc.value.errors} == {
        (2, "metric"),
        (3, "trigger"),
        (4, "bogus"),
        (4, "id"),
    }
    assert not Rule.objects.exists()
    assert not JournalEvent.objects.exists()


def test_recording_the_same_candidate_file_twice_is_a_no_op():
    candidates_record(read_jsonl(jsonl(GOOD)), actor=Actor.extractor())
    result, _ = candidates_record(read_jsonl(jsonl(GOOD)), actor=Actor.extractor())
    assert result.as_dict() == {"created": 0, "unchanged": 1, "updated": 0}


def test_a_candidate_id_with_other_text_is_a_conflict():
    candidates_record(read_jsonl(jsonl(GOOD)), actor=Actor.extractor())
    with pytest.raises(ImportRejected, match="immutable"):
        candidates_record(
            read_jsonl(jsonl({**GOOD, "directive": "force push"})), actor=Actor.extractor()
        )


def test_reports_are_stored_with_notices_reads_and_a_journal_event():
    rule = candidate("C-1")
    result = reports_ingest(
        numbered(
            [report("s1", T0, ["breach:task_completion"], rules_read=["C-1"]), report("s2", T0)]
        )
    )
    assert result.as_dict() == {"created": 2, "unchanged": 0, "updated": 0}
    stored = Report.objects.get(session_id="s1")
    assert (stored.has_notice, stored.notices) == (True, ["breach:task_completion"])
    assert list(RuleRead.objects.values_list("session_id", "rule_id", "via")) == [
        ("s1", rule.id, "report")
    ]
    assert JournalEvent.objects.filter(type="report_received").count() == 2


def test_the_same_report_twice_is_unchanged_and_a_changed_one_is_updated():
    reports_ingest(numbered([report("s1", T0)]))
    assert reports_ingest(numbered([report("s1", T0)])).as_dict() == {
        "created": 0,
        "unchanged": 1,
        "updated": 0,
    }
    changed = report("s1", T0, ["stall:coherence"])
    assert reports_ingest(numbered([changed])).as_dict() == {
        "created": 0,
        "unchanged": 0,
        "updated": 1,
    }
    assert Report.objects.get().notices == ["stall:coherence"]


def test_bad_reports_are_refused_naming_line_and_field():
    rows = numbered(
        [
            report("s1", T0),
            {"session_id": "", "at": "soon", "notices": ["tool:git"], "metrics": {"x": 2}},
            report("s3", T0, rules_read=["NOPE"]),
        ]
    )
    with pytest.raises(ImportRejected) as exc:
        reports_ingest(rows)
    assert {(e.line, e.field) for e in exc.value.errors} == {
        (2, "session_id"),
        (2, "at"),
        (2, "notices"),
        (2, "metrics"),
    }
    assert not Report.objects.exists()


def test_a_report_reading_an_unknown_rule_is_refused():
    with pytest.raises(ImportRejected) as exc:
        reports_ingest(numbered([report("s3", T0, rules_read=["NOPE"])]))
    assert [(e.line, e.field) for e in exc.value.errors] == [(1, "rules_read")]


def test_commands_print_the_counts_of_spec_15(tmp_path, capsys):
    candidates = tmp_path / "candidates.jsonl"
    candidates.write_text("".join(jsonl(GOOD)))
    reports = tmp_path / "reports.jsonl"
    reports.write_text("".join(jsonl(report("s1", T0))))
    call_command("record_candidates", str(candidates), "--json")
    assert json.loads(capsys.readouterr().out) == {"created": 1, "unchanged": 0, "updated": 0}
    call_command("ingest_reports", str(reports), "--json")
    assert json.loads(capsys.readouterr().out) == {"created": 1, "unchanged": 0, "updated": 0}


def test_a_bad_candidate_file_exits_non_zero_with_json_errors(tmp_path, capsys):
    path = tmp_path / "candidates.jsonl"
    path.write_text("".join(jsonl({**GOOD, "signature": ["push failed"]})))
    with pytest.raises(CommandError) as exc:
        call_command("record_candidates", str(path), "--json")
    assert exc.value.returncode == 1
    document = json.loads(capsys.readouterr().out)
    assert document["errors"][0]["line"] == 1
    assert document["errors"][0]["field"] == "signature"


@pytest.mark.django_db(transaction=True)
def test_a_candidate_file_kicks_one_round_not_one_per_line(tmp_path):
    # semantics §9.1: each new candidate asks for a round; a file of them asks once.
    path = tmp_path / "candidates.jsonl"
    path.write_text("".join(jsonl(*({**GOOD, "id": f"C-{i}"} for i in range(3)))))
    call_command("record_candidates", str(path))
    assert JournalEvent.objects.filter(type="validation_round_started").count() == 1
    assert Rule.objects.count() == 3
