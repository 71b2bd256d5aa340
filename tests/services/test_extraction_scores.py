"""Extraction accuracy of stored rules and its commands (semantics §12, §15): scored against the
source case's expected_rule, a number kept apart from replay fidelity."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from lifecycle.models import Rule
from lifecycle.selectors.extraction import extraction_for_rule, extraction_rows, parse_pairs
from lifecycle.services.candidates import candidates_record
from lifecycle.services.corpus import import_corpus
from lifecycle.services.rules import rule_record_candidate
from lifecycle.states import Actor
from lifecycle.validation import ImportRejected, read_jsonl

DEMO = Path(__file__).resolve().parents[2] / "lifecycle" / "fixtures" / "demo"
ROW_KEYS = {
    "rule",
    "state",
    "source_case",
    "expected",
    "extracted",
    "trigger",
    "directive",
    "token_f1",
    "semantic",
    "signature_agreement",
    "verdict",
    "why",
}


@pytest.fixture
def committed(db, monkeypatch, django_capture_on_commit_callbacks):
    """Run what each change enqueues on commit (the scoring task, eagerly), without rounds."""
    monkeypatch.setattr("replay.kick.kick_round", lambda **kwargs: None)
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture
def demo(committed):
    with committed(), open(DEMO / "corpus.jsonl", encoding="utf-8") as lines:
        import_corpus(lines)
    with committed(), open(DEMO / "candidates.jsonl", encoding="utf-8") as lines:
        candidates_record(read_jsonl(lines), actor=Actor.extractor("demo"))


def record(committed, **text) -> Rule:
    with committed():
        rule, _ = rule_record_candidate(actor=Actor.agent("bot"), **text)
    rule.refresh_from_db()
    return rule


def test_a_rule_is_scored_against_its_source_cases_expected_rule(demo):
    result = extraction_for_rule(Rule.objects.get(pk="C-001"))
    assert result["source_case"] == "F-001"
    assert result["expected"] == {
        "trigger": "when git push fails with non-fast-forward",
        "directive": "pull latest changes before pushing",
    }
    assert result["extracted"] == {
        "trigger": "when git push fails with non-fast-forward",
        "directive": "pull the latest changes with rebase before pushing again",
    }
    assert result["trigger"]["token_f1"] == 1.0
    assert result["directive"]["token_f1"] < 1.0
    # The word-level diff the dashboard highlights (semantics §12).
    assert ("insert", "rebase") in [tuple(op) for op in result["directive"]["diff"]]
    assert result["verdict"] == "match"


def test_an_identical_rule_is_a_match_with_token_f1_one(demo, committed):
    rule = record(
        committed,
        trigger="when the remote rejects a push because the branch is behind",
        directive="fetch and rebase onto the remote branch, then push again",
        source_case="F-002",  # word for word its expected rule
    )
    result = extraction_for_rule(rule)
    assert result["token_f1"] == 1.0
    assert result["verdict"] == "match"


def test_a_rule_without_a_source_case_has_no_extraction_score(demo):
    assert extraction_for_rule(Rule.objects.get(pk="C-010")) is None


def test_a_rule_whose_source_case_has_no_expected_rule_has_no_extraction_score(demo, committed):
    rule = record(
        committed,
        trigger="when a push of the lint config is rejected",
        directive="pull first",
        source_case="F-007",  # in the corpus, without an expected_rule
    )
    assert extraction_for_rule(rule) is None
    assert rule.id not in {row["rule"] for row in extraction_rows()}


def test_extraction_rows_has_one_row_per_scored_rule_in_one_query(demo, django_assert_num_queries):
    with django_assert_num_queries(1):
        rows = extraction_rows()
    expected_ids = [f"C-{n:03d}" for n in range(1, 13) if n != 10]
    assert [row["rule"] for row in rows] == expected_ids
    # Extraction accuracy only: no replay verdict, delta or trial figure is folded in.
    for row in rows:
        assert set(row) >= ROW_KEYS
        assert not set(row) & {"replay", "fidelity", "delta", "deciding_metric", "trial", "cases"}


def test_a_rule_recorded_before_its_source_case_is_scored_when_the_case_arrives(committed):
    rule = record(
        committed,
        trigger="when the remote rejects a push because the branch is behind",
        directive="fetch and rebase onto the remote branch, then push again",
        source_case="F-002",
    )
    assert extraction_for_rule(rule) is None  # nothing to compare with yet
    with committed(), open(DEMO / "corpus.jsonl", encoding="utf-8") as lines:
        import_corpus(lines)
    rule.refresh_from_db()
    assert extraction_for_rule(rule)["verdict"] == "match"


def test_extraction_rows_is_empty_without_rules(db):
    assert extraction_rows() == []


def test_pairs_lines_are_all_checked_and_every_bad_line_named():
    rows = read_jsonl(
        [
            json.dumps({"extracted": {"trigger": "a", "directive": "b"}}),
            "not json",
            json.dumps(
                {
                    "extracted": {"trigger": "", "directive": "b"},
                    "expected": {"trigger": "a", "directive": "b"},
                    "extracted_signature": ["nonsense"],
                }
            ),
            json.dumps(
                {
                    "extracted": {"trigger": "a", "directive": "b"},
                    "expected": {"trigger": "a", "directive": "b"},
                    "label": 1,
                }
            ),
        ]
    )
    with pytest.raises(ImportRejected) as caught:
        parse_pairs(rows)
    assert [(e.line, e.field) for e in caught.value.errors] == [
        (1, "expected"),
        (2, ""),
        (3, "extracted.trigger"),
        (3, "extracted_signature"),
    ]


def _call(name, *args):
    out = io.StringIO()
    call_command(name, *args, stdout=out)
    return out.getvalue()


def test_compare_rules_scores_each_line_of_a_pairs_file(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    same = {"trigger": "when git push fails with non-fast-forward", "directive": "pull first"}
    pairs.write_text(json.dumps({"extracted": same, "expected": same}) + "\n")
    document = json.loads(_call("compare_rules", "--pairs", str(pairs), "--json"))
    assert document["summary"] == {"match": 1, "partial": 0, "miss": 0, "uncertain": 0}
    [row] = document["pairs"]
    assert row["line"] == 1
    assert row["token_f1"] == 1.0
    human = _call("compare_rules", "--pairs", str(pairs))
    assert human.splitlines()[1].split()[:3] == ["1", "match", "1.00"]


def test_compare_rules_refuses_bad_input_naming_the_line(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"extracted": {"trigger": "a", "directive": "b"}}\n')
    with pytest.raises(CommandError, match="line 1, field 'expected'") as caught:
        _call("compare_rules", "--pairs", str(pairs))
    assert caught.value.returncode == 1


def test_compare_rules_refuses_an_empty_file_and_a_missing_one(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(CommandError, match="no pairs"):
        _call("compare_rules", "--pairs", str(empty))
    with pytest.raises(CommandError, match="cannot read"):
        _call("compare_rules", "--pairs", str(tmp_path / "missing.jsonl"))


def test_extraction_report_prints_rows_and_a_verdict_summary(demo):
    document = json.loads(_call("extraction_report", "--json"))
    assert len(document["rows"]) == 11
    assert sum(document["summary"].values()) == 11
    human = _call("extraction_report")
    assert human.startswith("extraction accuracy (semantics §12) — a separate number")
    assert "C-001      F-001    match" in human
    header = next(line for line in human.splitlines() if line.startswith("rule"))
    assert header.index("score") < header.index("|") < header.index("semantic")


@pytest.mark.parametrize(
    ("rule_id", "verdict"),
    [
        ("C-001", "match"),  # the F-001 rule, lightly reworded
        ("C-003", "match"),  # reworded with few shared words
        ("C-009", "match"),  # verify → confirm, deployment → rollout
        ("C-002", "miss"),  # force push: shares the words, not the meaning
        ("C-005", "miss"),  # retry immediately vs back off: same trigger, opposite advice
    ],
)
def test_the_demo_candidates_get_the_extraction_verdict_they_were_written_for(
    demo, rule_id, verdict
):
    # semantics §12: the verdict sees through rewording and is not fooled by shared words.
    assert extraction_for_rule(Rule.objects.get(pk=rule_id))["verdict"] == verdict


def test_compare_rules_scores_a_large_file_alike_over_several_processes(tmp_path):
    from comparison.compare import PARALLEL_MIN

    eval_set = Path(__file__).resolve().parents[2] / "comparison" / "data" / "extraction_eval.jsonl"
    lines = eval_set.read_text().splitlines()[: PARALLEL_MIN + 40]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(lines) + "\n")
    one = json.loads(_call("compare_rules", "--pairs", str(pairs), "--json"))
    two = json.loads(_call("compare_rules", "--pairs", str(pairs), "--json", "--workers", "2"))
    assert len(two["pairs"]) == len(lines)
    assert two == one


def test_compare_rules_refuses_fewer_than_one_worker(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    same = {"trigger": "when git push fails", "directive": "pull first"}
    pairs.write_text(json.dumps({"extracted": same, "expected": same}) + "\n")
    with pytest.raises(CommandError, match="--workers must be at least 1"):
        _call("compare_rules", "--pairs", str(pairs), "--workers", "0")
