"""Reads for the corpus and scope pages. A fixed number of queries whatever the
corpus size: filters are indexed lookups, the list is paginated in the database, and the rules
matching a trajectory are decided by the one semantics §11 match function over one read of the rules.
"""

import re
from collections import Counter
from dataclasses import dataclass, field

from django.db.models import Count, F, Max, Q, QuerySet

from ..atoms import atom_key
from ..matching import rule_matches
from ..metrics import Registry, load_registry
from ..models import Rule, RuleState, Trajectory, TrajectoryAtom, TrajectoryKind

# The corpus filter vocabulary (checked by the dashboard's CorpusFilterForm, which gives the
# parsed `atoms`). Every key is optional; an empty value means "any".
#   kind               failure | success | near_miss
#   corpus             a corpus label, exact (e.g. "failures/positive")
#   atom               one or more atoms (space-separated), all in the trajectory's signature or
#                      notices, e.g. "action:git.push error:non_fast_forward"
#   has_expected_rule  yes | no
#   q                  words searched in the id and the task (case-insensitive)
_YES, _NO = {"yes", "true", "1"}, {"no", "false", "0"}
MAX_QUERY_LENGTH = 200
MAX_ATOMS = 10
MATCHING_SHOWN = 50


def trajectory_list(*, filters: dict) -> QuerySet[Trajectory]:
    """Trajectories matching cleaned `filters`, ordered by id. The bulky JSON (steps, replay
    input) is left in the database: the list never shows it."""
    trajectories = Trajectory.objects.defer("steps", "replay_input", "outcome", "meta")
    if filters["kind"]:
        trajectories = trajectories.filter(kind=filters["kind"])
    if filters["corpus"]:
        trajectories = trajectories.filter(corpus=filters["corpus"])
    # One semi-join per atom on the (atom, trajectory) index, as matching does.
    for atom in filters["atoms"]:
        trajectories = trajectories.filter(
            pk__in=TrajectoryAtom.objects.filter(atom=atom).values("trajectory_id")
        )
    if filters["has_expected_rule"]:
        trajectories = trajectories.filter(
            expected_rule__isnull=filters["has_expected_rule"] in _NO
        )
    for word in filters["q"].split():
        trajectories = trajectories.filter(Q(id__icontains=word) | Q(task__icontains=word))
    return trajectories.order_by("id")


def corpus_filter_choices() -> dict:
    """What the filter form offers: the kinds and the corpus labels in use."""
    return {
        "kinds": TrajectoryKind.values,
        "corpora": list(
            Trajectory.objects.exclude(corpus="")
            .order_by("corpus")
            .values_list("corpus", flat=True)
            .distinct()
        ),
    }


@dataclass(frozen=True)
class MetricRow:
    name: str
    value: float
    tier: int | None


def metric_rows(metrics: dict, registry: Registry) -> list[MetricRow]:
    """A trajectory's metrics in registry order (tier, name); unregistered ones last."""
    rows = []
    for name, value in metrics.items():
        info = registry.resolve(name)
        rows.append(MetricRow(name, value, info.tier if info else None))
    return sorted(rows, key=lambda r: (r.tier is None, r.tier or 0, r.name))


@dataclass(frozen=True)
class RuleAtoms:
    """What matching needs of a rule: read as plain values, not model instances, because a
    common signature is shared by thousands of rules."""

    id: str
    state: str
    metric: str
    signature: list[str]


def rules_matching_atoms(
    trajectory_atoms: frozenset[str], rules: list[RuleAtoms], registry: Registry
) -> list[RuleAtoms]:
    """The rules that fire on a trajectory with these atoms, by the semantics §11 signature match;
    never by shared words."""
    families: dict[str, frozenset[str]] = {}
    matching = []
    for rule in rules:
        if rule.metric and rule.metric not in families:
            families[rule.metric] = registry.family(rule.metric)
        if rule_matches(
            rule_signature=rule.signature,
            rule_metric=rule.metric,
            trajectory_atoms=trajectory_atoms,
            family=families.get(rule.metric, frozenset()),
        ):
            matching.append(rule)
    return matching


def trajectory_detail(trajectory: Trajectory) -> dict:
    """Everything the trajectory page shows, in four queries whatever the number of rules:
    the registry, every rule's atoms, the rules listed, the rules extracted from this case."""
    registry = load_registry()
    trajectory_atoms = frozenset(trajectory.signature) | frozenset(trajectory.notices)
    everything = [
        RuleAtoms(*row)
        for row in Rule.objects.order_by("state", "id").values_list(
            "id", "state", "metric", "signature"
        )
    ]
    matching = rules_matching_atoms(trajectory_atoms, everything, registry)
    # Active rules first (state, then id); a common signature can match thousands of rules,
    # so the page lists the first ones and counts the rest.
    shown = [r.id for r in matching[:MATCHING_SHOWN]]
    listed = Rule.objects.only("id", "trigger", "state", "scope", "signature").in_bulk(shown)
    return {
        "trajectory": trajectory,
        "metrics": metric_rows(trajectory.metrics, registry),
        "matching_rules": [listed[rule_id] for rule_id in shown],
        "matching_count": len(matching),
        "matching_by_state": Counter(r.state for r in matching),
        "extracted_from_here": list(
            Rule.objects.filter(source_case=trajectory.id).only("id", "state").order_by("id")
        ),
    }


