"""Paraphrase-aware duplicates: a new candidate that says the same as a live
rule of its scope is linked to it as a probable duplicate and journaled, instead of silently
piling up copies.

"Says the same" needs both kinds of evidence:
- the comparator of semantics §12 (`comparison.compare.compare_many`) gives the verdict `match`
  — it sees through rewording and is not fooled by shared words;
- the signatures are compatible: the failure-mode atoms of one are a subset of the other's
  (one rule may be more specific), or, for two rules without failure-mode atoms, the notices
  they fire on overlap (semantics §11). A rule about `error:auth_denied` never duplicates one about
  `error:non_fast_forward`, however alike the prose.

Only candidates and active rules of the same scope are compared (retired rules are history,
not copies), and the rule a re-queued version replaces is not its duplicate. A duplicate is
still a candidate in its own right: the link is shown, it decides nothing.

The check costs the same whatever is stored (`lifecycle.limits`): it reads only the block of
the candidate, the live rules of its scope filed under its signature's keys
(`lifecycle.duplicate_keys`) — every rule its signature is compatible with, and usually a
few. A block of more than DUPLICATE_COMPARE rules (a crowded scope, one very common
signature) is ranked by the words it shares with the candidate and only the first
DUPLICATE_COMPARE are read. At most DUPLICATE_COMPARE compatible rules go to the comparator,
and only the first DUPLICATE_TEXT characters of each text are read, cut in SQL, and
journaled.
"""

import logging
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Count
from django.db.models.functions import Substr
from django.utils import timezone

from comparison.compare import compare_many
from comparison.semantic import ComparatorUnavailable

from .. import atoms as atom_lib
from .. import duplicate_keys, journal, limits
from ..journal import EventType
from ..limits import head
from ..matching import notice_targets
from ..metrics import Registry, load_registry
from ..models import DuplicateKey, Rule, RuleState

log = logging.getLogger(__name__)


def signatures_compatible(
    a_signature: list[str],
    a_family: frozenset[str],
    b_signature: list[str],
    b_family: frozenset[str],
    *,
    a_metric: str = "",
    b_metric: str = "",
) -> bool:
    """Could two rules fire on the same trajectories for the same reason? Pure."""
    a_failure = atom_lib.failure_mode_atoms(a_signature)
    b_failure = atom_lib.failure_mode_atoms(b_signature)
    if a_failure or b_failure:
        return bool(a_failure and b_failure) and (a_failure <= b_failure or b_failure <= a_failure)
    a_targets = notice_targets(rule_signature=a_signature, rule_metric=a_metric, family=a_family)
    b_targets = notice_targets(rule_signature=b_signature, rule_metric=b_metric, family=b_family)
    return bool(a_targets & b_targets)


def _text(rule: Rule) -> dict:
    return {"trigger": head(rule.trigger), "directive": head(rule.directive)}


LIVE = (RuleState.CANDIDATE, RuleState.ACTIVE)
# The rows of a block: the live rules of the scope under any of the keys, but the candidate
# and the rule it replaces (an edited version is meant to say nearly the same).
_BLOCK_SQL = (
    f"SELECT k.rule_id FROM {DuplicateKey._meta.db_table} k "
    f"JOIN {Rule._meta.db_table} r ON r.id = k.rule_id "
    "WHERE k.scope = %s AND k.key IN ({keys}) AND r.state IN (%s, %s) "
    "AND k.rule_id NOT IN (%s, %s) LIMIT %s"
)


def _block(rule: Rule, family: frozenset[str]) -> list[str]:
    """The ids of the live rules of the scope filed under the rule's signature keys: every rule
    it could duplicate. More than DUPLICATE_COMPARE of them: DUPLICATE_COMPARE, those sharing
    the most words of its text first (then the newest), then the first others the index gave."""
    keys = duplicate_keys.lookup_keys(rule.signature, rule.metric, family)
    if not keys:
        return []
    excluded = [rule.pk, rule.replaces_id or rule.pk]
    # A rule is filed under each key at most once, so fewer rows than this limit are the
    # whole block, and this many hold more than DUPLICATE_COMPARE rules: no DISTINCT, no sort,
    # the index is read until the limit. One statement written out: the ORM spent longer
    # building it than the database reading it.
    enough = (limits.DUPLICATE_COMPARE + 1) * len(keys)
    with connection.cursor() as cursor:
        cursor.execute(
            _BLOCK_SQL.format(keys=", ".join(["%s"] * len(keys))),
            [rule.scope, *keys, *(str(state) for state in LIVE), *excluded, enough],
        )
        ids = list(dict.fromkeys(row[0] for row in cursor.fetchall()))
    if len(ids) <= limits.DUPLICATE_COMPARE:
        return ids
    block = DuplicateKey.objects.filter(
        scope=rule.scope, key__in=keys, rule__state__in=LIVE
    ).exclude(rule_id__in=excluded)
    ranked = (
        DuplicateKey.objects.filter(
            scope=rule.scope,
            key__in=duplicate_keys.word_keys(rule.trigger, rule.directive),
            rule_id__in=block.values("rule_id"),
        )
        .values("rule_id")
        .annotate(shared=Count("id"))
        .order_by("-shared", "-rule__recorded_at", "-rule_id")
    )
    ranked = [row["rule_id"] for row in ranked[: limits.DUPLICATE_COMPARE]]
    return list(dict.fromkeys(ranked + ids))[: limits.DUPLICATE_COMPARE]


