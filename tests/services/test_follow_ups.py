"""What a state change enqueues on commit: one round per batch whoever calls it, the duplicate
check of each recorded candidate (one task for a batch), nothing for a batch that is refused
(semantics §9.1)."""

import pytest
from django.db import transaction

from lifecycle.services.candidates import candidates_record
from lifecycle.services.packs import export_pack, import_pack
from lifecycle.services.reports import reports_ingest
from lifecycle.services.rules import rule_record_candidate
from lifecycle.states import Actor
from lifecycle.validation import ImportRejected, read_jsonl

from ..builders import T0, candidate, jsonl, report

pytestmark = pytest.mark.django_db

RULE = {"trigger": "when git push fails", "directive": "pull first", "scope": "git"}


@pytest.fixture
def follow_ups(monkeypatch):
    """The rounds kicked and duplicate checks enqueued, in order, instead of running them: a
    check enqueued as `compare` and the ids of the rules it checks."""
    seen = []
    monkeypatch.setattr("replay.kick.kick_round", lambda *, reason: seen.append(reason))

    def enqueue(name, **kwargs):
        assert name in ("lifecycle.tasks.rule_compare_task", "lifecycle.tasks.rules_compare_task")
        seen.append(" ".join(["compare", *kwargs.get("rule_ids", [kwargs.get("rule_id")])]))

    monkeypatch.setattr("lifecycle.follow_ups._enqueue", enqueue)
    return seen


def test_a_batch_of_candidates_asks_for_one_round_when_it_commits(
    follow_ups, django_capture_on_commit_callbacks
):
    lines = jsonl(*({**RULE, "id": f"C-{n}", "directive": f"step {n}"} for n in range(3)))
    with django_capture_on_commit_callbacks(execute=True):
        candidates_record(read_jsonl(lines), actor=Actor.extractor())
        assert follow_ups == []  # nothing before the commit
    # One task checks the whole batch, in the order recorded.
    assert follow_ups == ["compare C-0 C-1 C-2", "bulk:candidate"]


def test_one_candidate_asks_for_its_own_round(follow_ups, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        rule_record_candidate(actor=Actor.agent("bot"), rule_id="C-9", **RULE)
    assert follow_ups == ["compare C-9", "candidate"]


def test_a_refused_batch_asks_for_nothing(follow_ups, django_capture_on_commit_callbacks):
    lines = jsonl({**RULE, "id": "C-1"}, {**RULE, "id": "C-2", "metric": "vibes"})
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(ImportRejected):
        candidates_record(read_jsonl(lines), actor=Actor.extractor())
    assert follow_ups == []


def test_a_file_of_reports_asks_for_one_round(follow_ups, django_capture_on_commit_callbacks):
    lines = jsonl(report("s-1", T0), report("s-2", T0), report("s-3", T0))
    with django_capture_on_commit_callbacks(execute=True):
        reports_ingest(read_jsonl(lines))
    assert follow_ups == ["report"]


def test_a_pack_asks_for_one_round_whoever_imports_it(
    follow_ups, django_capture_on_commit_callbacks
):
    """The dashboard's import calls the same service: five rules, one round, not five."""
    with transaction.atomic():
        for n in range(5):
            candidate(f"P-{n}", directive=f"step {n}", signature=[])
        text = export_pack(scopes=["git"], states=["candidate"])
        transaction.set_rollback(True)
    with django_capture_on_commit_callbacks(execute=True):
        result = import_pack(text, actor=Actor.reviewer("rita"))
    assert result["created"] == 5
    assert follow_ups == [" ".join(["compare", *result["rules"]]), "bulk:candidate"]
