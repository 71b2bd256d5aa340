"""The keys a rule's possible copies are looked up by (docs/matching.md, "Probable duplicates"),
so that the duplicate check reads a few rules whatever the scope holds.

Two rules can only be duplicates when their signatures are compatible
(`lifecycle.services.duplicates.signatures_compatible`): the failure-mode atoms of one are a
subset of the other's, or, for two rules without failure-mode atoms, the notices they fire on
overlap. Each stored rule is filed under keys that let a new rule A find every such B:

- `a:<atom>`, every failure-mode atom B holds: a B more specific than A (A ⊆ B) holds A's
  anchor, so it is found under `a:<anchor of A>`;
- `k:<anchor>`, B's own anchor — its most specific atom, `error:` before `action:` before any
  other key before `tool:`, then alphabetical: a B more general than A (B ⊆ A) has its anchor
  among A's atoms, so it is found under `k:<atom>` for one of A's atoms;
- `n:<notice>`, for a B without failure-mode atoms, every notice it fires on (its own notice
  atoms and breach:/stall:/regression: on its metric's family, as the registry stood when B
  was recorded);
- `w:<word>`, the first five letters of each word of its text (a few short and common ones
  left out), to rank a crowded block by the words it shares with A.

The block of A (the keys above) holds every compatible live rule of its scope, and usually a
few; `signatures_compatible` then decides, exactly as before. Pure but for `index_rules`, the
one writer of the table.
"""

import re
from collections.abc import Iterable

from . import atoms as atom_lib
from .limits import head
from .matching import notice_targets

# The kinds of atom from the most specific (an error names one failure) to the least.
_SPECIFICITY = {"error": 0, "action": 1, "tool": 3}
_OTHER_KIND = 2
WORD_LETTERS = 5
# Words of one rule filed (a 2,000-character trigger has hundreds).
WORDS_PER_RULE = 48
_WORD = re.compile(r"[a-z0-9]+")
# Words nearly every rule has: they would put every rule of a scope in every ranking.
_COMMON_WORDS = """
the and for not are but you your with when then than that this these those from into onto what
which while where there their them they its has have had was were been being does did doing
done any all each every some such only also just can could should would will may might must
use using used before after again first instead
"""
_COMMON = frozenset(_COMMON_WORDS.split())


def anchor(failure: frozenset[str]) -> str:
    """The most specific of a non-empty set of failure-mode atoms (one per set, always the same)."""
    return min(failure, key=lambda a: (_SPECIFICITY.get(atom_lib.atom_key(a), _OTHER_KIND), a))


def words(trigger: str, directive: str) -> list[str]:
    """The word keys of a rule's text (its head: `lifecycle.limits`), in order, each once."""
    found: dict[str, None] = {}
    for text in (head(trigger), head(directive)):
        for word in _WORD.findall(text.lower()):
            if len(word) < 3 or word in _COMMON:
                continue
            found[word[:WORD_LETTERS]] = None
            if len(found) >= WORDS_PER_RULE:
                return list(found)
    return list(found)


def signature_keys(signature: list[str], metric: str, family: frozenset[str]) -> set[str]:
    """The signature keys a stored rule is filed under."""
    failure = atom_lib.failure_mode_atoms(signature)
    if failure:
        return {f"a:{a}" for a in failure} | {f"k:{anchor(failure)}"}
    targets = notice_targets(rule_signature=signature, rule_metric=metric, family=family)
    return {f"n:{t}" for t in targets}


def lookup_keys(signature: list[str], metric: str, family: frozenset[str]) -> list[str]:
    """The keys under which every rule compatible with this signature is filed."""
    failure = atom_lib.failure_mode_atoms(signature)
    if failure:
        return sorted({f"a:{anchor(failure)}"} | {f"k:{a}" for a in failure})
    targets = notice_targets(rule_signature=signature, rule_metric=metric, family=family)
    return sorted(f"n:{t}" for t in targets)


def word_keys(trigger: str, directive: str) -> list[str]:
    return [f"w:{w}" for w in words(trigger, directive)]


def index_rules(rules: Iterable, *, registry=None, new: bool = False) -> None:
    """File these rules under their keys (idempotent: a key already filed is left alone).
    Called where a rule is recorded, in its transaction, with `new`: rules just inserted have
    no key filed yet, so their rows go in as plain tuples (`lifecycle.bulk.insert_rows`)."""
    from .bulk import insert_rows
    from .metrics import load_registry
    from .models import DuplicateKey

    rows = []
    for rule in rules:
        if registry is None and not atom_lib.failure_mode_atoms(rule.signature):
            registry = load_registry()  # only a rule without failure-mode atoms needs it
        family = registry.family(rule.metric) if registry is not None else frozenset()
        keys = signature_keys(rule.signature, rule.metric, family)
        keys.update(word_keys(rule.trigger, rule.directive))
        rows += [(rule.id, rule.scope, k) for k in sorted(keys)]
    if new:
        insert_rows(DuplicateKey, ("rule_id", "scope", "key"), rows)
        return
    DuplicateKey.objects.bulk_create(
        [DuplicateKey(rule_id=r, scope=s, key=k) for r, s, k in rows],
        ignore_conflicts=True,
        batch_size=2000,
    )