# --- Scopes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScopeCounts:
    scope: str
    active: int
    candidate: int
    retired: int

    @property
    def in_force(self) -> int:
        """Rules the rule tool returns for this scope (semantics §4: candidates always)."""
        return self.active + self.candidate


def scope_counts() -> list[ScopeCounts]:
    """Every scope with its rules counted by state, in one grouped query."""
    rows = (
        Rule.objects.values("scope")
        .annotate(
            active=Count("id", filter=Q(state=RuleState.ACTIVE)),
            candidate=Count("id", filter=Q(state=RuleState.CANDIDATE)),
            retired=Count("id", filter=Q(state=RuleState.RETIRED)),
        )
        .order_by("scope")
    )
    return [ScopeCounts(**row) for row in rows]


# --- Failure families (docs/traces.md, "Failure families") ---------------------------------------

FAMILY_KEYS = ("action", "error", "exception")
FAMILIES_SHOWN = 50
EXAMPLES = 3
_STEP_SOURCE = re.compile(r"^steps\[(\d+)\]")


def family_atoms(signature: list[str]) -> tuple[str, ...]:
    """A failing session's family: what it did and how it failed (its `action:`, `error:` and
    `exception:` atoms), whichever agent, tool or exit code wrote it; () without an error."""
    atoms = sorted({a for a in signature if atom_key(a) in FAMILY_KEYS})
    if not any(atom_key(a) in ("error", "exception") for a in atoms):
        return ()
    return tuple(atoms)


@dataclass
class Family:
    atoms: tuple[str, ...]
    sessions: int = 0
    failures: int = 0
    near_misses: int = 0
    last_seen: object = None
    examples: list[str] = field(default_factory=list)
    example_step: int | None = None

    @property
    def key(self) -> str:
        return " ".join(self.atoms)


def failure_families(*, limit: int = FAMILIES_SHOWN) -> tuple[list[Family], int]:
    """The failing sessions grouped into families, most sessions first, with the newest
    examples and the step where the newest one failed; and how many families there are in all.

    Three queries whatever the corpus holds: the failing sessions counted by signature and kind
    in the database (a corpus has few distinct signatures; they are merged into families here),
    the newest EXAMPLE_WINDOW failing sessions for the examples (a family seen only before them
    links its sessions through the atom filter), and the derivation of the newest examples."""
    failing = Trajectory.objects.filter(kind__in=(TrajectoryKind.FAILURE, TrajectoryKind.NEAR_MISS))
    groups = failing.values("signature", "kind").annotate(
        named=Count("session_id", distinct=True, filter=~Q(session_id="")),
        unnamed=Count("id", filter=Q(session_id="")),
        last=Max("started_at"),
    )
    families: dict[tuple[str, ...], Family] = {}
    for group in groups.order_by():
        atoms = family_atoms(group["signature"] or [])
        if not atoms:
            continue
        family = families.setdefault(atoms, Family(atoms))
        count = group["named"] + group["unnamed"]
        family.sessions += count
        if group["kind"] == TrajectoryKind.FAILURE:
            family.failures += count
        else:
            family.near_misses += count
        if group["last"] and (family.last_seen is None or group["last"] > family.last_seen):
            family.last_seen = group["last"]
    ranked = sorted(families.values(), key=lambda f: (-f.sessions, f.key))[:limit]
    _examples(failing, ranked)
    _example_steps(ranked)
    return ranked, len(families)


EXAMPLE_WINDOW = 5_000


def _examples(failing: QuerySet, families: list[Family]) -> None:
    wanted = {f.atoms: f for f in families}
    newest = failing.order_by(F("started_at").desc(nulls_last=True), "id").values_list(
        "id", "signature"
    )[:EXAMPLE_WINDOW]
    for tid, signature in newest:
        family = wanted.get(family_atoms(signature or []))
        if family is not None and len(family.examples) < EXAMPLES:
            family.examples.append(tid)


def _example_steps(families: list[Family]) -> None:
    """The step of each family's newest example where its signature was read (its derivation
    names it: `steps[3].error`), for the link to the steps."""
    newest = {f.examples[0]: f for f in families if f.examples}
    rows = Trajectory.objects.filter(pk__in=list(newest)).values_list(
        "id", "meta__signature_derivation"
    )
    for tid, derivation in rows:
        because = (derivation or {}).get("because") if isinstance(derivation, dict) else None
        for reason in because or []:
            found = _STEP_SOURCE.match(str(reason.get("source", "")))
            if found:
                newest[tid].example_step = int(found.group(1))
                break
