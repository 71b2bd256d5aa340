"""Existing databases upgrade in place: rules recorded before extraction scores were stored
get theirs when migration 0008 runs (semantics §12)."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("lifecycle", "0007_enrolment_indexes")]
AFTER = [("lifecycle", "0008_rule_comparison")]
EXPECTED = {
    "trigger": "when an API responds 429 Too Many Requests",
    "directive": "back off exponentially and honour the Retry-After header before retrying",
}
AT = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def latest_schema_after():
    """Migrating back and forth leaves the test database where it found it: at the latest
    migrations, which the tests after this one expect."""
    yield
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_rules_recorded_before_the_upgrade_are_scored_by_it(latest_schema_after):
    apps = _migrate(BEFORE)
    Trajectory, Rule = (
        apps.get_model("lifecycle", "Trajectory"),
        apps.get_model("lifecycle", "Rule"),
    )
    Trajectory.objects.create(
        id="F-429",
        kind="failure",
        task="call the API",
        content_hash="x",
        imported_at=AT,
        expected_rule=EXPECTED,
    )
    common = {"scope": "http", "content_hash": "x", "recorded_at": AT, "author": "bot"}
    Rule.objects.create(id="R-1", source_case="F-429", **EXPECTED, **common)
    Rule.objects.create(id="R-2", trigger="when tests fail", directive="rerun", **common)

    apps = _migrate(AFTER)
    scored = dict(apps.get_model("lifecycle", "Rule").objects.values_list("id", "comparison"))
    assert scored["R-1"]["source_case"] == "F-429"
    assert (scored["R-1"]["verdict"], scored["R-1"]["token_f1"]) == ("match", 1.0)
    assert scored["R-2"] is None  # no source case: nothing to compare with
