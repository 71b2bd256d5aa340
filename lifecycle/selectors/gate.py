"""The corpus gate (semantics §11): the quick offline check of what a rule would fire on.

Over the stored corpus, for one rule and one matcher:

- `failures_prevented`: failure trajectories the rule fires on;
- `successes_broken`: non-failure trajectories it fires on — successes *and* near misses,
  since a near miss ended well and a rule firing there interferes with a session that worked;
- `near_misses`: the near-miss trajectories it fires on (a subset of the broken ones);
- `precision = prevented / (prevented + broken)` (None when the rule fires on nothing);
- `recall = prevented failures of the rule's family / failures in the family` (None when the
  family is empty or undefined). The family is, for a rule with a source case that carries
  `error:` atoms, every failure sharing one of them; otherwise, for a rule with a declared
  metric, every failure with a breach/stall/regression notice on the metric's family;
  otherwise undefined. Only failures of the family count toward recall, so a matcher that
  also fires on unrelated failures cannot push recall above 1;
- verdict: `FAIL` when precision < 0.5; `PASS` when precision ≥ 0.8 and recall ≥ 0.5;
  otherwise `INCONCLUSIVE` (also when the rule fires on nothing or has no family).

Two matchers, always shown side by side (`gate_both`):

- `signature` is `lifecycle.matching` — atoms as atoms, the product's matcher;
- `lexical` is the legacy token-overlap matcher, kept to show its defect: it tokenises the
  rule's trigger and a trajectory's prose (its task plus every text field of its steps —
  tool, input, output, error — but not the step atoms) into lower-case runs of letters and
  digits ("non-fast-forward" → non, fast, forward), drops the stop words in `STOP_WORDS`, and
  fires when at least `LEXICAL_THRESHOLD` (half) of the trigger's remaining words occur in the
  prose. On F-001 it fires on a `git pull` that printed "Fast-forward" (semantics §11).
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .. import atoms as atom_lib
from ..matching import matching_trajectories, rule_family
from ..metrics import Registry, load_registry
from ..models import Rule, Trajectory, TrajectoryAtom, TrajectoryKind

MATCHERS = ("lexical", "signature")
LEXICAL_THRESHOLD = 0.5
_STOP_WORDS = (
    "a an and are as at be by do does for from has have if in into is it its of on or the "
    "then this that to was when while with"
)
STOP_WORDS = frozenset(_STOP_WORDS.split())
PASS_PRECISION = 0.8
PASS_RECALL = 0.5
FAIL_PRECISION = 0.5
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> frozenset[str]:
    """The lexical matcher's tokens: lower-case letter/digit runs, stop words dropped."""
    return frozenset(_WORD.findall(text.lower())) - STOP_WORDS


def _texts(value) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key != "atoms":
                yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def prose_words(task: str, steps) -> frozenset[str]:
    """A trajectory's prose for the lexical matcher: its task and the text of its steps."""
    return words(" ".join([task, *_texts(steps)]))


def lexical_fires(trigger_words: frozenset[str], trajectory_words: frozenset[str]) -> bool:
    """The legacy matcher: enough of the trigger's words appear somewhere in the prose."""
    if not trigger_words:
        return False
    return len(trigger_words & trajectory_words) / len(trigger_words) >= LEXICAL_THRESHOLD


def verdict(precision: float | None, recall: float | None) -> str:
    if precision is not None and precision < FAIL_PRECISION:
        return "FAIL"
    passes = precision is not None and precision >= PASS_PRECISION
    if passes and recall is not None and recall >= PASS_RECALL:
        return "PASS"
    return "INCONCLUSIVE"


