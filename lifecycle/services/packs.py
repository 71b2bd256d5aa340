"""Rule packs (semantics §13) and the agent files (AGENTS.md, CLAUDE.md, Cursor rules).

One implementation for the commands, the API and the dashboard. A pack is plain data: YAML is
read with a safe loader that also refuses anchors/aliases and timestamps, so nothing in a pack
is ever executed or expanded. The whole pack is validated (schema, checksum, every rule) before
any rule is written; imported rules become candidates, and the evidence a pack carries is kept
as provenance to be shown, never trusted.
"""

import functools
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Literal

from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic import ValidationError as SchemaError

from lifecycle import journal, jsonsafe, limits, signals
from lifecycle.inputs import candidate_fields
from lifecycle.journal import DECISION_TYPES, EventType
from lifecycle.services.rules import rule_record_candidate
from lifecycle.validation import (
    InvalidRule,
    check_metric,
    check_rule_id,
    content_hash,
    rule_content_hash,
)

from ..follow_ups import compared_in_one_task
from ..metrics import load_registry
from ..models import JournalEvent, PackStatus, Rule, RuleState, StagedPack
from ..states import Actor, ActorKind, NotAllowed

PACK_VERSION = 1
PACK_FORMATS = ("yaml", "json")
AGENT_FILE_FORMATS = ("agents_md", "claude_md", "cursor_mdc")
# A pack of thousands of rules is well under this; anything bigger is refused before parsing.
MAX_PACK_CHARS = 10_000_000
DECISION_EVENTS = DECISION_TYPES
CHECKSUM_MISMATCH = (
    "does not match the content: the pack was changed after it was sealed; if you edited it "
    "on purpose, re-seal it with `cauterweb seal_pack FILE` (docs/api.md)"
)


class InvalidSelection(ValueError):
    """An export request that cannot be served; `field` names the argument at fault."""

    def __init__(self, message: str, *, field: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class PackError:
    loc: tuple[str | int, ...]
    msg: str

    def as_dict(self) -> dict:
        return {"loc": list(self.loc), "msg": self.msg}

    def __str__(self) -> str:
        where = ".".join(str(part) for part in self.loc) or "pack"
        return f"{where}: {self.msg}"


class PackRejected(Exception):
    """Nothing was imported; `errors` names every problem with its path in the pack."""

    def __init__(self, errors: list[PackError]):
        self.errors = errors
        super().__init__(
            f"{len(errors)} error(s), nothing imported:\n" + "\n".join(map(str, errors))
        )


# ---- the format ---------------------------------------------------------------------------


class PackRuleSchema(BaseModel):
    """A rule of a pack. Its fields are checked by the candidate's checks when it is planned
    (`candidate_fields`, lifecycle/inputs.py), the same as any other candidate's; here only
    their types, and its id, which a candidate need not carry."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: Annotated[str, BeforeValidator(check_rule_id)]
    trigger: str
    directive: str
    scope: str = "global"
    metric: str | None = None
    signature: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    source_case: str = ""
    source_notice: str = ""
    state: Literal["candidate", "active", "retired"]
    provenance: dict = Field(default_factory=dict)
    evidence: dict | None = None


class PackSelectionSchema(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    scopes: list[str] | None = None
    states: list[str]


class PackSchema(BaseModel):
    """What `pack_version: 1` means. Strict: a value of the wrong type is an error, not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)

    pack_version: Literal[1]
    name: str = Field(min_length=1, max_length=limits.PACK_NAME)
    version: str = Field(min_length=1, max_length=limits.PACK_VERSION)
    checksum: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    exported_at: str
    selection: PackSelectionSchema
    rules: list[PackRuleSchema]


def pack_checksum(document: dict) -> str:
    """SHA-256 over the canonical JSON of everything but the checksum itself."""
    return "sha256:" + content_hash({k: v for k, v in document.items() if k != "checksum"})


# ---- export -------------------------------------------------------------------------------


