"""The demo corpus and candidates (lifecycle/fixtures/demo/): shape, coverage, and what the
simulated harness will do with each candidate (semantics §2, §7, §11, §15)."""

import importlib.util
import json
import re
from pathlib import Path

import pytest

from lifecycle import atoms as atom_lib
from lifecycle.matching import rule_matches
from lifecycle.models import Rule, Trajectory
from lifecycle.services.candidates import candidates_record
from lifecycle.services.corpus import import_corpus
from lifecycle.states import Actor
from lifecycle.validation import read_jsonl

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "lifecycle" / "fixtures" / "demo"


def _load(name):
    with open(DEMO / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


CORPUS = _load("corpus.jsonl")
CANDIDATES = {c["id"]: c for c in _load("candidates.jsonl")}
BY_ID = {t["id"]: t for t in CORPUS}


def test_the_committed_files_are_what_the_generator_writes(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "make_demo_corpus", ROOT / "scripts" / "make_demo_corpus.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write(tmp_path)
    for name in ("corpus.jsonl", "candidates.jsonl"):
        assert (tmp_path / name).read_text() == (DEMO / name).read_text(), name


def test_the_corpus_is_large_and_varied_enough_for_the_demo():
    kinds = {t["kind"] for t in CORPUS}
    families = {t["meta"]["family"] for t in CORPUS if t["kind"] == "failure"}
    assert len(CORPUS) >= 60
    assert kinds == {"failure", "success", "near_miss"}
    assert len(families) >= 6
    assert sum(1 for t in CORPUS if t.get("expected_rule")) >= 20


def test_it_carries_the_f001_situation_of_the_spec():
    # semantics §11.
    assert BY_ID["F-001"]["expected_rule"] == {
        "trigger": "when git push fails with non-fast-forward",
        "directive": "pull latest changes before pushing",
    }
    assert BY_ID["S-022"]["kind"] == "success" and "action:git.pull" in BY_ID["S-022"]["signature"]
    assert BY_ID["S-023"]["kind"] == "success"
    assert "action:git.status" in BY_ID["S-023"]["signature"]
    assert BY_ID["NM-044"]["kind"] == "near_miss"
    assert "action:git.commit" in BY_ID["NM-044"]["signature"]


def test_every_step_is_a_tool_call_with_its_state_atoms():
    for t in CORPUS:
        assert t["steps"], t["id"]
        for step in t["steps"]:
            assert {"tool", "input", "output", "error", "atoms"} <= set(step), t["id"]
            atom_lib.parse_atoms(step["atoms"])


def test_every_metric_tier_is_present_on_every_case():
    tiers = {
        "outcome_correct",
        "task_completion",
        "coherence",
        "tool_correctness",
        "argument_correctness",
        "plan_adherence",
        "plan_quality",
        "step_efficiency",
    }
    for t in CORPUS:
        assert set(t["metrics"]) == tiers, t["id"]


def test_replay_inputs_follow_the_simulated_harness_format():
    for t in CORPUS:
        if t.get("replayable") is False:
            assert "replay_input" not in t, t["id"]
            continue
        ri = t["replay_input"]
        assert set(ri) == {"task", "scope", "fault", "fixes", "hazards"}, t["id"]
        if t["kind"] == "failure":
            fault = ri["fault"]
            # The fault state carries every failure-mode atom of the case's signature, so a rule
            # that matches the case also applies at its fault (semantics §11).
            assert atom_lib.failure_mode_atoms(t["signature"]) <= set(fault["atoms"]), t["id"]
            assert t["steps"][fault["step"]]["atoms"] == fault["atoms"]
            assert ri["fixes"], t["id"]
        else:
            assert ri["fault"] is None and ri["fixes"] == []
        for item in ri["fixes"] + ri["hazards"]:
            assert item["directive_terms"] and item["metrics"], t["id"]


def _effect_at(directive: str, items: list[dict]) -> dict | None:
    """What the simulated harness applies: the first fix/hazard whose terms all appear (as
    words or inside the directive's text, as replay.backends.simulated reads them)."""
    text = directive.lower()
    found = set(re.findall(r"[a-z0-9_.\-]+", text))

    def appears(term):
        return term in found or term in text

    return next((i for i in items if all(map(appears, i["directive_terms"]))), None)


def _newest_matching_failures(cand):
    rows = [
        t
        for t in CORPUS
        if t["kind"] == "failure"
        and t.get("replayable", True)
        and rule_matches(
            rule_signature=cand["signature"],
            rule_metric=cand["metric"],
            trajectory_atoms=t["signature"] + t["notices"],
            family=frozenset({cand["metric"]}),
        )
    ]
    return sorted(rows, key=lambda t: (t["started_at"], t["id"]), reverse=True)[:3]


@pytest.mark.parametrize(
    ("candidate", "effect"),
    [
        ("C-001", "rescue"),
        ("C-002", "harm"),  # pushed through: task_completion up, outcome still wrong
        ("C-003", "rescue"),
        ("C-004", "rescue"),
        ("C-005", "harm"),
        ("C-006", "rescue"),
        ("C-007", None),  # no fix: the original metrics come back, no improvement
        ("C-008", "rescue"),
        ("C-011", "rescue"),
        ("C-012", "rescue"),
    ],
)
def test_each_candidate_meets_its_designed_fate_on_its_failing_cases(candidate, effect):
    cand = CANDIDATES[candidate]
    cases = _newest_matching_failures(cand)
    assert len(cases) == 3
    for case in cases:
        applied = _effect_at(cand["directive"], case["replay_input"]["fixes"])
        assert (applied and applied["effect"]) == effect, (candidate, case["id"])


def test_the_force_push_candidate_harms_a_protected_win_it_fires_on():
    # S-024 recovered from a rejected push; a force push there overwrites a teammate's work.
    cand = CANDIDATES["C-002"]
    hazards = BY_ID["S-024"]["replay_input"]["hazards"]
    state = hazards[0]["atoms"]
    assert atom_lib.failure_mode_atoms(cand["signature"]) <= set(state)
    assert _effect_at(cand["directive"], hazards) is hazards[0]
    assert _effect_at(CANDIDATES["C-001"]["directive"], hazards) is None


def test_the_forward_trial_candidate_has_only_unreplayable_failures():
    cand = CANDIDATES["C-009"]
    matching = [
        t for t in CORPUS if atom_lib.failure_mode_atoms(cand["signature"]) <= set(t["signature"])
    ]
    assert matching and all(t.get("replayable") is False for t in matching)


def test_the_pending_candidate_matches_no_case_at_all():
    cand = CANDIDATES["C-010"]
    assert not any(
        atom_lib.failure_mode_atoms(cand["signature"]) <= set(t["signature"]) for t in CORPUS
    )


@pytest.mark.django_db
def test_the_corpus_and_candidates_load_through_the_real_intake():
    with open(DEMO / "corpus.jsonl", encoding="utf-8") as lines:
        result = import_corpus(lines)
    assert result.created == len(CORPUS)
    assert Trajectory.objects.filter(expected_rule__isnull=False).count() >= 20
    with open(DEMO / "candidates.jsonl", encoding="utf-8") as lines:
        recorded, _ = candidates_record(read_jsonl(lines), actor=Actor.extractor("demo"))
    assert recorded.created == len(CANDIDATES)
    assert set(Rule.objects.values_list("id", flat=True)) == set(CANDIDATES)
    source_cases = {c["source_case"] for c in CANDIDATES.values() if c.get("source_case")}
    assert source_cases <= set(Trajectory.objects.values_list("id", flat=True))
