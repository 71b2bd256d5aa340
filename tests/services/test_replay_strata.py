"""Strata and shared control arms on the database (docs/semantics.md#s21-1,
docs/semantics.md#s21-2): a promotion between two looks of another candidate starts a new
baseline, kept apart in the journal and the stored samples; a control replay of a case under
one active set is run once for every candidate replaying it."""

import threading

import pytest

from lifecycle.models import JournalEvent, Rule
from replay.models import ReplaySample
from replay.rounds import round_run
from tests.scenarios import corpus, failing, rule

CALLS: list = []
_LOCK = threading.Lock()


def agent(case, context):
    """R-1 rescues the failing cases (+0.6 task completion). R-2 does nothing, and when it is
    shown it is followed first — so with R-1 active, R-2 keeps R-1 from rescuing. Counts its
    replays by (case, arm, rule under test)."""
    context.mark_execution_started()
    shown = [r["id"] for r in context.rule_tool(scope=case.rule["scope"])]
    with _LOCK:
        CALLS.append((case.id, context.arm, case.rule["id"]))
    metrics = dict(case.trajectory["metrics"])
    first = next((r for r in ("R-2", "R-1") if r in shown), None)
    lift = 0.6 if first == "R-1" else 0.0
    wobble = 0.01 * (context.repeat % 3)
    metrics["task_completion"] = round(metrics["task_completion"] + lift + wobble, 3)
    return {"traces": [{"metrics": metrics}]}


