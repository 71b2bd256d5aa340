"""Every state change of a rule is one function here (semantics §3): it checks who may do it, locks
the rule row, writes the new state and its journal event in one transaction, and is
idempotent. Follow-ups (kicking a round) are enqueued on commit."""

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from . import atoms as atom_lib
from .bulk import insert_many, update_from_values
from .metrics import load_registry
from .models import AuthorKind, JournalEvent, Report, Rule, RuleState
from .signals import candidate_recorded
from .states import TRANSITIONS, Action, Actor, ActorKind, check_allowed, next_state
from .trials import baseline


class RuleNotFound(Exception):
    pass


class InvalidRule(ValueError):
    """A candidate that cannot be recorded; `field` names the field at fault."""

    def __init__(self, message: str, *, field: str = ""):
        super().__init__(message)
        self.field = field


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(value) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def journal_write(
    *,
    type: str,
    actor: Actor | str,
    rule_id: str | None = None,
    round_id: int | None = None,
    evidence: dict | None = None,
    at: datetime | None = None,
) -> JournalEvent:
    """Append one event (semantics §10). Call it inside the transaction of the change it records."""
    return JournalEvent.objects.create(
        type=type,
        at=at or timezone.now(),
        rule_id=rule_id,
        round_id=round_id,
        actor=actor.name if isinstance(actor, Actor) else actor,
        evidence=evidence or {},
    )


_AUTHOR_KIND = {
    ActorKind.AGENT: AuthorKind.AGENT,
    ActorKind.EXTRACTOR: AuthorKind.EXTRACTOR,
    ActorKind.PACK: AuthorKind.PACK,
    ActorKind.REVIEWER: AuthorKind.REVIEWER,
}


def candidate_fields(
    *,
    trigger: str,
    directive: str,
    scope: str = "global",
    metric: str = "",
    signature: list | None = None,
    tags: list | None = None,
    source_case: str = "",
    source_notice: str = "",
) -> dict:
    """Validate and normalise a candidate's fields; raises InvalidRule naming the field."""
    trigger = (trigger or "").strip() if isinstance(trigger, str) else trigger
    directive = (directive or "").strip() if isinstance(directive, str) else directive
    if not isinstance(trigger, str) or not trigger:
        raise InvalidRule("trigger is required (the 'when …' part)", field="trigger")
    if not isinstance(directive, str) or not directive:
        raise InvalidRule("directive is required (the 'do …' part)", field="directive")
    if not isinstance(scope, str) or not scope.strip() or len(scope) > 128:
        raise InvalidRule("scope must be a non-empty name of at most 128 characters", field="scope")
    if not isinstance(metric, str):
        raise InvalidRule("metric must be a metric name", field="metric")
    try:
        signature = atom_lib.parse_atoms(signature if signature is not None else [])
    except atom_lib.BadAtom as exc:
        raise InvalidRule(f"signature: {exc}", field="signature") from None
    if tags is None:
        tags = []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidRule("tags must be a list of strings", field="tags")
    if not isinstance(source_case, str) or not isinstance(source_notice, str):
        raise InvalidRule("source_case and source_notice must be strings", field="source_case")
    return {
        "trigger": trigger,
        "directive": directive,
        "scope": scope.strip(),
        "metric": metric.strip(),
        "signature": signature,
        "tags": sorted(set(tags)),
        "source_case": source_case.strip(),
        "source_notice": source_notice.strip(),
    }


def rule_content_hash(fields: dict) -> str:
    keys = ("trigger", "directive", "scope", "metric", "signature", "source_case")
    return content_hash({k: fields[k] if k != "signature" else sorted(fields[k]) for k in keys})


def baseline_for(*, metric: str, now: datetime | None = None) -> tuple[float, int, int]:
    """The forward-trial baseline of a rule on `metric`, from recent reports (semantics §8)."""
    window = settings.CAUTERWEB_BASELINE_WINDOW
    rows = (
        Report.objects.filter(has_notice=True)
        .order_by("-at", "-id")
        .values_list("session_id", "notices")[:window]
    )
    family = load_registry().family(metric) if metric else frozenset()
    return baseline(list(rows), family)


