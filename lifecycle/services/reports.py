"""Report intake (semantics §2, §8, §15): the one write path of a report, for the command line,
the API and the demo alike.

`reports_ingest` takes a batch in ONE transaction: the reports (idempotent on session and
time), their rule reads, a `report_received` event each, and their sessions' trial outcomes
(`lifecycle.services.enrolment`); a validation round is asked for on commit. Every bad line is
reported with its number and field, and nothing is written unless every line is good.
"""

from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from .. import bulk, journal, signals
from ..inputs import ReportIn, line_fields
from ..journal import EventType
from ..models import Report, Rule, RuleRead
from ..validation import ImportRejected, ImportResult, LineError, content_hash
from .enrolment import sessions_report


def parse_report(number: int, obj: object) -> tuple[dict | None, list[LineError]]:
    """One line's fields, checked by `ReportIn`, or the line's errors."""
    line, errors = line_fields(ReportIn, number, obj)
    if errors:
        return None, errors
    fields = {**line.__dict__, "has_notice": bool(line.notices)}
    fields["content_hash"] = content_hash({**fields, "at": line.at.isoformat()})
    return fields, []


Parsed = dict[tuple[str, datetime], tuple[int, dict]]


def reports_parse(rows) -> Parsed:
    """(session_id, at) → (line, fields); raises ImportRejected naming every bad line. Reads
    nothing: whether the rules read exist is checked where the reports are stored."""
    parsed: dict[tuple[str, datetime], tuple[int, dict]] = {}
    errors: list[LineError] = []
    for number, obj, error in rows:
        fields, line_errors = (None, [error]) if error else parse_report(number, obj)
        if line_errors:
            errors.extend(line_errors)
            continue
        key = (fields["session_id"], fields["at"])
        if key in parsed and parsed[key][1]["content_hash"] != fields["content_hash"]:
            errors.append(
                LineError(
                    number,
                    "at",
                    f"session {key[0]} already has another report at this time "
                    f"on line {parsed[key][0]}",
                )
            )
            continue
        parsed[key] = (number, fields)
    if errors:
        raise ImportRejected(errors)
    return parsed


def refuse_unknown_rules(parsed: Parsed) -> None:
    """Raise ImportRejected naming every line that reads a rule never recorded."""
    named = {rid for _, f in parsed.values() for rid in f["rules_read"]}
    if not named:
        return
    known = set(Rule.objects.filter(pk__in=named).order_by().values_list("id", flat=True))
    unknown = [
        LineError(n, "rules_read", f"unknown rule {rid!r}")
        for n, f in parsed.values()
        for rid in f["rules_read"]
        if rid not in known
    ]
    if unknown:
        raise ImportRejected(unknown)


def reports_ingest(rows, *, actor: str = "harness", now: datetime | None = None) -> ImportResult:
    """Take in session reports (semantics §2): store them with their rule reads and events, and
    record what their sessions showed in the forward trials (§8, §20), all or nothing. A report
    sent again with other content replaces the stored one. One round is asked for on commit.
    Raises ImportRejected naming every bad line."""
    parsed = reports_parse(rows)
    now = now or timezone.now()
    with transaction.atomic():
        result, touched = _store(parsed, actor=actor, now=now)
        if touched:
            sessions_report(reports=touched, now=now)
            signals.announce("report")
    return result


REPORT_COLUMNS = (
    "session_id",
    "at",
    "notices",
    "metrics",
    "rules_read",
    "has_notice",
    "content_hash",
    "received_at",
)


def _store(parsed: Parsed, *, actor: str, now: datetime) -> tuple[ImportResult, list[Report]]:
    """Store the reports not stored as they are; (result, the reports stored or changed).

    New reports go in with one INSERT that leaves the stored ones alone (the usual report is
    new: one round trip); only reports sent before are read back, to tell the unchanged from
    those sent again with other content."""
    result = ImportResult()
    rows = [[*(fields[c] for c in REPORT_COLUMNS[:-1]), now] for _, fields in parsed.values()]
    ids = dict(
        bulk.insert_new_rows(
            Report,
            REPORT_COLUMNS,
            rows,
            unique=("session_id", "at"),
            returning=("content_hash", "id"),
        )
    )
    new, again = [], {}
    for key, (_, fields) in parsed.items():
        pk = ids.get(fields["content_hash"])
        if pk is None:
            again[key] = fields
        else:
            new.append(Report(pk=pk, **fields, received_at=now))
    changed = _replace(again, now=now, result=result) if again else []
    touched = new + changed
    if touched:
        _record_reads(parsed, touched)
        journal.write_many([_received(r, actor=actor, now=now) for r in touched])
    result.created, result.updated = len(new), len(changed)
    result.ids = [str(r.pk) for r in touched]
    return result, touched


def _replace(again: dict, *, now: datetime, result: ImportResult) -> list[Report]:
    """Reports stored before: those sent again with other content are replaced (returned)."""
    sessions = {key[0] for key in again}
    stored = {(r.session_id, r.at): r for r in Report.objects.filter(session_id__in=sessions)}
    changed = []
    for key, fields in again.items():
        existing = stored[key]
        if existing.content_hash == fields["content_hash"]:
            result.unchanged += 1
            continue
        for name, value in fields.items():
            setattr(existing, name, value)
        existing.received_at = now
        changed.append(existing)
    if changed:
        Report.objects.bulk_update(changed, [*REPORT_COLUMNS[2:]])
    return changed


def _record_reads(parsed: Parsed, reports: list[Report]) -> None:
    """The rule reads the reports declare (semantics §5), written for the rules that exist by
    one INSERT … SELECT; when some rule does not, ImportRejected names the lines (and the
    transaction takes the reports back)."""
    at = RuleRead._meta.get_field("at")
    rows = [
        (r.session_id, rule_id, at.get_db_prep_save(r.at, connection), "report")
        for r in reports
        for rule_id in r.rules_read
    ]
    read, rule = RuleRead._meta.db_table, Rule._meta.db_table
    written = 0
    with connection.cursor() as cursor:
        for start in range(0, len(rows), bulk.BATCH):
            chunk = rows[start : start + bulk.BATCH]
            values = ", ".join(["(%s, %s, %s, %s)"] * len(chunk))
            cursor.execute(
                f"INSERT INTO {read} (session_id, rule_id, at, via) "
                f"SELECT column1, column2, column3, column4 FROM (VALUES {values}) AS v "
                f"WHERE column2 IN (SELECT id FROM {rule})",
                [value for row in chunk for value in row],
            )
            written += cursor.rowcount
    if written != len(rows):
        refuse_unknown_rules(parsed)


def _received(report: Report, *, actor: str, now: datetime) -> journal.Event:
    """A report_received event: the report as it was sent."""
    return journal.event(
        type=EventType.REPORT_RECEIVED,
        at=now,
        actor=actor,
        evidence={
            "session_id": report.session_id,
            "at": report.at.isoformat(),
            "notices": report.notices,
            "metrics": report.metrics,
            "rules_read": report.rules_read,
        },
    )
