"""Paraphrase-aware duplicates (semantics §11 signatures, §12 comparator): recording a
candidate that says what a live rule of its scope says links it, journaled, and decides nothing."""

from datetime import UTC, datetime

import pytest

from comparison.semantic import ComparatorUnavailable
from lifecycle.models import JournalEvent, Rule, RuleState
from lifecycle.services.duplicates import rule_check_duplicate, signatures_compatible
from lifecycle.services.rules import rule_record_candidate, rule_retire
from lifecycle.states import Actor

NFF = ["tool:git", "action:git.push", "error:non_fast_forward"]
AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
BOT = Actor.agent("repair-bot")

C001 = {
    "trigger": "when git push fails with non-fast-forward",
    "directive": "pull the latest changes with rebase before pushing again",
}
# What the demo's C-012 says: the same rule in other words.
REWORDED = {
    "trigger": "if git push fails because it is not a fast-forward",
    "directive": "first pull and rebase onto the latest remote changes, then push",
}
FORCE = {
    "trigger": "when git push is rejected as non-fast-forward",
    "directive": "force push with --force to overwrite the remote branch",
}


def _scores(verdict, semantic):
    return {
        "verdict": verdict,
        "semantic": semantic,
        "token_f1": 0.3,
        "signature_agreement": 1.0,
        "trigger": {"token_f1": 0.3, "semantic": semantic},
        "directive": {"token_f1": 0.3, "semantic": semantic},
        "why": "stub",
    }


@pytest.fixture
def comparator(monkeypatch):
    """A stand-in for the semantics §12 comparator that calls C001 and REWORDED the same rule and
    anything else different, so these tests pin this module's logic, not the model's."""
    same = {frozenset({C001["directive"], REWORDED["directive"]})}

    def compare_many(pairs, signatures=None):
        return [
            _scores("match", 0.9)
            if frozenset({new["directive"], old["directive"]}) in same
            else _scores("miss", 0.4)
            for new, old in pairs
        ]

    monkeypatch.setattr("lifecycle.services.duplicates.compare_many", compare_many)


def record(text, *, rule_id, scope="git", signature=NFF, metric="task_completion"):
    """Record a candidate, then run the duplicate check its commit enqueues."""
    rule, _ = rule_record_candidate(
        actor=BOT, rule_id=rule_id, scope=scope, signature=signature, metric=metric, now=AT, **text
    )
    rule_check_duplicate(rule_id=rule.id, now=AT)
    rule.refresh_from_db()
    return rule


@pytest.mark.django_db
def test_a_reworded_copy_in_the_same_scope_is_linked_and_journaled(comparator):
    record(C001, rule_id="C-001")
    copy = record(REWORDED, rule_id="C-012")
    copy.refresh_from_db()
    assert copy.duplicate_of_id == "C-001"
    # It stays a candidate in its own right: the link decides nothing (semantics §3).
    assert copy.state == RuleState.CANDIDATE
    events = list(JournalEvent.objects.filter(rule_id="C-012").values_list("type", "actor"))
    assert events == [("rule_added", "repair-bot"), ("rule_duplicate_suspected", "repair-bot")]
    evidence = JournalEvent.objects.get(type="rule_duplicate_suspected").evidence
    assert evidence["duplicate_of"] == "C-001"
    assert evidence["other_state"] == "candidate"
    assert evidence["other"] == C001
    assert evidence["verdict"] == "match"
    assert evidence["semantic"] == 0.9
    assert evidence["directive"] == {"token_f1": 0.3, "semantic": 0.9}
    assert set(evidence) >= {"token_f1", "signature_agreement", "trigger", "why"}


# With the real comparator (semantics §12): the demo's C-012 and C-002 against C-001, and C-006
# ("back off") against C-005 ("retry immediately").


@pytest.mark.django_db
def test_the_comparator_links_a_rewording_of_the_f001_rule():
    record(C001, rule_id="C-001")
    assert record(REWORDED, rule_id="C-012").duplicate_of_id == "C-001"


@pytest.mark.django_db
def test_the_comparator_does_not_link_shared_words_with_the_opposite_advice():
    record(C001, rule_id="C-001")
    force = record(FORCE, rule_id="C-002")
    assert force.duplicate_of_id is None
    assert not JournalEvent.objects.filter(type="rule_duplicate_suspected").exists()


