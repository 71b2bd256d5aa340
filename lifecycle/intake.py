"""Candidates and reports in (semantics §2, §3, §15): the same validation for the command line and
the API. Every bad line is reported with its number and field; nothing is written unless
every line is good."""

from collections.abc import Iterable
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from . import atoms as atom_lib
from .corpus import ImportRejected, ImportResult, LineError, parse_metrics, parse_time
from .metrics import load_registry
from .models import JournalEvent, Report, Rule, RuleRead
from .services import (
    InvalidRule,
    candidate_fields,
    content_hash,
    rule_content_hash,
    rule_record_candidate,
)
from .signals import reports_received, reports_stored
from .states import Actor

CANDIDATE_KEYS = {
    "id",
    "trigger",
    "directive",
    "scope",
    "metric",
    "signature",
    "tags",
    "source_case",
    "source_notice",
}
REPORT_KEYS = {"session_id", "at", "notices", "metrics", "rules_read"}


def numbered(objects: Iterable[object]) -> list[tuple[int, object, LineError | None]]:
    """Objects already decoded (an API batch): numbered from 1 like lines of a file."""
    return [(n, obj, None) for n, obj in enumerate(objects, start=1)]


def _unknown_keys(number: int, obj: dict, allowed: set[str]) -> list[LineError]:
    return [
        LineError(number, key, f"unknown field (allowed: {', '.join(sorted(allowed))})")
        for key in obj
        if key not in allowed
    ]


def parse_candidates(rows) -> list[tuple[int, dict]]:
    """Validate candidate lines (semantics §15 `record_candidates`); raises ImportRejected."""
    registry = load_registry()
    good: list[tuple[int, dict]] = []
    errors: list[LineError] = []
    seen_ids: dict[str, int] = {}
    for number, obj, error in rows:
        if error:
            errors.append(error)
            continue
        if not isinstance(obj, dict):
            errors.append(LineError(number, "", "each line must be a JSON object"))
            continue
        line_errors = _unknown_keys(number, obj, CANDIDATE_KEYS)
        try:
            fields = candidate_fields(
                trigger=obj.get("trigger", ""),
                directive=obj.get("directive", ""),
                scope=obj.get("scope", "global"),
                metric=obj.get("metric") or "",
                signature=obj.get("signature"),
                tags=obj.get("tags"),
                source_case=obj.get("source_case") or "",
                source_notice=obj.get("source_notice") or "",
            )
        except InvalidRule as exc:
            errors.extend(line_errors)
            errors.append(LineError(number, exc.field, str(exc)))
            continue
        if fields["metric"] and registry.resolve(fields["metric"]) is None:
            line_errors.append(
                LineError(
                    number,
                    "metric",
                    f"unknown metric {fields['metric']!r} (known: {', '.join(sorted(registry))})",
                )
            )
        rule_id = obj.get("id")
        if rule_id is not None:
            if not isinstance(rule_id, str) or not rule_id.strip() or len(rule_id) > 64:
                line_errors.append(
                    LineError(number, "id", "must be a non-empty string of at most 64 characters")
                )
            elif rule_id in seen_ids:
                line_errors.append(
                    LineError(
                        number, "id", f"{rule_id!r} already appears on line {seen_ids[rule_id]}"
                    )
                )
            else:
                seen_ids[rule_id] = number
        if line_errors:
            errors.extend(line_errors)
            continue
        good.append((number, {**fields, "rule_id": rule_id.strip() if rule_id else None}))
    if errors:
        raise ImportRejected(errors)

    # A given id already stored with other text is a conflict: rule text is immutable.
    ids = [f["rule_id"] for _, f in good if f["rule_id"]]
    stored = dict(Rule.objects.filter(pk__in=ids).values_list("id", "content_hash"))
    conflicts = [
        LineError(
            n,
            "id",
            f"rule {f['rule_id']} is already recorded with other text "
            "(a recorded rule is immutable; record it without an id to make a new candidate)",
        )
        for n, f in good
        if f["rule_id"] in stored and stored[f["rule_id"]] != rule_content_hash(f)
    ]
    if conflicts:
        raise ImportRejected(conflicts)
    return good


