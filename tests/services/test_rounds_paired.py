"""Rounds under the paired design (semantics §17): two arms per case, samples that accumulate
across rounds, a sequential decision, and the evidence in the journal."""

import pytest

from lifecycle.models import JournalEvent, Rule
from lifecycle.services.reports import reports_ingest
from lifecycle.validation import read_jsonl
from replay.models import ReplaySample
from replay.rounds import round_run
from tests.builders import T0, jsonl, report
from tests.scenarios import corpus, failing, rule, win

ARMS_SEEN: list = []


def arms(case, context):
    """Treatment helps by +0.6 when the candidate was read; control is the case as recorded,
    give or take a little by repeat. Records which arm was asked for."""
    context.mark_execution_started()
    shown = [r["id"] for r in context.rule_tool(scope=case.rule["scope"])]
    ARMS_SEEN.append((case.id, context.arm, context.repeat, case.rule["id"] in shown))
    metrics = dict(case.trajectory["metrics"])
    wobble = 0.01 * (context.repeat % 3)
    lift = 0.6 if case.rule["id"] in shown else 0.0
    metrics["task_completion"] = round(metrics["task_completion"] + lift + wobble, 3)
    return {"traces": [{"metrics": metrics}]}


def never_reads(case, context):
    context.mark_execution_started()
    return {"traces": [{"metrics": dict(case.trajectory["metrics"])}]}


