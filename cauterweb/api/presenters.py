"""Rules and journal events as the API returns them."""

from lifecycle.models import JournalEvent, Rule
from lifecycle.scopes import rule_as_dict
from lifecycle.services.rules import RuleNotFound


def rule_out(rule: Rule) -> dict:
    return {
        **rule_as_dict(rule),
        "tags": rule.tags,
        "pending_reason": rule.pending_reason or None,
        "pending_text": rule.pending_text,
        "replay_attempts": rule.replay_attempts,
        "last_validator": rule.last_validator or None,
        "verdict_reason": rule.verdict_reason,
        "author": rule.author,
        "author_kind": rule.author_kind,
        "source_case": rule.source_case or None,
        "source_notice": rule.source_notice or None,
        "provenance": rule.provenance,
        "baseline": {
            "rate": rule.baseline_rate,
            "sessions": rule.baseline_sessions,
            "hits": rule.baseline_hits,
        },
        "recorded_at": rule.recorded_at,
        "decided_at": rule.decided_at,
        "replaces": rule.replaces_id,
        "duplicate_of": rule.duplicate_of_id,
    }


def event_out(event: JournalEvent) -> dict:
    return {
        "id": event.id,
        "type": event.type,
        "at": event.at,
        "rule": event.rule_id,
        "round": event.round_id,
        "actor": event.actor,
        "evidence": event.evidence,
    }


def rule_or_404(rule_id: str) -> Rule:
    rule = Rule.objects.filter(pk=rule_id).first()
    if rule is None:
        raise RuleNotFound(rule_id)
    return rule