def _check_selection(scopes, states, fmt, formats) -> None:
    if fmt not in formats:
        raise InvalidSelection(f"format must be one of {', '.join(formats)}", field="format")
    known = {s.value for s in RuleState}
    if not states or any(s not in known for s in states):
        raise InvalidSelection(f"states must be among {', '.join(sorted(known))}", field="state")
    if scopes is not None and not all(isinstance(s, str) and s.strip() for s in scopes):
        raise InvalidSelection("scopes must be non-empty names", field="scope")


def _decisions(rule_ids: list[str]) -> dict[str, JournalEvent]:
    """The latest decision event of each rule (one query for the whole export)."""
    events = JournalEvent.objects.filter(rule_id__in=rule_ids, type__in=DECISION_EVENTS)
    return {e.rule_id: e for e in events.order_by("at", "id")}


def evidence_summary(rule: Rule, decision: JournalEvent | None) -> dict:
    """The compact evidence of a rule's state, as a pack carries it and agent files show it."""
    summary: dict = {
        "state": rule.state,
        "baseline": {"rate": rule.baseline_rate, "sessions": rule.baseline_sessions},
    }
    if rule.state == RuleState.CANDIDATE:
        summary["pending"] = rule.pending_text
        summary["replay_attempts"] = rule.replay_attempts
        return summary
    if decision is None:
        return summary
    evidence = decision.evidence or {}
    summary["decided_at"] = decision.at.isoformat()
    summary["reason"] = evidence.get("reason", "")
    if decision.type == EventType.RULE_RETIRED_BY_REVIEWER:
        summary["validator"] = "reviewer"
        summary["by"] = decision.actor
        return summary
    summary["validator"] = evidence.get("validator") or rule.last_validator
    summary["deciding_metric"] = evidence.get("deciding_metric")
    summary["cases"] = [
        {
            "case": case.get("case"),
            "kind": case.get("kind"),
            "outcome": case.get("outcome"),
            "metric": case.get("deciding_metric"),
            "delta": ((case.get("metrics") or {}).get(case.get("deciding_metric")) or {}).get(
                "delta"
            ),
        }
        for case in evidence.get("cases") or []
    ]
    summary["trial"] = evidence.get("trial")
    return summary


def _pack_rule(rule: Rule, decision: JournalEvent | None) -> dict:
    return {
        "id": rule.id,
        "trigger": rule.trigger,
        "directive": rule.directive,
        "scope": rule.scope,
        "metric": rule.metric or None,
        "signature": list(rule.signature),
        "tags": list(rule.tags),
        "source_case": rule.source_case,
        "source_notice": rule.source_notice,
        "state": rule.state,
        "provenance": {"author": rule.author, "author_kind": rule.author_kind, **rule.provenance},
        "evidence": evidence_summary(rule, decision),
    }


def _selected_rules(scopes: list[str] | None, states: list[str]) -> list[Rule]:
    """The rules an export ships: those selected, less any flagged as a suspected duplicate of
    another one shipped beside it (the older of the pair ships; the review queue decides
    which stays, semantics §13, docs/api.md)."""
    return _withhold_duplicates(_candidates_for_export(scopes, states))[0]


def _candidates_for_export(scopes: list[str] | None, states: list[str]) -> list[Rule]:
    rules = Rule.objects.filter(state__in=states)
    if scopes:
        rules = rules.filter(scope__in=scopes)
    return list(rules.order_by("scope", "recorded_at", "id"))


def _withhold_duplicates(rules: list[Rule]) -> tuple[list[Rule], list[tuple[str, str]]]:
    """(rules shipped, [(withheld, the rule it duplicates)]). In the export's order, oldest
    first within a scope: of two rules flagged as each other's duplicate, one still ships."""
    selected = {r.id for r in rules}
    shipped, withheld, held = [], [], set()
    for rule in rules:
        other = rule.duplicate_of_id
        if other and other in selected and other not in held:
            withheld.append((rule.id, other))
            held.add(rule.id)
        else:
            shipped.append(rule)
    return shipped, withheld


