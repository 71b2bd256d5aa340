"""Wording kept, meaning changed: a swapped key term, or the option the other rule rejects
(semantics §12). Both ask the embedding model whether the changed words mean the same."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from .directives import PREFERENCE, PREFERENCE_CUE, verb_classes
from .lexicon import SYNONYM_OF, opposites_of
from .text import (
    CONNECTIVES,
    EMPTY,
    PRONOUNS,
    CaseBlind,
    change_blocks,
    content,
    only,
    same_stem,
    stem,
    tokens,
)
from .thesaurus import lemmas, opposite_lemmas
from .triggers import atoms_of

if TYPE_CHECKING:
    from .semantic import StaticEmbedder

# Share of content words kept for a change to count as a swap rather than a rewording,
# and the cosine above which two swapped terms are taken as synonyms.
_SWAP_MIN_KEPT = 0.4
_SWAP_SYNONYM_COS = 0.8
# How much closer to the rejected option than to the preferred one a directive must read
# to be taken as doing what the other rule rules out.
_REJECTED_MARGIN = 0.05


# Words that only mark what a rule refuses ("but" of "but not").
_REFUSALS = frozenset({"instead", "rather", "not", "never", "no", "avoid", "without", "but"})


def key_term_swapped(expected: str, extracted: str, embedder: StaticEmbedder) -> str | None:
    """A text kept nearly word for word with one key term swapped for an unrelated one.

    A rewording changes most of the wording; an extraction that keeps the expected
    sentence and swaps its key term ("connection refused" for "connection timed out",
    "primary" for "replica", "upload" for "download") states another rule. A swap is
    excused when the two terms are near-synonyms for the model, share a stem, or read
    as the same atoms.
    """
    if not expected.strip() or not extracted.strip():
        return None
    kept = len(content(expected) & content(extracted))
    total = len(content(expected) | content(extracted))
    if total == 0 or kept / total < _SWAP_MIN_KEPT:
        return None
    for gone, came in change_blocks(expected, extracted):
        old, new = content(gone) - CONNECTIVES, content(came) - CONNECTIVES
        # A compound term is judged by the part that changed: "--ask-become-pass" against
        # "--ask-vault-pass" is "become" against "vault", not two flags that share "ask".
        old, new = _uninflected(old - new, new - old)
        if old | new <= _REFUSALS:
            # "rather than X" for ", not X": one refusal for another.
            continue
        # The cheap tests first: the atoms of both runs are read only when they decide.
        if not old or not new or related(old, new) or _compound(gone, came):
            continue
        if _same_atoms(gone, came, frozenset(old)):
            continue
        vectors = embedder.encode([only(gone, old), only(came, new)])
        if float(vectors[0] @ vectors[1]) < _SWAP_SYNONYM_COS:
            return f"{gone!r} replaced by {came!r}"
    return None


@lru_cache(maxsize=8192)
def _same_atoms(gone: str, came: str, old: frozenset[str]) -> bool:
    # The same atoms on both sides excuse the change ("with non-fast-forward" against
    # "because it is not a fast-forward") unless the words both keep give those atoms
    # on their own ("pass" in "--ask-become-pass" and "--ask-vault-pass").
    atoms = atoms_of(gone)
    return (
        bool(atoms)
        and atoms == atoms_of(came)
        and atoms != atoms_of(only(gone, content(gone) - old))
    )


def related(old: set[str] | frozenset[str], new: set[str] | frozenset[str]) -> bool:
    """Same term in other words: a shared stem ("holding"/"holds", "config"/"configuration"),
    the same act ("verify"/"confirm"), a plain synonym ("required"/"needed"), or a stand-in
    pronoun ("packages"/"anything")."""
    return _related(frozenset(old), frozenset(new))


def _compound(gone: str, came: str) -> bool:
    # One compound spelt apart, hyphenated or together ("pre-commit" / "precommit",
    # "set up" / "setup"): the tokens differ, the word does not.
    return _joined(gone) == _joined(came)


def _joined(words: str) -> str:
    return words.replace(" ", "").replace("-", "")


def _uninflected(old: frozenset[str], new: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """The words of a change left once those that are one word inflected are paired off:
    "ifIndex values change" against "community string changes" is "ifindex values"
    against "community string", which an inflection kept must not excuse."""
    if len(old) == 1 and len(new) == 1:
        # Most changes are one word for one word.
        (a,), (b,) = old, new
        return (EMPTY, EMPTY) if _inflected(a, b) else (old, new)
    # The words of `new` by lemma, so each word of `old` is looked up, not tried against
    # every word of `new` (the same pairs as `_inflected`).
    by_lemma: dict[str, set[str]] = {}
    for b in new:
        for lemma in lemmas(b):
            by_lemma.setdefault(lemma, set()).add(b)
    gone: set[str] = set()
    came: set[str] = set()
    for a in old:
        found = {b for lemma in lemmas(a) for b in by_lemma.get(lemma, ())}
        found.update(w for w in (a + "s", a[:-1] if a.endswith("s") else "") if w in new)
        if found:
            gone.add(a)
            came |= found
    if not gone:
        return old, new
    return old - gone, new - came


def _inflected(a: str, b: str) -> bool:
    # One word in another inflection ("file" / "files", "ran" / "run"), which the crude
    # stems miss where the stem ends in "e".
    return bool(lemmas(a) & lemmas(b)) or a + "s" == b or b + "s" == a


@lru_cache(maxsize=8192)
def _related(old: frozenset[str], new: frozenset[str]) -> bool:
    if any(opposites_of(a) & new for a in old):
        return False
    # Every pair of words tested at once, on each side's lemmas together (a lemma meets
    # one of the other side's words' exactly when it meets their union): a word WordNet
    # calls the opposite of one on the other side, or one word in another inflection
    # ("file" / "files", "ran" / "run", which the crude stems miss where the stem ends
    # in "e").
    new_lemmas = frozenset().union(*map(lemmas, new))
    if new_lemmas and any(opposite_lemmas(a) & new_lemmas for a in old):
        return False
    if not new_lemmas.isdisjoint(frozenset().union(*map(lemmas, old))):
        return True
    if any(a + "s" in new for a in old) or any(b + "s" in old for b in new):
        return True
    if old <= PRONOUNS or new <= PRONOUNS:
        return True
    if _synonym_groups(old) & _synonym_groups(new):
        return True
    if _initials(old, new) or _initials(new, old):
        return True
    acts = verb_classes(" ".join(sorted(old)))
    if acts and acts & verb_classes(" ".join(sorted(new))):
        return True
    stems_old, stems_new = {stem(w) for w in old}, {stem(w) for w in new}
    return any(same_stem(a, b) for a in stems_old for b in stems_new)


def _synonym_groups(words: frozenset[str]) -> set[int]:
    # The lexicon's groups of plain synonyms, a word found in any inflection ("deleted"
    # in "delete deletes", "removing" in "remove removes").
    found: set[int] = set()
    for w in words:
        found |= SYNONYM_OF.get(w, _NO_GROUP)
        for lemma in lemmas(w):
            found |= SYNONYM_OF.get(lemma, _NO_GROUP)
    return found


_NO_GROUP: frozenset[int] = frozenset()


def _initials(short: frozenset[str], long: frozenset[str]) -> bool:
    """One word that spells the initials of the other side's content words: "DIN" for
    "donation identification number", "RCA" for "root cause analysis" (order aside: the
    words come as a set)."""
    if len(short) != 1:
        return False
    (word,) = short
    if not 2 <= len(word) <= 6 or not word.isalpha():
        return False
    # A possessive's "s" is no word.
    words = [w for w in long if len(w) > 1]
    return len(words) == len(word) and sorted(word) == sorted(w[0] for w in words)


_AVOID_CUE = CaseBlind(
    r"\b(?:instead|rather|not|no|never|don'?t|do not|avoid|without|skip|stop|replac\w*|"
    r"get rid of|swap out)\b|n't\b"
)


def rejected_alternative(expected: str, extracted: str, embedder: StaticEmbedder) -> str | None:
    """ "chmod +x instead of running it as root" against "run the script with sudo": one
    rule does what the other rules out. Read from whichever side names a rejected option,
    when the other side names none, avoids nothing, and reads closer to the rejected option
    than to the preferred one."""
    for rule, other, side in (
        (expected, extracted, "extracted"),
        (extracted, expected, "expected"),
    ):
        if not PREFERENCE_CUE.holds(rule) or _AVOID_CUE.holds(other):
            continue
        found = PREFERENCE.search(rule)
        if not found:
            continue
        keep, drop = found.group(1), found.group(2)
        ruled_out = acts_named(drop)
        if ruled_out and not ruled_out & acts_named(other):
            # "instead of creating a new file" against "edit the file under its new name":
            # the other rule does not do the act ruled out, however close its words read.
            continue
        vectors = embedder.encode([keep, drop, other])
        to_keep, to_drop = float(vectors[2] @ vectors[0]), float(vectors[2] @ vectors[1])
        if to_drop - to_keep > _REJECTED_MARGIN:
            return f"the {side} rule does what the other rules out ({drop.strip()})"
    return None


@lru_cache(maxsize=32768)
def acts_named(text: str) -> frozenset[str]:
    """The acts (verb classes) a text names, its verbs read in any inflection too
    ("creating a new file" names `add`, as "create a new file" does)."""
    found = set(verb_classes(text))
    words = [w for w in tokens(text) if w.endswith(("ing", "ed", "es", "s"))]
    if words:
        plain = " ".join(sorted({lemma for w in words for lemma in lemmas(w)}))
        found |= verb_classes(plain)
    return frozenset(found)


# Changed words, both sides together, from which a change is long (see `explained_share`).
_LONG_CHANGE = 4


def explained_share(expected: str, extracted: str) -> tuple[float, float, float]:
    """How the wording changed, as shares of all content words: (replaced by a related
    word or the same atoms, replaced by something unrelated, only added or only dropped).

    A near copy with "remove" for "delete" is all explained; a key term swapped is not;
    "pull the latest changes with rebase" for "pull the latest changes" only adds."""
    total = len(content(expected) | content(extracted)) or 1
    explained = unexplained = one_sided = 0
    for gone, came in change_blocks(expected, extracted):
        old, new = content(gone) - content(came), content(came) - content(gone)
        kept_old, kept_new = _uninflected(old, new)
        if kept_old != old or kept_new != new:
            # The same word inflected is explained; the rest of the block judged alone.
            explained += len(old | new) - len(kept_old | kept_new)
            old, new = kept_old, kept_new
            if not old and not new:
                continue
        if not old or not new:
            one_sided += len(old | new)
        elif (
            old | new <= _REFUSALS
            or _compound(gone, came)
            or _initials(old, new)
            or _initials(new, old)
            or _same_atoms(gone, came, frozenset(old))
        ):
            explained += len(old | new)
        elif related(old, new):
            # One related pair explains a short change; in a long one each word must find
            # its own ("status shows a worker as crashed" against "deploy fails with unknown
            # identifier": "crashed" and "fails" excuse no other word of the clause).
            if len(old | new) < _LONG_CHANGE:
                explained += len(old | new)
            else:
                found = {a for a in old if related((a,), new)} | {
                    b for b in new if related(old, (b,))
                }
                explained += len(found)
                unexplained += len(old | new) - len(found)
        else:
            unexplained += len(old | new)
    return explained / total, unexplained / total, one_sided / total


def opposites(expected: str, extracted: str) -> int:
    """How many words the expected text has that the extracted one replaces, or joins,
    with their opposite ("public" against "private", "documented" against
    "undocumented")."""
    gone = content(expected) - content(extracted)
    came = content(extracted) - content(expected)
    came_stems = {stem(b) for b in came}
    return sum(
        bool(opposites_of(a) & came or (came and opposites_of(stem(a)) & came_stems)) for a in gone
    )
