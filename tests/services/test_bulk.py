"""The engine's bulk writes (lifecycle/bulk.py): the same rows as the ORM would write, in a
statement per batch. Run on SQLite locally and on PostgreSQL (COPY) in CI."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle.bulk import insert_many, update_from_values
from lifecycle.models import JournalEvent, Rule, RuleRead
from tests.builders import T0, candidate

pytestmark = pytest.mark.django_db


def test_each_row_gets_its_own_values_and_rows_not_listed_are_left_alone():
    for i in range(5):
        candidate(f"R-{i}", directive=f"remedy {i}")
    changed = update_from_values(
        Rule,
        columns=("id", "reason", "bump"),
        rows=[("R-1", "first's own reason", 1), ("R-3", "it's the 'third' one", 2)],
        assignments={
            "verdict_reason": "v.reason",
            "replay_attempts": "{table}.replay_attempts + v.bump",
            "decided_at": "%s",
        },
        params=[connection.ops.adapt_datetimefield_value(T0)],
    )
    assert changed == 2
    rows = {
        r.id: (r.verdict_reason, r.replay_attempts, r.decided_at)
        for r in Rule.objects.order_by("id")
    }
    assert rows == {
        "R-0": ("", 0, None),
        "R-1": ("first's own reason", 1, T0),
        "R-2": ("", 0, None),
        "R-3": ("it's the 'third' one", 2, T0),
        "R-4": ("", 0, None),
    }


def test_an_update_is_one_statement_per_batch(django_assert_num_queries):
    for i in range(7):
        candidate(f"R-{i}", directive=f"remedy {i}")
    rows = [(f"R-{i}", f"reason {i}") for i in range(7)]
    with django_assert_num_queries(3):
        update_from_values(
            Rule,
            columns=("id", "reason"),
            rows=rows,
            assignments={"verdict_reason": "v.reason"},
            batch_size=3,
        )
    assert dict(Rule.objects.values_list("id", "verdict_reason")) == dict(rows)
    with django_assert_num_queries(0):
        assert update_from_values(Rule, columns=("id",), rows=[], assignments={}) == 0


def test_insert_many_writes_what_a_save_would():
    candidate("R-1")
    before = JournalEvent.objects.count()
    evidence = {"quote": 'a "quoted" \\ word', "tab": "a\tb", "nested": [1, {"x": None}]}
    insert_many(
        [
            JournalEvent(
                type="validation_verdict", at=T0, rule_id="R-1", actor="engine", evidence=evidence
            ),
            JournalEvent(
                type="validation_verdict", at=T0 + timedelta(seconds=1), actor="engine", evidence={}
            ),
        ]
    )
    insert_many([RuleRead(session_id="s\\1", rule_id="R-1", at=T0, via="replay")])
    insert_many([])
    events = list(JournalEvent.objects.order_by("id")[before:])
    assert [(e.type, e.rule_id, e.at, e.evidence) for e in events] == [
        ("validation_verdict", "R-1", T0, evidence),
        ("validation_verdict", None, T0 + timedelta(seconds=1), {}),
    ]
    read = RuleRead.objects.get()
    assert (read.session_id, read.rule_id, read.at, read.via) == ("s\\1", "R-1", T0, "replay")


@pytest.mark.postgres
def test_insert_many_copies_on_postgresql():
    candidate("R-1")
    with CaptureQueriesContext(connection) as ctx:
        insert_many(
            [RuleRead(session_id=f"s{i}", rule_id="R-1", at=T0, via="replay") for i in range(3000)]
        )
    assert RuleRead.objects.count() == 3000
    assert [q["sql"] for q in ctx.captured_queries] == [
        'COPY "lifecycle_ruleread" ("session_id", "rule_id", "at", "via") FROM STDIN'
    ]