def withheld_duplicates(
    *, scopes: list[str] | None = None, states: list[str] | tuple[str, ...] = ("active",)
) -> list[tuple[str, str]]:
    """[(rule, the rule it duplicates)] that an export of this selection leaves out."""
    return _withhold_duplicates(_candidates_for_export(scopes, list(states)))[1]


def export_pack(
    *,
    scopes: list[str] | None = None,
    states: list[str] | tuple[str, ...] = ("active",),
    fmt: str = "yaml",
    name: str = "cauterweb",
    version: str | None = None,
    now: datetime | None = None,
) -> str:
    """A pack of the rules in `scopes` (all when None) and `states` (active by default)."""
    states = list(states)
    _check_selection(scopes, states, fmt, PACK_FORMATS)
    now = now or timezone.now()
    rules = _selected_rules(scopes, states)
    decisions = _decisions([r.id for r in rules])
    document = {
        "pack_version": PACK_VERSION,
        "name": name,
        # The default version says when it was cut; two exports of one day stay distinct.
        "version": version or now.strftime("%Y.%m.%d.%H%M%S"),
        "checksum": "",
        "exported_at": now.isoformat(),
        "selection": {"scopes": sorted(scopes) if scopes else None, "states": sorted(states)},
        "rules": [_pack_rule(r, decisions.get(r.id)) for r in rules],
    }
    document["checksum"] = pack_checksum(document)
    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return _dump_yaml(document)


# ---- agent files --------------------------------------------------------------------------


def _one_line(text: str) -> str:
    # Rule text is data: flattened so it cannot open a heading or front matter of its own.
    return " ".join(str(text).split())


def evidence_line(summary: dict) -> str:
    """The evidence of one rule in a few words, e.g. "replay: F-001 task_completion +0.40"."""
    validator = summary.get("validator")
    if validator == "forward_trial" and summary.get("trial"):
        trial = summary["trial"]
        return (
            f"forward trial: {trial.get('trial_rate', 0):.2f} of "
            f"{trial.get('observed_sessions', 0)} sessions breached vs baseline "
            f"{trial.get('baseline_rate', 0):.2f}"
        )
    if validator == "replay":
        improved = [
            f"{c['case']} {c['metric']} {c['delta']:+.2f}"
            for c in summary.get("cases") or []
            if c.get("kind") == "failing" and c.get("metric") and isinstance(c.get("delta"), float)
        ]
        return "replay: " + ("; ".join(improved) or _one_line(summary.get("reason", "")))
    return _one_line(summary.get("reason", "")) or "no recorded evidence"


def _agent_rule_block(rule: Rule, decision: JournalEvent | None) -> str:
    summary = evidence_summary(rule, decision)
    origin = [f"recorded by {rule.author} ({rule.author_kind})"]
    if rule.source_case:
        origin.insert(0, f"source case {rule.source_case}")
    if pack := rule.provenance.get("pack"):
        origin.append(f"imported from pack {pack.get('name')}@{pack.get('version')}")
    lines = [
        f"### {rule.id}: {_one_line(rule.trigger)}",
        "",
        _one_line(rule.directive),
        "",
    ]
    if rule.signature:
        lines.append("- Signature: " + ", ".join(f"`{a}`" for a in rule.signature))
    if rule.metric:
        lines.append(f"- Metric: {rule.metric}")
    lines.append("- Provenance: " + "; ".join(origin))
    decided = f" (promoted {summary['decided_at'][:10]})" if summary.get("decided_at") else ""
    lines.append(f"- Evidence: {evidence_line(summary)}{decided}")
    return "\n".join(lines)


