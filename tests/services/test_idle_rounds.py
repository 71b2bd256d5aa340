"""An idle round writes nothing: a report, a beat or any other automatic kick with no candidate
to validate leaves no round row and no journal event, however many arrive."""

import pytest

from lifecycle.journal import EventType
from lifecycle.models import JournalEvent
from lifecycle.services.reports import reports_ingest
from replay.models import ValidationRound
from replay.tasks import round_run_task

from ..builders import T0, candidate, report

pytestmark = pytest.mark.django_db
ROUND_EVENTS = [EventType.VALIDATION_ROUND_STARTED, EventType.VALIDATION_ROUND_FINISHED]


def numbered(*objects):
    return [(n, obj, None) for n, obj in enumerate(objects, start=1)]


def test_reports_with_no_candidate_journal_themselves_and_no_round(
    django_capture_on_commit_callbacks,
):
    for i in range(20):
        # Each report kicks a round after it commits (run inline here, as on the default).
        with django_capture_on_commit_callbacks(execute=True) as kicks:
            reports_ingest(numbered(report(f"s-{i}", T0)), actor="repair-bot")
        assert kicks
    assert not ValidationRound.objects.exists()
    assert not JournalEvent.objects.filter(type__in=ROUND_EVENTS).exists()
    assert JournalEvent.objects.filter(type=EventType.REPORT_RECEIVED).count() == 20


@pytest.mark.parametrize("kicked_by", ["", "report", "bulk:candidate,report", "api:rita-token"])
def test_an_idle_kick_writes_nothing(kicked_by):
    assert round_run_task(kicked_by=kicked_by) is None
    assert not ValidationRound.objects.exists()
    assert not JournalEvent.objects.exists()


def test_a_kick_with_a_candidate_runs_its_round():
    candidate("C-1")
    round_id = round_run_task(kicked_by="report")
    assert ValidationRound.objects.filter(pk=round_id).exists()
    assert set(
        JournalEvent.objects.filter(round_id=round_id).values_list("type", flat=True)
    ) >= set(ROUND_EVENTS)
