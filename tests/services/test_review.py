"""The review queue (docs/dashboard.md): items opened by the events that call for a human,
closed by the changes that make them moot, and each reviewer action one state change with its
exact journal rows."""

import json

import pytest

from lifecycle import journal
from lifecycle.journal import EventType
from lifecycle.models import JournalEvent, PackStatus, ReviewItem, Rule, StagedPack
from lifecycle.selectors import review as selectors
from lifecycle.services import packs
from lifecycle.services.review import BadAction, ItemClosed, review_resolve
from lifecycle.services.rules import rule_promote, rule_retire, rule_retire_by_reviewer
from lifecycle.states import Actor, NotAllowed
from tests.builders import (
    T0,
    candidate,
    make_rule,
    suspected_duplicate,
    uncertain_rule,
    verdict,
)

pytestmark = pytest.mark.django_db
RITA = Actor.reviewer("rita")


def events_of(rule_id: str, *types) -> list[tuple[str, str, dict]]:
    rows = JournalEvent.objects.filter(rule_id=rule_id).order_by("at", "id")
    if types:
        rows = rows.filter(type__in=types)
    return [(e.type, e.actor, e.evidence) for e in rows]


def open_items() -> list[tuple[str, str | None, str | None]]:
    rows = ReviewItem.objects.filter(closed_at__isnull=True).order_by("kind", "rule_id")
    return list(rows.values_list("kind", "rule_id", "other_rule_id"))


def the_item(kind: str) -> ReviewItem:
    return ReviewItem.objects.get(kind=kind, closed_at__isnull=True)


# --- opened by the journal ---------------------------------------------------------------------


def test_a_suspected_duplicate_opens_one_item_for_the_pair_in_its_scope():
    a, b = make_rule("A", scope="repo:x"), make_rule("B", scope="repo:x")
    suspected_duplicate(b, of=a)
    suspected_duplicate(b, of=a)  # a second check journals again: still one item
    suspected_duplicate(a, of=b)  # and each found to duplicate the other: still one pair
    assert open_items() == [("duplicate", "B", "A")]
    item = the_item("duplicate")
    assert item.scope == "repo:x" and item.evidence["semantic"] == 0.93


@pytest.mark.parametrize(("attempts", "opened"), [(2, False), (3, True), (4, True)])
def test_a_pending_verdict_opens_an_item_once_the_replay_budget_is_spent(attempts, opened):
    # semantics §7.10: with max_replay_attempts (3) spent, replay is not tried again.
    make_rule("C-1")
    verdict("C-1", 5, "pending", pending_reason="trial_in_progress", replay_attempts=attempts)
    assert open_items() == ([("inconclusive", "C-1", None)] if opened else [])


def _paired_retirement(*, rejected: bool) -> dict:
    return {
        "validator": "replay",
        "reason": "regressed" if rejected else "no improvement",
        "cases": [],
        "paired": {"regressions": [{"metric": "task_completion", "rejected": rejected}]},
    }


@pytest.mark.parametrize("rejected", [True, False])
def test_only_a_retirement_on_harm_opens_a_harm_item(engine, rejected):
    rule = candidate("C-1")
    rule_retire(
        rule_id=rule.id, actor=engine, evidence=_paired_retirement(rejected=rejected), reason="x"
    )
    assert open_items() == ([("harm", "C-1", None)] if rejected else [])


def test_a_single_design_regression_is_harm_too(engine):
    rule = candidate("C-1")
    evidence = {"validator": "replay", "cases": [{"case": "S-1", "regressed": True}]}
    rule_retire(rule_id=rule.id, actor=engine, evidence=evidence, reason="regressed S-1")
    assert open_items() == [("harm", "C-1", None)]


# --- closed by the changes that make them moot ------------------------------------------------


def test_a_decision_closes_the_rules_inconclusive_item(engine):
    rule = candidate("C-1")
    verdict("C-1", 5, "pending", replay_attempts=3)
    rule_promote(rule_id=rule.id, actor=engine, evidence={}, reason="improved on baseline")
    item = ReviewItem.objects.get(rule_id="C-1")
    assert (item.closed_by, item.resolution) == ("engine", "promoted")


def test_retiring_either_rule_of_a_pair_closes_the_duplicate_item():
    a, b = make_rule("A"), make_rule("B")
    suspected_duplicate(b, of=a)
    rule_retire_by_reviewer(rule_id="A", actor=RITA, reason="obsolete")
    item = ReviewItem.objects.get(kind="duplicate")
    assert (item.closed_by, item.resolution) == ("rita", "one of the pair retired")


def test_a_dismissed_item_is_not_opened_again():
    make_rule("C-1")
    verdict("C-1", 5, "pending", replay_attempts=3)
    review_resolve(item_id=the_item("inconclusive").pk, action="dismiss", actor=RITA)
    verdict("C-1", 6, "pending", replay_attempts=3)
    assert open_items() == []