def export_agent_files(*, scope: str, fmt: str = "agents_md", now: datetime | None = None) -> str:
    """The active rules of a scope as a file agents already read: AGENTS.md, CLAUDE.md or a
    Cursor rule (`.cursor/rules/<scope>.mdc`). Candidates are not listed: they are read through
    the rule tool, where their reads are recorded (semantics §5)."""
    _check_selection([scope], ["active"], fmt, AGENT_FILE_FORMATS)
    now = now or timezone.now()
    rules, withheld = _withhold_duplicates(_candidates_for_export([scope], ["active"]))
    decisions = _decisions([r.id for r in rules])
    title = {"agents_md": "AGENTS.md", "claude_md": "CLAUDE.md", "cursor_mdc": "Cursor rule"}[fmt]
    intro = (
        f"Standing rules for scope `{_one_line(scope)}`, exported from CauterWeb on "
        f"{now:%Y-%m-%d %H:%M} UTC. Each rule was promoted only after evidence: a replay of "
        "the recorded failures it targets, or a forward trial against live sessions."
    )
    body = [f"# {title} — rules for scope {_one_line(scope)}", "", intro, ""]
    body += [_agent_rule_block(r, decisions.get(r.id)) + "\n" for r in rules] or [
        "(no active rules in this scope)\n"
    ]
    if withheld:
        left_out = ", ".join(
            f"{_one_line(r)} (a suspected duplicate of {_one_line(o)})" for r, o in withheld
        )
        body.append(f"Left out until a reviewer decides which stays: {left_out}.\n")
    text = "\n".join(body)
    if fmt != "cursor_mdc":
        return text
    description = json.dumps(f"CauterWeb standing rules for scope {_one_line(scope)}")
    return f"---\ndescription: {description}\nglobs:\nalwaysApply: true\n---\n\n{text}"


# ---- reading a pack -----------------------------------------------------------------------


def pack_text(*, scopes: list[str] | None, states: list[str] | None, fmt: str) -> str:
    """One export, whoever asks (API or dashboard): a pack of the selected rules, or one
    scope's agent file. Raises InvalidSelection naming the argument at fault."""
    if fmt in AGENT_FILE_FORMATS:
        if not scopes or len(scopes) != 1:
            raise InvalidSelection(f"format {fmt} needs exactly one scope", field="scope")
        return export_agent_files(scope=scopes[0], fmt=fmt)
    if fmt in PACK_FORMATS:
        return export_pack(scopes=scopes or None, states=states or ["active"], fmt=fmt)
    formats = ", ".join((*PACK_FORMATS, *AGENT_FILE_FORMATS))
    raise InvalidSelection(f"format must be one of {formats}", field="format")


@functools.cache
def _pack_loader():
    """SafeLoader (no Python tags, nothing executed) minus what plain data does not need:
    anchors/aliases (a billion-laughs pack would expand on checksum) and timestamps (they
    would come back as datetimes and change the checksum). PyYAML is imported here, by the
    first pack read or written, not by every process that loads the API."""
    import yaml

    class PackLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.constructor.ConstructorError(
                    None, None, "anchors and aliases are not allowed in a pack", event.start_mark
                )
            return super().compose_node(parent, index)

    PackLoader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return PackLoader


def _dump_yaml(document) -> str:
    import yaml

    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


def _parse(text: str) -> tuple[object, list[PackError]]:
    import yaml

    try:
        if text.lstrip().startswith(("{", "[")):
            return jsonsafe.loads(text), []
        document = yaml.load(text, Loader=_pack_loader())  # noqa: S506 - a SafeLoader subclass
        # YAML has no depth bound of its own; the checks that follow walk the document.
        jsonsafe.check_depth(document)
        return document, []
    except jsonsafe.JsonRejected as exc:
        where = f" (line {exc.line})" if exc.line is not None else ""
        return None, [PackError(_pack_loc(exc.path), f"{exc.message}{where}")]
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        where = f" (line {mark.line + 1})" if mark else ""
        problem = exc.problem or str(exc)
        if "could not determine a constructor" in problem:
            problem = "custom tags are not allowed: a pack is plain data and is never executed"
        return None, [PackError((), f"{problem}{where}")]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        return None, [PackError((), f"not valid YAML: {getattr(exc, 'problem', exc)}{where}")]
    except RecursionError:
        return None, [PackError((), "the pack is nested too deeply")]