@pytest.fixture
def paired(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_rounds_paired:arms"
    settings.CAUTERWEB_REPLAY_DESIGN = "paired"
    settings.CAUTERWEB_REPLAY_CONCURRENCY = 1
    settings.CAUTERWEB_MAX_FAILING_CASES = 1
    settings.CAUTERWEB_MAX_PROTECTED_WINS = 0
    settings.CAUTERWEB_VERIFIER = ""
    settings.CAUTERWEB_LOCK_URL = ""
    ARMS_SEEN.clear()
    return settings


def round_events(round_id: int) -> list[JournalEvent]:
    return list(JournalEvent.objects.filter(round_id=round_id).order_by("id"))


def retired_in_one_round(rule_id: str, *, replays: int) -> list[tuple]:
    """The journal rows (type, rule) of a round that retires one candidate on its replays."""
    return [
        ("validation_round_started", None),
        ("validation_candidate_started", rule_id),
        *[("validation_replay_case", rule_id)] * replays,
        ("validation_verdict", rule_id),
        ("rule_retired", rule_id),
        ("validation_round_finished", None),
    ]


@pytest.mark.django_db
def test_a_rule_that_helps_is_promoted_on_paired_evidence_with_exact_journal_rows(paired):
    # One case: its first look (4 against 4, p ≥ 1/70) cannot be decisive, so every look is
    # given in this one round (the schedule across rounds is tested below).
    paired.CAUTERWEB_REPLAY_LOOKS_PER_ROUND = 2
    corpus(failing("F-1"))
    rule()
    vround = round_run()
    rows = round_events(vround.pk)
    cases = [e.evidence for e in rows if e.type == "validation_replay_case"]
    spent = len(cases)
    assert [(e.type, e.rule_id) for e in rows] == [
        ("validation_round_started", None),
        ("validation_candidate_started", "R-1"),
        *[("validation_replay_case", "R-1")] * spent,
        ("validation_verdict", "R-1"),
        ("rule_promoted", "R-1"),
        ("validation_round_finished", None),
    ]
    # Arms alternate T, C, T, C …; each arm counts its own repeats; the control arm never
    # sees the candidate (semantics §17.1).
    assert [(c["arm"], c["repeat"]) for c in cases] == [
        (arm, i // 2) for i, arm in enumerate(["treatment", "control"] * (spent // 2))
    ]
    assert [(a, r, read) for _, a, r, read in ARMS_SEEN] == [
        (c["arm"], c["repeat"], c["arm"] == "treatment") for c in cases
    ]
    assert {c["outcome"] for c in cases} == {"scored"}
    verdict = rows[-3].evidence
    assert (verdict["outcome"], verdict["validator"], verdict["pending_reason"]) == (
        "promote",
        "replay",
        None,
    )
    evidence = rows[-2].evidence["paired"]
    assert evidence["replays"] == spent == ReplaySample.objects.filter(rule_id="R-1").count()
    f1 = evidence["cases"]["F-1"]["arms"]
    assert f1["treatment"]["metrics"]["task_completion"]["n"] == spent // 2
    assert f1["control"]["metrics"]["task_completion"]["n"] == spent // 2
    improvement = evidence["improvement"]
    assert improvement["metric"] == "task_completion" and improvement["significant"]
    assert improvement["effect"] >= 0.05 and improvement["ci"][0] > 0
    assert rows[-2].evidence["validator"] == "replay"
    r = Rule.objects.get(pk="R-1")
    assert (r.state, r.replay_attempts, r.last_validator) == ("active", 1, "replay")


@pytest.mark.django_db
def test_samples_accumulate_and_replay_stops_at_max_repeats(paired):
    paired.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_rounds_paired:never_reads"
    paired.CAUTERWEB_REPLAY_MAX_REPEATS = 2
    corpus(failing("F-1"))
    rule()
    first = round_run()
    r = Rule.objects.get(pk="R-1")
    # Every treatment replay went unread: no evidence for or against, the candidate waits.
    assert (r.state, r.pending_reason, r.replay_attempts) == (
        "candidate",
        "candidate_not_exercised",
        1,
    )
    stored = list(
        ReplaySample.objects.order_by("arm", "repeat").values_list("arm", "repeat", "outcome")
    )
    assert stored == [
        ("control", 0, "scored"),
        ("control", 1, "scored"),
        ("treatment", 0, "candidate_not_exercised"),
        ("treatment", 1, "candidate_not_exercised"),
    ]
    second = round_run()
    # At max repeats nothing more is replayed; the attempt still counts (semantics §7.10).
    assert not JournalEvent.objects.filter(round_id=second.pk, type="validation_replay_case")
    assert ReplaySample.objects.count() == 4 and first.pk != second.pk
    assert Rule.objects.get(pk="R-1").replay_attempts == 2


# --- the schedule across rounds (semantics §17.3) -------------------------------------------------


def _rows(round_id: int) -> list[tuple]:
    return [
        (e.type, e.rule_id, e.evidence.get("arm"), e.evidence.get("repeat"))
        for e in round_events(round_id)
    ]


@pytest.mark.django_db
def test_one_look_per_round_leaves_the_rule_pending_and_the_trial_waits_for_its_evidence(
    paired,
):
    paired.CAUTERWEB_REPLAY_LOOKS_PER_ROUND = 1
    corpus(failing("F-1"))
    rule()
    # Five sessions that all show the target condition: a forward trial would retire this
    # rule at once ("did not improve on baseline", semantics §8.4).
    breached = [report(f"s{i}", T0, notices=["breach:task_completion"]) for i in range(5)]
    reports_ingest(read_jsonl(jsonl(*breached)))
    first = round_run()
    arms = [("treatment", "control")[i % 2] for i in range(8)]
    assert _rows(first.pk) == [
        ("validation_round_started", None, None, None),
        ("validation_candidate_started", "R-1", None, None),
        *[("validation_replay_case", "R-1", arm, i // 2) for i, arm in enumerate(arms)],
        ("validation_verdict", "R-1", None, None),
        ("validation_round_finished", None, None, None),
    ]
    verdict = round_events(first.pk)[-2].evidence
    # One case of 4 against 4 (p ≥ 1/70) cannot clear the first look's share of alpha, nor
    # exclude any shift at that level.
    reason = "effect +0.60 [−∞, +∞]; needs more samples: 4 of 10 repeats per case"
    assert {k: verdict[k] for k in ("outcome", "validator", "reason", "pending_reason")} == {
        "outcome": "pending",
        "validator": "replay",
        "reason": reason,
        "pending_reason": "replay_inconclusive",
    }
    assert verdict["details"]["replay_attempts"] == 0
    trial = verdict["details"]["trial"]
    assert (trial["observed_sessions"], trial["trial_rate"]) == (5, 1.0)  # not consulted
    paired_evidence = verdict["details"]["replay"]["paired"]
    assert (paired_evidence["look"], paired_evidence["replays"]) == (1, 8)
    r = Rule.objects.get(pk="R-1")
    assert (r.state, r.pending_reason, r.replay_attempts, r.last_validator) == (
        "candidate",
        "replay_inconclusive",
        0,
        "replay",
    )
    assert r.pending_text == f"replay inconclusive: {reason}"

    second = round_run()
    assert _rows(second.pk) == [
        ("validation_round_started", None, None, None),
        ("validation_candidate_started", "R-1", None, None),
        *[("validation_replay_case", "R-1", arm, 4 + i // 2) for i, arm in enumerate(arms)],
        ("validation_verdict", "R-1", None, None),
        ("rule_promoted", "R-1", None, None),
        ("validation_round_finished", None, None, None),
    ]
    assert round_events(second.pk)[1].evidence["replay_attempts"] == 0
    promoted = round_events(second.pk)[-2].evidence
    assert promoted["validator"] == "replay"
    # Decided on every sample the rule has: round 1's and round 2's.
    assert promoted["paired"]["replays"] == 16 == ReplaySample.objects.count()
    arms_seen = promoted["paired"]["cases"]["F-1"]["arms"]
    assert arms_seen["treatment"]["metrics"]["task_completion"]["n"] == 8
    assert arms_seen["control"]["metrics"]["task_completion"]["n"] == 8
    assert promoted["paired"]["look"] == 2 and promoted["paired"]["improvement"]["significant"]
    r = Rule.objects.get(pk="R-1")
    assert (r.state, r.replay_attempts, r.last_validator) == ("active", 1, "replay")
    assert r.verdict_reason.startswith("improved task_completion: effect +0.60 [+0.59, +0.61]")


@pytest.mark.django_db
def test_a_candidate_that_wants_samples_reaches_max_repeats_past_max_replay_attempts(paired):
    # Four looks of 4 at one look per round, with a single replay attempt allowed: only the
    # round that completes the evidence spends it (semantics §7.10, §17.3).
    paired.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_rounds_paired:never_reads"
    paired.CAUTERWEB_REPLAY_MAX_REPEATS = 16
    paired.CAUTERWEB_MAX_REPLAY_ATTEMPTS = 1
    corpus(failing("F-1"))
    rule()
    seen = []
    for _ in range(5):
        round_run()
        r = Rule.objects.get(pk="R-1")
        seen.append((ReplaySample.objects.count(), r.replay_attempts, r.last_validator))
    assert seen == [
        (8, 0, "replay"),
        (16, 0, "replay"),
        (24, 0, "replay"),
        (32, 1, "replay"),
        (32, 1, "forward_trial"),
    ]


def treatment_fails_control_half(case, context):
    """Pass/fail: the treatment arm never succeeds, the control arm every other repeat."""
    context.mark_execution_started()
    context.rule_tool(scope=case.rule["scope"])  # the treatment arm reads its candidate
    metrics = dict(case.trajectory["metrics"])
    passed = context.arm == "control" and context.repeat % 2 == 0
    metrics["task_completion"] = 1.0 if passed else 0.0
    return {"traces": [{"metrics": metrics}]}


@pytest.mark.django_db
@pytest.mark.parametrize(("beta", "after_one_look"), [(0.0, "retired"), (0.02, "candidate")])
def test_the_futility_boundary_is_the_configured_one(paired, beta, after_one_look):
    # 0 of 4 against 2 of 4 on one case: below zero, so the sign retires at the first look;
    # the exact test of the success rates cannot rule out a lift of 0.2 from four repeats
    # and waits for more (semantics §21.3, CAUTERWEB_REPLAY_FUTILITY_BETA).
    paired.CAUTERWEB_REPLAY_BACKEND = (
        "tests.services.test_rounds_paired:treatment_fails_control_half"
    )
    paired.CAUTERWEB_REPLAY_FUTILITY_BETA = beta
    corpus(failing("F-1"))
    rule()
    round_run()
    candidate = Rule.objects.get()
    assert candidate.state == after_one_look
    if after_one_look == "retired":
        assert (
            "futility" in candidate.verdict_reason or "no improvement" in candidate.verdict_reason
        )
    else:
        assert ReplaySample.objects.filter(rule_id=candidate.pk).count() == 8


def treatment_fails_control_passes(case, context):
    """Pass/fail: the treatment arm never succeeds, the control arm always does."""
    context.mark_execution_started()
    context.rule_tool(scope=case.rule["scope"])  # the treatment arm reads its candidate
    metrics = dict(case.trajectory["metrics"])
    metrics["task_completion"] = 1.0 if context.arm == "control" else 0.0
    return {"traces": [{"metrics": metrics}]}


@pytest.mark.django_db
def test_with_the_defaults_a_first_look_that_rules_a_lift_out_retires_with_its_journal_rows(
    paired,
):
    # 0 of 4 against 4 of 4: the exact test of the success rates rules out a lift of 0.2 at
    # the first look's 0.01 (docs/semantics.md#s21-3), so the rule is retired after 8 replays.
    paired.CAUTERWEB_REPLAY_BACKEND = (
        "tests.services.test_rounds_paired:treatment_fails_control_passes"
    )
    corpus(failing("F-1"))
    rule()
    vround = round_run()
    rows = round_events(vround.pk)
    assert [(e.type, e.rule_id) for e in rows] == retired_in_one_round("R-1", replays=8)
    reason = (
        "no improvement on task_completion: effect −1.00 [−∞, +∞], p 1; a lift of 0.2 ruled out"
        " at level 0.01 (exact test of the success rates, p 0.000655) at look 1 of 3 (a futility"
        " stop)"
    )
    verdict, retired = rows[-3].evidence, rows[-2].evidence
    assert (verdict["outcome"], verdict["reason"], verdict["pending_reason"]) == (
        "retire",
        reason,
        None,
    )
    evidence = verdict["details"]["replay"]["paired"]
    assert (evidence["look"], evidence["looks"], evidence["replays"]) == (1, 3, 8)
    assert (evidence["futility_test"], evidence["futility_bound"]) == ("rates", 0.000655)
    assert evidence["improvement"]["futility_beta"] == 0.01
    assert (retired["from"], retired["to"], retired["reason"]) == ("candidate", "retired", reason)
    assert retired["paired"] == evidence
    assert Rule.objects.get(pk="R-1").state == "retired"


def breaks_the_wins(case, context):
    """The candidate, once read, loses every protected win's task and changes nothing on the
    failing case; without it each case replays as recorded."""
    context.mark_execution_started()
    shown = [r["id"] for r in context.rule_tool(scope=case.rule["scope"])]
    metrics = dict(case.trajectory["metrics"])
    if case.kind == "win" and case.rule["id"] in shown:
        metrics["task_completion"] = 0.0
    return {"traces": [{"metrics": metrics}]}


@pytest.mark.django_db
def test_with_the_defaults_a_broken_win_retires_before_the_failing_case_is_replayed(paired):
    # The wins of each look come first and their regressions are tested at every look
    # (docs/semantics.md#s21-3): two wins lost 4 times of 4 against 4 of 4 kept (p 1/12870,
    # under the first look's O'Brien–Fleming share) retire the rule on 16 replays, none of
    # them of the failing case.
    paired.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_rounds_paired:breaks_the_wins"
    paired.CAUTERWEB_MAX_PROTECTED_WINS = 2
    corpus(failing("F-1"), win("W-1", 1), win("W-2", 2))
    rule()
    vround = round_run()
    rows = round_events(vround.pk)
    assert [(e.type, e.rule_id) for e in rows] == retired_in_one_round("R-1", replays=16)
    cases = [e.evidence for e in rows if e.type == "validation_replay_case"]
    assert {c["case"] for c in cases} == {"W-1", "W-2"}
    assert sorted((c["case"], c["arm"]) for c in cases) == sorted(
        [(w, a) for w in ("W-1", "W-2") for a in ("treatment", "control")] * 4
    )
    verdict, retired = rows[-3].evidence, rows[-2].evidence
    assert verdict["outcome"] == "retire"
    assert verdict["reason"].startswith("regressed task_completion on protected win W-")
    evidence = verdict["details"]["replay"]["paired"]
    assert (evidence["look"], evidence["looks"], evidence["replays"]) == (1, 3, 16)
    assert evidence["regressions_tested"] is True
    assert evidence["spending"] == {"promote": "obf", "retire": "obf"}
    assert evidence["improvement"] is None  # the failing case was never replayed
    assert retired["reason"] == verdict["reason"] and retired["paired"] == evidence
    assert ReplaySample.objects.filter(rule_id="R-1", case_id="F-1").count() == 0
    assert Rule.objects.get(pk="R-1").state == "retired"
