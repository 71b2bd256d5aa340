"""The dashboard's words (dashboard/presenters.py): one vocabulary, p-values only where they
are p-values, and messages that say what happened. Pure: no database."""

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from dashboard import presenters
from replay.engine import paired

AT = datetime(2026, 12, 7, 11, 2, 33, tzinfo=UTC)


def figures(*, win_harm: float, repeats: int = 8) -> dict:
    cases = [
        paired.PairedCase(f"F-{i}", "failing", "task_completion", frozenset({"task_completion"}))
        for i in (1, 2)
    ] + [paired.PairedCase("S-1", "win", None)]
    samples = [
        paired.Sample(
            c.case_id,
            c.case_kind,
            arm,
            r,
            {
                "task_completion": (0.3 if c.case_kind == "failing" else 0.9)
                + (0.5 if arm == "treatment" and c.case_kind == "failing" else 0)
                - (win_harm if arm == "treatment" and c.case_kind == "win" else 0)
                + 0.01 * (r % 2)
            },
        )
        for c in cases
        for arm in paired.ARMS
        for r in range(repeats)
    ]
    return paired.decide_paired(
        samples,
        cases,
        paired.PairedConfig(
            max_repeats=8, futility_beta=None, retire_spending="last", wins_lead=False
        ),
    ).evidence


def test_every_paired_test_is_listed_with_the_kind_of_its_p_value():
    rows = presenters.paired_tests(figures(win_harm=0.6))
    first, *regressions = rows
    assert first["what"] == "task_completion better under treatment"
    assert first["p_words"] == "one-sided p" and first["result"] == "significant"
    win = next(r for r in regressions if "protected wins" in r["where"])
    assert win["p_words"] == "Holm-adjusted one-sided p"
    assert (win["result"], win["significant"], win["decisive"]) == ("significant", True, True)
    assert win["interval"].startswith("[\u2212")


def test_a_regression_test_a_look_spends_nothing_on_is_not_tested_and_has_no_p_value():
    rows = presenters.paired_tests(figures(win_harm=0.6, repeats=4))
    untested = [r for r in rows if "worse" in r["what"]]
    assert untested and all(r["result"] == "not tested at this look" for r in untested)
    assert all(r["p"] is None and r["interval"] == "" for r in untested)


@pytest.mark.parametrize(
    ("low", "high", "words"),
    [
        (-0.16, -0.13, "[\u22120.16, \u22120.13]"),
        (None, 0.43, "[open, +0.43]"),
        (0.0, None, "[+0.00, open]"),
    ],
)
def test_an_interval_never_says_infinity(low, high, words):
    assert presenters.interval(low, high) == words


def test_runs_of_alike_events_in_one_round_fold_into_one_line():
    def event(type_, round_id):
        return SimpleNamespace(type=type_, round_id=round_id, at=AT)

    events = [
        event("validation_verdict", 2),
        *[event("validation_replay_case", 2) for _ in range(40)],
        event("validation_candidate_started", 2),
        event("validation_replay_case", 1),
        event("validation_replay_case", 1),
    ]
    groups = presenters.timeline_groups(events)
    assert [(g["words"], g["count"], g["round_id"]) for g in groups] == [
        ("validation verdict", 1, 2),
        ("validation replay case", 40, 2),
        ("validation candidate started", 1, 2),
        ("validation replay case", 2, 1),
    ]


def _rule(**fields):
    base = {
        "id": "C-1-v2",
        "state": "candidate",
        "scope": "git",
        "verdict_reason": "",
        "first_attempted_at": None,
        "pending_reason": "",
        "pending_text": "not yet attempted",
    }
    return SimpleNamespace(**{**base, **fields})


