"""The journal's and the reads' own indexes on the rule go: `journal_rule_at` and
`ruleread_rule_at` lead with the rule and serve every lookup by rule (and the foreign keys'
checks), while a round writes six events and three reads a candidate, and each index is one
more insert per row.

The indexes are dropped by name: on PostgreSQL Django's AlterField would also drop, and not
create again, the partial unique index `journal_one_verdict_per_rule` on the same column."""

import django.db.models.deletion
from django.db import migrations, models

INDEXES = {
    "lifecycle_journalevent": "lifecycle_journalevent_rule_id_ab1654fc",
    "lifecycle_ruleread": "lifecycle_ruleread_rule_id_724913bb",
}


def drop(apps, schema_editor):
    quote = schema_editor.quote_name
    for name in INDEXES.values():
        # `_like`: PostgreSQL's second index on a character key, for LIKE.
        for index in (name, f"{name}_like"):
            schema_editor.execute(f"DROP INDEX IF EXISTS {quote(index)}")


def restore(apps, schema_editor):
    quote = schema_editor.quote_name
    for table, name in INDEXES.items():
        schema_editor.execute(f'CREATE INDEX {quote(name)} ON {quote(table)} ("rule_id")')
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(
                f'CREATE INDEX {quote(name + "_like")} ON {quote(table)} '
                '("rule_id" varchar_pattern_ops)'
            )


class Migration(migrations.Migration):
    dependencies = [
        ("lifecycle", "0011_trajectory_row_hashes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="journalevent",
                    name="rule",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="events",
                        to="lifecycle.rule",
                    ),
                ),
                migrations.AlterField(
                    model_name="ruleread",
                    name="rule",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="reads",
                        to="lifecycle.rule",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(drop, restore)],
        ),
    ]
