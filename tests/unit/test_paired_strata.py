"""Strata and shared control arms of the paired design (docs/semantics.md#s21-1,
docs/semantics.md#s21-2), as pure functions over fixed samples and in-memory candidates. No
database."""

import pytest

from lifecycle.metrics import MetricInfo, Registry
from replay.config import PAIRED
from replay.designs import CandidateRun, CaseSpec, SharedControls
from replay.dispatch import Job, RunResult
from replay.engine.paired import PairedCase, PairedConfig, Sample, decide_paired, next_requests
from tests.builders import round_config

T, C = "treatment", "control"
OC = "outcome_correct"
FAILING = [PairedCase(f"F{i}", "failing", OC, frozenset({OC})) for i in (1, 2, 3)]


def arm(case: str, arm_: str, values: list[float], stratum: str, start: int = 0) -> list:
    return [
        Sample(case, "failing", arm_, start + i, {OC: v}, stratum) for i, v in enumerate(values)
    ]


def simpson(stratum_before: str, stratum_after: str) -> list[Sample]:
    """Per case: before a promotion the agent fails in both arms, after it succeeds in both
    (the promoted rule rescues it; the candidate changes nothing). The candidate's treatment
    replays fell mostly after the promotion, its control replays mostly before."""
    out = []
    for case in ("F1", "F2", "F3"):
        out += arm(case, T, [0.0] * 2, stratum_before)
        out += arm(case, C, [0.0] * 6, stratum_before)
        out += arm(case, T, [1.0] * 6, stratum_after, start=2)
        out += arm(case, C, [1.0] * 2, stratum_after)
    return out


def test_a_promotion_between_looks_never_mixes_baselines():
    cfg = PairedConfig(max_repeats=8, futility_beta=None)
    stratified = decide_paired(simpson("0-aaa", "1-bbb"), FAILING, cfg)
    # Within each active set treatment and control are alike: no effect, nothing promoted.
    assert stratified.evidence["improvement"]["effect"] == 0
    assert stratified.evidence["improvement"]["strata"] == 6
    assert stratified.outcome != "promote"
    assert stratified.evidence["cases"]["F1"]["strata"] == {
        "0-aaa": {T: 2, C: 6},
        "1-bbb": {T: 6, C: 2},
    }
    # Pooled by case across the change (what the design did before strata), the same replays
    # read as a rescue: treatment 0.75 against control 0.25.
    mixed = decide_paired(simpson("", ""), FAILING, cfg)
    assert mixed.evidence["improvement"]["effect"] == pytest.approx(0.5)
    assert mixed.outcome == "promote"


def test_a_stratum_with_one_arm_only_compares_nothing():
    samples = arm("F1", T, [1.0] * 4, "0-aaa") + arm("F1", C, [0.0] * 4, "1-bbb")
    verdict = decide_paired(samples, FAILING[:1], PairedConfig(max_repeats=8, futility_beta=None))
    assert verdict.evidence["improvement"] is None
    assert verdict.outcome == "pending"


def test_max_repeats_bounds_a_case_and_arm_over_every_stratum():
    cfg = PairedConfig(max_repeats=8, futility_beta=None)
    samples = []
    for case in ("F1", "F2", "F3"):
        samples += arm(case, T, [0.0, 1.0] * 2, "0-aaa") + arm(case, C, [1.0, 0.0] * 2, "0-aaa")
    assert len(next_requests(samples, FAILING, cfg)) == 24  # a second look, in any stratum
    for case in ("F1", "F2", "F3"):
        samples += arm(case, T, [0.0, 1.0] * 2, "1-bbb", start=4)
        samples += arm(case, C, [1.0, 0.0] * 2, "1-bbb")
    # Control repeats 0–3 exist in both strata: eight per case and arm, nothing more to ask.
    assert next_requests(samples, FAILING, cfg) == []


# --- shared control arms ---------------------------------------------------------------------

