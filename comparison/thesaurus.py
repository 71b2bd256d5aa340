"""Plain-word synonyms and antonyms from WordNet 3.0 (semantics §12).

The lexicon (lexicon.py) knows the words of failures and fixes; rules are also written in
everyday words it cannot list one by one ("sluggish" for "slow", "launch" for "start",
"raise" for "increase"). data/thesaurus.json, built offline from WordNet by
build_thesaurus.py, holds each common lemma's frequent senses, their direct
generalisations, and WordNet's antonym pairs; nothing is downloaded. Two words are
synonyms when they share a sense, or one's sense is the other's direct generalisation
("delete" is a way to "remove"); siblings ("increase" and "decrease", both ways to
"change") are not. Antonyms come first: a word and its opposite are never synonyms.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

THESAURUS = Path(__file__).resolve().parent / "data" / "thesaurus.json"
_EMPTY: frozenset = frozenset()
# A set of words together: their senses, with the generalisations too, their lemmas.
_Side = tuple[set[int], set[int], set[str]]


class _Data:
    """The file read once into sets, so each question is a few set operations."""

    def __init__(self, path: Path = THESAURUS) -> None:
        raw = json.loads(path.read_text())
        self.senses = {w: frozenset(s) for w, s in raw["senses"].items()}
        self.parents = {w: frozenset(s) for w, s in raw["parents"].items()}
        self.irregular = {w: tuple(ls) for w, ls in raw["irregular"].items()}
        self.detach = tuple(tuple(rule) for rule in raw["detach"])
        antonyms: dict[str, set[str]] = {}
        for pair in raw["antonyms"]:
            a, b = pair.split()
            antonyms.setdefault(a, set()).add(b)
            antonyms.setdefault(b, set()).add(a)
        self.antonyms = {w: frozenset(o) for w, o in antonyms.items()}


@lru_cache(maxsize=1)
def _data() -> _Data:
    return _Data()


@lru_cache(maxsize=32768)
def lemmas(word: str) -> frozenset[str]:
    """The WordNet lemmas a word may be an inflection of ("deleted" -> "delete", "ran" ->
    "run"), by WordNet's exception lists and suffix rules; empty for an unknown word."""
    data = _data()
    found = {word} if word in data.senses else set()
    found.update(data.irregular.get(word, ()))
    for suffix, ending in data.detach:
        if word.endswith(suffix) and len(word) > len(suffix) + 1:
            lemma = word[: len(word) - len(suffix)] + ending
            if lemma in data.senses:
                found.add(lemma)
    return frozenset(found) if found else _EMPTY


@lru_cache(maxsize=32768)
def _senses(word: str) -> tuple[frozenset[int], frozenset[int], frozenset[str]]:
    data = _data()
    own: set[int] = set()
    parents: set[int] = set()
    opposite: set[str] = set()
    for lemma in lemmas(word):
        own |= data.senses[lemma]
        parents |= data.parents.get(lemma, _EMPTY)
        opposite |= data.antonyms.get(lemma, _EMPTY)
    return frozenset(own), frozenset(parents), frozenset(opposite)


def opposite_lemmas(word: str) -> frozenset[str]:
    """The lemmas WordNet calls opposites of one of the word's lemmas."""
    return _senses(word)[2]


def antonyms(a: str, b: str) -> bool:
    """WordNet calls one word's lemma the opposite of the other's ("increase" /
    "decreased", "slow" / "fast")."""
    return bool(_senses(a)[2] & lemmas(b))


def synonyms(a: str, b: str) -> bool:
    """The same lemma, a shared frequent sense, or one a direct generalisation of the
    other; never a pair of antonyms."""
    own_a, parents_a, opposite_a = _senses(a)
    if not own_a:
        return False
    own_b, parents_b, _ = _senses(b)
    if opposite_a & lemmas(b):
        return False
    return bool(lemmas(a) & lemmas(b) or own_a & own_b or own_a & parents_b or parents_a & own_b)


def synonym_share(gone: frozenset[str], came: frozenset[str]) -> float:
    """Of the words only one side has, the share with a synonym among the other side's
    ("sluggish" for "slow"); 1 when nothing differs, 0 when words were only added or
    only dropped."""
    return changed_words(gone, came)[0]


def antonym_count(gone: frozenset[str], came: frozenset[str]) -> int:
    """How many words one side dropped whose WordNet opposite the other side brought."""
    return changed_words(gone, came)[1]


def changed_words(gone: frozenset[str], came: frozenset[str]) -> tuple[float, int]:
    """`synonym_share` and `antonym_count` at once. Each side's sets are made once for
    both, and not memoised: a memo's hits were mostly the same side asked for again word
    by word, and its entries (five objects each, a third of a batch's sides new) were
    more for the garbage collector to walk after the batch."""
    if not gone and not came:
        return 1.0, 0
    if not gone or not came:
        # Nothing on the other side to be a synonym or an opposite of.
        return 0.0, 0
    # A word WordNet does not know (most of them: names, flags, paths) is passed over
    # without a set operation; with none known on one side, nothing can match.
    known_gone = [w for w in gone if lemmas(w)]
    known_came = [w for w in came if lemmas(w)] if known_gone else known_gone
    if not known_came:
        return 0.0, 0
    gone_side, came_side = _side(known_gone), _side(known_came)
    matched = sum(_has_synonym(w, came, came_side) for w in known_gone)
    matched += sum(_has_synonym(w, gone, gone_side) for w in known_came)
    opposed = sum(bool(_senses(a)[2] & came_side[2]) for a in known_gone)
    return matched / (len(gone) + len(came)), opposed


def _side(known: list[str]) -> _Side:
    """Words WordNet knows, together: their senses, their senses with the senses'
    generalisations, their lemmas. A word is then tested against the other side with
    two intersections, not one test a word ("synonyms" below, in set form: a shared
    sense, or one generalising the other; a shared lemma shares its senses). Plain
    sets: they live for one pair."""
    own: set[int] = set()
    parents: set[int] = set()
    found: set[str] = set()
    for w in known:
        w_own, w_parents, _ = _senses(w)
        own |= w_own
        parents |= w_parents
        found |= lemmas(w)
    return own, own | parents, found


def _has_synonym(
    word: str,
    others: frozenset[str],
    side: _Side,
) -> bool:
    own, parents, opposite = _senses(word)
    if not own:
        return False
    others_own, others_wider, others_lemmas = side
    if opposite and opposite & others_lemmas:
        # Its opposite is among them: only a word-by-word test keeps that one out.
        return any(synonyms(word, other) for other in others)
    return not own.isdisjoint(others_wider) or not parents.isdisjoint(others_own)
