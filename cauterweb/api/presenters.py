"""Rules and journal events as the API returns them."""

from lifecycle.models import JournalEvent, Rule
from lifecycle.scopes import rule_as_dict
from lifecycle.selectors.rules import extraction_report
from lifecycle.services.review import ACTIONS
from replay.trials import rule_trial


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


def rule_detail_out(rule: Rule, evidence: dict) -> dict:
    """A rule with its trial, the evidence that decided it, and its newest journal events
    (`evidence` as lifecycle's rule_evidence reads it)."""
    decided_by = evidence["decided_by"]
    return {
        "rule": rule_out(rule),
        "trial": vars(evidence["trial"]),
        "randomized_trial": rule_trial(rule.id),
        "evidence": decided_by.evidence if decided_by else None,
        "extraction": extraction_report(rule.comparison),
        "journal": [event_out(e) for e in evidence["events"]],
        "journal_truncated": evidence["older_events"],
    }


def review_item_out(item) -> dict:
    return {
        "id": item.pk,
        "kind": item.kind,
        "kind_text": item.get_kind_display(),
        "rule": item.rule_id,
        "other_rule": item.other_rule_id,
        "pack": item.pack_id,
        "scope": item.scope,
        "evidence": item.evidence,
        "opened_at": item.opened_at,
        "closed_at": item.closed_at,
        "closed_by": item.closed_by,
        "resolution": item.resolution,
        "actions": list(ACTIONS[item.kind]) if item.is_open else [],
    }


def staged_pack_out(pack) -> dict:
    return {
        "id": pack.pk,
        "name": pack.name,
        "version": pack.version,
        "checksum": pack.checksum,
        "rules": pack.rules,
        "new_rules": pack.new_rules,
        "status": pack.status,
        "staged_by": pack.staged_by,
        "staged_at": pack.staged_at,
    }