# --- each action: one change, its journal rows ---------------------------------------------------


def test_retiring_an_undecided_candidate_journals_the_reviewer_and_reason():
    candidate("C-1")
    verdict("C-1", 5, "pending", replay_attempts=3)
    item = review_resolve(
        item_id=the_item("inconclusive").pk, action="retire", actor=RITA, reason="stuck for weeks"
    )
    assert (item.closed_by, item.resolution) == ("rita", "retired")
    (event,) = events_of("C-1", "rule_retired_by_reviewer")
    assert event[:2] == ("rule_retired_by_reviewer", "rita")
    assert event[2]["reason"] == "stuck for weeks" and event[2]["reviewer"] == "rita"
    assert Rule.objects.get(pk="C-1").state == "retired"


def test_leaving_a_candidate_to_its_trial_journals_the_dismissal():
    candidate("C-1")
    verdict("C-1", 5, "pending", replay_attempts=3)
    item = the_item("inconclusive")
    review_resolve(item_id=item.pk, action="dismiss", actor=RITA, reason="traffic comes Monday")
    assert events_of("C-1", "review_dismissed") == [
        (
            "review_dismissed",
            "rita",
            {
                "kind": "inconclusive",
                "item": item.pk,
                "resolution": "left to its trial",
                "reason": "traffic comes Monday",
            },
        )
    ]
    assert Rule.objects.get(pk="C-1").state == "candidate"


@pytest.mark.parametrize(("action", "label"), [("confirm", 1), ("deny", 0)])
def test_an_answer_about_an_extraction_is_a_labelled_pair(action, label):
    rule = uncertain_rule("C-9", scope="git")
    review_resolve(item_id=the_item("extraction").pk, action=action, actor=RITA)
    ((type_, actor, evidence),) = events_of("C-9", "extraction_labelled")
    assert (type_, actor, evidence["label"]) == ("extraction_labelled", "rita", label)
    assert evidence["expected"] == rule.comparison["expected"]
    assert evidence["extracted"] == rule.comparison["extracted"]
    (pair,) = selectors.extraction_labels()
    # The comparator's own labelled data has these fields (comparison/data/extraction_eval.jsonl).
    assert {"expected", "extracted", "label", "domain", "split", "kind", "category"} <= set(pair)
    assert (pair["label"], pair["domain"], pair["rule"]) == (label, "git", "C-9")


def test_a_later_answer_about_the_same_rule_replaces_the_earlier_pair():
    uncertain_rule("C-9")
    review_resolve(item_id=the_item("extraction").pk, action="confirm", actor=RITA)
    journal.write(
        type=EventType.EXTRACTION_LABELLED,
        actor="sam",
        rule_id="C-9",
        evidence={"expected": {}, "extracted": {}, "label": 0, "scope": "git"},
    )
    assert [(p["label"], p["labelled_by"]) for p in selectors.extraction_labels()] == [(0, "sam")]


def test_merging_keeps_one_and_retires_the_other_linked_to_it():
    a, b = make_rule("A", state="active"), make_rule("B")
    suspected_duplicate(b, of=a)
    item = the_item("duplicate")
    # Keep the newer one: the older, active one is retired, linked to the one kept.
    review_resolve(item_id=item.pk, action="merge", keep="B", actor=RITA)
    a.refresh_from_db()
    b.refresh_from_db()
    assert (a.state, a.duplicate_of_id, b.state, b.duplicate_of_id) == (
        "retired",
        "B",
        "candidate",
        None,
    )
    (event,) = events_of("A", "rule_retired_by_reviewer")
    assert (
        event[2]["merged_into"] == "B" and event[2]["reason"] == "a duplicate of B, merged into it"
    )
    item.refresh_from_db()
    assert item.resolution == "merged: kept B, retired A"


def test_merging_names_the_rule_to_keep():
    a, b = make_rule("A"), make_rule("B")
    suspected_duplicate(b, of=a)
    with pytest.raises(BadAction) as exc:
        review_resolve(item_id=the_item("duplicate").pk, action="merge", keep="Z", actor=RITA)
    assert exc.value.field == "keep"
    assert open_items() == [("duplicate", "B", "A")]


def test_dismissing_a_pair_removes_the_link_and_it_is_not_flagged_again():
    a, b = make_rule("A"), make_rule("B")
    suspected_duplicate(b, of=a)
    suspected_duplicate(a, of=b)
    review_resolve(item_id=the_item("duplicate").pk, action="dismiss", actor=RITA, reason="differ")
    assert list(Rule.objects.values_list("duplicate_of", flat=True)) == [None, None]
    assert events_of("B", "rule_duplicate_dismissed") == [
        ("rule_duplicate_dismissed", "rita", {"duplicate_of": "A", "reason": "differ"})
    ]
    suspected_duplicate(b, of=a)
    assert open_items() == []


