"""The review queue kept by the journal writer (docs/dashboard.md, "The review queue").

Every event is written by `lifecycle.journal`, in the transaction of its change; the writer
hands each batch here, so an item is opened by the very change that calls for a human and
closed by the change that makes it moot — no state change can forget the queue:

- `rule_duplicate_suspected` opens a *duplicate* item (the pair);
- a pending `validation_verdict` of a candidate whose replay budget is spent opens an
  *inconclusive* item (semantics §7.10: replay will not try again);
- `rule_retired` on an attributable regression (semantics §7.7, §17.4) opens a *harm* item;
- `pack_staged` opens a *pack* item; an extraction the comparator is `uncertain` about opens an
  *extraction* item (`open_extraction`, called where the scores are stored).

A decision closes the rule's *inconclusive* items, and a retirement the *duplicate* items it
is part of; re-queuing a retired rule closes its *harm* item. A reviewer's action closes its
own item first, with its own resolution (lifecycle/services/review.py). An item is never
opened twice for the same thing, so a dismissed one stays dismissed.
"""

import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db.models import Q

from . import outbox
from .models import ReviewItem, ReviewKind, Rule

DECIDED = ("rule_promoted", "rule_retired", "rule_retired_by_reviewer")
RETIRED = ("rule_retired", "rule_retired_by_reviewer")


@dataclass(frozen=True)
class Opening:
    kind: str
    rule_id: str | None = None
    other_id: str | None = None
    pack_id: int | None = None
    evidence: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        # A pair is one pair whichever of the two was found to duplicate the other.
        rules = [self.rule_id, self.other_id]
        if self.kind == ReviewKind.DUPLICATE:
            rules.sort(key=str)
        parts = json.dumps([self.kind, *rules, self.pack_id])
        return hashlib.sha256(parts.encode()).hexdigest()


@dataclass(frozen=True)
class Closing:
    kinds: tuple[str, ...]
    where: Q
    by: str
    resolution: str


def replay_budget_spent(evidence: dict) -> bool:
    """A pending verdict after which replay will not be tried again (semantics §7.10)."""
    details = evidence.get("details") or {}
    attempts = details.get("replay_attempts")
    return (
        evidence.get("outcome") == "pending"
        and isinstance(attempts, int)
        and attempts >= settings.CAUTERWEB_MAX_REPLAY_ATTEMPTS
    )


def retired_on_harm(evidence: dict) -> bool:
    """Whether an engine retirement was for an attributable regression (semantics §7.7,
    §17.4) or a forward trial's harm guardrail (semantics §20.4), not for no improvement."""
    paired = evidence.get("paired") or {}
    if any(r.get("rejected") for r in paired.get("regressions") or []):
        return True
    if any(case.get("regressed") for case in evidence.get("cases") or []):
        return True
    trial = evidence.get("trial") or {}
    return trial.get("decision") == "harm"


def openings(events: Sequence) -> list[Opening]:
    """The items these events call for. Pure."""
    out = []
    for e in events:
        evidence = e.evidence or {}
        if e.type == "rule_duplicate_suspected" and evidence.get("duplicate_of"):
            out.append(
                Opening(ReviewKind.DUPLICATE, e.rule_id, evidence["duplicate_of"], None, evidence)
            )
        elif e.type == "validation_verdict" and replay_budget_spent(evidence):
            out.append(Opening(ReviewKind.INCONCLUSIVE, e.rule_id))
        elif e.type == "rule_retired" and retired_on_harm(evidence):
            out.append(
                Opening(ReviewKind.HARM, e.rule_id, evidence={"reason": evidence.get("reason", "")})
            )
        elif e.type == "pack_staged" and evidence.get("staged_pack"):
            out.append(Opening(ReviewKind.PACK, pack_id=evidence["staged_pack"], evidence=evidence))
    return out