def gate_figures(
    *, matcher: str, fired: dict[str, str], family: frozenset[str], family_basis: str
) -> dict:
    """The gate's numbers from what a matcher fired on (id → kind) and the rule's family of
    failure ids. Pure."""
    prevented = sorted(t for t, kind in fired.items() if kind == TrajectoryKind.FAILURE)
    broken = sorted(t for t, kind in fired.items() if kind != TrajectoryKind.FAILURE)
    near = sorted(t for t, kind in fired.items() if kind == TrajectoryKind.NEAR_MISS)
    precision = len(prevented) / (len(prevented) + len(broken)) if fired else None
    recall = len(family.intersection(prevented)) / len(family) if family else None
    return {
        "matcher": matcher,
        "failures_prevented": len(prevented),
        "successes_broken": len(broken),
        "near_misses": len(near),
        "precision": precision,
        "recall": recall,
        "verdict": verdict(precision, recall),
        "fired": {"prevented": prevented, "broken": broken, "near_misses": near},
        "family_size": len(family),
        "family_basis": family_basis,
    }


@dataclass
class LexicalCorpus:
    """The corpus prose, read once and reused across rules (the lexical matcher must scan)."""

    rows: list[tuple[str, str, frozenset[str]]]

    @classmethod
    def load(cls) -> "LexicalCorpus":
        return cls(
            [
                (tid, kind, prose_words(task, steps))
                for tid, kind, task, steps in Trajectory.objects.order_by("id").values_list(
                    "id", "kind", "task", "steps"
                )
            ]
        )

    def fired(self, rule: Rule) -> dict[str, str]:
        trigger = words(rule.trigger)
        return {tid: kind for tid, kind, prose in self.rows if lexical_fires(trigger, prose)}


def rule_failure_family(rule: Rule, registry: Registry | None = None) -> tuple[frozenset[str], str]:
    """(ids of the failures in the rule's family, how the family was chosen) — semantics §11."""
    failures = Trajectory.objects.filter(kind=TrajectoryKind.FAILURE)
    if rule.source_case:
        source = Trajectory.objects.filter(pk=rule.source_case).values_list("signature", flat=True)
        errors = sorted(a for a in (source.first() or []) if atom_lib.atom_key(a) == "error")
        if errors:
            ids = failures.filter(
                pk__in=TrajectoryAtom.objects.filter(atom__in=errors).values("trajectory_id")
            ).values_list("id", flat=True)
            return frozenset(ids), f"failures sharing {', '.join(errors)} of {rule.source_case}"
    family = rule_family(rule, registry)
    if family:
        notices = sorted(atom_lib.family_notice_atoms(family))
        ids = failures.filter(
            pk__in=TrajectoryAtom.objects.filter(atom__in=notices).values("trajectory_id")
        ).values_list("id", flat=True)
        return frozenset(ids), f"failures with a notice on {rule.metric}"
    return frozenset(), "no family: the rule has neither a source case with an error nor a metric"


def gate_report(
    rule: Rule,
    *,
    matcher: str,
    corpus: LexicalCorpus | None = None,
    registry: Registry | None = None,
) -> dict:
    """The gate for one rule under one matcher (`lexical` or `signature`)."""
    if matcher not in MATCHERS:
        raise ValueError(f"unknown matcher {matcher!r} (choose from {', '.join(MATCHERS)})")
    registry = registry if registry is not None else load_registry()
    if matcher == "signature":
        fired = dict(matching_trajectories(rule, registry=registry).values_list("id", "kind"))
    else:
        fired = (corpus or LexicalCorpus.load()).fired(rule)
    family, basis = rule_failure_family(rule, registry)
    return gate_figures(matcher=matcher, fired=fired, family=family, family_basis=basis)


def gate_both(
    rule: Rule, *, corpus: LexicalCorpus | None = None, registry: Registry | None = None
) -> dict:
    """Both matchers side by side, as the gate is always shown (semantics §11)."""
    registry = registry if registry is not None else load_registry()
    corpus = corpus or LexicalCorpus.load()
    return {
        matcher: gate_report(rule, matcher=matcher, corpus=corpus, registry=registry)
        for matcher in MATCHERS
    }
