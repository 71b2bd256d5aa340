"""Session reports in (semantics §2, §15): the same validation for the command line and the
API. Every bad line is reported with its number and field; nothing is written unless every line
is good. Storing reports is the lifecycle's half of report intake; trial enrolment, the
engine's half, is called beside it by `replay.intake.reports_ingest` in the same transaction —
for a batch of one report on PostgreSQL, in the same statement (`report_store_sql`).
"""

import json
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from .. import atoms as atom_lib
from .. import journal, signals
from ..journal import EventType
from ..models import Report, Rule, RuleRead
from ..validation import (
    ImportRejected,
    ImportResult,
    LineError,
    content_hash,
    parse_metrics,
    parse_time,
    report_size_errors,
    unknown_keys,
)

REPORT_KEYS = {"session_id", "at", "notices", "metrics", "rules_read"}


def parse_report(number: int, obj: object) -> tuple[dict | None, list[LineError]]:
    if not isinstance(obj, dict):
        return None, [LineError(number, "", "each line must be a JSON object")]
    errors = unknown_keys(number, obj, REPORT_KEYS)
    errors += [LineError(number, f, m) for f, m in report_size_errors(obj)]
    session_id = obj.get("session_id")
    if not isinstance(session_id, str) or not session_id.strip() or len(session_id) > 128:
        errors.append(
            LineError(number, "session_id", "is required: a string of at most 128 characters")
        )
    at = None
    if "at" not in obj:
        errors.append(LineError(number, "at", "is required (ISO 8601)"))
    else:
        try:
            at = parse_time(obj["at"])
        except ValueError as exc:
            errors.append(LineError(number, "at", str(exc)))
    try:
        notices = atom_lib.parse_atoms(obj.get("notices") or [], notices_only=True)
    except atom_lib.BadAtom as exc:
        errors.append(LineError(number, "notices", str(exc)))
        notices = []
    try:
        metrics = parse_metrics(obj.get("metrics") or {})
    except ValueError as exc:
        errors.append(LineError(number, "metrics", str(exc)))
        metrics = {}
    rules_read = obj.get("rules_read") or []
    if not isinstance(rules_read, list) or not all(isinstance(r, str) for r in rules_read):
        errors.append(LineError(number, "rules_read", "must be a list of rule ids"))
    if errors:
        return None, errors
    fields = {
        "session_id": session_id.strip(),
        "at": at,
        "notices": notices,
        "metrics": metrics,
        "rules_read": list(dict.fromkeys(rules_read)),
        "has_notice": bool(notices),
    }
    fields["content_hash"] = content_hash({**fields, "at": at.isoformat()})
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
    known = set(Rule.objects.filter(pk__in=named).order_by().values_list("id", flat=True))
    unknown = [
        LineError(n, "rules_read", f"unknown rule {rid!r}")
        for n, f in parsed.values()
        for rid in f["rules_read"]
        if rid not in known
    ]
    if unknown:
        raise ImportRejected(unknown)


def reports_store(
    parsed: Parsed, *, actor: str = "harness", now: datetime | None = None
) -> tuple[ImportResult, list[Report]]:
    """Store parsed reports (semantics §2), idempotent on (session_id, at); a report sent again
    with other content replaces the stored one. Returns the result and the reports stored or
    changed (for trial enrolment, in the caller's transaction); one round is asked for on
    commit."""
    refuse_unknown_rules(parsed)
    now = now or timezone.now()
    result = ImportResult()
    # No savepoint inside the caller's transaction: nothing here is retried on its own, and a
    # savepoint is two more round trips for every report.
    with transaction.atomic(savepoint=False):
        sessions = {k[0] for k in parsed}
        stored = {(r.session_id, r.at): r for r in Report.objects.filter(session_id__in=sessions)}
        new, changed = [], []
        for key, (_, fields) in parsed.items():
            existing = stored.get(key)
            if existing is None:
                new.append(Report(**fields, received_at=now))
            elif existing.content_hash == fields["content_hash"]:
                result.unchanged += 1
            else:
                for name, value in fields.items():
                    setattr(existing, name, value)
                existing.received_at = now
                changed.append(existing)
        touched = _write_reports(new, changed, actor=actor, now=now)
        result.created, result.updated = len(touched) - len(changed), len(changed)
        result.ids = [str(r.pk) for r in touched]
    return result, touched


