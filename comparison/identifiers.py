"""The literal names two rules share: quoted messages, flags, error codes, identifiers,
file names, numbers (semantics §12).

A rewording of a rule changes its words and keeps what it names ("--force-with-lease",
"ENOSPC", "'Permission denied'", "pg_hba.conf", "exit 137"); a rule about another error
of the same tool keeps its words and names something else. Each literal of one side is
looked for in the other side's text, case-blind, so a name quoted on one side and bare
on the other is kept.
"""

from __future__ import annotations

import re
from functools import lru_cache

_QUOTED = re.compile(r"(?<!\w)'([^'\n]{2,}?)'(?!\w)|\"([^\"\n]{2,}?)\"|`([^`\n]{1,}?)`")
# A token that names something rather than says it: a flag, a word with a digit, an
# underscore, a dot, a slash or a colon inside, an inner capital (camelCase), or all
# capitals. Tokens are cut with one plain character class and tested with string methods:
# most are lower-case words and are passed over by the first test.
_TOKEN = re.compile(r"[\w./:-]+")
_CAMEL = re.compile(r"[a-z]+[A-Z]")
_INNER = re.compile(r"\w[_./:]\w")
_DIGIT = re.compile(r"\d")
_NAME_END = ".:-"


def _is_name(token: str) -> bool:
    if token.isalpha():
        # A word: a name only in capitals ("ENOSPC") or with an inner capital ("fooBar").
        return len(token) >= 2 and (token.isupper() or _CAMEL.match(token) is not None)
    if token[0] == "-":
        return token.lstrip("-")[:1].isalpha()
    return (
        _DIGIT.search(token) is not None
        or _INNER.search(token) is not None
        or (token.isupper() and token.isalnum())
    )


@lru_cache(maxsize=32768)
def literals(text: str) -> frozenset[str]:
    """The literal names in a text, lower-cased."""
    found = set()
    if "'" in text or '"' in text or "`" in text:
        for groups in _QUOTED.findall(text):
            quoted = next(g for g in groups if g)
            found.add(" ".join(quoted.lower().split()))
    for token in _TOKEN.findall(text):
        if token.isalpha() and token[1:].islower():
            continue  # a word in lower case, or capitalised: most tokens
        token = token.rstrip(_NAME_END) if token[0] != "-" else token.rstrip(".:")
        if len(token) >= 2 and _is_name(token):
            found.add(token.lower())
    return frozenset(found)


_UNQUOTE = str.maketrans({"'": " ", '"': " ", "`": " "})


@lru_cache(maxsize=32768)
def _plain(text: str) -> str:
    return " " + " ".join(text.lower().translate(_UNQUOTE).split()) + " "


def _kept(name: str, other: str) -> bool:
    if name not in other:
        return False
    at = other.find(name)
    while at >= 0:
        before, after = other[at - 1], other[at + len(name) : at + len(name) + 1]
        if not (before.isalnum() or before == "-") and not (after.isalnum() or after == "_"):
            return True
        at = other.find(name, at + 1)
    return False


def _names(texts: tuple[str, ...]) -> frozenset[str]:
    return frozenset().union(*(literals(t) for t in texts))


def _unmatched(names: frozenset[str], others: tuple[str, ...]) -> int:
    # Each text is plain between spaces: joined, a name is found in either.
    plain = "".join(_plain(t) for t in others)
    return sum(not _kept(n, plain) for n in names)


def name_agreement(expected: tuple[str, ...], extracted: tuple[str, ...]) -> tuple[float, int]:
    """What the two rules (each its texts: trigger, directive) name, compared wherever in
    the rule a name stands: the share of both sides' names the other holds too (0.5 when
    neither names anything), and how many names one side has where the other has another
    instead ("exit code 137" against "exit code 143", "--no-verify" against "--no-edit";
    a name only one side has, a jargon code against its plain description, is not
    counted)."""
    a, b = _names(expected), _names(extracted)
    if not a and not b:
        return 0.5, 0
    lost_a, lost_b = _unmatched(a, extracted), _unmatched(b, expected)
    return (len(a) + len(b) - lost_a - lost_b) / (len(a) + len(b)), min(lost_a, lost_b)


def shared_share(expected: str, extracted: str) -> float:
    """`name_agreement`'s share for two single texts."""
    return name_agreement((expected,), (extracted,))[0]


def replaced(expected: str, extracted: str) -> int:
    """`name_agreement`'s count of names replaced, for two single texts."""
    return name_agreement((expected,), (extracted,))[1]
