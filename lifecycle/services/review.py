"""What a reviewer does with an item of the review queue (docs/dashboard.md, "The review
queue"): one function per action. Each locks its item, closes it with its resolution, makes
its change and journals it, in one transaction; an item someone resolved a moment ago is
refused (`ItemClosed`), never resolved twice. `review_resolve` is the one entry point, for
the dashboard and the API alike: it checks that the action is one the item's kind offers.

| kind          | actions                                                         |
|---------------|-----------------------------------------------------------------|
| inconclusive  | `retire` (with a reason), `dismiss` (leave it to its trial)     |
| extraction    | `confirm` (the same rule: label 1), `deny` (another rule: 0)    |
| duplicate     | `merge` (`keep` one, retire the other linked to it), `dismiss`  |
| harm          | `acknowledge`, `requeue` (a new candidate version)              |
| pack          | `import` (as candidates, semantics §13), `reject` (with a reason) |
"""

from collections.abc import Callable
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from .. import journal, review_items
from ..journal import EventType
from ..models import PackStatus, ReviewItem, ReviewKind, Rule, StagedPack
from ..states import Action, Actor, ActorKind, NotAllowed
from ..validation import review_reason
from .packs import import_pack
from .rules import Decision, rule_requeue, rule_retire_by_reviewer, rules_decide


class ReviewItemNotFound(Exception):
    """No review item has this id (HTTP 404)."""


class ItemClosed(Exception):
    """The item was resolved already (HTTP 409)."""


class BadAction(ValueError):
    """An action the item's kind does not offer, or one missing what it needs (HTTP 400)."""

    def __init__(self, message: str, *, field: str = "action"):
        super().__init__(message)
        self.field = field


def _close(item: ReviewItem, *, actor: Actor, resolution: str, now: datetime) -> None:
    review_items.close_item(item, by=actor.name, resolution=resolution, now=now)


def _dismissed(item: ReviewItem, *, actor: Actor, reason: str, now: datetime, words: str) -> None:
    _close(item, actor=actor, resolution=words, now=now)
    journal.write(
        type=EventType.REVIEW_DISMISSED,
        actor=actor,
        rule_id=item.rule_id,
        at=now,
        evidence={"kind": item.kind, "item": item.pk, "resolution": words, "reason": reason},
    )


def review_retire(item: ReviewItem, *, actor: Actor, reason: str, now: datetime, **_) -> None:
    """Retire an undecided candidate by hand (semantics §3)."""
    reason = review_reason(reason)
    _close(item, actor=actor, resolution="retired", now=now)
    rule_retire_by_reviewer(rule_id=item.rule_id, actor=actor, reason=reason, now=now)


def review_dismiss(item: ReviewItem, *, actor: Actor, reason: str, now: datetime, **_) -> None:
    """Leave an undecided candidate to its forward trial, or take note of a harm retirement."""
    words = "acknowledged" if item.kind == ReviewKind.HARM else "left to its trial"
    _dismissed(item, actor=actor, reason=reason, now=now, words=words)


def _labelled(item: ReviewItem, *, actor: Actor, label: int, now: datetime) -> None:
    """A reviewer's answer about an extraction, kept as a labelled pair (semantics §12) in the
    shape of the comparator's own labelled data."""
    _close(item, actor=actor, resolution="same rule" if label else "another rule", now=now)
    rule = Rule.objects.only("trigger", "directive", "comparison").get(pk=item.rule_id)
    stored = rule.comparison or item.evidence
    journal.write(
        type=EventType.EXTRACTION_LABELLED,
        actor=actor,
        rule_id=item.rule_id,
        at=now,
        evidence={
            "expected": stored.get("expected"),
            "extracted": stored.get("extracted")
            or {"trigger": rule.trigger, "directive": rule.directive},
            "label": label,
            "scope": item.scope,
            "score": stored.get("score"),
            "verdict": stored.get("verdict"),
        },
    )


def extraction_confirm(item: ReviewItem, *, actor: Actor, now: datetime, **_) -> None:
    _labelled(item, actor=actor, label=1, now=now)


def extraction_deny(item: ReviewItem, *, actor: Actor, now: datetime, **_) -> None:
    _labelled(item, actor=actor, label=0, now=now)


