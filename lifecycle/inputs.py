"""The lines every entry point takes in (API batches, JSON Lines files, the demo), as pydantic
models whose fields are checked by the functions of `lifecycle.validation` and nothing else.

One definition for both jobs: the API publishes these models in its OpenAPI schema
(`cauterweb.api.schemas`), and `line_fields` validates a decoded line with the same model,
turning pydantic's errors into `LineError`s that name the line and the field. Each field's
check is a `BeforeValidator`, so the check sees the value as sent and its message is the one
reported; a missing required field is reported with the message its check gives for no value.
Checks that read the database (a metric in the registry, a rule read that exists) stay with
the services that store the line.
"""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from . import atoms as atom_lib
from . import limits
from .validation import (
    InvalidRule,
    LineError,
    check_rule_id,
    parse_metrics,
    parse_time,
    rule_text,
)

# ---- the checks of a report's fields ------------------------------------------------------


def _session_id(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > limits.SESSION_ID:
        raise ValueError(f"is required: a string of at most {limits.SESSION_ID} characters")
    return value.strip()


def _report_time(value: object) -> datetime:
    if value is None:
        raise ValueError("is required (ISO 8601)")
    return parse_time(value)


def _notices(value: object) -> list[str]:
    if isinstance(value, list) and len(value) > limits.ATOMS:
        raise ValueError(f"has {len(value):,} items; the limit is {limits.ATOMS:,}")
    return atom_lib.parse_atoms(value or [], notices_only=True)


def _metrics(value: object) -> dict[str, float]:
    return parse_metrics(value or {})


def _rules_read(value: object) -> list[str]:
    value = value or []
    if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
        raise ValueError("must be a list of rule ids")
    if len(value) > limits.RULES_READ:
        raise ValueError(f"has {len(value):,} items; the limit is {limits.RULES_READ:,}")
    if any(len(r) > limits.RULE_ID for r in value):
        raise ValueError(f"a rule id is longer than {limits.RULE_ID} characters")
    return list(dict.fromkeys(value))


def _at_most(limit: int, keyword: str = "maxLength") -> dict:
    """A bound published in the schema; checking it is the field's validator's job."""
    return {keyword: limit}


class Line(BaseModel):
    """A line of input: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class ReportIn(Line):
    """One live session report (semantics §2)."""

    session_id: Annotated[str, BeforeValidator(_session_id)] = Field(
        json_schema_extra=_at_most(limits.SESSION_ID)
    )
    at: Annotated[datetime, BeforeValidator(_report_time)]
    notices: Annotated[list[str], BeforeValidator(_notices)] = Field(
        default_factory=list,
        json_schema_extra=_at_most(limits.ATOMS, "maxItems"),
        examples=[["breach:task_completion"]],
    )
    metrics: Annotated[dict[str, float], BeforeValidator(_metrics)] = Field(
        default_factory=dict, json_schema_extra=_at_most(limits.METRICS, "maxProperties")
    )
    rules_read: Annotated[list[str], BeforeValidator(_rules_read)] = Field(
        default_factory=list, json_schema_extra=_at_most(limits.RULES_READ, "maxItems")
    )


# ---- the checks of a candidate's fields ---------------------------------------------------


def _text(field: str, limit: int, missing: str = "", *, required: bool = True):
    """A stripped, bounded, storable text (`validation.rule_text`)."""
    return BeforeValidator(lambda value: rule_text(value, field, limit, missing, required))


def _optional_text(field: str, limit: int):
    def check(value: object) -> str:
        if value is not None and not isinstance(value, str):
            raise InvalidRule(f"{field} must be a string", field=field)
        return rule_text(value or "", field, limit, "", required=False)

    return BeforeValidator(check)


def _metric(value: object) -> str:
    if value is not None and not isinstance(value, str):
        raise InvalidRule("metric must be a metric name", field="metric")
    return rule_text(value or "", "metric", limits.METRIC_NAME, "", required=False)


def _bounded(items: list, field: str, limit: int) -> None:
    try:
        limits.check_count(items, field=field, limit=limit)
    except limits.TooLarge as exc:
        raise InvalidRule(str(exc), field=field) from None


def _signature(value: object) -> list[str]:
    try:
        atoms = atom_lib.parse_atoms(value if value is not None else [])
    except atom_lib.BadAtom as exc:
        raise InvalidRule(f"signature: {exc}", field="signature") from None
    _bounded(atoms, "signature", limits.ATOMS)
    return atoms


def _tags(value: object) -> list[str]:
    value = [] if value is None else value
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise InvalidRule("tags must be a list of strings", field="tags")
    _bounded(value, "tags", limits.TAGS)
    return sorted({rule_text(t, "tags", limits.TAG, "", required=False) for t in value})


class CandidateIn(Line):
    """One candidate rule (semantics §3)."""

    trigger: Annotated[str, _text("trigger", limits.TRIGGER, "is required (the 'when …' part)")] = (
        Field(json_schema_extra=_at_most(limits.TRIGGER), description="the 'when …' part")
    )
    directive: Annotated[
        str, _text("directive", limits.DIRECTIVE, "is required (the 'do …' part)")
    ] = Field(json_schema_extra=_at_most(limits.DIRECTIVE), description="the 'do …' part")
    id: Annotated[str | None, BeforeValidator(check_rule_id)] = Field(
        None,
        json_schema_extra=_at_most(limits.RULE_ID),
        description="kept as the rule's id; default: a fresh R-… id",
    )
    scope: Annotated[str, _text("scope", limits.SCOPE, "must be a non-empty name")] = Field(
        "global", json_schema_extra=_at_most(limits.SCOPE)
    )
    metric: Annotated[str, BeforeValidator(_metric)] = Field(
        "",
        json_schema_extra=_at_most(limits.METRIC_NAME),
        description="a registered metric name or alias; empty or null: any notice",
    )
    signature: Annotated[list[str], BeforeValidator(_signature)] = Field(
        default_factory=list,
        json_schema_extra=_at_most(limits.ATOMS, "maxItems"),
        examples=[["action:git.push"]],
    )
    tags: Annotated[list[str], BeforeValidator(_tags)] = Field(
        default_factory=list, json_schema_extra=_at_most(limits.TAGS, "maxItems")
    )
    source_case: Annotated[str, _optional_text("source_case", limits.SOURCE_CASE)] = Field(
        "", json_schema_extra=_at_most(limits.SOURCE_CASE)
    )
    source_notice: Annotated[str, _optional_text("source_notice", limits.SOURCE_NOTICE)] = Field(
        "", json_schema_extra=_at_most(limits.SOURCE_NOTICE)
    )


def candidate_fields(**given: Any) -> dict:
    """A candidate's fields checked and normalised by `CandidateIn` (all but `id`), for callers
    holding them as arguments (the dashboard's form, packs); raises InvalidRule naming the
    first field at fault."""
    try:
        line = CandidateIn.model_validate(given)
    except ValidationError as exc:
        first = _line_error(0, CandidateIn, exc.errors(include_url=False)[0])
        raise InvalidRule(first.message, field=first.field) from None
    return line.model_dump(exclude={"id"})


# ---- a decoded line through its model -----------------------------------------------------


def line_fields(model: type[Line], number: int, obj: object) -> tuple[Any, list[LineError]]:
    """(the line as `model`, []) or (None, its LineErrors): every field at fault, named."""
    if not isinstance(obj, dict):
        return None, [LineError(number, "", "each line must be a JSON object")]
    try:
        return model.model_validate(obj), []
    except ValidationError as exc:
        return None, [_line_error(number, model, e) for e in exc.errors(include_url=False)]


def _line_error(number: int, model: type[Line], error: dict) -> LineError:
    field = str(error["loc"][0]) if error["loc"] else ""
    if error["type"] == "extra_forbidden":
        allowed = ", ".join(sorted(model.model_fields))
        return LineError(number, field, f"unknown field (allowed: {allowed})")
    if error["type"] == "missing":
        return LineError(number, field, _missing_message(model, field))
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, InvalidRule):
        return LineError(number, cause.field or field, str(cause))
    if isinstance(cause, Exception):
        return LineError(number, field, str(cause))
    return LineError(number, field, error["msg"])


def _missing_message(model: type[Line], field: str) -> str:
    """What the field's check says of no value at all."""
    for check in model.model_fields[field].metadata:
        if isinstance(check, BeforeValidator):
            try:
                check.func(None)
            except ValueError as exc:
                return str(exc)
    return "is required"


# ---- documented only: corpus lines are checked by `lifecycle.services.corpus` ----------------


class TrajectoryIn(BaseModel):
    """One corpus line (semantics §2); any further semantics §2 field is accepted. Its checks
    are the corpus import's, tuned for files of millions of lines (`services.corpus`)."""

    id: str = Field(json_schema_extra=_at_most(limits.TRAJECTORY_ID))
    kind: Literal["failure", "success", "near_miss"]
    task: str = Field(json_schema_extra=_at_most(limits.TASK))
    steps: list[Any] = Field(json_schema_extra=_at_most(limits.STEPS, "maxItems"))
    outcome: Any
    metrics: dict[str, float] = Field(json_schema_extra=_at_most(limits.METRICS, "maxProperties"))
    signature: list[str] = Field(
        default_factory=list,
        description="derived from the steps when absent or empty (semantics §19)",
    )
