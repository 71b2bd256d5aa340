"""What a candidate is replayed against (semantics §7.1–§7.3): its failing cases, the protected
wins of its scope, and the capability-only context each replay sees.

Failing cases are selected for a chunk of the queue at once, shortly before the round reaches
its candidates (`replay.rounds`), so a trajectory imported during an earlier replay is seen by
the next chunk. The selection starts from the rarest of the rule's
failure-mode atoms (the atom counts are read once per round), so a common atom such as
`tool:git` costs a few index probes instead of a walk of its whole posting list.
"""

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Count, Exists

from lifecycle import atoms as atom_lib
from lifecycle.journal import EventType
from lifecycle.matching import NEWEST_FIRST, matching_trajectories
from lifecycle.metrics import Registry
from lifecycle.models import Rule, RuleState, Trajectory, TrajectoryAtom, TrajectoryKind
from lifecycle.scopes import narrow_active, rule_as_dict

from . import engine
from .backends.python import ReplayCase

TREATMENT = "treatment"
CONTROL = "control"
_CHUNK = 5000


def case_ref(t: Trajectory) -> engine.CaseRef:
    scope = t.replay_input.get("scope") if isinstance(t.replay_input, dict) else None
    return engine.CaseRef(id=t.id, started_at=t.started_at, scope=scope)


def atom_counts(rules: Iterable[Rule]) -> dict[str, int]:
    """How many trajectories carry each failure-mode atom of `rules`: one grouped read of
    the (atom, trajectory) index per round, chunked."""
    wanted = sorted({a for r in rules for a in atom_lib.failure_mode_atoms(r.signature)})
    counts = dict.fromkeys(wanted, 0)
    for start in range(0, len(wanted), _CHUNK):
        rows = (
            TrajectoryAtom.objects.filter(atom__in=wanted[start : start + _CHUNK])
            .values("atom")
            .annotate(n=Count("id"))
            .values_list("atom", "n")
        )
        counts.update(rows)
    return counts


def failing_cases(
    rules: Iterable[Rule], *, limit: int, counts: dict[str, int], registry: Registry
) -> dict[str, list[Trajectory]]:
    """Each candidate's matching replayable failing cases, newest first (semantics §7.1, §11),
    by rule id; a rule that is no longer a candidate is left out: the same statement asks
    both, so the round learns that a reviewer retired it before any replay starts (semantics
    §9.5). On PostgreSQL the rules with failure-mode atoms share one statement, whatever
    their number: the round selects for a chunk of its queue at once."""
    rules = list(rules)
    by_atoms = {r.id: atom_lib.failure_mode_atoms(r.signature) for r in rules}
    wanted = [
        (r.id, sorted(by_atoms[r.id], key=lambda a: (counts.get(a, 0), a)))
        for r in rules
        if by_atoms[r.id]
    ]
    rows: dict[str, list[Trajectory]] = {}
    if connection.vendor == "postgresql":
        rows.update(_newest_with_atoms_many(wanted, limit))
    else:
        for rule_id, atoms in wanted:
            if found := _newest_with_atoms(atoms, limit, rule_id=rule_id):
                rows[rule_id] = found
    for rule in (r for r in rules if not by_atoms[r.id]):
        query = matching_trajectories(
            rule, kinds=[TrajectoryKind.FAILURE], replayable=True, registry=registry
        ).filter(Exists(Rule.objects.filter(pk=rule.id, state=RuleState.CANDIDATE)))
        if found := list(query.order_by(*NEWEST_FIRST)[:limit]):
            rows[rule.id] = found
    return {rule_id: _newest(found, limit) for rule_id, found in rows.items()}


def _newest(rows: list[Trajectory], limit: int) -> list[Trajectory]:
    by_id = {t.id: t for t in rows}
    return [by_id[c.id] for c in engine.select_failing_cases(map(case_ref, rows), limit=limit)]


