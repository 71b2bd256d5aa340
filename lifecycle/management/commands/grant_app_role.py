"""Give a PostgreSQL role exactly what the web app and the workers need, and nothing more.

Run by the owner of the tables (the role `migrate` runs as), after every `migrate`: it is
idempotent. The role may read and write every table, but only read and append to the journal;
it owns nothing, so it cannot TRUNCATE, DROP, ALTER or DISABLE TRIGGER — the journal's
append-only triggers then hold against the app itself (docs/deploy.md).
"""

import re

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from lifecycle.models import JournalEvent

APP_PRIVILEGES = "SELECT, INSERT, UPDATE, DELETE"
JOURNAL_PRIVILEGES = "SELECT, INSERT"
# Read by `migrate --check` and `showmigrations`; written only by migrations, as the owner.
READ_ONLY_TABLES = ("django_migrations",)
# A plain, unquoted PostgreSQL identifier: nothing to escape when it is put into a statement.
ROLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def grant_statements(*, role: str, database: str, schema: str, tables: list[str]) -> list[str]:
    """The statements, in order: everything revoked from `role` first, then granted."""
    journal = JournalEvent._meta.db_table
    read_write = [t for t in tables if t != journal and t not in READ_ONLY_TABLES]
    read_only = [t for t in tables if t in READ_ONLY_TABLES]
    who, where = _quote(role), _quote(schema)

    def on(names: list[str]) -> str:
        return ", ".join(f"{where}.{_quote(t)}" for t in names)

    statements = [
        f"GRANT CONNECT ON DATABASE {_quote(database)} TO {who}",
        f"GRANT USAGE ON SCHEMA {where} TO {who}",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {where} FROM {who}",
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {where} FROM {who}",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {where} TO {who}",
    ]
    if read_write:
        statements.append(f"GRANT {APP_PRIVILEGES} ON TABLE {on(read_write)} TO {who}")
    if read_only:
        statements.append(f"GRANT SELECT ON TABLE {on(read_only)} TO {who}")
    if journal in tables:
        statements.append(f"GRANT {JOURNAL_PRIVILEGES} ON TABLE {on([journal])} TO {who}")
    return statements


class Command(BaseCommand):
    help = (
        "Grant a PostgreSQL role what the app needs (read/write tables, append-only journal) "
        "and nothing it could use to rewrite history. Run as the tables' owner after migrate."
    )

    def add_arguments(self, parser):
        parser.add_argument("role", help="an existing role that owns nothing, e.g. cauterweb_app")
        parser.add_argument(
            "--print", action="store_true", help="print the statements instead of running them"
        )

    def handle(self, *args, **options):
        role = options["role"]
        if connection.vendor != "postgresql":
            raise CommandError("grant_app_role needs PostgreSQL (DATABASE_URL=postgres://…)")
        if not ROLE_NAME.match(role):
            raise CommandError(f"{role!r} is not a plain role name (letters, digits, _ and $)")
        with transaction.atomic(), connection.cursor() as cursor:
            schema, database, tables = _target(cursor)
            if not options["print"]:
                _check_role(cursor, role, schema)
            statements = grant_statements(
                role=role, database=database, schema=schema, tables=tables
            )
            for statement in statements:
                self.stdout.write(f"{statement};")
                if not options["print"]:
                    cursor.execute(statement)
        if not options["print"]:
            self.stderr.write(f"granted {role}: {len(tables)} tables, the journal append-only")


def _target(cursor) -> tuple[str, str, list[str]]:
    cursor.execute("SELECT current_schema(), current_database()")
    schema, database = cursor.fetchone()
    cursor.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", [schema]
    )
    return schema, database, [name for (name,) in cursor.fetchall()]


def _check_role(cursor, role: str, schema: str) -> None:
    """Refuse a role that could undo the guard: missing, superuser, the owner, or a member of
    the owner's role (membership lets it act as the owner)."""
    cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [role])
    row = cursor.fetchone()
    if row is None:
        raise CommandError(f"no role {role!r}: create it first (CREATE ROLE {role} LOGIN …)")
    if row[0]:
        raise CommandError(f"{role!r} is a superuser: it can disable any trigger")
    cursor.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s "
        "AND pg_has_role(%s, tableowner, 'MEMBER') ORDER BY tablename LIMIT 1",
        [schema, role],
    )
    owned = cursor.fetchone()
    if owned is not None:
        raise CommandError(
            f"{role!r} owns (or is a member of the owner of) {owned[0]}: it could drop or "
            "disable the journal's triggers. Use a role that owns nothing."
        )