def closings(events: Sequence) -> list[Closing]:
    """The open items these events make moot, a few statements for a whole batch (a round
    decides a thousand forward trials at once). Pure."""
    decided: dict[tuple[str, str], list[str]] = defaultdict(list)
    retired: dict[str, list[str]] = defaultdict(list)
    out = []
    for e in events:
        evidence = e.evidence or {}
        if e.type in DECIDED and e.rule_id:
            verb = "promoted" if e.type == "rule_promoted" else "retired"
            decided[(e.actor, verb)].append(e.rule_id)
        if e.type in RETIRED and e.rule_id:
            retired[e.actor].append(e.rule_id)
        if e.type == "rule_added" and evidence.get("replaces"):
            where = Q(rule_id=evidence["replaces"])
            out.append(Closing((ReviewKind.HARM,), where, e.actor, f"re-queued as {e.rule_id}"))
    for (actor, verb), ids in decided.items():
        out.append(Closing((ReviewKind.INCONCLUSIVE,), Q(rule_id__in=ids), actor, verb))
    for actor, ids in retired.items():
        where = Q(rule_id__in=ids) | Q(other_rule_id__in=ids)
        out.append(Closing((ReviewKind.DUPLICATE,), where, actor, "one of the pair retired"))
    return out


def project(events: Sequence, *, now: datetime) -> list[ReviewItem]:
    """Close what the events make moot, open what they call for; the items opened."""
    for closing in closings(events):
        close(
            closing.where & Q(kind__in=closing.kinds),
            by=closing.by,
            resolution=closing.resolution,
            now=now,
        )
    wanted = openings(events)
    return open_items(wanted, now=now) if wanted else []


def open_items(wanted: list[Opening], *, now: datetime) -> list[ReviewItem]:
    """Open the items not opened before (ever: a closed one stays closed), each announced to
    the endpoints that want `needs_review`. Two queries, three with something new."""
    by_key = {o.key: o for o in wanted}
    known = set(ReviewItem.objects.filter(key__in=list(by_key)).values_list("key", flat=True))
    fresh = [o for key, o in by_key.items() if key not in known]
    if not fresh:
        return []
    scopes = dict(
        Rule.objects.filter(pk__in={o.rule_id for o in fresh if o.rule_id}).values_list(
            "pk", "scope"
        )
    )
    items = [
        ReviewItem(
            key=o.key,
            kind=o.kind,
            rule_id=o.rule_id,
            other_rule_id=o.other_id,
            pack_id=o.pack_id,
            scope=scopes.get(o.rule_id, ""),
            evidence=o.evidence,
            opened_at=now,
        )
        for o in fresh
        if o.rule_id is None or o.rule_id in scopes
    ]
    # A racing writer may have opened one a moment ago: the unique key keeps one.
    ReviewItem.objects.bulk_create(items, ignore_conflicts=True)
    outbox.notify_review(items, now=now)
    return items


def open_extraction(rule: Rule, scores: dict, *, now: datetime) -> list[ReviewItem]:
    """An extraction the comparator cannot call (verdict `uncertain`, semantics §12): a
    reviewer's answer becomes a labelled pair for the comparator."""
    if scores.get("verdict") != "uncertain":
        return []
    keep = {k: scores.get(k) for k in ("score", "verdict", "why", "expected", "extracted")}
    return open_items([Opening(ReviewKind.EXTRACTION, rule.id, evidence=keep)], now=now)


def close(where: Q, *, by: str, resolution: str, now: datetime) -> int:
    """Close the open items `where` selects; how many were open."""
    return ReviewItem.objects.filter(where, closed_at__isnull=True).update(
        closed_at=now, closed_by=by[:150], resolution=resolution[:200]
    )


def close_item(item: ReviewItem, *, by: str, resolution: str, now: datetime) -> None:
    """Close one item (a reviewer's action, before the change it makes)."""
    item.closed_at, item.closed_by, item.resolution = now, by[:150], resolution[:200]
    item.save(update_fields=["closed_at", "closed_by", "resolution"])