REGISTRY = Registry({"task_completion": MetricInfo("task_completion", 1)})
CASES = [CaseSpec("F-1", "failing", {"task_completion": 0.3}, ("tool:git", "error:x"))]


def candidate(rule_id: str, shared: SharedControls | None, stratum: str = "1-abc"):
    return CandidateRun(
        rule_id=rule_id,
        round_id=1,
        rule_metric="task_completion",
        trigger_metric=None,
        retire_on=["task_completion"],
        cases=list(CASES),
        cfg=round_config(max_wins=0, design=PAIRED, max_repeats=8, looks_per_round=1),
        registry=REGISTRY,
        stratum=stratum,
        shared=shared,
    )


class Backend:
    """A deterministic agent that counts its replays per (case, arm)."""

    def __init__(self):
        self.calls: dict[tuple[str, str], int] = {}

    def __call__(self, job: Job) -> RunResult:
        key = (job.case_id, job.arm)
        self.calls[key] = self.calls.get(key, 0) + 1
        lift = 0.5 if job.arm == T else 0.0
        value = round(0.3 + lift + 0.01 * (job.repeat % 3), 3)
        read = [job.rule_id] if job.arm == T else []
        return RunResult(job, metrics={"task_completion": value}, read=read)


def run_round(runs: list[CandidateRun], shared: SharedControls, backend: Backend) -> None:
    """What a round does with their first looks: every batch handed out, then every replay
    run, each control replay filling the shared set for the candidates waiting on it."""
    jobs = [job for run in runs for job in run.next_batch()]
    by_id = {run.rule_id: run for run in runs}
    for job in jobs:
        owner = by_id[job.rule_id]
        owner.record(backend(job))
        if job.arm == C:
            key = (job.case_id, job.stratum)
            shared.fill(key, job.repeat, owner.last_sample, owner.evidence[-1])


def test_two_candidates_on_one_case_replay_its_control_once():
    shared, backend = SharedControls(), Backend()
    first, second = candidate("R-1", shared), candidate("R-2", shared)
    shared.load(("F-1", "1-abc"), [])
    run_round([first, second], shared, backend)
    # Four control replays of F-1 under this active set, not eight; four treatment replays each.
    assert backend.calls == {("F-1", T): 8, ("F-1", C): 4}
    assert first.outstanding == second.outstanding == 0
    for run in (first, second):
        controls = [s for s in run.samples if s.arm == C]
        assert [s.repeat for s in controls] == [0, 1, 2, 3]
        assert run.control_sources() == {"F-1": {"R-1": 4}}
    # The second candidate's evidence names whose replays its control samples were; only the
    # first stores them.
    borrowed = [e for e in second.evidence if e["arm"] == C]
    assert {e["replayed_for"] for e in borrowed} == {"R-1"}
    assert not any(e.get("replayed_for") for e in first.evidence)
    assert first.paired_verdict().evidence["cases"] == second.paired_verdict().evidence["cases"]


def test_a_control_already_stored_is_not_replayed_again():
    shared, backend = SharedControls(), Backend()
    stored = [
        (i, "R-0", Sample("F-1", "failing", C, i, {"task_completion": 0.3}, "1-abc"))
        for i in range(4)
    ]
    shared.load(("F-1", "1-abc"), stored)
    run = candidate("R-2", shared)
    run_round([run], shared, backend)
    assert backend.calls == {("F-1", T): 4}
    assert run.control_sources() == {"F-1": {"R-0": 4}}


def test_another_active_set_does_not_share():
    shared, backend = SharedControls(), Backend()
    first, second = candidate("R-1", shared, "1-abc"), candidate("R-2", shared, "2-def")
    run_round([first, second], shared, backend)
    assert backend.calls == {("F-1", T): 8, ("F-1", C): 8}
    assert second.control_sources() == {"F-1": {"R-2": 4}}