def _pack_loc(path: str) -> tuple[str | int, ...]:
    """`rules[3].trigger` → ("rules", 3, "trigger"), the shape of every other pack error."""
    return tuple(
        int(index) if index else name for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path)
    )


def _non_plain(value: object, loc: tuple = ()) -> list[PackError]:
    """Everything in a pack must be JSON a database can store: YAML's sets, binary, odd floats
    and NUL characters are refused."""
    if isinstance(value, dict):
        errors = []
        for key, item in value.items():
            if not isinstance(key, str):
                errors.append(PackError(loc, f"key {key!r} is not a string"))
            errors += _non_plain(item, (*loc, str(key)))
        return errors
    if isinstance(value, list):
        return [e for i, item in enumerate(value) for e in _non_plain(item, (*loc, i))]
    if isinstance(value, int | float) and jsonsafe.number_problem(value):
        return [PackError(loc, jsonsafe.number_problem(value))]
    if isinstance(value, str) and jsonsafe.string_problem(value):
        return [PackError(loc, f"contains {jsonsafe.string_problem(value)[1]}")]
    if value is None or isinstance(value, str | int | float | bool):
        return []
    return [PackError(loc, f"{type(value).__name__} values are not allowed in a pack")]


@dataclass
class PlannedRule:
    """One rule of a pack and what importing it would do."""

    index: int
    origin_id: str
    origin_state: str
    fields: dict
    provenance: dict
    evidence: dict | None
    # "create", or "unchanged" when this very rule is already here (as `existing_id`).
    action: str = "create"
    existing_id: str | None = None
    # The id it will be recorded under: the pack's own when free here, else a fresh one (None).
    new_id: str | None = None

    def as_dict(self) -> dict:
        return {
            "id": self.existing_id or self.new_id or self.origin_id,
            "origin_id": self.origin_id,
            "origin_state": self.origin_state,
            "action": self.action,
            **self.fields,
            "provenance": self.provenance,
            "evidence": self.evidence,
        }


@dataclass
class PackPreview:
    """A parsed pack: its rules and every error with its path. Writes nothing."""

    name: str = ""
    version: str = ""
    pack_version: object = None
    checksum: str = ""
    rules: list[PlannedRule] = field(default_factory=list)
    errors: list[PackError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "pack_version": self.pack_version,
            "checksum": self.checksum,
            "ok": self.ok,
            "rules": [r.as_dict() for r in self.rules],
            "errors": [e.as_dict() for e in self.errors],
        }


def _schema_errors(exc: SchemaError) -> list[PackError]:
    return [_schema_error(e) for e in exc.errors(include_url=False)]


def _schema_error(error: dict) -> PackError:
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, InvalidRule):  # a check of `lifecycle.validation`, in its own words
        return PackError(tuple(error["loc"]), str(cause))
    return PackError(tuple(error["loc"]), error["msg"])


def _plan_rules(pack: PackSchema) -> tuple[list[PlannedRule], list[PackError]]:
    registry = load_registry()
    planned, errors, seen_ids, seen_content = [], [], {}, {}
    for index, item in enumerate(pack.rules):
        loc = ("rules", index)
        if item.id in seen_ids:
            errors.append(PackError((*loc, "id"), f"{item.id!r} is also rules.{seen_ids[item.id]}"))
            continue
        seen_ids[item.id] = index
        try:
            fields = candidate_fields(
                trigger=item.trigger,
                directive=item.directive,
                scope=item.scope,
                metric=item.metric or "",
                signature=item.signature,
                tags=item.tags,
                source_case=item.source_case,
                source_notice=item.source_notice,
            )
            check_metric(fields["metric"], registry)
        except InvalidRule as exc:
            errors.append(PackError((*loc, exc.field), str(exc)))
            continue
        digest = rule_content_hash(fields)
        if digest in seen_content:
            errors.append(PackError(loc, f"the same rule as rules.{seen_content[digest]}"))
            continue
        seen_content[digest] = index
        planned.append(
            PlannedRule(
                index=index,
                origin_id=item.id,
                origin_state=item.state,
                fields=fields,
                provenance=item.provenance,
                evidence=item.evidence,
            )
        )
    return planned, errors