def duplicates_merge(
    item: ReviewItem, *, actor: Actor, keep: str, reason: str, now: datetime, **_
) -> None:
    """Keep one of a suspected pair and retire the other, linked to the one kept."""
    pair = {item.rule_id, item.other_rule_id}
    if keep not in pair:
        raise BadAction(f"keep must be one of {', '.join(sorted(pair))}", field="keep")
    (drop,) = pair - {keep}
    _close(item, actor=actor, resolution=f"merged: kept {keep}, retired {drop}", now=now)
    Rule.objects.filter(pk=keep, duplicate_of=drop).update(duplicate_of=None)
    Rule.objects.filter(pk=drop).update(duplicate_of=keep)
    words = review_reason(reason or f"a duplicate of {keep}, merged into it")
    decision = Decision(
        drop, Action.RETIRE_BY_REVIEWER, words, {"reviewer": actor.name, "merged_into": keep}
    )
    if not rules_decide(decisions=[decision], actor=actor, now=now):
        raise BadAction(f"{drop} is no longer live: nothing to merge", field="keep")


def duplicate_dismiss(item: ReviewItem, *, actor: Actor, reason: str, now: datetime, **_) -> None:
    """Not duplicates after all: the link is removed, and the pair is not flagged again."""
    _close(item, actor=actor, resolution="not duplicates", now=now)
    pair = (item.rule_id, item.other_rule_id)
    Rule.objects.filter(pk__in=pair, duplicate_of__in=pair).update(duplicate_of=None)
    journal.write(
        type=EventType.RULE_DUPLICATE_DISMISSED,
        actor=actor,
        rule_id=item.rule_id,
        at=now,
        evidence={"duplicate_of": item.other_rule_id, "reason": reason},
    )


def harm_requeue(item: ReviewItem, *, actor: Actor, now: datetime, **_) -> None:
    """A new candidate version of a rule retired on harm, validated from scratch."""
    _close(item, actor=actor, resolution="re-queued", now=now)
    rule_requeue(rule_id=item.rule_id, actor=actor, now=now)


def _staged(item: ReviewItem) -> StagedPack:
    return StagedPack.objects.select_for_update().get(pk=item.pack_id)


def pack_import_staged(item: ReviewItem, *, actor: Actor, now: datetime, **_) -> None:
    """Import a waiting pack as candidates, all or nothing (semantics §13)."""
    pack = _staged(item)
    _close(item, actor=actor, resolution="imported", now=now)
    import_pack(pack.text, actor=actor, now=now)
    _decide_pack(pack, PackStatus.IMPORTED, by=actor.name, now=now)


def pack_reject_staged(item: ReviewItem, *, actor: Actor, reason: str, now: datetime, **_) -> None:
    pack = _staged(item)
    reason = review_reason(reason)
    _close(item, actor=actor, resolution="rejected", now=now)
    _decide_pack(pack, PackStatus.REJECTED, by=actor.name, now=now)
    journal.write(
        type=EventType.PACK_REJECTED,
        actor=actor,
        at=now,
        evidence={
            "staged_pack": pack.pk,
            "pack": pack.name,
            "version": pack.version,
            "reason": reason,
        },
    )


def _decide_pack(pack: StagedPack, status: str, *, by: str, now: datetime) -> None:
    pack.status, pack.decided_by, pack.decided_at = status, by[:150], now
    pack.save(update_fields=["status", "decided_by", "decided_at"])


Handler = Callable[..., None]
ACTIONS: dict[str, dict[str, Handler]] = {
    ReviewKind.INCONCLUSIVE: {"retire": review_retire, "dismiss": review_dismiss},
    ReviewKind.EXTRACTION: {"confirm": extraction_confirm, "deny": extraction_deny},
    ReviewKind.DUPLICATE: {"merge": duplicates_merge, "dismiss": duplicate_dismiss},
    ReviewKind.HARM: {"acknowledge": review_dismiss, "requeue": harm_requeue},
    ReviewKind.PACK: {"import": pack_import_staged, "reject": pack_reject_staged},
}


def review_resolve(
    *,
    item_id: int,
    action: str,
    actor: Actor,
    reason: str = "",
    keep: str = "",
    now: datetime | None = None,
) -> ReviewItem:
    """Resolve an open item with one of its kind's actions; returns the closed item."""
    if actor.kind != ActorKind.REVIEWER:
        raise NotAllowed(f"{actor.kind} {actor.name!r} may not resolve review items")
    now = now or timezone.now()
    with transaction.atomic():
        item = ReviewItem.objects.select_for_update().filter(pk=item_id).first()
        if item is None:
            raise ReviewItemNotFound(item_id)
        if not item.is_open:
            raise ItemClosed(
                f"already resolved by {item.closed_by or 'the engine'}: {item.resolution}"
            )
        handler = ACTIONS[item.kind].get(action)
        if handler is None:
            offered = ", ".join(ACTIONS[item.kind])
            raise BadAction(
                f"this item ({item.get_kind_display()}) offers {offered} (got {action!r})"
            )
        handler(item, actor=actor, reason=(reason or "").strip(), keep=keep, now=now)
    item.refresh_from_db()
    return item