def record_candidates(
    rows, *, actor: Actor, now: datetime | None = None
) -> tuple[ImportResult, list[Rule]]:
    """Record every candidate of a file or batch, all or nothing."""
    good = parse_candidates(rows)
    result = ImportResult()
    rules = []
    with transaction.atomic():
        for number, fields in good:
            rule_id = fields.pop("rule_id")
            try:
                rule, created = rule_record_candidate(
                    actor=actor, rule_id=rule_id, now=now, **fields
                )
            except InvalidRule as exc:
                raise ImportRejected([LineError(number, exc.field, str(exc))]) from None
            rules.append(rule)
            result.ids.append(rule.id)
            if created:
                result.created += 1
            else:
                result.unchanged += 1
    return result, rules


def parse_report(number: int, obj: object) -> tuple[dict | None, list[LineError]]:
    if not isinstance(obj, dict):
        return None, [LineError(number, "", "each line must be a JSON object")]
    errors = _unknown_keys(number, obj, REPORT_KEYS)
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


def ingest_reports(rows, *, actor: str = "harness", now: datetime | None = None) -> ImportResult:
    """Store reports (semantics §2), idempotent on (session_id, at); a report sent again with other
    content replaces the stored one. Trial enrolment runs in the same transaction (the
    `reports_stored` signal); a round is kicked after commit."""
    parsed: dict[tuple[str, datetime], tuple[int, dict]] = {}
    errors: list[LineError] = []
    for number, obj, error in rows:
        if error:
            errors.append(error)
            continue
        fields, line_errors = parse_report(number, obj)
        if line_errors:
            errors.extend(line_errors)
            continue
        key = (fields["session_id"], fields["at"])
        if key in parsed and parsed[key][1]["content_hash"] != fields["content_hash"]:
            errors.append(
                LineError(
                    number,
                    "at",
                    f"session {key[0]} already has another report at this time on line {parsed[key][0]}",
                )
            )
            continue
        parsed[key] = (number, fields)
    if errors:
        raise ImportRejected(errors)
    known_rules = set(
        Rule.objects.filter(
            pk__in={rid for _, f in parsed.values() for rid in f["rules_read"]}
        ).values_list("id", flat=True)
    )
    unknown = [
        LineError(n, "rules_read", f"unknown rule {rid!r}")
        for n, f in parsed.values()
        for rid in f["rules_read"]
        if rid not in known_rules
    ]
    if unknown:
        raise ImportRejected(unknown)

    now = now or timezone.now()
    result = ImportResult()
    with transaction.atomic():
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
        if changed:
            Report.objects.bulk_update(
                changed,
                ["notices", "metrics", "rules_read", "has_notice", "content_hash", "received_at"],
            )
        new = Report.objects.bulk_create(new, batch_size=2000)
        result.created, result.updated = len(new), len(changed)
        touched = new + changed
        if touched:
            RuleRead.objects.bulk_create(
                [
                    RuleRead(session_id=r.session_id, rule_id=rid, at=r.at, via="report")
                    for r in touched
                    for rid in r.rules_read
                ],
                batch_size=2000,
            )
            JournalEvent.objects.bulk_create(
                [
                    JournalEvent(
                        type="report_received",
                        at=now,
                        actor=actor,
                        evidence={
                            "session_id": r.session_id,
                            "at": r.at.isoformat(),
                            "notices": r.notices,
                            "metrics": r.metrics,
                            "rules_read": r.rules_read,
                        },
                    )
                    for r in touched
                ],
                batch_size=2000,
            )
            reports_stored.send(sender=None, reports=touched, now=now)
            ids = [r.pk for r in touched]
            transaction.on_commit(lambda: reports_received.send(sender=None, report_ids=ids))
        result.ids = [str(r.pk) for r in touched]
    return result