def test_without_a_shared_set_each_candidate_replays_its_own_controls():
    backend = Backend()
    first, second = candidate("R-1", None), candidate("R-2", None)
    for run in (first, second):
        for job in run.next_batch():
            run.record(backend(job))
    assert backend.calls == {("F-1", T): 8, ("F-1", C): 8}


# --- the design's tuning on the grid (docs/semantics.md#s21-3) -------------------------------

WINS = [PairedCase(f"W{i}", "win", None) for i in (1, 2)]


def test_a_looks_wins_follow_its_failing_cases():
    cfg = PairedConfig(max_repeats=8, futility_beta=None, wins_follow=True, wins_lead=False)
    first = next_requests([], FAILING + WINS, cfg)
    assert {case for case, _ in first} == {"F1", "F2", "F3"} and len(first) == 24
    samples = []
    for case in ("F1", "F2", "F3"):
        samples += arm(case, T, [1.0] * 4, "") + arm(case, C, [0.0] * 4, "")
    # A clear rescue on the failing cases is not promoted before the wins are replayed.
    verdict = decide_paired(samples, FAILING + WINS, cfg)
    assert verdict.outcome == "pending" and not verdict.evidence["improvement"]["significant"]
    wins = next_requests(samples, FAILING + WINS, cfg)
    assert {case for case, _ in wins} == {"W1", "W2"} and len(wins) == 16
    for case in ("W1", "W2"):
        samples += [Sample(case, "win", a, i, {OC: 1.0}) for a in (T, C) for i in range(4)]
    assert decide_paired(samples, FAILING + WINS, cfg).outcome == "promote"


def test_a_futility_stop_needs_no_win_replay():
    cfg = PairedConfig(max_repeats=8, futility_beta=None, wins_follow=True, wins_lead=False)
    samples = []
    for case in ("F1", "F2", "F3"):
        samples += arm(case, T, [0.0] * 4, "") + arm(case, C, [1.0, 0.0, 1.0, 0.0], "")
    verdict = decide_paired(samples, FAILING + WINS, cfg)
    assert verdict.outcome == "retire" and verdict.reason.endswith("(a futility stop)")


def futility_look(cases: int, treatment: list[float], control: list[float]) -> list[Sample]:
    samples = []
    for case in ("F1", "F2", "F3")[:cases]:
        samples += arm(case, T, treatment, "") + arm(case, C, control, "")
    return samples


def test_futility_does_not_stop_a_look_that_cannot_rule_out_the_lift():
    # An estimate of −0.25 from one case at 4 repeats: the sign boundary stops it, but a rule
    # lifting success by 0.2 reads that low often enough; the test of the rates waits.
    samples = futility_look(1, [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0])
    sign = decide_paired(samples, FAILING[:1], PairedConfig(max_repeats=8, futility_beta=None))
    assert sign.outcome == "retire" and "futility" in sign.reason
    cfg = PairedConfig(max_repeats=8, futility_beta=0.02, futility_effect=0.2)
    verdict = decide_paired(samples, FAILING[:1], cfg)
    assert verdict.evidence["improvement"]["effect"] == pytest.approx(-0.25)
    assert verdict.evidence["improvement"]["futility_p"] >= 0.02
    assert verdict.outcome == "pending"


def test_futility_stops_a_look_whose_test_rules_out_the_lift():
    # Three cases, each 0 of 4 under treatment against 3 of 4 under control: a lift of 0.2 is
    # rejected at level 0.02, so the rule stops, and the reason says what was ruled out.
    samples = futility_look(3, [0.0] * 4, [1.0, 1.0, 1.0, 0.0])
    cfg = PairedConfig(max_repeats=8, futility_beta=0.02, futility_effect=0.2)
    verdict = decide_paired(samples, FAILING, cfg)
    p = verdict.evidence["improvement"]["futility_p"]
    assert p < 0.02 and verdict.evidence["futility_bound"] == pytest.approx(p)
    assert verdict.outcome == "retire"
    assert "a lift of 0.2 ruled out at level 0.02" in verdict.reason
    assert verdict.reason.endswith("(a futility stop)")
