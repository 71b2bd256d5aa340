"""Seed the metric registry (semantics §1) from settings, and make the journal append-only in
PostgreSQL itself (semantics §10), so not even raw SQL can rewrite history."""

from django.db import migrations


def seed_metrics(apps, schema_editor):
    from lifecycle.metrics import seed_default_metrics

    seed_default_metrics(
        apps.get_model("lifecycle", "MetricDefinition"), using=schema_editor.connection.alias
    )


GUARD_SQL = """
CREATE OR REPLACE FUNCTION cauterweb_journal_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'the journal is append-only: %% on lifecycle_journalevent refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER journal_append_only
    BEFORE UPDATE OR DELETE ON lifecycle_journalevent
    FOR EACH ROW EXECUTE FUNCTION cauterweb_journal_append_only();
"""

UNGUARD_SQL = """
DROP TRIGGER IF EXISTS journal_append_only ON lifecycle_journalevent;
DROP FUNCTION IF EXISTS cauterweb_journal_append_only();
"""


def guard(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(GUARD_SQL)


def unguard(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(UNGUARD_SQL)


class Migration(migrations.Migration):
    dependencies = [("lifecycle", "0001_initial")]

    operations = [
        migrations.RunPython(seed_metrics, migrations.RunPython.noop),
        migrations.RunPython(guard, unguard),
    ]
