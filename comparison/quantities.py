"""Numbers, units and HTTP status classes stated in a rule (semantics §12).

"failed five times" is not "failed once", "5xx" is not "4xx", "30 seconds" is "30 s" and
"half a minute" is not read at all: a quantity counts only when it is said plainly.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .text import EMPTY, frozen, tokens

_WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "thirty": 30,
    "fifty": 50,
    "hundred": 100,
    "thousand": 1000,
    "twice": 2,
    "thrice": 3,
    "once": 1,
    "single": 1,
    "double": 2,
    "triple": 3,
}
# Unit → (dimension, scale): "90 s" and "1.5 minutes" are one quantity.
_UNITS = {
    "ms": ("time", 0.001),
    "millisecond": ("time", 0.001),
    "s": ("time", 1),
    "sec": ("time", 1),
    "second": ("time", 1),
    "m": ("time", 60),
    "min": ("time", 60),
    "minute": ("time", 60),
    "h": ("time", 3600),
    "hr": ("time", 3600),
    "hour": ("time", 3600),
    "d": ("time", 86400),
    "day": ("time", 86400),
    "week": ("time", 604800),
    "kb": ("size", 1e3),
    "kib": ("size", 1024),
    "mb": ("size", 1e6),
    "mib": ("size", 1024**2),
    "gb": ("size", 1e9),
    "gib": ("size", 1024**3),
    "tb": ("size", 1e12),
    "%": ("share", 1),
    "percent": ("share", 1),
    "x": ("times", 1),
    "time": ("times", 1),
    "attempt": ("times", 1),
    "retry": ("times", 1),
    "retrie": ("times", 1),
}
_NUMBER = (
    r"(\d+(?:\.\d+)?|" + "|".join(w for w in _WORDS if w not in {"once", "twice", "thrice"}) + r")"
)
_QUANTITY = re.compile(
    r"(?<![\w.-])" + _NUMBER + r"\s*(%|[a-z]+)?(?![\w.])|\b(twice|thrice)\b|\b(once)\b"
    # "once" opens a clause as often as it counts ("once the build finishes", "once in
    # staging, ..."): it counts before a stop or a conjunction, or after a word and before
    # a preposition ("fails once on the same rack").
    r"(?=\s*(?:$|[,.;:!?)]|and\b|but\b|or\b|more\b|again\b|per\b|a (?:day|week|minute|second)))"
    r"|(?<=[a-z] )(once)(?=\s+(?:on|in|at|for|during|within|before|after|from|every|each)\b)"
)
# Numbers that are names, not amounts: versions ("python 3.12", "v2"), ports after a
# colon and the like are left to the word diff.
_VERSIONISH = re.compile(r"(?:v|version |python |node |java |go |py)\s*$")
_STATUS = re.compile(r"\b([45])(?:\d\d|xx)\b")
# Every amount starts a word with a digit or a number word ("30s", "five", "oneself" too:
# "one" with the unit "self"). Testing a text's words for that is much cheaper than
# `_QUANTITY`, which is tried at every position; most texts state no amount.
_AMOUNT_STARTS = (*"0123456789", *_WORDS)
_STATUS_WORDS = {"server error": "5", "client error": "4"}


@lru_cache(maxsize=32768)
def quantities(text: str) -> frozenset[tuple[str, float]]:
    """(dimension, value) of every plainly stated amount; a bare number is a "count"."""
    low = text.lower()
    # The words are those of `low` (`tokens` lower-cases); outside ASCII a digit may be
    # one `tokens` does not read, so such text is always scanned.
    if low.isascii() and not any(w.startswith(_AMOUNT_STARTS) for w in tokens(text)):
        return EMPTY
    out: set[tuple[str, float]] = set()
    for m in _QUANTITY.finditer(low):
        if m.group(3) or m.group(4) or m.group(5):
            out.add(("times", float(_WORDS[m.group(3) or m.group(4) or m.group(5)])))
            continue
        if _VERSIONISH.search(low[: m.start()]):
            continue
        word = m.group(1)
        value = float(_WORDS.get(word, word))
        unit = (m.group(2) or "").rstrip("s") if m.group(2) not in {"s", "ms"} else m.group(2)
        dimension, scale = _UNITS.get(unit, ("count", 1))
        out.add((dimension, value * scale))
    return frozen(out)


def quantity_agreement(expected: str, extracted: str) -> float:
    """1 when both state the same amounts, -1 when they state amounts of one kind and share
    none, 0 when either states none (not said is never a disagreement)."""
    a, b = quantities(expected), quantities(extracted)
    if not a or not b:
        return 0.0
    if a == b:
        return 1.0
    dims = {d for d, _ in a} & {d for d, _ in b}
    if not dims:
        return 0.0
    same = {q for q in a & b if q[0] in dims}
    return 0.5 if same else -1.0


@lru_cache(maxsize=32768)
def status_classes(text: str) -> frozenset[str]:
    low = text.lower()
    # A cheap test first: the pattern tries every position and needs a 4 or a 5.
    found = {m.group(1) for m in _STATUS.finditer(low)} if "4" in low or "5" in low else set()
    found.update(c for words, c in _STATUS_WORDS.items() if words in low)
    return frozen(found)


def status_class_agreement(expected: str, extracted: str) -> float:
    """1 same HTTP status classes, -1 disjoint ("5xx" against "4xx"), 0 not said."""
    a, b = status_classes(expected), status_classes(extracted)
    if not a or not b:
        return 0.0
    return 1.0 if a & b else -1.0


# A number as written, wherever it stands ("--nproc_per_node=8", "EPSG:4326", "1400x1400",
# "10,000"): digits with their thousands commas and decimals, and a minus sign that starts
# it ("end_offset=-1"), not one that joins a range ("1-1024").
_DIGITS = re.compile(r"(?:(?<=[\s=(:\[])-|^-)?\d+(?:,\d{3})*(?:\.\d+)?")


@lru_cache(maxsize=8192)
def digit_numbers(text: str) -> frozenset[str]:
    """Every number written in digits, thousands commas dropped ("10,000" is "10000")."""
    return frozen(m.replace(",", "") for m in _DIGITS.findall(text))


def digits_replaced(expected: str, extracted: str) -> float:
    """1.0 when each side writes a number in digits that the other does not: a number was
    replaced ("8 GPUs" against "16 GPUs", "retry_delay_seconds=10" against "=600", "10,000"
    against "10,000,000"). A number only one side writes is no replacement: a rewording
    may leave one out or spell it as a word. Units are not read here (`quantities` does)."""
    a, b = digit_numbers(expected), digit_numbers(extracted)
    return float(bool(a - b) and bool(b - a))
