"""Every state change of a rule is one function here (semantics §3): it checks who may do it,
locks the rule row, writes the new state and its journal event in one transaction, and is
idempotent. Follow-ups (a validation round, the duplicate check) are enqueued on commit.

Promotion and retirement have one path, `rules_decide`, set-based because a round decides a
thousand forward trials at once; `rule_promote`, `rule_retire` and `rule_retire_by_reviewer`
are that path for one rule, so tests build active rules exactly as the engine does."""

import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from .. import journal, signals
from ..baseline import baseline
from ..bulk import update_from_values
from ..duplicate_keys import index_rules
from ..follow_ups import rule_compare_on_commit
from ..inputs import candidate_fields
from ..journal import EventType
from ..metrics import Registry, load_registry
from ..models import AuthorKind, Report, Rule, RuleState
from ..selectors.rules import RuleNotFound
from ..states import TRANSITIONS, Action, Actor, ActorKind, check_allowed, next_state
from ..validation import (
    MAX_RULE_ID,
    InvalidRule,
    check_metric,
    check_rule_id,
    review_reason,
    rule_content_hash,
)

_AUTHOR_KIND = {
    ActorKind.AGENT: AuthorKind.AGENT,
    ActorKind.EXTRACTOR: AuthorKind.EXTRACTOR,
    ActorKind.PACK: AuthorKind.PACK,
    ActorKind.REVIEWER: AuthorKind.REVIEWER,
}
_DECISION_EVENTS = {
    Action.PROMOTE: EventType.RULE_PROMOTED,
    Action.RETIRE: EventType.RULE_RETIRED,
    Action.RETIRE_BY_REVIEWER: EventType.RULE_RETIRED_BY_REVIEWER,
}


def baseline_for(*, metric: str, registry: Registry | None = None) -> tuple[float, int, int]:
    """The forward-trial baseline of a rule on `metric`, from recent reports (semantics §8)."""
    window = settings.CAUTERWEB_BASELINE_WINDOW
    rows = (
        Report.objects.filter(has_notice=True)
        .order_by("-at", "-id")
        .values_list("session_id", "notices")[:window]
    )
    if not metric:
        return baseline(list(rows), frozenset())
    registry = registry if registry is not None else load_registry()
    return baseline(list(rows), registry.family(metric))


class Recording:
    """What the candidates of one bulk record share, read once instead of once a candidate:
    the metric registry, the baseline of each metric (the reports cannot change inside the
    bulk's transaction, so every candidate on a metric gets the same baseline), which of the
    ids given are stored (one query for the batch), and the rules to file for the duplicate
    check, filed together by `finish` before the transaction ends."""

    def __init__(self, ids: list[str] | None = None) -> None:
        self.registry = load_registry()
        self._baselines: dict[str, tuple[float, int, int]] = {}
        ids = [i for i in ids or [] if i]
        self.stored = {r.id: r for r in Rule.objects.filter(pk__in=ids)} if ids else {}
        self.absent = set(ids) - set(self.stored)
        self.recorded: list[Rule] = []

    def finish(self) -> None:
        index_rules(self.recorded, registry=self.registry, new=True)
        self.recorded = []

    def baseline(self, metric: str) -> tuple[float, int, int]:
        if metric not in self._baselines:
            self._baselines[metric] = baseline_for(metric=metric, registry=self.registry)
        return self._baselines[metric]


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
    recording: Recording | None = None,
) -> tuple[Rule, bool]:
    """Record a candidate (semantics §3) with its baseline (semantics §8). Returns (rule, created).

    Idempotent: the same content (under the same id, if one is given) returns the stored rule.
    A given id whose stored text differs is refused: a recorded rule's text is immutable.
    A bulk record passes one `Recording` for all its candidates, inside its transaction."""
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
    check_metric(fields["metric"], recording.registry if recording else None)
    rule_id = check_rule_id(rule_id)
    digest = rule_content_hash(fields)
    now = now or timezone.now()
    with transaction.atomic():
        existing = _stored_version(
            rule_id=rule_id, digest=digest, replaces=replaces, recording=recording
        )
        if existing is not None:
            return existing, False
        rule = _insert_candidate(
            actor=actor,
            rule_id=rule_id,
            fields=fields,
            digest=digest,
            replaces=replaces,
            provenance=provenance or {},
            now=now,
            recording=recording,
        )
        _journal_added(rule, actor=actor, now=now)
        _after_recording(rule.id)
    return rule, True


