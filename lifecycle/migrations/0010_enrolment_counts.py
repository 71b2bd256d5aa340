"""Enrolment counts (semantics §8): each rule keeps the number of sessions enrolled in its
forward trial, so a report touches only the trials still short of sessions (through the partial
index rule_open_trials) instead of counting every candidate's enrolments.

The count is kept by triggers on the enrolment table, whoever writes it: statement-level with
transition tables on PostgreSQL (one UPDATE per statement, however many rows it enrolled),
row-level on SQLite. Existing counts are filled in from the enrolments."""

from django.db import migrations, models

POSTGRES_SQL = """
CREATE OR REPLACE FUNCTION cauterweb_enrolment_added() RETURNS trigger AS $$
BEGIN
    UPDATE lifecycle_rule r SET trial_sessions = r.trial_sessions + n.added
    FROM (SELECT rule_id, COUNT(*) AS added FROM added_rows GROUP BY rule_id) n
    WHERE r.id = n.rule_id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION cauterweb_enrolment_removed() RETURNS trigger AS $$
BEGIN
    UPDATE lifecycle_rule r SET trial_sessions = r.trial_sessions - n.removed
    FROM (SELECT rule_id, COUNT(*) AS removed FROM removed_rows GROUP BY rule_id) n
    WHERE r.id = n.rule_id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER enrolment_added AFTER INSERT ON lifecycle_trialenrolment
    REFERENCING NEW TABLE AS added_rows
    FOR EACH STATEMENT EXECUTE FUNCTION cauterweb_enrolment_added();
CREATE TRIGGER enrolment_removed AFTER DELETE ON lifecycle_trialenrolment
    REFERENCING OLD TABLE AS removed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION cauterweb_enrolment_removed();
"""

POSTGRES_UNDO_SQL = """
DROP TRIGGER IF EXISTS enrolment_added ON lifecycle_trialenrolment;
DROP TRIGGER IF EXISTS enrolment_removed ON lifecycle_trialenrolment;
DROP FUNCTION IF EXISTS cauterweb_enrolment_added();
DROP FUNCTION IF EXISTS cauterweb_enrolment_removed();
"""

SQLITE_SQL = [
    """CREATE TRIGGER enrolment_added AFTER INSERT ON lifecycle_trialenrolment
    BEGIN
        UPDATE lifecycle_rule SET trial_sessions = trial_sessions + 1 WHERE id = NEW.rule_id;
    END""",
    """CREATE TRIGGER enrolment_removed AFTER DELETE ON lifecycle_trialenrolment
    BEGIN
        UPDATE lifecycle_rule SET trial_sessions = trial_sessions - 1 WHERE id = OLD.rule_id;
    END""",
]

SQLITE_UNDO_SQL = [
    "DROP TRIGGER IF EXISTS enrolment_added",
    "DROP TRIGGER IF EXISTS enrolment_removed",
]

BACKFILL_SQL = """
UPDATE lifecycle_rule SET trial_sessions = (
    SELECT COUNT(*) FROM lifecycle_trialenrolment e WHERE e.rule_id = lifecycle_rule.id
)
WHERE EXISTS (SELECT 1 FROM lifecycle_trialenrolment e WHERE e.rule_id = lifecycle_rule.id)
"""


def count_triggers(apps, schema_editor):
    schema_editor.execute(BACKFILL_SQL)
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES_SQL)
    else:
        for statement in SQLITE_SQL:
            schema_editor.execute(statement)


def drop_count_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES_UNDO_SQL)
    else:
        for statement in SQLITE_UNDO_SQL:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("lifecycle", "0009_journal_truncate_guard")]

    operations = [
        migrations.AddField(
            model_name="rule",
            name="trial_sessions",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddIndex(
            model_name="rule",
            index=models.Index(
                condition=models.Q(("state", "candidate")),
                fields=["trial_sessions"],
                name="rule_open_trials",
            ),
        ),
        migrations.RunPython(count_triggers, drop_count_triggers),
    ]
