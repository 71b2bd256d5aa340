"""Bulk writes below the ORM, for the engine's hot paths.

`insert_rows`: new rows given as plain tuples, by COPY on PostgreSQL (a few by one INSERT).
Django's bulk_create there sends each column as an array (INSERT … SELECT UNNEST), and quoting
a JSON evidence body as an array element is done in Python, character class by character
class: for a round's events it cost more than the database spent writing them. Nor are model
instances built: a round writes thousands of rows a second, and an instance's construction and
each field's preparation (`get_db_prep_save`) cost more than the row's COPY. Each column is
prepared once per value the way its field would prepare it, so the stored row is the one a
save writes.

`update_from_values`: set-based UPDATE of many rows, each with its own values, in one
statement per batch.

The ORM updates one value set per statement, and its `bulk_update` builds a CASE per column
and per row that both SQLite and PostgreSQL plan slowly. A round that decides a thousand
replays writes a thousand different reasons: this writes them with a values list joined on
the primary key,

    UPDATE table SET state = v.state, …
    FROM (SELECT column1 AS id, column2 AS state, … FROM (VALUES (%s, %s, …), …) AS t) AS v
    WHERE table.id = v.id

which both databases run as one pass (SQLite ≥ 3.33 for UPDATE … FROM).
"""

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, islice

from django.db import connection, models
from django.db.models import Model

BATCH = 500
# Fewer rows than this are inserted by one INSERT on PostgreSQL too: COPY's extra round trip
# costs more than it saves on a handful of rows.
FEW_ROWS = 50


class BadColumns(ValueError):
    """`insert_rows` was not given every column of the model once, or was given one whose value
    a save computes (`auto_now`)."""


# Fields whose value a save sends as it is, given a value of the field's Python type.
_AS_GIVEN = (
    models.CharField,
    models.TextField,
    models.IntegerField,
    models.BooleanField,
    models.FloatField,
)


def _preparer(field: models.Field) -> Callable | None:
    """How a column's value becomes what a save would send; None: as given."""
    if field.is_relation:
        field = field.target_field
    if isinstance(field, models.JSONField):
        encoder = field.encoder

        # Encoded once, to the text the database parses (on PostgreSQL the ORM's Jsonb
        # adapter calls the same `json.dumps`); None is SQL NULL, as in a save.
        def encode(value):
            return None if value is None else json.dumps(value, cls=encoder)

        return encode
    if isinstance(field, _AS_GIVEN):
        return None
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        raise BadColumns(f"{field.name}: auto_now is a save's, not a value given")
    last: list = [object(), None]

    # A batch's rows usually share one timestamp object: prepared once.
    def prepare(value):
        if value is not last[0]:
            last[:] = [value, field.get_db_prep_save(value, connection)]
        return last[1]

    return prepare


def insert_rows(model: type[Model], columns: Sequence[str], rows: Iterable[Sequence]) -> None:
    """Insert new rows of `model`, each a tuple of values for `columns` (field names, or
    attnames such as `rule_id`), which must be every column but the auto primary key: COPY
    on PostgreSQL from `FEW_ROWS` rows on; fewer, or on SQLite, multi-row INSERTs.
    Values are those a model instance would hold before a save (no field's `pre_save` runs);
    primary keys are not read back."""
    fields = [model._meta.get_field(name) for name in columns]
    expected = {
        f.column
        for f in model._meta.concrete_fields
        if not f.generated and f is not model._meta.auto_field
    }
    given = [f.column for f in fields]
    if len(given) != len(set(given)) or set(given) != expected:
        raise BadColumns(f"{model.__name__}: columns {sorted(given)}, expected {sorted(expected)}")
    prepares = [(i, p) for i, f in enumerate(fields) if (p := _preparer(f)) is not None]
    if prepares:
        rows = (_prepared(row, prepares) for row in rows)
    quote = connection.ops.quote_name
    table, names = quote(model._meta.db_table), ", ".join(quote(c) for c in given)
    rows = iter(rows)
    few = list(islice(rows, FEW_ROWS))
    if not few:
        return
    if connection.vendor != "postgresql" or len(few) < FEW_ROWS:
        # A few rows (a report's events) go in one INSERT, one round trip; COPY takes two.
        rows = [*few, *rows]
        marks = ", ".join(["%s"] * len(given))
        with connection.cursor() as cursor:
            for start in range(0, len(rows), BATCH):
                batch = rows[start : start + BATCH]
                values = ", ".join([f"({marks})"] * len(batch))
                cursor.execute(
                    f"INSERT INTO {table} ({names}) VALUES {values}",
                    [value for row in batch for value in row],
                )
        return
    rows = chain(few, rows)
    first = next(rows)
    # COPY is psycopg's own API, outside Django's cursor wrapper: without wrap_database_errors a
    # connection lost mid-COPY escapes as a psycopg error instead of Django's OperationalError.
    with (
        connection.wrap_database_errors,
        connection.cursor() as cursor,
        cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy,
    ):
        copy.write_row(first)
        for row in rows:
            copy.write_row(row)


