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


def lowered(need: Required) -> Required:
    """The strings of a case-sensitive pattern as the lower-cased text holds them: where
    a text holds an ASCII string, its lower-cased text holds the string lower-cased. A
    non-ASCII string gives nothing (the final sigma lower-cases by its place)."""
    if need is None or not all(s.isascii() for s in need):
        return None
    return frozenset(s.lower() for s in need)


class Prefilter:
    """Which of many patterns may match a text, by their required strings.

    The strings of every prefilter in the process go into one regular expression shaped
    as a trie (one branch per next letter), tried at every position of the text through
    a look-ahead: at each position it finds the longest string starting there, and every
    shorter one starting there is a prefix of it. So each pattern is credited with every
    string that contains one of its own, and a text costs one scan in C instead of a test
    per string. The scan is shared (`_SharedScan`) and its findings memoised per text: a
    text is read by several vocabularies (tools, actions, errors, states, acts, the
    equivalences), and one scan of it serves them all."""

    def __init__(self, needs: list[Required]) -> None:
        self.always = frozenset(i for i, need in enumerate(needs) if need is None)
        self.always_sorted = sorted(self.always)
        self.needs = list(needs)
        self.credited: dict[str, frozenset[int]] = {}
        self.crediting: frozenset[str] = frozenset()
        self.version = -1
        _SHARED.add({s for need in needs if need for s in need})

    def candidates(self, text: str) -> list[int]:
        """Indices of the patterns that may match `text`, in order."""
        found = _SHARED.strings_in(text)
        if self.version != _SHARED.version:
            self._credit()
        if not found:
            return list(self.always_sorted)
        hit = set(self.always)
        credited = self.credited
        # One set intersection in C keeps the few strings found that credit a pattern.
        for s in found & self.crediting:
            hit |= credited[s]
        return sorted(hit)

    def _credit(self) -> None:
        # A string of the shared scan found in a text credits every pattern one of whose
        # own strings it contains: where that string occurs, the scan found it or a longer
        # string it starts. Only the strings that credit something are kept.
        version, strings = _SHARED.version, _SHARED.strings
        needs = self.needs
        credited = {}
        for s in strings:
            own = frozenset(i for i, need in enumerate(needs) if need and any(n in s for n in need))
            if own:
                credited[s] = own
        self.credited = credited
        self.crediting = frozenset(credited)
        self.version = version


class _SharedScan:
    """The one trie scan over the strings of every prefilter, made again (on first use,
    not once per vocabulary at import) when one brings strings it lacks."""

    def __init__(self) -> None:
        self.strings: frozenset[str] = frozenset()
        self.version = 0
        self.scan: re.Pattern | None = None
        self.strings_in = lru_cache(maxsize=32768)(self._strings_in)

    def add(self, strings: set[str]) -> None:
        if strings <= self.strings:
            return
        # A prefilter that sees the new version credits itself from the new strings, and
        # a text memoised with the old scan is read again.
        self.strings = self.strings | strings
        self.scan = None
        self.strings_in.cache_clear()
        self.version += 1

    def _strings_in(self, text: str) -> frozenset[str]:
        """The strings found in `text`, each the longest of them starting where it does."""
        scan = self.scan
        if scan is None:
            if not self.strings:
                return _NONE
            scan = self.scan = re.compile(f"(?=({_trie_source(sorted(self.strings))}))")
        found = frozenset(scan.findall(text))
        return found if found else _NONE


_NONE: frozenset[str] = frozenset()
_SHARED = _SharedScan()


def _trie_source(strings: list[str]) -> str:
    """A regex matching the longest of `strings` that starts where it is tried."""
    trie: dict = {}
    for s in strings:
        node = trie
        for ch in s:
            node = node.setdefault(ch, {})
        node[""] = {}
    return _node_source(trie)


def _node_source(node: dict) -> str:
    branches = [re.escape(ch) + _node_source(child) for ch, child in sorted(node.items()) if ch]
    if not branches:
        return ""
    inner = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
    # A string may end here: the longer ones are tried first, greedily.
    return f"(?:{inner})?" if "" in node else inner


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