def _newest_with_atoms_many(
    wanted: list[tuple[str, list[str]]], limit: int
) -> dict[str, list[Trajectory]]:
    """PostgreSQL: for each (rule id, atoms rarest first), the newest replayable failures
    carrying every atom, in one statement. Per rule its rarest atom's posting list is read,
    each of its trajectories is fetched by primary key and probes the (atom, trajectory) index
    for the other atoms, and the rule's state is read by primary key — index lookups whatever
    the planner's statistics say: without them (tables loaded a moment ago) PostgreSQL walked
    every replayable failure and every carrier of a common atom per candidate, a cost that
    grew with the corpus."""
    if not wanted:
        return {}
    traj, atom, rule = (m._meta.db_table for m in (Trajectory, TrajectoryAtom, Rule))
    # OFFSET 0 keeps the planner from folding the primary-key lookup into a scan; a scalar
    # subquery stays a per-row index probe (an EXISTS may become a join). The atoms are
    # distinct and (atom, trajectory) is unique, so the count is the number found.
    sql = (
        f"SELECT c.pos AS cw_pos, t.* FROM jsonb_to_recordset(%s::jsonb) "
        "AS c(pos int, rule_id text, rare text, others text[]) "
        "CROSS JOIN LATERAL ("
        f" SELECT t.* FROM {atom} a"
        f" CROSS JOIN LATERAL (SELECT * FROM {traj} WHERE id = a.trajectory_id OFFSET 0) t"
        " WHERE a.atom = c.rare AND t.kind = %s AND t.replayable"
        " AND (cardinality(c.others) = 0"
        f" OR (SELECT count(*) FROM {atom} o WHERE o.atom = ANY(c.others)"
        " AND o.trajectory_id = t.id) = cardinality(c.others))"
        " ORDER BY t.started_at DESC NULLS LAST, t.id DESC LIMIT %s) t "
        f"WHERE (SELECT r.state FROM {rule} r WHERE r.id = c.rule_id) = %s"
    )
    chosen = [
        {"pos": pos, "rule_id": rule_id, "rare": atoms[0], "others": atoms[1:]}
        for pos, (rule_id, atoms) in enumerate(wanted)
    ]
    params = [json.dumps(chosen), TrajectoryKind.FAILURE, limit, RuleState.CANDIDATE]
    rows: dict[str, list[Trajectory]] = {}
    for t in Trajectory.objects.raw(sql, params):
        rows.setdefault(wanted[t.cw_pos][0], []).append(t)
    return rows


def _newest_with_atoms(atoms: list[str], limit: int, *, rule_id: str) -> list[Trajectory]:
    """SQLite, one rule: the newest replayable failures carrying every atom, rarest atom
    first, and none once the rule is no longer a candidate. In process, so a statement per
    rule costs no round trip. CROSS JOIN is SQLite's way to fix the join order: with a plain
    JOIN it walked every replayable failure newest first, probing the rare atom for each (a
    selection grew with the corpus: 0.11 ms at 300 failures, 0.49 ms at 2,400); from the
    rare atom's posting list it reads a few rows whatever the corpus."""
    traj, atom, rule = (m._meta.db_table for m in (Trajectory, TrajectoryAtom, Rule))
    probes = " ".join(
        f"AND (SELECT 1 FROM {atom} o WHERE o.atom = %s AND o.trajectory_id = t.id) IS NOT NULL"
        for _ in atoms[1:]
    )
    sql = (
        f"WITH rare AS (SELECT trajectory_id FROM {atom} WHERE atom = %s) "
        f"SELECT t.* FROM rare CROSS JOIN {traj} t ON t.id = rare.trajectory_id "
        f"WHERE t.kind = %s AND t.replayable {probes} "
        f"AND (SELECT r.state FROM {rule} r WHERE r.id = %s) = %s "
        "ORDER BY t.started_at DESC NULLS LAST, t.id DESC LIMIT %s"
    )
    params = [atoms[0], TrajectoryKind.FAILURE, *atoms[1:], rule_id, RuleState.CANDIDATE, limit]
    return list(Trajectory.objects.raw(sql, params))


def protected_wins(scope: str, *, limit: int, cache: dict) -> list[Trajectory]:
    """Up to `limit` replayable successes, newest first, the scope's own first (semantics
    §7.2): the same for every candidate of a scope, so read once per scope and round."""
    if scope not in cache:
        protected_wins_read([scope], limit=limit, cache=cache)
    return cache[scope]


_NEWEST_OVERALL = object()  # the cache's key for the newest wins of any scope


def protected_wins_read(scopes: Iterable[str], *, limit: int, cache: dict) -> None:
    """Read the protected wins of every scope not in `cache` yet: each scope's own newest in
    one statement for them all (on PostgreSQL), and once per round the newest `2 × limit` of
    any scope, which hold the newest others of every scope (a scope's own are at most
    `limit` of them)."""
    scopes = sorted({s for s in scopes if s not in cache})
    if not scopes:
        return
    if not limit:
        cache.update(dict.fromkeys(scopes, []))
        return
    wins = Trajectory.objects.filter(kind=TrajectoryKind.SUCCESS, replayable=True)
    if _NEWEST_OVERALL not in cache:
        cache[_NEWEST_OVERALL] = list(wins.order_by(*NEWEST_FIRST)[: 2 * limit])
    own = _own_wins(scopes, limit, wins)
    for scope in scopes:
        mine = own.get(scope, [])
        ids = {t.id for t in mine}
        rows = mine + [t for t in cache[_NEWEST_OVERALL] if t.id not in ids][: limit - len(mine)]
        by_id = {t.id: t for t in rows}
        refs = engine.select_protected_wins(map(case_ref, rows), scope=scope, limit=limit)
        cache[scope] = [by_id[c.id] for c in refs]