def rule_record_candidate(
    *,
    actor: Actor,
    trigger: str,
    directive: str,
    scope: str = "global",
    metric: str = "",
    signature: list | None = None,
    tags: list | None = None,
    source_case: str = "",
    source_notice: str = "",
    rule_id: str | None = None,
    replaces: Rule | None = None,
    provenance: dict | None = None,
    now: datetime | None = None,
) -> tuple[Rule, bool]:
    """Record a candidate (semantics §3) with its baseline (semantics §8). Returns (rule, created).

    Idempotent: the same content (under the same id, if one is given) returns the stored rule.
    A given id whose stored text differs is refused: a recorded rule's text is immutable."""
    check_allowed(Action.RECORD, actor)
    fields = candidate_fields(
        trigger=trigger,
        directive=directive,
        scope=scope,
        metric=metric,
        signature=signature,
        tags=tags,
        source_case=source_case,
        source_notice=source_notice,
    )
    if fields["metric"]:
        registry = load_registry()
        if registry.resolve(fields["metric"]) is None:
            known = ", ".join(sorted(registry))
            raise InvalidRule(
                f"unknown metric {fields['metric']!r} (known: {known})", field="metric"
            )
    if rule_id is not None and (
        not isinstance(rule_id, str) or not rule_id.strip() or len(rule_id) > 64
    ):
        raise InvalidRule("id must be a non-empty string of at most 64 characters", field="id")
    digest = rule_content_hash(fields)
    now = now or timezone.now()

    with transaction.atomic():
        existing = (
            Rule.objects.filter(pk=rule_id.strip()).first()
            if rule_id
            else Rule.objects.filter(content_hash=digest, replaces=replaces).first()
        )
        if existing is not None:
            if existing.content_hash != digest:
                raise InvalidRule(
                    f"rule {existing.id} is already recorded with other text; a recorded rule "
                    "is immutable: record a new candidate (without this id) instead",
                    field="id",
                )
            return existing, False

        rate, sessions, hits = baseline_for(metric=fields["metric"], now=now)
        rule = Rule(
            id=rule_id.strip() if rule_id else f"R-{secrets.token_hex(4).upper()}",
            state=RuleState.CANDIDATE,
            author=actor.name,
            author_kind=_AUTHOR_KIND[actor.kind],
            provenance=provenance or {},
            content_hash=digest,
            recorded_at=now,
            replaces=replaces,
            baseline_rate=rate,
            baseline_sessions=sessions,
            baseline_hits=hits,
            **fields,
        )
        try:
            with transaction.atomic():
                rule.save(force_insert=True)
        except IntegrityError:
            # Someone recorded the same id a moment ago: the caller sees theirs, not a 500.
            raise InvalidRule(f"rule {rule.id} already exists", field="id") from None
        journal_write(
            type="rule_added",
            actor=actor,
            rule_id=rule.id,
            at=now,
            evidence={
                "baseline": {"rate": rate, "sessions": sessions, "hits": hits},
                "state": rule.state,
                "author_kind": rule.author_kind,
                "replaces": replaces.id if replaces else None,
                "provenance": rule.provenance,
            },
        )
        # Imported here: duplicates uses journal_write from this module.
        from .duplicates import flag_probable_duplicate

        flag_probable_duplicate(rule, actor=actor, now=now)
        transaction.on_commit(lambda: candidate_recorded.send(sender=None, rule_id=rule.id))
    return rule, True


def _decide(
    *,
    action: Action,
    event_type: str,
    rule_id: str,
    actor: Actor,
    evidence: dict,
    round_id: int | None,
    reason: str,
    validator: str = "",
    now: datetime | None,
) -> bool:
    """Move a rule by `action` and journal it, once. False when the rule is no longer in a
    state the action starts from (already decided, retired by hand): applying the same verdict
    twice is a no-op (semantics §3)."""
    check_allowed(action, actor)
    now = now or timezone.now()
    with transaction.atomic():
        rule = Rule.objects.select_for_update().filter(pk=rule_id).first()
        if rule is None:
            raise RuleNotFound(rule_id)
        sources, target, _ = TRANSITIONS[action]
        # The conditional UPDATE is the guard that holds on every database (SQLite has no
        # SELECT … FOR UPDATE): 0 rows means another worker decided it first.
        changed = Rule.objects.filter(pk=rule_id, state__in=sources).update(
            state=target,
            pending_reason="",
            decided_at=now,
            verdict_reason=reason,
            **({"last_validator": validator} if validator else {}),
        )
        if not changed:
            return False
        journal_write(
            type=event_type,
            actor=actor,
            rule_id=rule_id,
            round_id=round_id,
            at=now,
            evidence={"from": rule.state, "to": target, "reason": reason, **evidence},
        )
    return True


def rule_promote(
    *,
    rule_id: str,
    actor: Actor,
    evidence: dict,
    reason: str = "",
    validator: str = "",
    round_id: int | None = None,
    now: datetime | None = None,
) -> bool:
    """Promote a candidate to active. Only the validation engine may (semantics §3)."""
    return _decide(
        action=Action.PROMOTE,
        event_type="rule_promoted",
        rule_id=rule_id,
        actor=actor,
        evidence=evidence,
        round_id=round_id,
        reason=reason,
        validator=validator,
        now=now,
    )


