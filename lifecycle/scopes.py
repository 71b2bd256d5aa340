"""Scope files and the rule tool (semantics §4, §5).

A candidate must be in force to be measurable, so candidates are always rendered and always
returned; a query may narrow the active rules, never the candidates.
"""

import re
from collections.abc import Iterable
from datetime import datetime

from django.utils import timezone

from . import atoms as atom_lib
from .matching import rule_matches
from .models import Rule, RuleRead, RuleState

PROVISIONAL_HEADING = "Provisional rules (under evaluation)"
_WORD = re.compile(r"[a-z0-9][a-z0-9_.\-]*")


def rule_as_dict(rule: Rule) -> dict:
    """A rule as the rule tool and replay backends see it (semantics §14 `case.rule`)."""
    return {
        "id": rule.id,
        "trigger": rule.trigger,
        "directive": rule.directive,
        "scope": rule.scope,
        "metric": rule.metric or None,
        "signature": list(rule.signature),
        "state": rule.state,
    }


def _query_terms(query: str) -> tuple[frozenset[str], frozenset[str]]:
    atoms, words = set(), set()
    for token in query.lower().split():
        if ":" in token:
            try:
                atoms.add(atom_lib.parse_atom(token))
                continue
            except atom_lib.BadAtom:
                pass
        words.update(w for w in _WORD.findall(token) if len(w) > 2)
    return frozenset(atoms), frozenset(words)


def narrows_to(rule: Rule, query_atoms: frozenset[str], query_words: frozenset[str]) -> bool:
    """Does an active rule stay in a narrowed read? Atoms in the query match by signature,
    through the one match function of semantics §11; plain words match the rule's own words."""
    if query_atoms and rule_matches(
        rule_signature=list(rule.signature),
        rule_metric=rule.metric,
        trajectory_atoms=query_atoms,
        family=frozenset(),
    ):
        return True
    if query_words:
        text = " ".join([rule.trigger, rule.directive, *rule.signature, *rule.tags]).lower()
        if any(word in text for word in query_words):
            return True
    return False


def narrow_active(active: list[Rule], query: str | None) -> list[Rule]:
    """The active rules a read with `query` returns (semantics §4): a query may narrow the
    active rules, never the candidates. The live tool and the replay context both ask this."""
    if not (query and query.strip()):
        return active
    query_atoms, query_words = _query_terms(query)
    if not (query_atoms or query_words):
        return active
    return [r for r in active if narrows_to(r, query_atoms, query_words)]


def scope_rules(
    scope: str | None,
    *,
    query: str | None = None,
    visible_candidates: Iterable[str] | None = None,
) -> tuple[list[Rule], list[Rule]]:
    """(active rules, candidates) of a scope (all scopes when None).

    `visible_candidates` restricts which candidates are discoverable — the replay context shows
    only the candidate under test (semantics §7.3); None shows them all (the live rule tool)."""
    rules = Rule.objects.filter(state__in=[RuleState.ACTIVE, RuleState.CANDIDATE])
    if scope:
        rules = rules.filter(scope=scope)
    if visible_candidates is not None:
        from django.db.models import Q

        rules = rules.filter(Q(state=RuleState.ACTIVE) | Q(pk__in=list(visible_candidates)))
    rules = rules.order_by("recorded_at", "id")
    active, candidates = [], []
    for rule in rules:
        (active if rule.state == RuleState.ACTIVE else candidates).append(rule)
    return narrow_active(active, query), candidates


def record_reads(
    *, session_id: str, rule_ids: Iterable[str], via: str, now: datetime | None = None
) -> None:
    now = now or timezone.now()
    RuleRead.objects.bulk_create(
        [RuleRead(session_id=session_id, rule_id=rid, at=now, via=via) for rid in rule_ids],
        batch_size=1000,
    )


def rule_tool_read(
    *,
    scope: str | None,
    session_id: str,
    query: str | None = None,
    now: datetime | None = None,
    via: str = "api",
) -> list[dict]:
    """The live rule tool (semantics §5): returns the rules and records the read for the session.
    `via` says which door the agent came through (the API, the MCP server)."""
    active, candidates = scope_rules(scope, query=query)
    returned = active + candidates
    if session_id:
        record_reads(session_id=session_id, rule_ids=[r.id for r in returned], via=via, now=now)
    return [rule_as_dict(r) for r in returned]


def _render_rule(rule: Rule) -> str:
    lines = [f"- [{rule.id}] When {_strip_when(rule.trigger)} → {rule.directive}"]
    details = []
    if rule.metric:
        details.append(f"metric: {rule.metric}")
    if rule.signature:
        details.append("signature: " + ", ".join(rule.signature))
    if details:
        lines.append("  (" + "; ".join(details) + ")")
    return "\n".join(lines)


def _strip_when(trigger: str) -> str:
    return re.sub(r"^\s*when\s+", "", trigger, flags=re.IGNORECASE)


def render_scope(scope: str) -> str:
    """The scope file as agents read it (semantics §4): active rules, then the candidates under the
    provisional heading."""
    active, candidates = scope_rules(scope)
    out = [f"# Rules for scope: {scope}", ""]
    out += [_render_rule(r) for r in active] or ["(no active rules)"]
    out += ["", f"## {PROVISIONAL_HEADING}", ""]
    out += [_render_rule(r) for r in candidates] or ["(none)"]
    return "\n".join(out) + "\n"


def known_scopes() -> list[str]:
    return list(Rule.objects.order_by("scope").values_list("scope", flat=True).distinct())
