"""Candidates in by the batch (semantics §3, §15): a JSON Lines file or an API batch, checked
line by line, then recorded all or nothing through `rules.rule_record_candidate`. The whole
batch asks for one validation round when it commits."""

from datetime import datetime

from django.db import transaction

from .. import signals
from ..follow_ups import compared_in_one_task
from ..inputs import CandidateIn, line_fields
from ..metrics import load_registry
from ..models import Rule
from ..states import Actor
from ..validation import (
    ImportRejected,
    ImportResult,
    InvalidRule,
    LineError,
    check_metric,
    check_rule_id,
    rule_content_hash,
)
from .rules import Recording, rule_record_candidate


def _candidate_line(number: int, obj: object, registry) -> tuple[dict | None, list[LineError]]:
    """One line's fields (with `rule_id`), checked by `CandidateIn`, or the line's errors."""
    line, errors = line_fields(CandidateIn, number, obj)
    if errors:
        return None, errors
    fields = line.model_dump(exclude={"id"})
    try:
        check_metric(fields["metric"], registry)
    except InvalidRule as exc:
        return None, [LineError(number, exc.field, str(exc))]
    return {**fields, "rule_id": line.id}, []


def _given_id(obj: object) -> str | None:
    """The line's id when it is a valid one (to spot the same id twice in a file)."""
    try:
        return check_rule_id(obj.get("id")) if isinstance(obj, dict) else None
    except InvalidRule:
        return None


def parse_candidates(rows) -> list[tuple[int, dict]]:
    """Validate candidate lines (semantics §15 `record_candidates`); raises ImportRejected."""
    good: list[tuple[int, dict]] = []
    errors: list[LineError] = []
    seen_ids: dict[str, int] = {}
    registry = load_registry()
    for number, obj, error in rows:
        fields, line_errors = (None, [error]) if error else _candidate_line(number, obj, registry)
        rule_id = _given_id(obj)
        if rule_id in seen_ids:
            line_errors.append(
                LineError(number, "id", f"{rule_id!r} already appears on line {seen_ids[rule_id]}")
            )
        elif rule_id:
            seen_ids[rule_id] = number
        if line_errors:
            errors.extend(line_errors)
        else:
            good.append((number, fields))
    if errors:
        raise ImportRejected(errors)
    _refuse_changed_text(good)
    return good


def _refuse_changed_text(good: list[tuple[int, dict]]) -> None:
    """A given id already stored with other text is a conflict: rule text is immutable."""
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


def candidates_record(
    rows, *, actor: Actor, now: datetime | None = None
) -> tuple[ImportResult, list[Rule]]:
    """Record every candidate of a file or batch, all or nothing; one round is asked for."""
    good = parse_candidates(rows)
    result = ImportResult()
    rules = []
    with signals.one_announcement(), compared_in_one_task(), transaction.atomic():
        recording = Recording([fields["rule_id"] for _, fields in good])
        for number, fields in good:
            rule_id = fields.pop("rule_id")
            try:
                rule, created = rule_record_candidate(
                    actor=actor, rule_id=rule_id, now=now, recording=recording, **fields
                )
            except InvalidRule as exc:
                raise ImportRejected([LineError(number, exc.field, str(exc))]) from None
            rules.append(rule)
            result.ids.append(rule.id)
            if created:
                result.created += 1
            else:
                result.unchanged += 1
        recording.finish()
    return result, rules
