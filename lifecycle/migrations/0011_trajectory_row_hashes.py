"""A trajectory's content hash is now the sha256 of the cells the database receives (the JSON
is serialised once per row, for the hash and the write alike). Stored trajectories are
re-hashed from their stored values, so re-importing a file imported before stays a no-op."""

from django.db import migrations

BATCH = 2000


def rehash(apps, schema_editor):
    from lifecycle.services.corpus import stored_digest
    from lifecycle.services.corpus_store import CELL_COLUMNS, _PostgresStore, _SqliteStore

    vendor = schema_editor.connection.vendor
    time_text = (_PostgresStore if vendor == "postgresql" else _SqliteStore).time_text
    Trajectory = apps.get_model("lifecycle", "Trajectory")
    batch = []
    for row in Trajectory.objects.order_by("id").values(*CELL_COLUMNS).iterator(BATCH):
        batch.append(Trajectory(id=row["id"], content_hash=stored_digest(row, time_text)))
        if len(batch) == BATCH:
            Trajectory.objects.bulk_update(batch, ["content_hash"])
            batch = []
    Trajectory.objects.bulk_update(batch, ["content_hash"])


class Migration(migrations.Migration):
    dependencies = [("lifecycle", "0010_enrolment_counts")]

    operations = [migrations.RunPython(rehash, migrations.RunPython.noop)]
