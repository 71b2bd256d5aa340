"""Forward trials as semantics §8 writes them (the `baseline` trial design): enrolment, flips, the
statements per report, the verdict against the baseline."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle.metrics import current_registry
from lifecycle.models import Rule, TrialEnrolment
from lifecycle.services.reports import reports_ingest
from lifecycle.validation import read_jsonl
from replay.rounds import round_run
from tests.builders import T0, jsonl, report
from tests.scenarios import rule, state_of

pytestmark = pytest.mark.usefixtures("scripted_engine")


# --- forward trials (§8) -----------------------------------------------------------------------


@pytest.mark.django_db
def test_enrolment_caps_at_min_sessions_and_flips_enrolled_sessions(settings):  # semantics §8
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    rule()
    reports_ingest(
        read_jsonl(jsonl(*[report(f"s{i}", T0 + timedelta(minutes=i)) for i in range(7)]))
    )
    assert TrialEnrolment.objects.count() == 5
    later = report(
        "s0", T0 + timedelta(hours=1), notices=["breach:task_completion"], rules_read=["R-1"]
    )
    reports_ingest(read_jsonl(jsonl(later)))
    s0 = TrialEnrolment.objects.get(session_id="s0")
    assert (s0.breached, s0.read_candidate) == (True, True)
    assert TrialEnrolment.objects.filter(breached=True).count() == 1


@pytest.mark.django_db
def test_a_later_report_flips_only_the_trials_it_concerns(settings):  # semantics §8
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    rule("R-TC", metric="task_completion")
    rule("R-CO", metric="coherence", directive="d2")
    rule("R-ANY", metric="", directive="d3")
    rule("R-DONE", metric="task_completion", directive="d4")
    reports_ingest(read_jsonl(jsonl(report("s1", T0), report("s2", T0))))
    assert TrialEnrolment.objects.count() == 8
    Rule.objects.filter(pk="R-DONE").update(state="active")  # decided: its trial is over
    later = report(
        "s1",
        T0 + timedelta(hours=1),
        notices=["breach:task_completion"],
        rules_read=["R-CO", "R-DONE"],
    )
    reports_ingest(read_jsonl(jsonl(later)))
    flags = {
        (e.rule_id, e.session_id): (e.breached, e.read_candidate)
        for e in TrialEnrolment.objects.all()
    }
    assert flags == {
        ("R-TC", "s1"): (True, False),
        ("R-CO", "s1"): (False, True),
        ("R-ANY", "s1"): (True, False),
        ("R-DONE", "s1"): (False, False),
        ("R-TC", "s2"): (False, False),
        ("R-CO", "s2"): (False, False),
        ("R-ANY", "s2"): (False, False),
        ("R-DONE", "s2"): (False, False),
    }


@pytest.mark.django_db
def test_enrolment_takes_a_fixed_number_of_queries_however_many_candidates(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = ""  # semantics §8: set-based, not a query per candidate

    def enrol(session_id: str) -> int:
        lines = read_jsonl(jsonl(report(session_id, T0, notices=["breach:task_completion"])))
        with CaptureQueriesContext(connection) as ctx:
            reports_ingest(lines)
        return len(ctx.captured_queries)

    for i in range(3):
        rule(f"R-{i}", directive=f"d{i}")
    current_registry()  # read once a process, not a report (lifecycle.metrics)
    few = enrol("s1")
    for i in range(3, 40):
        rule(f"R-{i}", directive=f"d{i}")
    many = enrol("s2")
    assert few == many
    assert TrialEnrolment.objects.filter(session_id="s2", breached=True).count() == 40


@pytest.mark.django_db
def test_the_trial_retires_a_candidate_that_did_not_improve_on_its_baseline(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = ""  # semantics §8
    reports_ingest(
        read_jsonl(
            jsonl(
                *[
                    report(
                        f"h{i}",
                        T0,
                        notices=["breach:task_completion"] if i < 2 else ["stall:coherence"],
                    )
                    for i in range(4)
                ]
            )
        )
    )
    rule()
    assert state_of().baseline_rate == 0.5
    reports_ingest(
        read_jsonl(
            jsonl(
                *[
                    report(
                        f"s{i}",
                        T0 + timedelta(hours=1),
                        notices=["breach:task_completion"] if i < 3 else [],
                    )
                    for i in range(5)
                ]
            )
        )
    )
    round_run()
    r = state_of()
    assert (r.state, r.last_validator) == ("retired", "forward_trial")
    assert r.verdict_reason == "did not improve on baseline: trial rate 0.60 vs baseline 0.50"
