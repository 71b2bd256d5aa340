"""Extraction accuracy kept up to date (semantics §12): a rule's comparison with its source
case's expected rule is computed after commit and stored on the rule, so rule pages, the API
and the charts read it instead of running the comparator over the corpus."""

import logging

from django.db import transaction
from django.utils import timezone

from comparison.semantic import ComparatorUnavailable

from .. import review_items
from ..models import Rule
from ..selectors.extraction import score_rule

log = logging.getLogger(__name__)


def rule_store_comparison(*, rule_id: str, rule: Rule | None = None) -> dict | None:
    """Score the rule against its source case's expected rule and store the result (None
    when there is none to compare with). A comparator that cannot load leaves it unscored.
    `rule`: the rule as just read by the caller (a batch reads its rules at once)."""
    rule = rule if rule is not None else Rule.objects.filter(pk=rule_id).first()
    if rule is None:
        return None
    if not rule.source_case and rule.comparison is None:
        return None  # nothing to compare with, and nothing stored to clear
    try:
        # Outside any transaction: the comparator is the slow part and takes no lock.
        scores = score_rule(rule)
    except ComparatorUnavailable as exc:
        log.warning("extraction scores of %s skipped: %s", rule_id, exc)
        return None
    with transaction.atomic():
        Rule.objects.filter(pk=rule_id).update(comparison=scores)
        if scores:
            # A verdict the comparator cannot call waits for a reviewer (lifecycle/review_items.py).
            review_items.open_extraction(rule, scores, now=timezone.now())
    return scores
