"""Candidates in by the file or batch (semantics §3, §15): all-or-nothing, every bad line
named, one round asked for."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from lifecycle.models import JournalEvent, Rule
from lifecycle.services.candidates import candidates_record
from lifecycle.states import Actor
from lifecycle.validation import ImportRejected, read_jsonl

from ..builders import jsonl

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


def test_the_record_candidates_command_prints_the_counts_of_spec_15(tmp_path, capsys):
    candidates = tmp_path / "candidates.jsonl"
    candidates.write_text("".join(jsonl(GOOD)))
    call_command("record_candidates", str(candidates), "--json")
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
