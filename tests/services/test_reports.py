"""Reports in (semantics §2, §5, §8, §15): idempotent on (session, time), every bad line named,
rule reads recorded, trial enrolment in the same transaction."""

import json

import pytest
from django.core.management import call_command

from lifecycle.models import JournalEvent, Report, RuleRead, TrialEnrolment
from lifecycle.services.reports import reports_ingest
from lifecycle.validation import ImportRejected, numbered

from ..builders import T0, candidate, jsonl, report

pytestmark = pytest.mark.django_db


def test_reports_are_stored_with_notices_reads_and_a_journal_event():
    rule = candidate("C-1")
    result = reports_ingest(
        numbered(
            [report("s1", T0, ["breach:task_completion"], rules_read=["C-1"]), report("s2", T0)]
        )
    )
    assert result.as_dict() == {"created": 2, "unchanged": 0, "updated": 0}
    stored = Report.objects.get(session_id="s1")
    assert (stored.has_notice, stored.notices) == (True, ["breach:task_completion"])
    assert list(RuleRead.objects.values_list("session_id", "rule_id", "via")) == [
        ("s1", rule.id, "report")
    ]
    assert JournalEvent.objects.filter(type="report_received").count() == 2


def test_the_same_report_twice_is_unchanged_and_a_changed_one_is_updated():
    candidate("C-1")
    created = reports_ingest(numbered([report("s1", T0)]))
    again = reports_ingest(numbered([report("s1", T0)]))
    assert again.as_dict() == {"created": 0, "unchanged": 1, "updated": 0}
    assert again.ids == []
    changed = report("s1", T0, ["stall:coherence"], rules_read=["C-1"])
    updated = reports_ingest(numbered([changed]))
    assert updated.as_dict() == {"created": 0, "unchanged": 0, "updated": 1}
    assert updated.ids == created.ids == [str(Report.objects.get().pk)]
    assert Report.objects.get().notices == ["stall:coherence"]
    # Reads and events for what was stored or changed only, not for the unchanged report.
    assert list(RuleRead.objects.values_list("session_id", "rule_id")) == [("s1", "C-1")]
    events = JournalEvent.objects.filter(type="report_received").order_by("id")
    assert [e.evidence["notices"] for e in events] == [[], ["stall:coherence"]]


def test_bad_reports_are_refused_naming_line_and_field():
    rows = numbered(
        [
            report("s1", T0),
            {"session_id": "", "at": "soon", "notices": ["tool:git"], "metrics": {"x": 2}},
            report("s3", T0, rules_read=["NOPE"]),
        ]
    )
    with pytest.raises(ImportRejected) as exc:
        reports_ingest(rows)
    assert {(e.line, e.field) for e in exc.value.errors} == {
        (2, "session_id"),
        (2, "at"),
        (2, "notices"),
        (2, "metrics"),
    }
    assert not Report.objects.exists()


def test_a_report_reading_an_unknown_rule_is_refused_and_nothing_is_written():
    candidate("C-1")
    with pytest.raises(ImportRejected) as exc:
        reports_ingest(numbered([report("s3", T0, rules_read=["C-1", "NOPE"])]))
    assert [(e.line, e.field, e.message) for e in exc.value.errors] == [
        (1, "rules_read", "unknown rule 'NOPE'")
    ]
    assert not Report.objects.exists() and not RuleRead.objects.exists()
    assert not TrialEnrolment.objects.exists()
    assert not JournalEvent.objects.filter(type="report_received").exists()


def test_the_ingest_reports_command_prints_the_counts_of_spec_15(tmp_path, capsys):
    reports = tmp_path / "reports.jsonl"
    reports.write_text("".join(jsonl(report("s1", T0))))
    call_command("ingest_reports", str(reports), "--json")
    assert json.loads(capsys.readouterr().out) == {"created": 1, "unchanged": 0, "updated": 0}


def test_report_intake_enrols_the_session_in_each_candidates_trial():
    # semantics §8: enrolment is part of storing the report, in the same transaction.
    candidate("C-1", metric="task_completion")
    reports_ingest(numbered([report("s1", T0, notices=["breach:task_completion"])]))
    enrolment = TrialEnrolment.objects.get(rule_id="C-1")
    assert (enrolment.session_id, enrolment.breached) == ("s1", True)


def test_a_refused_report_batch_enrols_nobody():
    candidate("C-1")
    with pytest.raises(ImportRejected):
        reports_ingest(numbered([report("s1", T0), report("s2", T0, rules_read=["NOPE"])]))
    assert not TrialEnrolment.objects.exists() and not Report.objects.exists()


def test_reports_are_not_stored_when_their_enrolment_fails(monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("enrolment failed")

    monkeypatch.setattr("lifecycle.services.reports.sessions_report", broken)
    with pytest.raises(RuntimeError):
        reports_ingest(numbered([report("s1", T0, rules_read=[candidate("C-1").id])]))
    assert not Report.objects.exists() and not RuleRead.objects.exists()
    assert not JournalEvent.objects.filter(type="report_received").exists()
