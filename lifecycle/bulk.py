"""Bulk writes below the ORM, for the engine's hot paths.

`insert_many`: new rows by COPY on PostgreSQL. Django's bulk_create there sends each column as
an array (INSERT … SELECT UNNEST), and quoting a JSON evidence body as an array element is
done in Python, character class by character class: for a round's events it cost more than
the database spent writing them.

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

from collections.abc import Mapping, Sequence

from django.db import connection
from django.db.models import Model

BATCH = 500


def insert_many(objs: Sequence[Model]) -> None:
    """Insert new model instances of one model: COPY on PostgreSQL, `bulk_create` elsewhere.
    Values go through each field's own preparation (`pre_save`, `get_db_prep_save`), as in a
    save; primary keys are not read back."""
    if not objs:
        return
    model = type(objs[0])
    if connection.vendor != "postgresql":
        model.objects.bulk_create(objs, batch_size=BATCH * 4)
        return
    fields = [
        f
        for f in model._meta.concrete_fields
        if not f.generated and f is not model._meta.auto_field
    ]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(model._meta.db_table)
    # COPY is psycopg's own API, outside Django's cursor wrapper: without wrap_database_errors a
    # connection lost mid-COPY escapes as a psycopg error instead of Django's OperationalError.
    with (
        connection.wrap_database_errors,
        connection.cursor() as cursor,
        cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,
    ):
        for obj in objs:
            copy.write_row(
                [f.get_db_prep_save(f.pre_save(obj, add=True), connection) for f in fields]
            )


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