def _match_local(planned: list[PlannedRule]) -> None:
    """Which rules are already here (same content: unchanged), and whose id is free."""
    digests = {rule_content_hash(p.fields): p for p in planned}
    by_content = dict(
        Rule.objects.filter(content_hash__in=list(digests), replaces=None).values_list(
            "content_hash", "id"
        )
    )
    taken = set(
        Rule.objects.filter(pk__in=[p.origin_id for p in planned]).values_list("id", flat=True)
    )
    for digest, p in digests.items():
        if digest in by_content:
            p.action, p.existing_id = "unchanged", by_content[digest]
        elif p.origin_id not in taken:
            p.new_id = p.origin_id


def preview_pack(text: str) -> PackPreview:
    """Parse and validate a whole pack: format, checksum, schema and every rule."""
    preview = PackPreview()
    if not isinstance(text, str) or not text.strip():
        preview.errors.append(PackError((), "the pack is empty"))
        return preview
    if len(text) > MAX_PACK_CHARS:
        preview.errors.append(PackError((), f"the pack is larger than {MAX_PACK_CHARS} characters"))
        return preview
    document, preview.errors = _parse(text)
    if preview.errors:
        return preview
    if not isinstance(document, dict):
        preview.errors.append(PackError((), "a pack is a mapping with pack_version, rules, …"))
        return preview
    # Before anything of the pack is echoed back in the preview: a NaN or a lone surrogate
    # would make the answer itself invalid JSON.
    preview.errors = _non_plain(document)
    if preview.errors:
        return preview
    preview.pack_version = document.get("pack_version")
    preview.name = document.get("name") if isinstance(document.get("name"), str) else ""
    preview.version = document.get("version") if isinstance(document.get("version"), str) else ""
    preview.checksum = document.get("checksum") if isinstance(document.get("checksum"), str) else ""
    if preview.pack_version != PACK_VERSION or isinstance(preview.pack_version, bool):
        preview.errors.append(
            PackError(
                ("pack_version",),
                f"unsupported pack_version {preview.pack_version!r} (this server reads "
                f"{PACK_VERSION})",
            )
        )
        return preview
    if preview.checksum and preview.checksum != pack_checksum(document):
        preview.errors.append(PackError(("checksum",), CHECKSUM_MISMATCH))
    try:
        pack = PackSchema.model_validate(document)
    except SchemaError as exc:
        preview.errors += _schema_errors(exc)
        return preview
    planned, rule_errors = _plan_rules(pack)
    preview.errors += rule_errors
    _match_local(planned)
    preview.rules = planned
    return preview