def _prepared(row: Sequence, prepares: list[tuple[int, Callable]]) -> list:
    row = list(row)
    for i, prepare in prepares:
        row[i] = prepare(row[i])
    return row


def update_from_values(
    model: type[Model],
    *,
    columns: Sequence[str],
    rows: Sequence[Sequence],
    assignments: Mapping[str, str],
    params: Sequence = (),
    batch_size: int = BATCH,
) -> int:
    """Update `model`'s rows from `rows`, returning how many rows changed.

    `columns` names the values' columns, the first being the primary key; every row gives one
    value per column, none of them NULL (a VALUES column of NULLs has no type on PostgreSQL).
    `assignments` maps a column of the table to its new value in SQL, in which `v.<column>`
    is that row's value and `{table}` the table (to read a column's current value); `params`
    fill the `%s` placeholders of the assignments, in order."""
    if not rows:
        return 0
    table = connection.ops.quote_name(model._meta.db_table)
    key = connection.ops.quote_name(model._meta.pk.column)
    # VALUES names its columns column1, column2, … on both databases; the sub-select names them
    # as the caller does. (Not a WITH: Python's sqlite3 counts rows only for a statement that
    # starts with UPDATE.)
    names = ", ".join(f"column{i} AS {name}" for i, name in enumerate(columns, 1))
    sets = ", ".join(
        f"{connection.ops.quote_name(column)} = {sql.format(table=table)}"
        for column, sql in assignments.items()
    )
    tuple_sql = "(" + ", ".join(["%s"] * len(columns)) + ")"
    changed = 0
    with connection.cursor() as cursor:
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            values = ", ".join([tuple_sql] * len(chunk))
            cursor.execute(
                f"UPDATE {table} SET {sets} FROM (SELECT {names} FROM (VALUES {values}) AS t) "
                f"AS v WHERE {table}.{key} = v.{columns[0]}",
                [*params, *(value for row in chunk for value in row)],
            )
            changed += max(cursor.rowcount, 0)
    return changed


def insert_new_rows(
    model: type[Model],
    columns: Sequence[str],
    rows: Sequence[Sequence],
    *,
    unique: Sequence[str],
    returning: Sequence[str],
) -> list[tuple]:
    """Insert the rows whose `unique` columns (a unique constraint of `model`) are not stored
    yet, leaving stored ones as they are, and return the `returning` columns of the rows
    inserted, in no particular order: `INSERT … ON CONFLICT (…) DO NOTHING RETURNING …`, the
    same statement on PostgreSQL and SQLite (≥ 3.35). A concurrent insert of the same key waits
    for the other transaction and then counts as stored. Columns and values as `insert_rows`;
    the returned values are as the database returns them (use plain text and integer columns)."""
    if not rows:
        return []
    quote = connection.ops.quote_name
    fields = [model._meta.get_field(name) for name in columns]
    prepares = [(i, p) for i, f in enumerate(fields) if (p := _preparer(f)) is not None]
    table = quote(model._meta.db_table)
    names = ", ".join(quote(f.column) for f in fields)
    conflict = ", ".join(quote(model._meta.get_field(name).column) for name in unique)
    back = ", ".join(quote(model._meta.get_field(name).column) for name in returning)
    tuple_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    inserted: list[tuple] = []
    with connection.cursor() as cursor:
        for start in range(0, len(rows), BATCH):
            chunk = [_prepared(row, prepares) for row in rows[start : start + BATCH]]
            cursor.execute(
                f"INSERT INTO {table} ({names}) VALUES {', '.join([tuple_sql] * len(chunk))} "
                f"ON CONFLICT ({conflict}) DO NOTHING RETURNING {back}",
                [value for row in chunk for value in row],
            )
            inserted += [tuple(row) for row in cursor.fetchall()]
    return inserted