@pytest.mark.parametrize(
    ("fields", "created", "words"),
    [
        ({}, True, "C-1 re-queued as candidate C-1-v2; the next round validates it."),
        (
            {"state": "active", "verdict_reason": "improved task_completion"},
            True,
            "C-1 re-queued as C-1-v2; a round validated it at once and promoted it on its own "
            "fresh evidence: improved task_completion",
        ),
        (
            {"first_attempted_at": AT, "pending_text": "forward trial in progress"},
            True,
            "C-1 re-queued as candidate C-1-v2: forward trial in progress.",
        ),
        ({"state": "active"}, False, "C-1 was already re-queued as C-1-v2 (active)."),
    ],
)
def test_a_requeue_says_what_the_version_is_after_the_request(fields, created, words):
    # The flash once said "re-queued as candidate" over a version a round had just promoted.
    assert presenters.requeue_words("C-1", _rule(**fields), created=created) == words


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({}, "not yet attempted"),
        ({"first_attempted_at": AT}, "no verdict yet"),
        (
            {"pending_reason": "trial_in_progress"},
            "forward trial in progress: waiting for sessions",
        ),
    ],
)
def test_a_candidates_waiting_words_tell_never_attempted_from_no_verdict(fields, words):
    assert presenters.waiting_words(_rule(**fields)) == words


def test_pending_rows_word_each_reason_in_the_dashboards_vocabulary():
    rows = presenters.pending_rows([("replay_inconclusive", 2), ("not_attempted", 1)])
    assert rows == [
        (
            "replay_inconclusive",
            "replay inconclusive: its replays neither promote nor retire it yet",
            2,
        ),
        ("not_attempted", "not yet attempted", 1),
    ]


def test_the_journal_export_says_exactly_what_it_holds():
    assert presenters.journal_export_words({}) == "all events"
    words = presenters.journal_export_words(
        {"type": "rule_retired", "rule": "C-1", "round_id": 3, "actor": "engine", "since_at": AT}
    )
    assert words == (
        "every event of type rule_retired of rule C-1 of round 3 by engine since "
        "2026-12-07 11:02:33 UTC"
    )


def test_the_matrix_opens_on_the_headlines_metric_then_the_rules_own():
    measured = ["argument_correctness", "coherence", "task_completion"]
    assert (
        presenters.default_metric(measured, preferred=[None, "task_completion"])
        == "task_completion"
    )
    assert (
        presenters.default_metric(measured, preferred=["coherence", "task_completion"])
        == "coherence"
    )
    # Nothing preferred was measured: the first measured, as before.
    assert (
        presenters.default_metric(measured, preferred=["outcome_correct"]) == "argument_correctness"
    )


def test_notes_say_when_the_control_arms_baseline_moved_and_where_the_agent_reads_rules():
    rule = SimpleNamespace(scope="docs")
    notes = presenters.evidence_notes(
        rule,
        changes=[{"rule": "C-001", "state": "active", "at": AT}],
        elsewhere=[{"rule": "C-014", "scope": "repo:payments"}],
    )
    assert notes[0].startswith(
        "The active rules of scope docs changed while this rule's replays were taken "
        "(C-001 promoted at 2026-12-07 11:02:33)"
    )
    assert "did read rules in scope repo:payments: C-014 (repo:payments)" in notes[1]
    assert presenters.evidence_notes(rule, changes=[], elsewhere=[]) == []


def test_notes_name_the_candidates_whose_control_replays_a_rule_shares():
    rule = SimpleNamespace(scope="git", id="C-002")
    controls = {"F-8": {"C-001": 4, "C-002": 4}, "F-9": {"C-002": 8}}
    (note,) = presenters.evidence_notes(rule, changes=[], elsewhere=[], controls=controls)
    assert note.endswith("replayed for: F-8 (4 for C-001, 4 for C-002).")
    own = {"F-9": {"C-002": 8}}
    assert presenters.evidence_notes(rule, changes=[], elsewhere=[], controls=own) == []


@pytest.mark.parametrize(
    ("extraction", "words"),
    [
        ({"verdict": "match", "why": "same rule (p 0.92)"}, "the same rule as expected"),
        (
            {"verdict": "miss", "conflicts": ["directive: only the extracted rule says force"]},
            "a different rule from the one expected — directive: only the extracted rule says force",
        ),
        (
            {"verdict": "uncertain"},
            "uncertain — a reviewer decides (the comparator is not sure either way)",
        ),
    ],
)
def test_the_extraction_verdict_is_worded_from_its_fields_never_its_p(extraction, words):
    assert presenters.extraction_words(extraction) == words
    assert "p 0." not in presenters.extraction_words(extraction)
