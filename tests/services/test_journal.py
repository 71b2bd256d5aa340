"""The journal is append-only (semantics §10): the ORM refuses, and so does PostgreSQL itself."""

import pytest
from django.db import DatabaseError, connection, transaction

from lifecycle.journal import write as journal_write
from lifecycle.models import JournalEvent, JournalIsAppendOnly

pytestmark = pytest.mark.django_db


@pytest.fixture
def event():
    return journal_write(
        type="validation_round_started", actor="engine", round_id=1, evidence={"queued": []}
    )


def test_an_event_cannot_be_saved_again(event):
    event.type = "rewritten"
    with pytest.raises(JournalIsAppendOnly):
        event.save()


def test_an_event_cannot_be_deleted(event):
    with pytest.raises(JournalIsAppendOnly):
        event.delete()
    with pytest.raises(JournalIsAppendOnly):
        JournalEvent.objects.filter(pk=event.pk).delete()


def test_events_cannot_be_updated_in_bulk(event):
    with pytest.raises(JournalIsAppendOnly):
        JournalEvent.objects.filter(pk=event.pk).update(type="rewritten")
    with pytest.raises(JournalIsAppendOnly):
        JournalEvent.objects.bulk_update([event], ["type"])
    assert JournalEvent.objects.get(pk=event.pk).type == "validation_round_started"


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE lifecycle_journalevent SET type = 'rewritten'",
        "DELETE FROM lifecycle_journalevent",
    ],
)
def test_postgresql_refuses_raw_updates_and_deletes(event, sql):
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(sql)
    assert JournalEvent.objects.get(pk=event.pk).type == "validation_round_started"
