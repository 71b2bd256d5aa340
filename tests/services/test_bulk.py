"""The engine's bulk writes (lifecycle/bulk.py): the same rows as the ORM would write, in a
statement per batch. Run on SQLite locally and on PostgreSQL (COPY) in CI."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle.bulk import BadColumns, insert_rows, update_from_values
from lifecycle.models import JournalEvent, Rule, RuleRead
from replay.models import ReplaySample
from tests.builders import T0, candidate, make_round, make_trajectory

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


# JSON a save and a COPY might write differently: quotes, backslashes, control and non-ASCII
# characters, floats, big and negative numbers, nulls, nesting, an empty body.
EVIDENCE = {
    "quote": 'a "quoted" \\ word',
    "tab": "a\tb\nc\r",
    "accents": "café ☃ 𝄞",
    "numbers": [0.1, 1e-07, -3, 2**62, 2.5],
    "nested": [1, {"x": None, "y": True}],
    "empty": {},
}
MOMENT = T0 + timedelta(microseconds=123456)


def _stored(model, pks) -> list[tuple]:
    """The rows as the database holds them, every column but the id, in `pks`' order: the
    JSON as its text, the times as the database gives them back."""
    columns = [f.column for f in model._meta.concrete_fields if f is not model._meta.auto_field]
    quote = connection.ops.quote_name
    select = ", ".join(
        f"{quote(c)}::text" if connection.vendor == "postgresql" else quote(c) for c in columns
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, {select} FROM {quote(model._meta.db_table)} WHERE id IN "
            f"({', '.join(['%s'] * len(pks))})",
            list(pks),
        )
        by_id = {row[0]: row[1:] for row in cursor.fetchall()}
    return [by_id[pk] for pk in pks]


def _new_ids(model, before: set) -> list:
    return sorted(set(model.objects.values_list("id", flat=True)) - before)


def _as_saved_and_as_inserted(
    model, columns: tuple, rows: list[tuple], *, unique: bool = False
) -> tuple[list, list]:
    """The same rows written by a save and by `insert_rows`, as stored; `unique`: rows the
    table holds once, so the saved ones are deleted before the insert."""
    saved = []
    for row in rows:
        obj = model(**dict(zip(columns, row, strict=True)))
        obj.save(force_insert=True)
        saved.append(obj.pk)
    as_saved = _stored(model, saved)
    if unique:
        model.objects.filter(pk__in=saved).delete()
    before = set(model.objects.values_list("id", flat=True))
    insert_rows(model, columns, rows)
    return as_saved, _stored(model, _new_ids(model, before))


def test_insert_rows_stores_what_a_save_would():
    candidate("R-1")
    rows = [
        ("validation_verdict", MOMENT, "R-1", 7, "engine", EVIDENCE),
        ("validation_verdict", T0, None, None, "reviewer:ann", {}),
    ]
    saved, inserted = _as_saved_and_as_inserted(
        JournalEvent, ("type", "at", "rule_id", "round_id", "actor", "evidence"), rows
    )
    assert inserted == saved
    events = JournalEvent.objects.order_by("-id")[:2]
    assert [(e.type, e.rule_id, e.at, e.evidence) for e in reversed(events)] == [
        ("validation_verdict", "R-1", MOMENT, EVIDENCE),
        ("validation_verdict", None, T0, {}),
    ]
    saved, inserted = _as_saved_and_as_inserted(
        RuleRead, ("session_id", "rule_id", "at", "via"), [("s\\1\t", "R-1", MOMENT, "replay")]
    )
    assert inserted == saved


def test_insert_rows_stores_a_replay_sample_as_a_save_would():
    candidate("R-1")
    make_trajectory("F-1")
    vround = make_round(["R-1"])
    columns = (
        "rule_id",
        "case_id",
        "arm",
        "repeat",
        "round_id",
        "outcome",
        "metrics",
        "candidate_read",
        "replay_session",
        "created_at",
        "active_set",
    )
    rows = [
        (
            "R-1",
            "F-1",
            "treatment",
            0,
            vround.pk,
            "scored",
            EVIDENCE,
            True,
            "r1:F-1:t0",
            MOMENT,
            "1-0123456789ab",
        ),
        ("R-1", "F-1", "control", 0, None, "inconclusive", {}, False, "", T0, "0-ba9876543210"),
    ]
    saved, inserted = _as_saved_and_as_inserted(ReplaySample, columns, rows, unique=True)
    assert inserted == saved
    stored = ReplaySample.objects.order_by("id").values_list(*columns)
    assert [tuple(r) for r in stored] == rows


def test_insert_rows_refuses_anything_but_every_column_and_writes_nothing():
    candidate("R-1")
    with pytest.raises(BadColumns):
        insert_rows(RuleRead, ("session_id", "rule_id", "at"), [("s", "R-1", T0)])
    with pytest.raises(BadColumns):
        insert_rows(RuleRead, ("session_id", "rule_id", "rule", "at"), [("s", "R-1", "R-1", T0)])
    insert_rows(RuleRead, ("session_id", "rule_id", "at", "via"), [])
    assert not RuleRead.objects.exists()


@pytest.mark.postgres
def test_insert_rows_copies_on_postgresql():
    candidate("R-1")
    with CaptureQueriesContext(connection) as ctx:
        insert_rows(
            RuleRead,
            ("session_id", "rule_id", "at", "via"),
            [(f"s{i}", "R-1", T0, "replay") for i in range(3000)],
        )
    assert RuleRead.objects.count() == 3000
    assert [q["sql"] for q in ctx.captured_queries] == [
        'COPY "lifecycle_ruleread" ("session_id", "rule_id", "at", "via") FROM STDIN'
    ]