@pytest.mark.django_db
def test_the_comparator_does_not_link_back_off_to_retry_immediately():
    http = ["tool:http", "action:http.request", "error:http_429"]
    record(
        {
            "trigger": "when an API responds 429 Too Many Requests",
            "directive": "retry the request immediately until it succeeds",
        },
        rule_id="C-005",
        scope="http",
        signature=http,
    )
    backoff = record(
        {
            "trigger": "if the rate limiter returns HTTP 429",
            "directive": "honour Retry-After and back off exponentially before retrying",
        },
        rule_id="C-006",
        scope="http",
        signature=http,
    )
    assert backoff.duplicate_of_id is None


@pytest.mark.django_db
def test_the_same_words_in_another_scope_are_not_a_duplicate(comparator):
    record(C001, rule_id="C-001", scope="git")
    other = record(REWORDED, rule_id="C-012", scope="repo:payments")
    assert other.duplicate_of_id is None


@pytest.mark.django_db
def test_the_same_words_about_another_failure_are_not_a_duplicate(comparator):
    record(C001, rule_id="C-001")
    auth = ["tool:git", "action:git.push", "error:auth_denied"]
    other = record(REWORDED, rule_id="C-012", signature=auth)
    assert other.duplicate_of_id is None


@pytest.mark.django_db
def test_a_retired_rule_is_history_not_a_copy(engine, comparator):
    record(C001, rule_id="C-001")
    rule_retire(rule_id="C-001", actor=engine, evidence={}, reason="no improvement on F-001")
    assert record(REWORDED, rule_id="C-012").duplicate_of_id is None


@pytest.mark.django_db
def test_recording_the_same_rule_again_journals_nothing_new(comparator):
    record(C001, rule_id="C-001")
    record(REWORDED, rule_id="C-012")
    record(REWORDED, rule_id="C-012")
    assert JournalEvent.objects.filter(type="rule_duplicate_suspected").count() == 1


@pytest.mark.django_db
def test_the_comparator_is_not_called_when_no_rule_of_the_scope_is_compatible(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("compare_many should not run")

    monkeypatch.setattr("lifecycle.services.duplicates.compare_many", refuse)
    record(C001, rule_id="C-001", scope="git")
    record(C001, rule_id="C-003", scope="ci")
    record(C001, rule_id="C-004", signature=["tool:git", "error:auth_denied"])
    assert not Rule.objects.filter(duplicate_of__isnull=False).exists()


@pytest.mark.django_db
def test_a_comparator_that_cannot_load_never_blocks_recording(monkeypatch, caplog):
    def unavailable(*args, **kwargs):
        raise ComparatorUnavailable("model file missing")

    monkeypatch.setattr("lifecycle.services.duplicates.compare_many", unavailable)
    record(C001, rule_id="C-001")
    copy = record(REWORDED, rule_id="C-012")
    assert copy.duplicate_of_id is None
    assert "duplicate check skipped for C-012: model file missing" in caplog.text


@pytest.mark.django_db
def test_among_several_matches_the_closest_is_chosen(monkeypatch):
    record(C001, rule_id="C-001")
    record(REWORDED, rule_id="C-005")

    def scores(pairs, signatures=None):
        semantic = {"C-001": 0.7, "C-005": 0.9}
        return [
            {
                "verdict": "match",
                "semantic": semantic["C-001" if other == C001 else "C-005"],
                "token_f1": 0.5,
                "signature_agreement": 1.0,
                "trigger": {"token_f1": 0.5, "semantic": 0.5},
                "directive": {"token_f1": 0.5, "semantic": 0.5},
                "why": "same rule",
            }
            for _, other in pairs
        ]

    monkeypatch.setattr("lifecycle.services.duplicates.compare_many", scores)
    third = record(
        {"trigger": "when a push is not a fast-forward", "directive": "pull, rebase, push"},
        rule_id="C-009",
    )
    assert third.duplicate_of_id == "C-005"


@pytest.mark.parametrize(
    ("a", "b", "compatible"),
    [
        (NFF, NFF, True),
        # One rule more specific than the other: still the same failure.
        (NFF, ["action:git.push", "error:non_fast_forward"], True),
        (NFF, ["tool:git", "action:git.push", "error:auth_denied"], False),
        (NFF, ["breach:task_completion"], False),
        (["breach:task_completion"], ["breach:task_completion", "stall:coherence"], True),
        (["breach:task_completion"], ["stall:coherence"], False),
        ([], [], False),
    ],
)
def test_signature_compatibility(a, b, compatible):
    none = frozenset()
    assert signatures_compatible(a, none, b, none) is compatible
    assert signatures_compatible(b, none, a, none) is compatible


def test_two_rules_without_failure_atoms_on_the_same_metric_are_compatible():
    family = frozenset({"task_completion"})
    assert signatures_compatible([], family, [], family, a_metric="task_completion")
    assert not signatures_compatible([], family, [], frozenset({"coherence"}))