def test_re_queuing_a_rule_retired_on_harm_records_its_next_version(engine):
    rule = candidate("C-1")
    rule_retire(
        rule_id=rule.id, actor=engine, evidence=_paired_retirement(rejected=True), reason="x"
    )
    review_resolve(item_id=the_item("harm").pk, action="requeue", actor=RITA)
    version = Rule.objects.get(replaces="C-1")
    assert (version.pk, version.state) == ("C-1-v2", "candidate")
    assert ReviewItem.objects.get(kind="harm").resolution == "re-queued"


def _staged(name="team-pack") -> StagedPack:
    make_rule("K-1", state="active", scope="git")
    text = packs.export_pack(scopes=["git"], name=name, version="1")
    Rule.objects.filter(pk="K-1").delete()
    return packs.pack_stage(text, actor=Actor.agent("sync-bot"), now=T0)


def test_a_staged_pack_waits_in_the_queue_and_the_same_pack_is_staged_once():
    staged = _staged()
    assert packs.pack_stage(staged.text, actor=Actor.agent("sync-bot")) == staged
    assert open_items() == [("pack", None, None)]
    assert (staged.rules, staged.new_rules, staged.staged_by) == (1, 1, "sync-bot")
    (event,) = JournalEvent.objects.filter(type="pack_staged")
    assert event.evidence["staged_pack"] == staged.pk and event.actor == "sync-bot"


def test_a_bad_pack_is_refused_and_nothing_waits():
    with pytest.raises(packs.PackRejected):
        packs.pack_stage("pack_version: 1\n", actor=Actor.agent("sync-bot"))
    assert StagedPack.objects.count() == 0 and open_items() == []


def test_importing_a_staged_pack_records_its_rules_as_candidates():
    staged = _staged()
    review_resolve(item_id=the_item("pack").pk, action="import", actor=RITA)
    staged.refresh_from_db()
    assert (staged.status, staged.decided_by) == (PackStatus.IMPORTED, "rita")
    assert Rule.objects.get(pk="K-1").state == "candidate"
    (event,) = JournalEvent.objects.filter(type="pack_imported")
    assert event.evidence["created"] == ["K-1"] and event.actor == "rita"


def test_rejecting_a_staged_pack_needs_a_reason_and_journals_it():
    staged = _staged()
    item = the_item("pack")
    with pytest.raises(Exception, match="reason"):
        review_resolve(item_id=item.pk, action="reject", actor=RITA)
    review_resolve(item_id=item.pk, action="reject", actor=RITA, reason="not our repo")
    staged.refresh_from_db()
    assert staged.status == PackStatus.REJECTED
    (event,) = JournalEvent.objects.filter(type="pack_rejected")
    assert event.evidence == {
        "staged_pack": staged.pk,
        "pack": "team-pack",
        "version": "1",
        "reason": "not our repo",
    }


# --- refusals -----------------------------------------------------------------------------------


def test_an_item_is_resolved_once():
    make_rule("C-1")
    verdict("C-1", 5, "pending", replay_attempts=3)
    item = the_item("inconclusive")
    review_resolve(item_id=item.pk, action="dismiss", actor=RITA)
    with pytest.raises(ItemClosed, match="already resolved by rita: left to its trial"):
        review_resolve(item_id=item.pk, action="retire", actor=RITA, reason="x")


def test_an_action_the_kind_does_not_offer_is_refused_naming_those_it_does():
    make_rule("C-1")
    verdict("C-1", 5, "pending", replay_attempts=3)
    with pytest.raises(
        BadAction, match=r"\(undecided after its replay budget\) offers retire, dismiss"
    ):
        review_resolve(item_id=the_item("inconclusive").pk, action="merge", actor=RITA)


def test_only_a_reviewer_resolves_items():
    make_rule("C-1")
    verdict("C-1", 5, "pending", replay_attempts=3)
    with pytest.raises(NotAllowed):
        review_resolve(
            item_id=the_item("inconclusive").pk, action="dismiss", actor=Actor.agent("bot")
        )
    assert open_items() == [("inconclusive", "C-1", None)]


def test_the_counts_and_filters_read_open_items_only():
    uncertain_rule("C-1", scope="git")
    uncertain_rule("C-2", scope="docs")
    make_rule("C-3", scope="git")
    verdict("C-3", 5, "pending", replay_attempts=3)
    review_resolve(item_id=ReviewItem.objects.get(rule_id="C-2").pk, action="deny", actor=RITA)
    counts = selectors.review_counts()
    assert (counts["extraction"], counts["inconclusive"], counts["duplicate"]) == (1, 1, 0)
    assert [i.rule_id for i in selectors.review_items(filters={"scope": "git"})] == ["C-1", "C-3"]
    assert [i.rule_id for i in selectors.review_items(filters={"kind": "inconclusive"})] == ["C-3"]
    assert selectors.review_scopes() == ["git"]
    assert json.dumps(counts)
