"""The paired schedule across rounds (semantics §7.10, §17.3) with no database: how many looks
a round gives a candidate, what a candidate still short of its repeats is (pending, not an
attempt spent, not the forward trial's to decide), and that the next round's look continues
from the stored samples to the verdict one round with every look would give."""

import pytest

from lifecycle.metrics import MetricInfo, Registry
from replay import engine
from replay.cases import CONTROL, TREATMENT
from replay.config import PAIRED, SINGLE, RoundConfig
from replay.designs import CandidateRun, CaseSpec
from replay.dispatch import Job, RunResult
from replay.engine import Margins, Trial
from tests.builders import round_config

REGISTRY = Registry(
    {
        "outcome_correct": MetricInfo("outcome_correct", 0),
        "task_completion": MetricInfo("task_completion", 1),
    }
)
CASES = [
    CaseSpec(case_id, "failing", {"task_completion": 0.3}, ("tool:git", "error:x"))
    for case_id in ("F-1", "F-2", "F-3")
]
THIN = "effect +0.20 [−0.10, +0.50]; needs more samples: 4 of 8 repeats per case"


def config(*, looks: int, design: str = PAIRED, max_repeats: int = 8) -> RoundConfig:
    return round_config(max_wins=0, design=design, max_repeats=max_repeats, looks_per_round=looks)


def candidate(cfg: RoundConfig, prior=(), round_id: int = 1) -> CandidateRun:
    return CandidateRun(
        rule_id="R-1",
        round_id=round_id,
        rule_metric="task_completion",
        trigger_metric=None,
        retire_on=["task_completion"],
        cases=list(CASES),
        cfg=cfg,
        registry=REGISTRY,
        prior=list(prior),
    )


def lifts(*rescued: str, by: float = 0.6, read: bool = True):
    """A deterministic agent: treatment lifts task completion on the `rescued` cases only."""

    def answer(job: Job) -> RunResult:
        lift = by if job.arm == TREATMENT and job.case_id in rescued else 0.0
        value = round(0.3 + lift + 0.01 * (job.repeat % 3), 3)
        shown = ["R-1"] if read and job.arm == TREATMENT else []
        return RunResult(job, metrics={"task_completion": value}, read=shown)

    return answer


def walk(run: CandidateRun, agent) -> list[int]:
    """Run every batch the round asks for; the sizes of the batches."""
    sizes = []
    while jobs := run.next_batch():
        sizes.append(len(jobs))
        for job in jobs:
            run.record(agent(job))
    return sizes


@pytest.mark.parametrize("looks", [1, 2, 8])
def test_a_round_gives_a_candidate_at_most_looks_per_round_batches(looks):
    run = candidate(config(looks=looks))
    # A thin effect (one case of three rescued) is decided at the second look, never the first.
    sizes = walk(run, lifts("F-1"))
    assert sizes == [24, 24][: min(looks, 2)]


def test_a_candidate_short_of_its_repeats_is_pending_gathering_and_spends_no_attempt():
    run = candidate(config(looks=1))
    walk(run, lifts("F-1"))
    verdict = run.replay_verdict()
    assert (verdict.outcome, verdict.pending_reason) == ("pending", "replay_inconclusive")
    assert verdict.reason.endswith("needs more samples: 4 of 8 repeats per case")
    assert verdict.gathering and not verdict.attempt_spent
    assert run.wants_samples()


def test_the_next_round_continues_from_the_stored_samples_to_the_one_round_verdict():
    first = candidate(config(looks=1))
    walk(first, lifts("F-1"))
    second = candidate(config(looks=1), prior=first.samples, round_id=2)
    jobs = second.next_batch()
    assert {(j.arm, j.repeat) for j in jobs} == {
        (a, r) for a in (TREATMENT, CONTROL) for r in (4, 5, 6, 7)
    }
    assert jobs[0].session_id == "replay:2:R-1:F-1:treatment:4"
    for job in jobs:
        second.record(lifts("F-1")(job))
    assert second.next_batch() == []
    at_once = candidate(config(looks=8))
    walk(at_once, lifts("F-1"))
    across, whole = second.replay_verdict(), at_once.replay_verdict()
    assert (across.outcome, across.reason) == (whole.outcome, whole.reason)
    assert across.outcome == "promote" and across.attempt_spent
    assert second.paired_verdict().evidence == at_once.paired_verdict().evidence


def test_a_clear_effect_is_decided_at_the_first_look_whatever_the_looks_per_round():
    for looks in (1, 8):
        run = candidate(config(looks=looks))
        assert walk(run, lifts("F-1", "F-2", "F-3")) == [24]
        assert run.replay_verdict().outcome == "promote"


def test_complete_evidence_that_stays_pending_spends_an_attempt():
    # Never read: no comparison, ever. Once every case and arm has its repeats the replay has
    # nothing more to gather, and the attempt counts (semantics §7.10).
    run = candidate(config(looks=1, max_repeats=4))
    walk(run, lifts(read=False))
    verdict = run.replay_verdict()
    assert (verdict.outcome, verdict.pending_reason) == ("pending", "candidate_not_exercised")
    assert not verdict.gathering and verdict.attempt_spent


def test_the_single_design_ignores_the_looks_per_round():
    run = candidate(config(looks=1, design=SINGLE))
    assert walk(run, lifts("F-1")) == [3]
    assert run.looks == 0


# --- the forward trial does not pre-empt a replay still gathering (semantics §7.10, §17.4) ----

DECISIVE_TRIAL = Trial(enrolled=5, breached=0, baseline_rate=1.0)


@pytest.mark.parametrize(
    ("gathering", "decided_by"),
    [(True, engine.REPLAY), (False, engine.FORWARD_TRIAL)],
)
def test_a_decisive_trial_waits_for_a_replay_still_gathering(gathering, decided_by):
    replay = engine.Verdict(
        "pending", engine.REPLAY, THIN, "replay_inconclusive", gathering=gathering
    )
    verdict = engine.decide_candidate(
        replay=replay, trial=DECISIVE_TRIAL, over_budget=False, min_sessions=5, margins=Margins()
    )
    assert verdict.validator == decided_by
    assert verdict.outcome == ("pending" if gathering else "promote")
    if gathering:
        assert verdict == replay