def import_pack(text: str, *, actor: Actor, now: datetime | None = None) -> dict:
    """Import a pack's rules as candidates, all or nothing (semantics §13). A reviewer's action;
    the rules are recorded by the pack itself (`name@version`) with the exported evidence
    kept as provenance — shown, not trusted."""
    if actor.kind != ActorKind.REVIEWER:
        raise NotAllowed(f"{actor.kind} {actor.name!r} may not import packs")
    preview = preview_pack(text)
    if preview.errors:
        raise PackRejected(preview.errors)
    pack_actor = Actor.pack(f"{preview.name}@{preview.version}")
    now = now or timezone.now()
    created, unchanged = [], []
    # One round for the whole pack, whoever imports it (semantics §9.1).
    with signals.one_announcement(), compared_in_one_task(), transaction.atomic():
        for p in preview.rules:
            if p.action == "unchanged":
                unchanged.append(p.existing_id)
                continue
            rule, _ = rule_record_candidate(
                actor=pack_actor,
                rule_id=p.new_id,
                now=now,
                provenance={
                    "pack": {
                        "name": preview.name,
                        "version": preview.version,
                        "checksum": preview.checksum,
                        "origin_id": p.origin_id,
                        "origin_state": p.origin_state,
                        "imported_by": actor.name,
                    },
                    "exported_provenance": p.provenance,
                    # Kept to be shown beside the rule; the engine decides on its own evidence.
                    "exported_evidence": p.evidence,
                    "evidence_trusted": False,
                },
                **p.fields,
            )
            created.append(rule.id)
        if created:
            journal.write(
                type=EventType.PACK_IMPORTED,
                actor=actor,
                at=now,
                evidence={
                    "pack": preview.name,
                    "version": preview.version,
                    "checksum": preview.checksum,
                    "created": created,
                    "unchanged": unchanged,
                },
            )
    return {"created": len(created), "unchanged": len(unchanged), "updated": 0, "rules": created}


# ---- waiting for a reviewer ---------------------------------------------------------------


def pack_stage(text: str, *, actor: Actor, now: datetime | None = None) -> StagedPack:
    """Keep a pack for a reviewer to import: it waits in the review queue (docs/dashboard.md).
    An agent may send one; only a reviewer imports. The pack is validated in full first
    (PackRejected: nothing kept), and the same pack already waiting is returned as it is."""
    if actor.kind not in (ActorKind.AGENT, ActorKind.REVIEWER):
        raise NotAllowed(f"{actor.kind} {actor.name!r} may not send packs")
    preview = preview_pack(text)
    if preview.errors:
        raise PackRejected(preview.errors)
    now = now or timezone.now()
    with transaction.atomic():
        waiting = StagedPack.objects.filter(
            checksum=preview.checksum, status=PackStatus.WAITING
        ).first()
        if waiting is not None:
            return waiting
        new = sum(1 for p in preview.rules if p.action == "create")
        staged = StagedPack.objects.create(
            name=preview.name,
            version=preview.version,
            checksum=preview.checksum,
            text=text,
            rules=len(preview.rules),
            new_rules=new,
            staged_by=actor.name[:150],
            staged_at=now,
        )
        journal.write(
            type=EventType.PACK_STAGED,
            actor=actor,
            at=now,
            evidence={
                "staged_pack": staged.pk,
                "pack": staged.name,
                "version": staged.version,
                "checksum": staged.checksum,
                "rules": staged.rules,
                "new": new,
            },
        )
    return staged


# ---- sealing an edited pack ---------------------------------------------------------------


@dataclass(frozen=True)
class Sealed:
    text: str
    previous: str | None
    checksum: str


def seal_pack(text: str) -> Sealed:
    """An edited pack with its checksum made right again, in its own format (JSON stays JSON,
    YAML stays YAML, the keys in their order). Everything else is validated as an import
    would (PackRejected naming every error): sealing never makes a bad pack importable."""
    if not isinstance(text, str) or not text.strip():
        raise PackRejected([PackError((), "the pack is empty")])
    document, errors = _parse(text)
    errors = errors or (
        [] if isinstance(document, dict) else [PackError((), "a pack is a mapping")]
    )
    errors = errors or _non_plain(document)
    if errors:
        raise PackRejected(errors)
    previous = document.get("checksum") if isinstance(document.get("checksum"), str) else None
    document["checksum"] = ""
    document["checksum"] = pack_checksum(document)
    try:
        pack = PackSchema.model_validate(document)
    except SchemaError as exc:
        raise PackRejected(_schema_errors(exc)) from None
    rule_errors = _plan_rules(pack)[1]
    if rule_errors:
        raise PackRejected(rule_errors)
    if text.lstrip().startswith(("{", "[")):
        sealed = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    else:
        sealed = _dump_yaml(document)
    return Sealed(sealed, previous, document["checksum"])
