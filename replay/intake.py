"""Report intake (semantics §2, §8): the lifecycle stores the reports, and in the same
transaction the engine enrols their sessions in the forward trials of every candidate in
force — explicitly, here, so the most important write of a report is in plain sight. The round
the reports ask for is kicked after commit (through `lifecycle.signals`).

A batch of one report on PostgreSQL — what a live harness posts after each session — is taken
in by ONE statement: the report, its rule reads and journal event (`report_store_sql`), and its
session's enrolment (`trials.enrol_terms`), with the registry read inside it. One statement is
one transaction, as durable as any: the BEGIN and COMMIT round trips and the ORM's work were
most of what a report cost. Any other batch, and every batch on SQLite (which cannot write in
a WITH), goes through `reports_store` and `trial_enrol`; both ways follow the rule of
`trials.enrol_report` (tests/services/test_enrolment.py).
"""

from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from lifecycle import signals
from lifecycle.metrics import families_sql
from lifecycle.services.reports import (
    Parsed,
    refuse_unknown_rules,
    report_store_sql,
    reports_parse,
    reports_store,
)
from lifecycle.validation import ImportResult

from .trials import enrol_terms, notice_metrics, trial_enrol


def reports_ingest(rows, *, actor: str = "harness", now: datetime | None = None) -> ImportResult:
    """Store reports and enrol their sessions in the trials, all or nothing."""
    parsed = reports_parse(rows)
    now = now or timezone.now()
    if len(parsed) == 1 and connection.vendor == "postgresql":
        return _one_report_ingest(parsed, actor=actor, now=now)
    with transaction.atomic():
        result, touched = reports_store(parsed, actor=actor, now=now)
        trial_enrol(reports=touched, now=now)
    return result


def _one_report_ingest(parsed: Parsed, *, actor: str, now: datetime) -> ImportResult:
    [(_, fields)] = parsed.values()
    sql, params = _one_report_statement(fields, actor=actor, now=now)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        known, report_id, created = cursor.fetchone()
    if not known:
        # Nothing was written. This names the lines; it finds nothing only when the rule was
        # recorded in between, and then the report goes in now.
        refuse_unknown_rules(parsed)
        return _one_report_ingest(parsed, actor=actor, now=now)
    if report_id is None:
        return ImportResult(unchanged=1)
    signals.announce("report")
    return ImportResult(created=int(created), updated=int(not created), ids=[str(report_id)])


def _one_report_statement(fields: dict, *, actor: str, now: datetime) -> tuple[str, list]:
    store, store_params = report_store_sql(fields, actor=actor, now=now)
    mine, flip, insert = enrol_terms(
        fields["session_id"],
        hit=("r.metric IN (SELECT name FROM hit)", []),
        any_notice=bool(fields["notices"]),
        read=sorted(fields["rules_read"]),
        now=now,
        needed=settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS,
        only_if="EXISTS (SELECT FROM stored)",
    )
    terms = [
        (store, store_params),
        (f"hit AS MATERIALIZED ({families_sql()})", [notice_metrics(fields["notices"])]),
        (f"mine AS MATERIALIZED ({mine[0]})", mine[1]),
        *([(f"flipped AS ({flip[0]})", flip[1])] if flip else []),
        (f"enrolled AS ({insert[0]})", insert[1]),
    ]
    sql = (
        f"WITH {', '.join(term for term, _ in terms)} "
        "SELECT known.ok, stored.id, stored.created FROM known LEFT JOIN stored ON TRUE"
    )
    return sql, [param for _, term_params in terms for param in term_params]
