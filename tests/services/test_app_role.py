"""The journal survives the app (semantics §10): TRUNCATE is refused by a trigger even for the
owner, and the app, run as the role `grant_app_role` prepares, can write everything it needs
but cannot update, delete, truncate, drop or disable the journal's triggers. PostgreSQL only.
"""

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from lifecycle.journal import EventType
from lifecycle.models import JournalEvent, Rule

from ..builders import candidate

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _owner_sql(sql: str) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "TRUNCATE lifecycle_journalevent",
        "TRUNCATE TABLE ONLY lifecycle_journalevent RESTART IDENTITY",
        "TRUNCATE lifecycle_rule CASCADE",
    ],
)
def test_postgresql_refuses_truncating_the_journal_even_for_the_owner(sql):
    rule = candidate("C-1")
    before = JournalEvent.objects.filter(rule=rule).count()
    assert before >= 1
    with pytest.raises(DatabaseError, match="append-only: TRUNCATE"):
        _owner_sql(sql)
    assert JournalEvent.objects.filter(rule=rule).count() == before
    assert Rule.objects.filter(pk=rule.pk).exists()


@pytest.fixture
def app_role():
    """A login role that owns nothing, granted by the command, dropped afterwards."""
    role = f"cw_app_{uuid.uuid4().hex[:10]}"
    _owner_sql(f"CREATE ROLE {role} LOGIN")
    try:
        yield role
    finally:
        _owner_sql(f"DROP OWNED BY {role}")
        _owner_sql(f"DROP ROLE {role}")


def _grant(role: str) -> None:
    call_command("grant_app_role", role, stdout=io.StringIO())


def _as(role: str) -> psycopg.Connection:
    params = connection.settings_dict
    return psycopg.connect(
        host=params["HOST"] or "127.0.0.1",
        port=params["PORT"] or 5432,
        dbname=params["NAME"],
        user=role,
        autocommit=True,
    )


@pytest.mark.parametrize(
    "sql, words",
    [
        ("TRUNCATE lifecycle_journalevent", "permission denied"),
        ("TRUNCATE lifecycle_rule CASCADE", "permission denied"),
        ("ALTER TABLE lifecycle_journalevent DISABLE TRIGGER journal_append_only", "owner"),
        ("ALTER TABLE lifecycle_journalevent DISABLE TRIGGER ALL", "owner"),
        ("DROP TRIGGER journal_no_truncate ON lifecycle_journalevent", "owner"),
        ("DROP TABLE lifecycle_journalevent CASCADE", "owner"),
        ("UPDATE lifecycle_journalevent SET type = 'rewritten'", "permission denied"),
        ("DELETE FROM lifecycle_journalevent", "permission denied"),
        ("CREATE TABLE lifecycle_shadow (id int)", "permission denied"),
    ],
)
def test_the_app_role_cannot_rewrite_history(app_role, sql, words):
    candidate("C-1")
    _grant(app_role)
    before = JournalEvent.objects.count()
    with _as(app_role) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege, match=words):
        conn.execute(sql)
    assert JournalEvent.objects.count() == before


def test_the_app_role_reads_and_appends_to_the_journal(app_role):
    _grant(app_role)
    with _as(app_role) as conn:
        conn.execute(
            "INSERT INTO lifecycle_journalevent (type, at, actor, evidence) "
            "VALUES ('report_received', now(), 'probe', '{}')"
        )
        (count,) = conn.execute("SELECT count(*) FROM lifecycle_journalevent").fetchone()
    assert count == JournalEvent.objects.count() == 1


def _manage(role: str, *args: str, stdin: str) -> subprocess.CompletedProcess:
    params = connection.settings_dict
    url = f"postgres://{role}@{params['HOST'] or '127.0.0.1'}:{params['PORT'] or 5432}/{params['NAME']}"
    env = {**os.environ, "DATABASE_URL": url, "CELERY_BROKER_URL": "", "DEBUG": "false"}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def test_the_app_runs_as_the_restricted_role(app_role):
    """Recording candidates and ingesting reports as the app role: rules, reports, enrolments,
    the round they kick (its lock row, its journal events) are all written."""
    _grant(app_role)
    line = {"id": "C-7", "trigger": "when git push fails", "directive": "pull first"}
    recorded = _manage(app_role, "record_candidates", "--json", "-", stdin=json.dumps(line))
    assert recorded.returncode == 0, recorded.stderr
    report = {"session_id": "s-1", "at": "2026-12-03T08:00:00Z", "notices": [], "metrics": {}}
    ingested = _manage(app_role, "ingest_reports", "--json", "-", stdin=json.dumps(report))
    assert ingested.returncode == 0, ingested.stderr
    assert json.loads(ingested.stdout)["created"] == 1
    types = set(JournalEvent.objects.values_list("type", flat=True))
    assert {EventType.RULE_ADDED, EventType.REPORT_RECEIVED} <= types
    assert Rule.objects.get(pk="C-7").enrolments.filter(session_id="s-1").exists()


def test_the_command_refuses_a_role_that_could_undo_the_guard(app_role):
    with pytest.raises(CommandError, match="superuser"):
        call_command("grant_app_role", connection.settings_dict["USER"] or "postgres")
    _owner_sql(f"GRANT {connection.settings_dict['USER'] or 'postgres'} TO {app_role}")
    with pytest.raises(CommandError, match="owns"):
        call_command("grant_app_role", app_role)
    with pytest.raises(CommandError, match="no role"):
        call_command("grant_app_role", "cw_nobody_here")
    with pytest.raises(CommandError, match="plain role name"):
        call_command("grant_app_role", 'x"; DROP TABLE lifecycle_rule; --')


def test_the_statements_can_be_printed_for_a_dba(app_role, capsys):
    call_command("grant_app_role", app_role, "--print")
    printed = capsys.readouterr().out
    assert (
        f'GRANT SELECT, INSERT ON TABLE "public"."lifecycle_journalevent" TO "{app_role}";'
        in printed
    )
    assert "TRUNCATE" not in printed
    with _as(app_role) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT 1 FROM lifecycle_rule")
