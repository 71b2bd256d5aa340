"""The corpus gate (semantics §11) on the demo corpus, under both matchers, side by side."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from lifecycle.models import Rule
from lifecycle.selectors.gate import (
    gate_both,
    gate_figures,
    gate_report,
    lexical_fires,
    verdict,
    words,
)
from lifecycle.services.candidates import candidates_record
from lifecycle.services.corpus import import_corpus
from lifecycle.states import Actor
from lifecycle.validation import read_jsonl

DEMO = Path(__file__).resolve().parents[2] / "lifecycle" / "fixtures" / "demo"


@pytest.fixture
def demo(db):
    with open(DEMO / "corpus.jsonl", encoding="utf-8") as lines:
        import_corpus(lines)
    with open(DEMO / "candidates.jsonl", encoding="utf-8") as lines:
        candidates_record(read_jsonl(lines), actor=Actor.extractor("demo"))


def test_the_lexical_gate_reproduces_the_f001_numbers_of_the_spec(demo):
    # semantics §11: prevented 5, broken 3 (S-022, S-023, NM-044), near misses 1,
    # precision 0.625, recall 0.625: INCONCLUSIVE, although the rule is right.
    report = gate_report(Rule.objects.get(pk="C-001"), matcher="lexical")
    assert report["failures_prevented"] == 5
    assert report["successes_broken"] == 3
    assert report["near_misses"] == 1
    assert report["precision"] == 0.625
    assert report["recall"] == 0.625
    assert report["verdict"] == "INCONCLUSIVE"
    assert report["fired"] == {
        "prevented": ["F-001", "F-002", "F-003", "F-005", "F-007"],
        "broken": ["NM-044", "S-022", "S-023"],
        "near_misses": ["NM-044"],
    }
    assert report["family_size"] == 8


def test_the_signature_gate_does_not_count_git_pull_status_or_the_commit_hook_as_broken(demo):
    # semantics §11: the signature gate must not count those three successes as broken.
    report = gate_report(Rule.objects.get(pk="C-001"), matcher="signature")
    assert report["fired"]["broken"] == []
    assert report["fired"]["prevented"] == [f"F-00{n}" for n in range(1, 9)]
    assert (report["failures_prevented"], report["successes_broken"], report["near_misses"]) == (
        8,
        0,
        0,
    )
    assert report["precision"] == 1.0
    assert report["recall"] == 1.0
    assert report["verdict"] == "PASS"


def test_gate_both_shows_the_two_matchers_side_by_side(demo, django_assert_max_num_queries):
    rule = Rule.objects.get(pk="C-001")
    with django_assert_max_num_queries(8):
        both = gate_both(rule)
    assert set(both) == {"lexical", "signature"}
    assert both["lexical"]["matcher"] == "lexical"
    assert both["signature"]["matcher"] == "signature"
    assert both["lexical"]["verdict"] == "INCONCLUSIVE"
    assert both["signature"]["verdict"] == "PASS"


def test_the_family_of_a_rule_with_a_source_case_is_every_failure_sharing_its_error(demo):
    report = gate_report(Rule.objects.get(pk="C-001"), matcher="signature")
    assert report["family_basis"] == "failures sharing error:non_fast_forward of F-001"


def test_the_family_of_a_rule_without_a_source_case_comes_from_its_metric(demo):
    # C-010 declares tool_correctness and matches nothing in the demo corpus.
    report = gate_report(Rule.objects.get(pk="C-010"), matcher="signature")
    assert report["family_basis"] == "failures with a notice on tool_correctness"
    assert report["failures_prevented"] == 0
    assert report["precision"] is None
    assert report["verdict"] == "INCONCLUSIVE"


def test_an_unknown_matcher_is_refused(demo):
    with pytest.raises(ValueError, match="unknown matcher 'fuzzy'"):
        gate_report(Rule.objects.get(pk="C-001"), matcher="fuzzy")


@pytest.mark.parametrize(
    ("precision", "recall", "expected"),
    [
        (1.0, 1.0, "PASS"),
        (0.8, 0.5, "PASS"),
        (0.79, 1.0, "INCONCLUSIVE"),
        (1.0, 0.49, "INCONCLUSIVE"),
        (0.625, 0.625, "INCONCLUSIVE"),
        (0.5, 1.0, "INCONCLUSIVE"),
        (0.49, 1.0, "FAIL"),
        (0.0, 0.0, "FAIL"),
        (0.2, None, "FAIL"),
        (None, 1.0, "INCONCLUSIVE"),
        (None, None, "INCONCLUSIVE"),
        (1.0, None, "INCONCLUSIVE"),
    ],
)
def test_the_verdict_thresholds(precision, recall, expected):
    # semantics §11: PASS (precision ≥ 0.8 and recall ≥ 0.5), FAIL (precision < 0.5), else
    # INCONCLUSIVE.
    assert verdict(precision, recall) == expected


def test_near_misses_are_broken_too_and_recall_counts_only_the_family():
    figures = gate_figures(
        matcher="signature",
        fired={"F-1": "failure", "F-9": "failure", "S-1": "success", "NM-1": "near_miss"},
        family=frozenset({"F-1", "F-2"}),
        family_basis="test",
    )
    assert figures["successes_broken"] == 2
    assert figures["near_misses"] == 1
    assert figures["precision"] == 0.5
    # F-9 fired but is outside the family: it does not lift recall.
    assert figures["recall"] == 0.5


@pytest.mark.parametrize(
    ("trigger", "prose", "fires"),
    [
        # Half of the trigger's words present is enough for the legacy matcher.
        ("when git push fails with non-fast-forward", "git pull: Fast-forward", True),
        ("when git push fails with non-fast-forward", "git status", False),
        ("when git push fails", "git commit", False),
        ("when", "when", False),
    ],
)
def test_the_lexical_matcher_fires_on_shared_words(trigger, prose, fires):
    assert lexical_fires(words(trigger), words(prose)) is fires


def _call(*args):
    out = io.StringIO()
    call_command("gate_report", *args, stdout=out)
    return out.getvalue()


def test_the_gate_report_command_prints_both_matchers_side_by_side(demo):
    # semantics §15: gate_report [--rule ID] [--matcher lexical|signature|both].
    out = _call("--rule", "C-001")
    lines = out.splitlines()
    assert lines[0] == "C-001 (candidate): when git push fails with non-fast-forward"
    lexical = next(line for line in lines if line.strip().startswith("lexical"))
    signature = next(line for line in lines if line.strip().startswith("signature"))
    assert lexical.split()[1:7] == ["5", "3", "1", "0.625", "0.625", "INCONCLUSIVE"]
    assert lexical.endswith("NM-044, S-022, S-023")
    assert signature.split()[1:7] == ["8", "0", "0", "1.000", "1.000", "PASS"]


def test_the_gate_report_command_prints_one_json_document(demo):
    document = json.loads(_call("--json", "--matcher", "signature"))
    assert [row["rule"] for row in document["rules"]] == [f"C-{n:03d}" for n in range(1, 13)]
    first = document["rules"][0]
    assert set(first["gate"]) == {"signature"}
    assert first["gate"]["signature"]["fired"]["prevented"] == [f"F-00{n}" for n in range(1, 9)]


def test_the_gate_report_command_refuses_an_unknown_rule(demo):
    with pytest.raises(CommandError, match="no rule 'C-999'"):
        _call("--rule", "C-999")
