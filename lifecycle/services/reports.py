"""Session reports in (semantics §2, §15): the same validation for the command line and the
API. Every bad line is reported with its number and field; nothing is written unless every line
is good. Storing reports is the lifecycle's half of report intake; trial enrolment, the
engine's half, is called beside it by `replay.intake.reports_ingest` in the same transaction.
"""

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


def _parse_reports(rows) -> dict[tuple[str, datetime], tuple[int, dict]]:
    """(session_id, at) → (line, fields); raises ImportRejected naming every bad line."""
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
    _refuse_unknown_rules(parsed)
    return parsed


def _refuse_unknown_rules(parsed: dict) -> None:
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
    rows, *, actor: str = "harness", now: datetime | None = None
) -> tuple[ImportResult, list[Report]]:
    """Store reports (semantics §2), idempotent on (session_id, at); a report sent again with
    other content replaces the stored one. Returns the result and the reports stored or changed
    (for trial enrolment, in the caller's transaction); one round is asked for on commit."""
    parsed = _parse_reports(rows)
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
        evidence={
            "session_id": report.session_id,
            "at": report.at.isoformat(),
            "notices": report.notices,
            "metrics": report.metrics,
            "rules_read": report.rules_read,
        },
    )
