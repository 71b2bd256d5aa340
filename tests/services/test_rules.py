"""One function per state change (semantics §3, §10): each journals exactly one event in the same
transaction, and applying it twice is a no-op."""

import threading
from datetime import timedelta

import pytest
from django.db import IntegrityError, close_old_connections, connection, transaction

from lifecycle.models import JournalEvent, Rule
from lifecycle.services.reports import reports_ingest
from lifecycle.services.rules import (
    rule_promote,
    rule_record_candidate,
    rule_requeue,
    rule_retire,
    rule_retire_by_reviewer,
)
from lifecycle.states import Actor, NotAllowed, WrongState
from lifecycle.validation import InvalidRule, numbered

from ..builders import T0, candidate, report

pytestmark = pytest.mark.django_db


def events(rule_id):
    return list(JournalEvent.objects.filter(rule_id=rule_id).values_list("type", "actor"))


def test_recording_a_candidate_journals_rule_added_with_its_baseline():
    rule = candidate("C-1", actor=Actor.agent("repair-bot"))
    assert rule.state == "candidate"
    event = JournalEvent.objects.get(rule=rule)
    assert (event.type, event.actor) == ("rule_added", "repair-bot")
    # semantics §8: with no history the baseline is 1.0.
    assert event.evidence["baseline"] == {"rate": 1.0, "sessions": 0, "hits": 0}
    assert rule.pending_text == "not yet attempted"


def test_baseline_is_the_fraction_of_incident_sessions_hitting_the_metric_family():
    # semantics §8: 4 sessions had a notice, 1 of them on task_completion; healthy reports do not count.
    reports = [
        report("s1", T0, ["breach:task_completion"]),
        report("s2", T0, ["stall:coherence"]),
        report("s3", T0, ["breach:tool_correctness"]),
        report("s4", T0, ["regression:coherence"]),
        report("s5", T0, []),
        report("s1", T0 + timedelta(minutes=1), ["stall:task_completion"]),
    ]
    reports_ingest(numbered(reports))
    rule = candidate("C-1", metric="task_completion")
    assert (rule.baseline_rate, rule.baseline_sessions, rule.baseline_hits) == (0.25, 4, 1)
    no_metric = candidate("C-2", metric="", trigger="when anything breaks")
    assert no_metric.baseline_rate == 1.0  # any notice hits a rule with no metric


def test_recording_the_same_candidate_twice_is_a_no_op():
    first, created = rule_record_candidate(
        actor=Actor.agent("a"), trigger="when x", directive="do y", rule_id="C-9"
    )
    again, created_again = rule_record_candidate(
        actor=Actor.agent("b"), trigger="when x", directive="do y", rule_id="C-9"
    )
    assert (created, created_again) == (True, False)
    assert again.pk == first.pk
    assert JournalEvent.objects.filter(type="rule_added").count() == 1


def test_a_recorded_rules_text_is_immutable():
    candidate("C-1")
    with pytest.raises(InvalidRule, match="immutable") as exc:
        candidate("C-1", directive="force push")
    assert exc.value.field == "id"
    assert Rule.objects.get(pk="C-1").directive == "pull latest changes before pushing"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"trigger": ""}, "trigger"),
        ({"directive": "  "}, "directive"),
        ({"signature": ["no colon"]}, "signature"),
        ({"metric": "vibes"}, "metric"),
        ({"scope": ""}, "scope"),
        ({"tags": "git"}, "tags"),
    ],
)
def test_bad_candidates_are_refused_naming_the_field(fields, field):
    with pytest.raises(InvalidRule) as exc:
        candidate("C-1", **fields)
    assert exc.value.field == field
    assert not Rule.objects.exists()


def test_the_engine_promotes_once_and_journals_once(engine):
    rule = candidate("C-1")
    evidence = {"validator": "replay", "cases": []}
    assert rule_promote(
        rule_id=rule.id, actor=engine, evidence=evidence, reason="improved", round_id=7
    )
    assert not rule_promote(rule_id=rule.id, actor=engine, evidence=evidence, reason="improved")
    rule.refresh_from_db()
    assert rule.state == "active"
    promoted = JournalEvent.objects.get(rule=rule, type="rule_promoted")
    assert (promoted.actor, promoted.round_id) == ("engine", 7)
    assert promoted.evidence == {
        "from": "candidate",
        "to": "active",
        "reason": "improved",
        "validator": "replay",
        "cases": [],
    }


@pytest.mark.parametrize(
    "actor", [Actor.agent("repair-bot"), Actor.reviewer("rita"), Actor.extractor()]
)
def test_nobody_but_the_engine_can_promote_even_their_own_rule(actor):
    # semantics §3: the author of the rule included.
    rule = candidate("C-1", actor=actor)
    with pytest.raises(NotAllowed):
        rule_promote(rule_id=rule.id, actor=actor, evidence={})
    with pytest.raises(NotAllowed):
        rule_retire(rule_id=rule.id, actor=actor, evidence={}, reason="x")
    assert Rule.objects.get(pk="C-1").state == "candidate"
    assert events("C-1") == [("rule_added", actor.name)]