def _stored_version(
    *, rule_id: str | None, digest: str, replaces: Rule | None, recording=None
) -> Rule | None:
    """The rule already recorded with this content (under this id, if one is given)."""
    if rule_id and recording is not None and rule_id in recording.absent:
        existing = None  # the bulk's one query found it absent
    elif rule_id and recording is not None and rule_id in recording.stored:
        existing = recording.stored[rule_id]
    elif rule_id:
        existing = Rule.objects.filter(pk=rule_id).first()
    else:
        existing = Rule.objects.filter(content_hash=digest, replaces=replaces).first()
    if existing is not None and existing.content_hash != digest:
        raise InvalidRule(
            f"rule {existing.id} is already recorded with other text; a recorded rule "
            "is immutable: record a new candidate (without this id) instead",
            field="id",
        )
    return existing


def _insert_candidate(
    *, actor, rule_id, fields, digest, replaces, provenance, now, recording
) -> Rule:
    if recording is not None:
        rate, sessions, hits = recording.baseline(fields["metric"])
    else:
        rate, sessions, hits = baseline_for(metric=fields["metric"])
    rule = Rule(
        id=rule_id or _generated_id(),
        state=RuleState.CANDIDATE,
        author=actor.name,
        author_kind=_AUTHOR_KIND[actor.kind],
        provenance=provenance,
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
    # Filed where the duplicate check of later candidates looks (lifecycle/duplicate_keys.py);
    # a bulk record files its rules together before it commits.
    if recording is not None:
        recording.recorded.append(rule)
    else:
        index_rules([rule], new=True)
    return rule


def _generated_id() -> str:
    return f"R-{secrets.token_hex(4).upper()}"


def _journal_added(rule: Rule, *, actor: Actor, now: datetime) -> None:
    journal.write(
        type=EventType.RULE_ADDED,
        actor=actor,
        rule_id=rule.id,
        at=now,
        evidence={
            "baseline": {
                "rate": rule.baseline_rate,
                "sessions": rule.baseline_sessions,
                "hits": rule.baseline_hits,
            },
            "state": rule.state,
            "author_kind": rule.author_kind,
            "replaces": rule.replaces_id,
            "provenance": rule.provenance,
        },
    )


def _after_recording(rule_id: str) -> None:
    """On commit: compare the rule with its source case's expected rule and with its live
    neighbours, off the write path (the comparator is slow and never blocks recording), and
    ask for a round."""
    rule_compare_on_commit(rule_id)
    signals.announce("candidate")


@dataclass(frozen=True)
class Decision:
    """One decision for `rules_decide`: PROMOTE or RETIRE (the engine's), or RETIRE_BY_REVIEWER."""

    rule_id: str
    action: Action
    reason: str
    evidence: dict = field(default_factory=dict)
    validator: str = ""
    # A round's bookkeeping of the attempt that decided, written in the decision's own row
    # write: the replay attempts it spent, and that the engine attempted the rule (its
    # `first_attempted_at` is set once).
    attempts_spent: int = 0
    attempted: bool = False


def rules_decide(
    *,
    decisions: list[Decision],
    actor: Actor,
    round_id: int | None = None,
    now: datetime | None = None,
) -> set[str]:
    """Apply decisions to many rules at once, set-based: a round deciding a thousand forward
    trials must not pay five round trips per rule. The actor and the transition table are
    checked, the rows are locked, each change is journaled in the same transaction, and a rule
    no longer in a state the action starts from is left alone (applying the same verdict twice
    is a no-op). Returns the ids moved."""
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
            events.append(_decision_event(decision, rule, target, actor, round_id, now))
            rule.state, rule.pending_reason = target, ""
            rule.decided_at, rule.verdict_reason = now, decision.reason
            rule.last_validator = decision.validator or rule.last_validator
            moved.append((rule, decision))
        _write_states(moved, now)
        journal.write_many(events)
    return {rule.id for rule, _ in moved}


def _decision_event(decision: Decision, rule: Rule, target: str, actor, round_id, now):
    return journal.event(
        type=_DECISION_EVENTS[decision.action],
        at=now,
        rule_id=rule.id,
        round_id=round_id,
        actor=actor,
        evidence={"from": rule.state, "to": target, "reason": decision.reason, **decision.evidence},
    )


def _write_states(moved: list[tuple[Rule, Decision]], now: datetime) -> None:
    """One statement for the lot, each rule with its own reason (a replay's names its case)."""
    at = connection.ops.adapt_datetimefield_value(now)
    update_from_values(
        Rule,
        columns=("id", "state", "verdict_reason", "last_validator", "spent", "attempted"),
        rows=[
            (r.id, r.state, r.verdict_reason, r.last_validator, d.attempts_spent, d.attempted)
            for r, d in moved
        ],
        assignments={
            "state": "v.state",
            "pending_reason": "''",
            "decided_at": "%s",
            "verdict_reason": "v.verdict_reason",
            "last_validator": "v.last_validator",
            "replay_attempts": "{table}.replay_attempts + v.spent",
            "first_attempted_at": "CASE WHEN v.attempted "
            "THEN COALESCE({table}.first_attempted_at, %s) ELSE {table}.first_attempted_at END",
        },
        params=[at, at],
    )


def _decide_one(decision: Decision, *, actor: Actor, round_id, now) -> bool:
    with transaction.atomic():
        if not Rule.objects.filter(pk=decision.rule_id).exists():
            raise RuleNotFound(decision.rule_id)
        return bool(rules_decide(decisions=[decision], actor=actor, round_id=round_id, now=now))


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
    """Promote a candidate to active. Only the validation engine may (semantics §3). False when
    it is no longer a candidate."""
    decision = Decision(rule_id, Action.PROMOTE, reason, evidence, validator)
    return _decide_one(decision, actor=actor, round_id=round_id, now=now)


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
    decision = Decision(rule_id, Action.RETIRE, reason, evidence, validator)
    return _decide_one(decision, actor=actor, round_id=round_id, now=now)


def rule_retire_by_reviewer(
    *, rule_id: str, actor: Actor, reason: str, now: datetime | None = None
) -> bool:
    """A human reviewer retires a candidate or an active rule, with a reason (semantics §3).
    False when it is already retired."""
    check_allowed(Action.RETIRE_BY_REVIEWER, actor)
    reason = review_reason(reason)
    with transaction.atomic():
        rule = Rule.objects.select_for_update().filter(pk=rule_id).only("state").first()
        if rule is None:
            raise RuleNotFound(rule_id)
        if rule.state == RuleState.RETIRED:
            return False
        next_state(Action.RETIRE_BY_REVIEWER, rule.state)
        decision = Decision(rule_id, Action.RETIRE_BY_REVIEWER, reason, {"reviewer": actor.name})
        return bool(rules_decide(decisions=[decision], actor=actor, now=now))


class Requeued(NamedTuple):
    version: Rule
    created: bool


_VERSION = re.compile(r"-v(\d+)$")


def _version_id(rule: Rule) -> str:
    """The id of a rule's next version: C-001 → C-001-v2 → C-001-v3, so that a version reads
    as one; a generated id when that would be longer than an id may be."""
    base = _VERSION.sub("", rule.id)
    taken = Rule.objects.filter(pk__startswith=f"{base}-v").values_list("pk", flat=True)
    numbers = [int(m[1]) for pk in taken if (m := _VERSION.fullmatch(pk[len(base) :]))]
    version = f"{base}-v{max([1, *numbers]) + 1}"
    return version if len(version) <= MAX_RULE_ID else _generated_id()


def rule_requeue(*, rule_id: str, actor: Actor, now: datetime | None = None) -> Requeued:
    """Re-queue a retired rule as a new candidate version that links to it (semantics §3),
    under the next version id. While a version of it is live (a candidate, or active) that
    version is returned and nothing is recorded; once every version is retired, re-queuing
    records another. The version is returned as it stands after the commit: on the embedded
    default the round its recording kicks has run by then, and may have decided it."""
    check_allowed(Action.REQUEUE, actor)
    with transaction.atomic():
        rule = Rule.objects.select_for_update().filter(pk=rule_id).first()
        if rule is None:
            raise RuleNotFound(rule_id)
        next_state(Action.REQUEUE, rule.state)
        live = (
            Rule.objects.filter(replaces=rule, state__in=[RuleState.CANDIDATE, RuleState.ACTIVE])
            .order_by("recorded_at", "id")
            .first()
        )
        if live is not None:
            return Requeued(live, False)
        version, created = rule_record_candidate(
            actor=actor,
            trigger=rule.trigger,
            directive=rule.directive,
            scope=rule.scope,
            metric=rule.metric,
            signature=rule.signature,
            tags=rule.tags,
            source_case=rule.source_case,
            source_notice=rule.source_notice,
            rule_id=_version_id(rule),
            replaces=rule,
            provenance={**rule.provenance, "requeued_from": rule.id},
            now=now,
        )
    version.refresh_from_db()
    return Requeued(version, created)
