"""Refuse TRUNCATE of the journal on PostgreSQL (semantics §10).

Migration 0002's trigger refuses UPDATE and DELETE row by row, but TRUNCATE fires no row
trigger and emptied the journal in one statement. A statement-level BEFORE TRUNCATE trigger on
the same function refuses it, for every role, including a TRUNCATE that reaches the journal
through `TRUNCATE … CASCADE` on a table it references. The owner of the table can still drop
or disable the trigger: run the app as a role that owns nothing (`manage.py grant_app_role`,
docs/deploy.md). Nothing to do on SQLite, which has no TRUNCATE.
"""

from django.db import migrations

GUARD_SQL = """
CREATE TRIGGER journal_no_truncate
    BEFORE TRUNCATE ON lifecycle_journalevent
    FOR EACH STATEMENT EXECUTE FUNCTION cauterweb_journal_append_only();
"""

UNGUARD_SQL = "DROP TRIGGER IF EXISTS journal_no_truncate ON lifecycle_journalevent;"


def guard(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(GUARD_SQL)


def unguard(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(UNGUARD_SQL)


class Migration(migrations.Migration):
    dependencies = [("lifecycle", "0008_rule_comparison")]

    operations = [migrations.RunPython(guard, unguard)]