def _write_reports(new: list[Report], changed: list[Report], *, actor: str, now) -> list[Report]:
    if changed:
        Report.objects.bulk_update(
            changed,
            ["notices", "metrics", "rules_read", "has_notice", "content_hash", "received_at"],
        )
    touched = Report.objects.bulk_create(new, batch_size=2000) + changed
    if not touched:
        return touched
    RuleRead.objects.bulk_create(
        [
            RuleRead(session_id=r.session_id, rule_id=rid, at=r.at, via="report")
            for r in touched
            for rid in r.rules_read
        ],
        batch_size=2000,
    )
    journal.write_many([_received(r, actor=actor, now=now) for r in touched])
    signals.announce("report")
    return touched


def _received(report: Report, *, actor: str, now: datetime):
    return journal.event(
        type=EventType.REPORT_RECEIVED,
        at=now,
        actor=actor,
        evidence=_evidence(vars(report)),
    )


def _evidence(fields: dict) -> dict:
    """A report_received event's evidence: the report as it was sent."""
    return {
        "session_id": fields["session_id"],
        "at": fields["at"].isoformat(),
        "notices": fields["notices"],
        "metrics": fields["metrics"],
        "rules_read": fields["rules_read"],
    }


def report_store_sql(fields: dict, *, actor: str, now: datetime) -> tuple[str, list]:
    """`reports_store` for one parsed report as the first terms of a PostgreSQL WITH, for a
    caller that adds its own writes and runs it all as ONE statement: one round trip, and
    atomic without a BEGIN and a COMMIT of its own.

    The terms: `known` (one row: `ok`, every rule the report reads exists — nothing below
    writes otherwise, so the caller can name the lines and write nothing), and `stored` (the
    report inserted or changed: `id`, `created`; no row when it was already stored as is).
    Rule reads and the journal event are written for a stored row only, as `_write_reports`
    does. The caller announces the round when `stored` has a row."""
    report, read = Report._meta.db_table, RuleRead._meta.db_table
    rule = Rule._meta.db_table
    columns = ("notices", "metrics", "rules_read", "has_notice", "content_hash", "received_at")
    changed = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns)
    events, event_params = journal.insert_rows_sql(
        source="stored",
        type=EventType.REPORT_RECEIVED,
        actor=actor,
        at=now,
        evidence=_evidence(fields),
    )
    rules_read = fields["rules_read"]
    sql = (
        "known AS MATERIALIZED "
        f"(SELECT count(*) = %s AS ok FROM {rule} WHERE id = ANY(%s::text[])), "
        f"stored AS (INSERT INTO {report} "
        f"(session_id, at, {', '.join(columns)}) "
        "SELECT %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s, %s, %s FROM known WHERE ok "
        f"ON CONFLICT (session_id, at) DO UPDATE SET {changed} "
        f"WHERE {report}.content_hash <> EXCLUDED.content_hash "
        # xmax is 0 on a row version this statement inserted, and this transaction's id on
        # one it updated: PostgreSQL's way to tell the two apart in one upsert.
        f"RETURNING {report}.id, {report}.xmax = 0 AS created), "
        f"reads AS (INSERT INTO {read} (session_id, rule_id, at, via) "
        "SELECT %s, rule_id, %s, 'report' FROM stored, unnest(%s::text[]) AS rule_id), "
        f"journaled AS ({events})"
    )
    params = [
        len(rules_read),
        rules_read,
        fields["session_id"],
        fields["at"],
        json.dumps(fields["notices"]),
        json.dumps(fields["metrics"]),
        json.dumps(rules_read),
        fields["has_notice"],
        fields["content_hash"],
        now,
        fields["session_id"],
        fields["at"],
        rules_read,
        *event_params,
    ]
    return sql, params
