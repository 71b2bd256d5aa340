"""The demo corpus also ships as an OTLP export (semantics §19): imported through
`import_traces`, it gives the same sessions — task, steps, kind, outcome, metrics — and
signatures derived from the spans that match the hand-written ones of every failure family."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from lifecycle.models import Rule, Trajectory
from lifecycle.selectors.gate import gate_both
from lifecycle.services.candidates import candidates_record
from lifecycle.states import Actor
from lifecycle.validation import read_jsonl
from traces.export import corpus_to_otlp

DEMO = Path(__file__).resolve().parents[2] / "lifecycle" / "fixtures" / "demo"
CORPUS = [json.loads(line) for line in (DEMO / "corpus.jsonl").read_text().splitlines() if line]
# The failure families, each named by the error in the text of its traces. The flaky-test
# family is named by the timeout its traces show (flakiness is a judgment across runs that
# no single trace holds).
TEXT_FAMILIES = {
    "error:timeout",
    "error:non_fast_forward",
    "error:http_429",
    "error:file_not_found",
    "error:resolution_impossible",
    "error:conflicting_migrations",
    "error:address_in_use",
    "error:image_pull_backoff",
}


def _step(step: dict) -> tuple:
    return (step["tool"], step["input"], step["output"], step["error"])


@pytest.fixture
def imported(db) -> dict[str, Trajectory]:
    out = StringIO()
    call_command("import_traces", str(DEMO / "corpus.otlp.json"), "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"created": len(CORPUS), "unchanged": 0, "updated": 0}
    return {t.id: t for t in Trajectory.objects.all()}


def test_the_committed_export_is_the_export_of_the_committed_corpus():
    committed = json.loads((DEMO / "corpus.otlp.json").read_text())
    assert committed == json.loads(json.dumps(corpus_to_otlp(CORPUS)))


def test_every_session_comes_back_with_its_task_steps_kind_and_outcome(imported):
    for line in CORPUS:
        got = imported[line["id"]]
        assert (got.task, got.kind, got.outcome) == (line["task"], line["kind"], line["outcome"])
        assert [_step(s) for s in got.steps] == [_step(s) for s in line["steps"]], line["id"]
        assert got.metrics == line["metrics"]
        assert got.session_id == line["session_id"]
        assert (got.replay_input, got.expected_rule) == (
            line.get("replay_input"),
            line.get("expected_rule"),
        )
        assert got.notices == line.get("notices", [])


def test_derived_signatures_match_the_hand_written_ones_for_the_failure_families(imported):
    matched = 0
    for line in CORPUS:
        if line["kind"] == "failure" and TEXT_FAMILIES & set(line["signature"]):
            assert imported[line["id"]].signature == line["signature"], line["id"]
            matched += 1
    assert matched == 34
    f001 = imported["F-001"]
    assert f001.signature == ["tool:git", "action:git.push", "error:non_fast_forward"]
    because = f001.meta["signature_derivation"]["because"]
    assert {
        "atom": "error:non_fast_forward",
        "rule": "git.non_fast_forward",
        "source": "steps[2].error",
        "match": "non-fast-forward",
    } in because


def test_the_flaky_family_derives_the_timeout_it_shows(imported):
    flaky = [
        line["id"]
        for line in CORPUS
        if line["meta"].get("family") == "flaky-test" and line["kind"] == "failure"
    ]
    assert flaky == ["F-009", "F-010", "F-011", "F-012"]
    for case in flaky:
        assert imported[case].signature == ["tool:pytest", "action:test.run", "error:timeout"]


def test_the_shared_word_successes_carry_no_error_atom(imported):
    # semantics §11: S-022 (git pull) and S-023 (git status) must not look like the failure.
    for case in ("S-022", "S-023", "S-024"):
        assert not [a for a in imported[case].signature if a.startswith("error:")]


def test_the_gate_figures_of_f001_hold_on_derived_signatures(imported):
    # The demo loads this export (demo_setup), so the figures it shows come from derived
    # signatures: lexical 5 / 3 / 1 INCONCLUSIVE, signature 8 / 0 / 0 PASS (semantics §11).
    with open(DEMO / "candidates.jsonl", encoding="utf-8") as lines:
        candidates_record(read_jsonl(lines), actor=Actor.extractor("demo"))
    gate = gate_both(Rule.objects.get(pk="C-001"))
    figures = {
        matcher: (
            report["failures_prevented"],
            report["successes_broken"],
            report["near_misses"],
            report["verdict"],
        )
        for matcher, report in gate.items()
        if matcher in ("lexical", "signature")
    }
    assert figures == {"lexical": (5, 3, 1, "INCONCLUSIVE"), "signature": (8, 0, 0, "PASS")}
