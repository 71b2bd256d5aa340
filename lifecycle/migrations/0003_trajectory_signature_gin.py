"""A GIN index on Trajectory.signature (jsonb_path_ops) for PostgreSQL, so a failure-mode match
(semantics §11) is one `signature @> '[atoms]'` bitmap intersection inside the index rather than a
chain of semi-joins over TrajectoryAtom: ~10–20 ms instead of ~50–120 ms for the F-001 rule
over 1,000,000 trajectories (bench/bench_matching.py). Other databases keep the TrajectoryAtom
path; lifecycle.matching picks by vendor."""

from django.db import migrations

CREATE = "CREATE INDEX IF NOT EXISTS traj_signature_gin ON lifecycle_trajectory USING gin (signature jsonb_path_ops)"
DROP = "DROP INDEX IF EXISTS traj_signature_gin"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("lifecycle", "0002_seed_metrics_and_journal_guard")]

    operations = [migrations.RunPython(create, drop)]
