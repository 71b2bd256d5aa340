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
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from traces.derive import with_derived_signature

from . import atoms as atom_lib
from . import limits
from .models import TrajectoryKind
from .validation import (
    InvalidRule,
    LineError,
    check_rule_id,
    parse_metrics,
    parse_time,
    review_reason,
    rule_text,
    trajectory_size_errors,
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


# ---- a reviewer's bodies ------------------------------------------------------------------


class RetireIn(BaseModel):
    """Retiring a rule by hand (semantics §3): the reason is required and journaled."""

    reason: Annotated[str, BeforeValidator(review_reason)] = Field(
        json_schema_extra=_at_most(limits.REVIEW_REASON),
        description="why a reviewer retires it by hand; journaled",
    )


ReviewAction = Literal[
    "retire", "dismiss", "confirm", "deny", "merge", "acknowledge", "requeue", "import", "reject"
]


class ReviewActionIn(BaseModel):
    """Resolving a review item; whether its action needs a reason is the service's to say."""

    action: ReviewAction = Field(description="one the item's kind offers (docs/api.md)")
    reason: Annotated[str, _optional_text("reason", limits.REVIEW_REASON)] = Field(
        "",
        json_schema_extra=_at_most(limits.REVIEW_REASON),
        description="required to retire a candidate or reject a pack; journaled",
    )
    keep: Annotated[str, _optional_text("keep", limits.RULE_ID)] = Field(
        "", json_schema_extra=_at_most(limits.RULE_ID), description="merge: the rule to keep"
    )


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


# ---- corpus lines -------------------------------------------------------------------------
# Checked by `parse_trajectory`, which the corpus import calls on each of millions of lines
# (lifecycle/services/corpus.py) and `TrajectoryIn` runs as its validator: plain functions
# rather than one validator a field, because that import's speed is measured per line.

KINDS = {k.value for k in TrajectoryKind}
REQUIRED = ("id", "kind", "task", "steps", "outcome", "metrics")


def _shape_errors(obj: dict, *, json_bytes: bool = False) -> list[tuple[str, str]]:
    """(field, message) for every plain field of the wrong shape or over its limit; the byte
    sizes of the JSON parts only with `json_bytes` (a good line's are measured on its cells)."""
    wrong = []
    tid = obj["id"]
    if not isinstance(tid, str) or not tid.strip() or len(tid) > limits.TRAJECTORY_ID:
        wrong.append(
            ("id", f"must be a non-empty string of at most {limits.TRAJECTORY_ID} characters")
        )
    if not isinstance(obj["kind"], str) or obj["kind"] not in KINDS:
        wrong.append(("kind", f"must be one of {', '.join(sorted(KINDS))}, got {obj['kind']!r}"))
    if not isinstance(obj["task"], str) or not obj["task"].strip():
        wrong.append(("task", "must be a non-empty string"))
    if not isinstance(obj["steps"], list):
        wrong.append(("steps", "must be a list of steps"))
    expected = obj.get("expected_rule")
    if expected is not None and not isinstance(expected, dict):
        wrong.append(("expected_rule", "must be an object with 'trigger' and 'directive'"))
    elif expected is not None:
        for part in ("trigger", "directive"):
            if not isinstance(expected.get(part), str) or not expected[part].strip():
                wrong.append(
                    (f"expected_rule.{part}", "is required and must be a non-empty string")
                )
    if obj.get("replayable") is not None and not isinstance(obj["replayable"], bool):
        wrong.append(("replayable", "must be true or false"))
    for name, limit in (("session_id", limits.SESSION_ID), ("corpus", limits.CORPUS_NAME)):
        value = obj.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            wrong.append((name, f"must be a string of at most {limit} characters"))
    if obj.get("meta") is not None and not isinstance(obj["meta"], dict):
        wrong.append(("meta", "must be an object"))
    return wrong + trajectory_size_errors(obj, json_bytes=json_bytes)


def _atoms(raw: object, *, notices_only: bool) -> list[str]:
    """`atoms.parse_atoms`, remembered for the last few thousand lists of strings: a corpus
    repeats a small number of signatures, line after line."""
    if raw.__class__ is list:
        try:
            return list(_atoms_of(tuple(raw), notices_only))
        except TypeError:  # an item that cannot be a key (a list, an object): not an atom
            pass
    return atom_lib.parse_atoms(raw, notices_only=notices_only)


@lru_cache(maxsize=4096)
def _atoms_of(raw: tuple, notices_only: bool) -> tuple[str, ...]:
    return tuple(atom_lib.parse_atoms(list(raw), notices_only=notices_only))


def _started_at(obj: dict):
    value = obj.get("started_at")
    return None if value is None else parse_time(value)


# (field, parser of the line's object): the fields that need parsing. Module-level functions,
# not closures built per line: a corpus has millions of lines.
PARSED = (
    ("metrics", lambda obj: parse_metrics(obj["metrics"])),
    ("signature", lambda obj: _atoms(obj["signature"], notices_only=False)),
    ("notices", lambda obj: _atoms(obj.get("notices") or [], notices_only=True)),
    ("started_at", _started_at),
)


def _parsed_values(obj: dict) -> tuple[dict, list[tuple[str, str]]]:
    """The fields that need parsing (metrics, atoms, time), and (field, message) errors."""
    values, wrong = {}, []
    for name, parse in PARSED:
        try:
            values[name] = parse(obj)
        except (ValueError, atom_lib.BadAtom) as exc:
            wrong.append((name, str(exc)))
    return values, wrong


def parse_trajectory(number: int, obj: object) -> tuple[dict | None, list[LineError]]:
    """Validate one corpus line into model fields; collects every error of the line."""
    if not isinstance(obj, dict):
        return None, [LineError(number, "", "each line must be a JSON object")]
    # semantics §19: a trajectory without a signature gets one derived from its steps (which
    # also notes the atoms on the steps and the explanation in meta). The content hash stays
    # that of the line as given (`as_given`), so re-importing it is a no-op even if the
    # derivation has changed since.
    original = obj
    if not obj.get("signature"):
        obj = with_derived_signature(obj)
    missing = [LineError(number, name, "is required") for name in REQUIRED if name not in obj]
    if missing:
        return None, missing
    values, wrong = _parsed_values(obj)
    if wrong or _shape_errors(obj):
        # A bad line is checked again in full, JSON sizes too, so every error of it is named.
        return None, [
            LineError(number, f, m) for f, m in (*_shape_errors(obj, json_bytes=True), *wrong)
        ]
    steps, replayable = obj["steps"], obj.get("replayable")
    return {
        "id": obj["id"].strip(),
        "kind": obj["kind"],
        "task": obj["task"],
        "steps": steps,
        "outcome": obj["outcome"],
        **values,
        "session_id": obj.get("session_id") or "",
        "corpus": obj.get("corpus") or "",
        "expected_rule": obj.get("expected_rule"),
        # semantics §2: replayable defaults to true when the trajectory has steps.
        "replayable": bool(steps) if replayable is None else replayable,
        "replay_input": obj.get("replay_input"),
        "meta": obj.get("meta") or {},
        **({} if obj is original else {"as_given": _as_given(original)}),
    }, []


def _as_given(line: dict) -> dict:
    """The fields derivation changes, as the line gave them: what its content hash is of."""
    return {
        "steps": line["steps"],
        "meta": line.get("meta") or {},
        "signature": line.get("signature"),
    }


class TrajectoryIn(BaseModel):
    """One corpus line (semantics §2); any further semantics §2 field is accepted. Validated by
    `parse_trajectory`, the corpus import's own check: its errors are the import's."""

    model_config = ConfigDict(extra="allow")

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

    @model_validator(mode="before")
    @classmethod
    def _checked(cls, obj: object) -> dict:
        fields, errors = parse_trajectory(0, obj)
        if errors:
            raise ValueError("; ".join(f"{e.field or 'line'}: {e.message}" for e in errors))
        return fields