def _own_wins(scopes: list[str], limit: int, wins) -> dict[str, list[Trajectory]]:
    """Each scope's own newest `limit` wins, by scope."""
    if connection.vendor != "postgresql":  # in process: a statement per scope is no round trip
        return {
            scope: list(wins.filter(replay_input__scope=scope).order_by(*NEWEST_FIRST)[:limit])
            for scope in scopes
        }
    traj = Trajectory._meta.db_table
    sql = (
        "SELECT s.scope AS cw_scope, w.* FROM unnest(%s::text[]) AS s(scope) "
        f"CROSS JOIN LATERAL (SELECT * FROM {traj} t WHERE t.kind = %s AND t.replayable "
        "AND t.replay_input -> 'scope' = to_jsonb(s.scope) "
        "ORDER BY t.started_at DESC NULLS LAST, t.id DESC LIMIT %s) w"
    )
    own: dict[str, list[Trajectory]] = {}
    for t in Trajectory.objects.raw(sql, [scopes, TrajectoryKind.SUCCESS, limit]):
        own.setdefault(t.cw_scope, []).append(t)
    return own


def trajectory_dict(t: Trajectory) -> dict:
    """The trajectory as imported (semantics §14 `case.trajectory`)."""
    return {
        "id": t.id,
        "kind": t.kind,
        "task": t.task,
        "steps": t.steps,
        "outcome": t.outcome,
        "metrics": t.metrics,
        "signature": t.signature,
        "notices": t.notices,
        "session_id": t.session_id,
        "started_at": t.started_at.isoformat() if t.started_at else None,
        "corpus": t.corpus,
        "replayable": t.replayable,
        "replay_input": t.replay_input,
        "meta": t.meta,
    }


def replay_input(t: Trajectory):
    return t.replay_input if t.replay_input is not None else t.task


def replay_case(t: Trajectory, kind: str, rule: Rule) -> ReplayCase:
    return ReplayCase(
        id=t.id,
        kind=kind,
        trajectory=trajectory_dict(t),
        replay_input=replay_input(t),
        rule=rule_as_dict(rule),
    )


@dataclass(frozen=True)
class Actives:
    """The active rules every replay of a round shows as its baseline (semantics §7.3), as they
    were when the round started: a rule promoted during the round joins the baseline of the
    next round, so a replay sees the same rules whenever it runs and verdicts do not depend
    on how many replays ran at once (semantics §18)."""

    ordered: tuple[Rule, ...]
    by_scope: dict
    # What reads returned, by (scope, query): the same for every replay of the round that reads
    # alike (a scope's protected wins are replayed for each of its candidates).
    reads: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, rules: Iterable[Rule]) -> "Actives":
        ordered = tuple(sorted(rules, key=lambda r: (r.recorded_at, r.id)))
        by_scope: dict[str, list[Rule]] = {}
        for rule in ordered:
            by_scope.setdefault(rule.scope, []).append(rule)
        return cls(ordered=ordered, by_scope=by_scope)

    def version(self, scope: str) -> str:
        """The version of `scope`'s active rule set (docs/semantics.md#s21-1): how many rules
        and a digest of the scope and their sorted ids. Any promotion or retirement in the
        scope changes it; nothing else does, so it needs no write path of its own."""
        ids = sorted(r.id for r in self.by_scope.get(scope, ()))
        digest = hashlib.sha256(json.dumps([scope, ids]).encode()).hexdigest()[:12]
        return f"{len(ids)}-{digest}"

    def read(self, scope: str | None, query: str | None) -> list[dict]:
        """The active rules a read returns (narrowed by its query, semantics §4), as the rule
        tool shows them: worked out once per round and (scope, query), handed out as copies
        (a harness may change what it was given)."""
        key = (scope, query)
        if key not in self.reads:
            active = list(self.ordered) if scope is None else self.by_scope.get(scope, [])
            self.reads[key] = [rule_as_dict(r) for r in narrow_active(active, query)]
        return [{**r, "signature": list(r["signature"])} for r in self.reads[key]]

    def ids(self, scope: str) -> list[str]:
        return sorted(r.id for r in self.by_scope.get(scope, ()))

    @classmethod
    def at_round_start(cls, round_id: int | None = None) -> "Actives":
        """Read from the database; a replay task in another process leaves out the rules its
        round promoted since it started."""
        rules = Rule.objects.filter(state=RuleState.ACTIVE)
        if round_id is not None:
            rules = rules.exclude(
                pk__in=Rule.objects.filter(
                    events__type=EventType.RULE_PROMOTED, events__round_id=round_id
                ).values("pk")
            )
        return cls.of(rules)


def rule_tool(
    actives: Actives, candidate: Rule, *, arm: str
) -> Callable[[str | None, str | None], list[dict]]:
    """The replay's rule tool (semantics §7.3, §17.1): the active rules as the baseline,
    narrowed by the query exactly as the live tool narrows them, and the candidate under test
    in the treatment arm only; no other candidate, ever. Built from rules in memory, so a
    backend thread never needs the database."""
    shown = [candidate] if arm == TREATMENT else []

    def rules(scope: str | None, query: str | None) -> list[dict]:
        mine = [c for c in shown if scope is None or c.scope == scope]
        return actives.read(scope, query) + [rule_as_dict(r) for r in mine]

    return rules