def rule_retire(
    *,
    rule_id: str,
    actor: Actor,
    evidence: dict,
    reason: str,
    validator: str = "",
    round_id: int | None = None,
    now: datetime | None = None,
) -> bool:
    """Retire a candidate on evidence. Only the validation engine may (semantics §3)."""
    return _decide(
        action=Action.RETIRE,
        event_type="rule_retired",
        rule_id=rule_id,
        actor=actor,
        evidence=evidence,
        round_id=round_id,
        reason=reason,
        validator=validator,
        now=now,
    )


@dataclass(frozen=True)
class Decision:
    """One engine verdict for `rules_decide`: PROMOTE or RETIRE, with its evidence."""

    rule_id: str
    action: Action
    reason: str
    evidence: dict
    validator: str = ""


_DECISION_EVENTS = {Action.PROMOTE: "rule_promoted", Action.RETIRE: "rule_retired"}


def rules_decide(
    *,
    decisions: list[Decision],
    actor: Actor,
    round_id: int | None = None,
    now: datetime | None = None,
) -> set[str]:
    """`rule_promote` / `rule_retire` for many rules at once, set-based: a round deciding a
    thousand forward trials must not pay five round trips per rule. Same guards: the actor and
    the transition table are checked, the rows are locked, each change is journaled in the same
    transaction, and a rule no longer in a source state is left alone. Returns the ids moved."""
    for decision in decisions:
        check_allowed(decision.action, actor)
    now = now or timezone.now()
    # No savepoint when nested: the caller's transaction is the unit, and a round writes
    # many small batches.
    with transaction.atomic(savepoint=False):
        rules = (
            Rule.objects.select_for_update()
            .only("id", "state", "last_validator")
            .in_bulk([d.rule_id for d in decisions])
        )
        moved, events = [], []
        for decision in decisions:
            rule = rules.get(decision.rule_id)
            sources, target, _ = TRANSITIONS[decision.action]
            if rule is None or rule.state not in sources:
                continue
            events.append(
                JournalEvent(
                    type=_DECISION_EVENTS[decision.action],
                    at=now,
                    rule_id=rule.id,
                    round_id=round_id,
                    actor=actor.name,
                    evidence={
                        "from": rule.state,
                        "to": target,
                        "reason": decision.reason,
                        **decision.evidence,
                    },
                )
            )
            rule.state, rule.pending_reason = target, ""
            rule.decided_at, rule.verdict_reason = now, decision.reason
            rule.last_validator = decision.validator or rule.last_validator
            moved.append(rule)
        # One statement for the lot, each rule with its own reason (a replay's names its case).
        update_from_values(
            Rule,
            columns=("id", "state", "verdict_reason", "last_validator"),
            rows=[(r.id, r.state, r.verdict_reason, r.last_validator) for r in moved],
            assignments={
                "state": "v.state",
                "pending_reason": "''",
                "decided_at": "%s",
                "verdict_reason": "v.verdict_reason",
                "last_validator": "v.last_validator",
            },
            params=[connection.ops.adapt_datetimefield_value(now)],
        )
        insert_many(events)
    return {rule.id for rule in moved}


def rule_retire_by_reviewer(
    *, rule_id: str, actor: Actor, reason: str, now: datetime | None = None
) -> bool:
    """A human reviewer retires a candidate or an active rule, with a reason (semantics §3)."""
    reason = (reason or "").strip()
    if not reason:
        raise InvalidRule("a reason is required to retire a rule by hand", field="reason")
    with transaction.atomic():
        rule = Rule.objects.filter(pk=rule_id).only("state").first()
        if rule is None:
            raise RuleNotFound(rule_id)
        if rule.state == RuleState.RETIRED:
            return False
        next_state(Action.RETIRE_BY_REVIEWER, rule.state)
        return _decide(
            action=Action.RETIRE_BY_REVIEWER,
            event_type="rule_retired_by_reviewer",
            rule_id=rule_id,
            actor=actor,
            evidence={"reviewer": actor.name},
            round_id=None,
            reason=reason,
            now=now,
        )


def rule_requeue(*, rule_id: str, actor: Actor, now: datetime | None = None) -> Rule:
    """Re-queue a retired rule as a new candidate version that links to it (semantics §3).
    Re-queuing the same rule twice returns the version already queued."""
    check_allowed(Action.REQUEUE, actor)
    with transaction.atomic():
        rule = Rule.objects.select_for_update().filter(pk=rule_id).first()
        if rule is None:
            raise RuleNotFound(rule_id)
        next_state(Action.REQUEUE, rule.state)
        version, _ = rule_record_candidate(
            actor=actor,
            trigger=rule.trigger,
            directive=rule.directive,
            scope=rule.scope,
            metric=rule.metric,
            signature=rule.signature,
            tags=rule.tags,
            source_case=rule.source_case,
            source_notice=rule.source_notice,
            replaces=rule,
            provenance={**rule.provenance, "requeued_from": rule.id},
            now=now,
        )
    return version