def test_a_reviewer_retires_by_hand_with_a_reason(reviewer_actor, engine):
    rule = candidate("C-1")
    with pytest.raises(InvalidRule):
        rule_retire_by_reviewer(rule_id=rule.id, actor=reviewer_actor, reason=" ")
    assert rule_retire_by_reviewer(rule_id=rule.id, actor=reviewer_actor, reason="wrong fix")
    assert not rule_retire_by_reviewer(rule_id=rule.id, actor=reviewer_actor, reason="again")
    event = JournalEvent.objects.get(rule=rule, type="rule_retired_by_reviewer")
    assert event.actor == "rita"
    assert event.evidence["reason"] == "wrong fix"
    # semantics §3: a verdict arriving after a hand retirement changes nothing.
    assert not rule_promote(rule_id=rule.id, actor=engine, evidence={})
    assert Rule.objects.get(pk="C-1").state == "retired"


def test_an_agent_cannot_retire_by_hand(agent_actor):
    rule = candidate("C-1", actor=agent_actor)
    with pytest.raises(NotAllowed):
        rule_retire_by_reviewer(rule_id=rule.id, actor=agent_actor, reason="mine")


def test_requeue_records_a_new_candidate_version_linked_to_the_old(engine, reviewer_actor):
    rule = candidate("C-1")
    with pytest.raises(WrongState):
        rule_requeue(rule_id=rule.id, actor=reviewer_actor)
    rule_retire(rule_id=rule.id, actor=engine, evidence={}, reason="no improvement on F-001")
    version, created = rule_requeue(rule_id=rule.id, actor=reviewer_actor)
    # The version reads as one: the original's id with a version number.
    assert created and version.pk == "C-1-v2"
    assert (version.state, version.replaces_id, version.trigger) == (
        "candidate",
        "C-1",
        rule.trigger,
    )
    # While that version is live, re-queuing again returns it and records nothing.
    assert rule_requeue(rule_id=rule.id, actor=reviewer_actor) == (version, False)
    assert events(version.pk) == [("rule_added", "rita")]
    assert Rule.objects.get(pk="C-1").state == "retired"


def test_once_every_version_is_retired_requeue_records_the_next_one(engine, reviewer_actor):
    rule = candidate("C-1")
    rule_retire(rule_id=rule.id, actor=engine, evidence={}, reason="no improvement")
    first, _ = rule_requeue(rule_id=rule.id, actor=reviewer_actor)
    rule_retire_by_reviewer(rule_id=first.id, actor=reviewer_actor, reason="still wrong")
    second, created = rule_requeue(rule_id=rule.id, actor=reviewer_actor)
    assert created and second.pk == "C-1-v3" and second.replaces_id == "C-1"
    # A version of a version keeps one numbering.
    third, _ = rule_requeue(rule_id=first.id, actor=reviewer_actor)
    assert third.pk == "C-1-v4" and third.replaces_id == "C-1-v2"


@pytest.mark.django_db(transaction=True)
def test_the_version_returned_is_the_rule_as_it_stands_after_the_round(engine, reviewer_actor):
    # Embedded default: the round the recording kicks runs at commit, before the service
    # returns; what it returns must not be the candidate it was before that round.
    rule = candidate("C-1", signature=["action:nothing.matches"])
    rule_retire(rule_id=rule.id, actor=engine, evidence={}, reason="no improvement")
    version, _ = rule_requeue(rule_id=rule.id, actor=reviewer_actor)
    assert version.first_attempted_at is not None
    assert version.pending_reason == Rule.objects.get(pk=version.pk).pending_reason != ""


def test_a_version_id_too_long_for_an_id_falls_back_to_a_generated_one(engine, reviewer_actor):
    long_id = "R" * 62
    rule = candidate(long_id)
    rule_retire(rule_id=rule.id, actor=engine, evidence={}, reason="no improvement")
    version, _ = rule_requeue(rule_id=rule.id, actor=reviewer_actor)
    assert version.pk.startswith("R-") and len(version.pk) == 10


def test_the_database_refuses_a_second_verdict_event(engine):
    # semantics §3: exactly one rule_promoted or rule_retired per rule, enforced by a constraint.
    rule = candidate("C-1")
    rule_promote(rule_id=rule.id, actor=engine, evidence={})
    with pytest.raises(IntegrityError), transaction.atomic():
        JournalEvent.objects.create(type="rule_retired", at=T0, rule=rule, actor="engine")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_promotes_from_two_threads_journal_exactly_one_event(engine):
    # semantics §3: two workers can never decide the same candidate at once.
    rule = candidate("C-1")
    barrier = threading.Barrier(2)
    results, errors = [], []

    def promote():
        try:
            barrier.wait()
            results.append(rule_promote(rule_id=rule.id, actor=engine, evidence={}, reason="race"))
        except Exception as exc:  # surfaced below: a thread must not die silently
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=promote) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(results) == [False, True]
    assert JournalEvent.objects.filter(rule=rule, type="rule_promoted").count() == 1
