"""Scope files and the rule tool (semantics §4, §5, §20.1).

A candidate must be in force to be measurable; a query may narrow the active rules, never the
candidates. Under the `baseline` trial design every read is served every candidate. Under
`randomized` a read with a session id assigns the session to each candidate's treatment or
control arm — once, recorded as an exposure — and is served the candidates of its treatment
arms only; a read without a session id cannot be assigned and is served active rules only.
"""

import re
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from . import atoms as atom_lib
from .assignment import TREATMENT, arm_for
from .matching import rule_matches
from .models import Exposure, Rule, RuleRead, RuleState

PROVISIONAL_HEADING = "Provisional rules (under evaluation)"
PER_SESSION = (
    "(candidates are served per session: fetch this file with your session id, or read the "
    "rule tool with it)"
)
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


def randomized() -> bool:
    return settings.CAUTERWEB_TRIAL_DESIGN == "randomized"


def exposures_assign(*, rule_ids: list[str], session_id: str, now: datetime) -> dict[str, str]:
    """rule id → the session's arm in that candidate's trial (semantics §20.1), assigned and
    recorded on the session's first read, read back ever after. Two first reads at once both
    insert the same deterministic arm; the unique constraint keeps one, and both read it."""
    if not rule_ids:
        return {}
    mine = Exposure.objects.filter(session_id=session_id, rule_id__in=rule_ids)
    arms = dict(mine.values_list("rule_id", "arm"))
    missing = [rule_id for rule_id in rule_ids if rule_id not in arms]
    if missing:
        key = settings.SECRET_KEY.encode()
        allocation = settings.CAUTERWEB_TRIAL_ALLOCATION
        Exposure.objects.bulk_create(
            [
                Exposure(
                    rule_id=rule_id,
                    session_id=session_id,
                    arm=arm_for(rule_id, session_id, allocation=allocation, key=key),
                    exposed_at=now,
                )
                for rule_id in missing
            ],
            ignore_conflicts=True,
        )
        arms.update(mine.filter(rule_id__in=missing).values_list("rule_id", "arm"))
    return arms


def served_candidates(candidates: list[Rule], *, session_id: str, now: datetime) -> list[Rule]:
    """The candidates a read serves: all of them under the baseline design; under randomized,
    those whose treatment arm the session is in (none for a read without a session id)."""
    if not randomized():
        return candidates
    if not (session_id and candidates):
        return []
    arms = exposures_assign(rule_ids=[c.id for c in candidates], session_id=session_id, now=now)
    return [c for c in candidates if arms[c.id] == TREATMENT]


def rule_tool_read(
    *,
    scope: str | None,
    session_id: str,
    query: str | None = None,
    now: datetime | None = None,
    via: str = "api",
) -> list[dict]:
    """The live rule tool (semantics §5, §20.1): returns the rules the session is served and
    records the read (and, under randomized, its exposures). `via` says which door the agent
    came through (the API, the MCP server)."""
    now = now or timezone.now()
    active, candidates = scope_rules(scope, query=query)
    with transaction.atomic():
        returned = active + served_candidates(candidates, session_id=session_id, now=now)
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


def render_scope(scope: str, *, session_id: str = "", now: datetime | None = None) -> str:
    """The scope file as agents read it (semantics §4, §20.2): active rules, then the
    candidates the reader is served under the provisional heading. Fetched with a session id,
    it is a read of that session, recorded like the rule tool's."""
    now = now or timezone.now()
    active, candidates = scope_rules(scope)
    with transaction.atomic():
        served = served_candidates(candidates, session_id=session_id, now=now)
        if session_id:
            record_reads(
                session_id=session_id, rule_ids=[r.id for r in active + served], via="file", now=now
            )
    out = [f"# Rules for scope: {scope}", ""]
    out += [_render_rule(r) for r in active] or ["(no active rules)"]
    out += ["", f"## {PROVISIONAL_HEADING}", ""]
    if randomized() and not session_id:
        out.append(PER_SESSION)
    else:
        out += [_render_rule(r) for r in served] or ["(none)"]
    return "\n".join(out) + "\n"


def known_scopes() -> list[str]:
    return list(Rule.objects.order_by("scope").values_list("scope", flat=True).distinct())