def _live_heads(rule: Rule, family: frozenset[str]) -> list[tuple[Rule, dict]]:
    """The rules of the candidate's block (`_block`), newest first, each with the head of its
    text (`lifecycle.limits`): only the first DUPLICATE_TEXT characters of each text are read
    from the database (a rule kept from before the limits may be 25 MB)."""
    ids = _block(rule, family)
    if not ids:
        return []
    rows = (
        Rule.objects.filter(pk__in=ids, state__in=LIVE)
        .order_by("-recorded_at", "-id")
        .only("id", "scope", "state", "metric", "signature", "recorded_at")
        .annotate(
            trigger_head=Substr("trigger", 1, limits.DUPLICATE_TEXT),
            directive_head=Substr("directive", 1, limits.DUPLICATE_TEXT),
        )
    )
    return [(r, {"trigger": r.trigger_head, "directive": r.directive_head}) for r in rows]


def probable_duplicate(
    rule: Rule, *, registry: Registry | None = None
) -> tuple[Rule, dict, dict] | None:
    """(the live rule of the same scope this one says the same as, the comparator's scores,
    the head of its text), or None. Among several, the closest (highest semantic score, then
    the oldest). At most DUPLICATE_COMPARE compatible rules go to the comparator."""
    registry = registry if registry is not None else load_registry()
    family = registry.family(rule.metric)
    others = [
        (other, text)
        for other, text in _live_heads(rule, family)
        if signatures_compatible(
            rule.signature,
            family,
            other.signature,
            registry.family(other.metric),
            a_metric=rule.metric,
            b_metric=other.metric,
        )
    ][: limits.DUPLICATE_COMPARE]
    if not others:
        return None
    others.reverse()  # oldest first, so that the oldest wins a tie
    results = compare_many([(_text(rule), text) for _, text in others])
    matches = [
        (other, scores, text)
        for (other, text), scores in zip(others, results, strict=True)
        if scores["verdict"] == "match"
    ]
    if not matches:
        return None
    return max(matches, key=lambda found: found[1]["semantic"])


def rule_check_duplicate(
    *,
    rule_id: str,
    now: datetime | None = None,
    registry: Registry | None = None,
    rule: Rule | None = None,
) -> Rule | None:
    """Link a recorded candidate to the live rule it duplicates and journal
    `rule_duplicate_suspected`, as the one who recorded it. Runs after the recording commits
    (`lifecycle.tasks`); checking twice journals once. Returns the other rule, or None. A
    comparator that cannot load never blocks recording a rule: the check is skipped."""
    if rule is None or rule.duplicate_of_id is not None:
        # (`rule`: the rule as just read by the caller; a batch reads its rules at once.)
        rule = Rule.objects.filter(pk=rule_id, duplicate_of__isnull=True).first()
    if rule is None:
        return None
    try:
        # Outside the transaction: the comparator is the slow part and takes no lock.
        found = probable_duplicate(rule, registry=registry)
    except ComparatorUnavailable as exc:
        log.warning("duplicate check skipped for %s: %s", rule.id, exc)
        return None
    if found is None:
        return None
    other, scores, other_text = found
    with transaction.atomic():
        if not Rule.objects.filter(pk=rule.pk, duplicate_of__isnull=True).update(
            duplicate_of=other
        ):
            return None  # another worker linked it first
        journal.write(
            type=EventType.RULE_DUPLICATE_SUSPECTED,
            actor=rule.author,
            rule_id=rule.id,
            at=now or timezone.now(),
            evidence=_duplicate_evidence(other, scores, other_text),
        )
    return other


def _duplicate_evidence(other: Rule, scores: dict, other_text: dict) -> dict:
    return {
        "duplicate_of": other.id,
        "other_state": other.state,
        "other": other_text,
        "verdict": scores["verdict"],
        "semantic": scores["semantic"],
        "token_f1": scores["token_f1"],
        "signature_agreement": scores["signature_agreement"],
        "trigger": {k: scores["trigger"][k] for k in ("token_f1", "semantic")},
        "directive": {k: scores["directive"][k] for k in ("token_f1", "semantic")},
        "why": scores["why"],
    }