@pytest.fixture
def strata(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_replay_strata:agent"
    settings.CAUTERWEB_REPLAY_DESIGN = "paired"
    settings.CAUTERWEB_REPLAY_CONCURRENCY = 1
    settings.CAUTERWEB_MAX_FAILING_CASES = 3
    settings.CAUTERWEB_MAX_PROTECTED_WINS = 0
    settings.CAUTERWEB_VERIFIER = ""
    settings.CAUTERWEB_LOCK_URL = ""
    settings.CAUTERWEB_REPLAY_LOOKS_PER_ROUND = 1
    # Two looks of 4 and the sign boundary (the defaults before docs/semantics.md#s21-3's
    # grid): R-2, which changes nothing before R-1 is promoted, gathers after its first look
    # (the rates test would rule a lift out on these noiseless replays and stop it), and its
    # second look is its last, where a regression is tested.
    settings.CAUTERWEB_REPLAY_MAX_REPEATS = 8
    settings.CAUTERWEB_REPLAY_FUTILITY_BETA = 0.0
    CALLS.clear()
    corpus(failing("F-1", 1), failing("F-2", 2), failing("F-3", 3))
    rule("R-1")
    rule("R-2")
    return settings


def events(rule_id: str, type_: str) -> list[JournalEvent]:
    return list(JournalEvent.objects.filter(rule_id=rule_id, type=type_).order_by("id"))


@pytest.mark.django_db
@pytest.mark.parametrize("concurrency", [1, 4])
def test_two_candidates_on_the_same_cases_replay_each_control_once(strata, concurrency):
    strata.CAUTERWEB_REPLAY_CONCURRENCY = concurrency
    round_run()
    control = [(case, rule_id) for case, arm, rule_id in CALLS if arm == "control"]
    treatment = [(case, rule_id) for case, arm, rule_id in CALLS if arm == "treatment"]
    # One look each: 4 treatment replays per case and candidate, 4 control replays per case
    # for both, run for the first candidate in the queue.
    assert sorted(treatment) == sorted(
        [(c, r) for c in ("F-1", "F-2", "F-3") for r in ("R-1", "R-2")] * 4
    )
    assert sorted(control) == sorted([(c, "R-1") for c in ("F-1", "F-2", "F-3")] * 4)
    rows = ReplaySample.objects.filter(arm="control")
    assert rows.count() == 12 and set(rows.values_list("rule_id", flat=True)) == {"R-1"}
    # The second candidate's evidence says whose control replays it used.
    verdict = events("R-2", "validation_verdict")[0].evidence
    assert verdict["details"]["replay"]["paired"]["controls"] == {
        case: {"R-1": 4} for case in ("F-1", "F-2", "F-3")
    }
    shared = [
        e.evidence
        for e in events("R-2", "validation_replay_case")
        if e.evidence["arm"] == "control"
    ]
    assert len(shared) == 12 and {e["replayed_for"] for e in shared} == {"R-1"}


@pytest.mark.django_db
def test_a_promotion_between_two_looks_starts_a_new_stratum(strata):
    first = round_run()
    assert Rule.objects.get(pk="R-1").state == "active"  # promoted at its first look
    assert Rule.objects.get(pk="R-2").state == "candidate"  # no effect yet: gathering
    second = round_run()
    retired = Rule.objects.get(pk="R-2")
    assert retired.state == "retired"
    # The two looks ran under different active sets of scope git: none, then R-1.
    looks = {
        e.round_id: {
            c.evidence["stratum"]
            for c in events("R-2", "validation_replay_case")
            if c.round_id == e.round_id
        }
        for e in events("R-2", "validation_verdict")
    }
    (before,), (after,) = looks[first.pk], looks[second.pk]
    assert before.startswith("0-") and after.startswith("1-") and before != after
    stored = set(
        ReplaySample.objects.filter(rule_id="R-2", arm="treatment").values_list(
            "round_id", "active_set"
        )
    )
    assert stored == {(first.pk, before), (second.pk, after)}
    evidence = events("R-2", "rule_retired")[0].evidence["paired"]
    assert evidence["active_set"] == {"version": after, "rules": ["R-1"]}
    for case in ("F-1", "F-2", "F-3"):
        assert evidence["cases"][case]["strata"] == {
            before: {"treatment": 4, "control": 4},
            after: {"treatment": 4, "control": 4},
        }
        # Before the promotion its controls were R-1's replays; after it, its own.
        assert evidence["controls"][case] == {"R-1": 4, "R-2": 4}
    # Under keeps the failing cases from being rescued: −0.6 in that stratum, 0
    # before it, −0.3 over the two. Pooled by case the control arm would have read 0.3 for
    # four repeats and 0.9 for four, and the treatment compared with that mixture.
    row = next(
        r
        for r in evidence["regressions"]
        if r["kind"] == "failing" and r["metric"] == "task_completion"
    )
    assert row["rejected"] and row["strata"] == 6
    assert all(effect == pytest.approx(-0.3, abs=0.02) for effect in row["by_case"].values())
    assert retired.verdict_reason.startswith("regressed task_completion on failing case ")


@pytest.mark.django_db
@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_candidate_that_fails_midway_still_hands_its_control_replays_over(
    strata, monkeypatch, concurrency
):
    from replay.designs import CandidateRun

    strata.CAUTERWEB_REPLAY_CONCURRENCY = concurrency

    record = CandidateRun.record

    def failing_record(self, result):
        if self.rule_id == "R-1":
            raise RuntimeError("R-1 broke while scoring")
        return record(self, result)

    monkeypatch.setattr(CandidateRun, "record", failing_record)
    vround = round_run()
    assert [e["rule"] for e in vround.summary["errors"]] == ["R-1"]
    # R-1 died at its first result; the control replays it had started came in all the same
    # and R-2 used them.
    assert sorted(c for c, arm, _ in CALLS if arm == "control") == sorted(["F-1", "F-2", "F-3"] * 4)
    # R-2 scored them: they are its rows now, not replayed again.
    verdict = events("R-2", "validation_verdict")[0].evidence["details"]["replay"]["paired"]
    assert verdict["controls"] == {case: {"R-2": 4} for case in ("F-1", "F-2", "F-3")}
    rows = ReplaySample.objects.filter(arm="control")
    assert rows.count() == 12 and set(rows.values_list("rule_id", flat=True)) == {"R-2"}


@pytest.mark.django_db
def test_the_rule_page_shows_the_shared_control_replays_and_whose_they_were(strata, viewer_client):
    round_run()
    page = viewer_client.get("/rules/R-2/").content.decode()
    assert "This rule&#x27;s control samples were replayed for: F-1 (4 for R-1)" in page
    # Its matrix counts the control samples it used, though the rows are R-1's.
    from replay.selectors import rule_samples

    samples = rule_samples("R-2")
    assert sum(s["arm"] == "control" for s in samples) == 12
    assert {s["rule_id"] for s in samples if s["arm"] == "control"} == {"R-1"}
