"""The words a regular expression cannot match without (semantics §12).

A rule text is searched with a few hundred patterns and nearly all of them fail. Python's
regex engine tries an alternation branch by branch at every position of the text, while
`str.__contains__` finds a plain string in one fast scan. So each pattern is given the
strings one of which must occur in a text for it to match ("retr" for
`\\bretr(?:y|ies|ying)\\b`), and is only searched when one does. That is a necessary
condition, read from the pattern itself, so the answers are exactly those of searching
every pattern.
"""

from __future__ import annotations

import re
from functools import lru_cache
from re import _constants as sre  # the parsed form of a pattern; read, never changed
from re import _parser

Required = frozenset[str] | None

_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)


def required(pattern: str, *, ignore_case: bool = False) -> Required:
    """Strings one of which every match of `pattern` contains, or None when none is
    known (the pattern must then always be searched). With `ignore_case` they are in
    lower case, to be looked for in the lower-cased text."""
    try:
        parsed = _parser.parse(pattern)
    except re.error:
        return None
    if parsed.state.flags & re.IGNORECASE and not ignore_case:
        return None  # an inline (?i): its literals match either case
    found = _required(parsed)
    if found is None or not found or "" in found:
        return None
    return frozenset(s.lower() for s in found) if ignore_case else found


class Prefilter:
    """Which of many patterns may match a text, by their required strings.

    Testing each pattern's strings one by one would cost as much as the searches it
    saves; instead the strings are filed under their first two letters, and a text looks
    up only the pairs of letters it has."""

    def __init__(self, needs: list[Required]) -> None:
        self.always = [i for i, need in enumerate(needs) if need is None]
        self.by_pair: dict[str, list[tuple[str, int]]] = {}
        for i, need in enumerate(needs):
            for s in _minimal(need or frozenset()):
                if len(s) == 1:
                    self.always.append(i)  # one letter: nearly every text has it
                    continue
                self.by_pair.setdefault(s[:2], []).append((s, i))
        self.always = sorted(set(self.always))

    def candidates(self, text: str) -> list[int]:
        """Indices of the patterns that may match `text`, in order."""
        hit = set(self.always)
        by_pair = self.by_pair
        for pair in letter_pairs(text) & by_pair.keys():
            for s, i in by_pair[pair]:
                if i not in hit and s in text:
                    hit.add(i)
        return sorted(hit)


@lru_cache(maxsize=256)
def letter_pairs(text: str) -> frozenset[str]:
    """Every two consecutive characters of a text; kept a short while, as several
    vocabularies read one text in turn."""
    return frozenset(text[i : i + 2] for i in range(len(text) - 1))


def _minimal(need: frozenset[str]) -> list[str]:
    # A string that contains another of the set adds nothing: the shorter one is there.
    return sorted(s for s in need if not any(o != s and o in s for o in need))


def _required(items) -> Required:
    """The best requirement of a sequence: each literal run it must contain is one, and so
    is a group or an alternation all of whose branches have one."""
    candidates: list[frozenset[str]] = []
    run: list[str] = []
    for op, av in items:
        if op is sre.LITERAL:
            run.append(chr(av))
            continue
        if run:
            candidates.append(frozenset({"".join(run)}))
            run = []
        found = _item(op, av)
        if found:
            candidates.append(found)
    if run:
        candidates.append(frozenset({"".join(run)}))
    if not candidates:
        return None
    # The rarest-looking: the one whose shortest string is longest, then the fewest.
    return max(candidates, key=lambda c: (min(map(len, c)), -len(c)))


def _item(op, av) -> Required:
    if op is sre.SUBPATTERN:
        _group, add_flags, del_flags, sub = av
        return None if add_flags or del_flags else _required(sub)
    if op is sre.BRANCH:
        branches = [_required(b) for b in av[1]]
        if any(b is None for b in branches):
            return None
        return frozenset().union(*branches)
    if op in _REPEATS and av[0] >= 1:
        return _required(av[2])
    if op is sre.ATOMIC_GROUP:
        return _required(av)
    # Character classes, anchors, look-arounds, optional parts: nothing required.
    return None
