"""A directive's order and preference written one way (semantics §12, docs/semantics.md#s12-1).

The same advice about order or preference comes in several shapes: "validate it before
importing" / "only import it after it validates" / "don't import it until it validates";
"run auto-compaction instead of reingesting" / "do not reingest; run auto-compaction" /
"rather than reingesting, run auto-compaction". Read word by word, the shapes differ in
their negations and in the order of their words, which is exactly what the comparator
weighs when it looks for opposite advice — so a rewording in another shape read as a rule
that says the opposite, and a rule that does say the opposite read as a rewording. Each
shape is rewritten here into one: the step that comes first, "before", the step that waits
("Y before X"); the option taken, "instead of", the one refused ("Y instead of X").

Only a directive as a whole is rewritten, and only when its shape is unambiguous: one
negated step and the condition it waits for, or one refused option and the one taken, set
apart by a semicolon, a comma with "but" or "instead", or the connective itself. A
prohibition after the advice ("reject those rows; do not create new SKUs") reads the same
way: "instead of" refuses its act as "do not" does, so nothing is lost, and the two ways of
writing it (a semicolon, a full stop) read alike. Anything else is left as written.
"""

from __future__ import annotations

import re
from functools import lru_cache

_END = r"\s*[.!?]?\s*$"
# A negated step: "do not", "don't", "never", "hold off on", "avoid", "refrain from",
# "wait to".
_NEGATED = r"(?:do\s+not|don'?t|never|hold\s+off(?:\s+on)?|avoid|refrain\s+from|wait\s+to)"
# A clause: no semicolon and no sentence break inside it (a dot inside a word, as in
# "model.no_sync()", is not one).
_CLAUSE = r"((?:[^;.]|\.(?=\S))+?)"
# The condition waited for ends at a comma; what follows it is kept after the rewrite.
_CONDITION = r"((?:[^;,.]|\.(?=\S))+?)"
_TAIL = r"((?:\s*[,;]\s*.*?)?)"
# Each pattern below splits the text at the first place its connective can and keeps that
# split (an atomic group, `(?>…)`): a later split is never tried. Trying every later one
# cost time in the square of the text's length (4 s for 20,000 characters of "wait until
# x"); the first connective deciding changes no labelled text's reading.

# "don't X until Y", "never X before Y", "hold off on X until Y" → "Y before X".
_WAIT = re.compile(
    rf"^{_NEGATED}\s+(?>{_CLAUSE}\s+(?:until|till|before)\s+){_CONDITION}{_TAIL}{_END}", re.I
)
# "only X after Y", "X only after Y", "only X once Y" → "Y before X".
_ONLY_AFTER = re.compile(
    rf"^(?:only\s+(?>{_CLAUSE}\s+(?:after|once)\s+)|(?>{_CLAUSE}\s+only\s+(?:after|once)\s+))"
    rf"{_CONDITION}{_TAIL}{_END}",
    re.I,
)
# "only after Y should the agent X", "only once Y, X" → "Y before X".
_ONLY_AFTER_FIRST = re.compile(
    rf"^only\s+(?:after|once)\s+(?>{_CONDITION}\s*(?:,\s*|\s+(?:should|must|can|may)\s+"
    rf"(?:the\s+agent|you|we|it|they)\s+)){_CLAUSE}{_END}",
    re.I,
)
# "rather than X, Y" / "instead of X, Y" → "Y instead of X".
_LEADING_REFUSED = re.compile(
    rf"^(?:rather\s+than|instead\s+of|in\s+place\s+of)\s+{_CONDITION}\s*,\s*{_CLAUSE}{_END}",
    re.I,
)
# "don't X; Y", "don't X - Y", "never X, but Y", "do not X; instead Y" → "Y instead of X"
# (two sentences stay two: "Don't X. Y instead.").
_REFUSED_FIRST = re.compile(
    rf"^{_NEGATED}\s+(?>{_CLAUSE}\s*(?:;|\s[-\u2013\u2014]\s|"
    rf",\s*(?=but\b|instead\b|rather\b)))\s*"
    rf"(?:but\s+|instead\s*,?\s+|rather\s*,?\s+)?"
    rf"(?:(?:it|you|they|the\s+agent|we)\s+(?:should|must|need\s+to)\s+(?:instead\s+)?)?"
    rf"{_CLAUSE}(?:\s+instead)?{_END}",
    re.I,
)

# "Y; don't X", "Y. Do not X.", "Y - don't X", "Y, but never X" → "Y instead of X": the
# refused act is refused either way, the words now in the order of the shape above ("Y, and
# never X" asks for both, and stays; "is HDF5, not a partial download" refuses no act).
_REFUSED_LAST = re.compile(
    rf"^(?>{_CLAUSE}\s*(?:;|,|\.\s+|\s-\s)\s*(?:but\s+)?{_NEGATED}\s+){_CLAUSE}{_END}",
    re.I,
)
_NEGATED_START = re.compile(rf"^(?:{_NEGATED}|not)\b", re.I)


def _joined(first: str, connective: str, second: str) -> str:
    return f"{first.strip()} {connective} {second.strip()}"


@lru_cache(maxsize=8192)
def plain_order(text: str) -> str:
    """The directive with its order or preference in the one shape; else as written."""
    if not text or not _CUE.search(text):
        return text  # cheap test first: most directives have neither shape
    m = _WAIT.match(text)
    if m:
        return _joined(m.group(2), "before", m.group(1)) + m.group(3).rstrip()
    m = _ONLY_AFTER.match(text)
    if m:
        return _joined(m.group(3), "before", m.group(1) or m.group(2)) + m.group(4).rstrip()
    m = _ONLY_AFTER_FIRST.match(text)
    if m:
        return _joined(m.group(1), "before", m.group(2))
    m = _LEADING_REFUSED.match(text)
    if m:
        return _joined(m.group(2), "instead of", m.group(1))
    m = _REFUSED_FIRST.match(text)
    if m:
        return _joined(m.group(2), "instead of", m.group(1))
    m = _REFUSED_LAST.match(text)
    if m and not _NEGATED_START.match(m.group(1)):
        return _joined(m.group(1), "instead of", m.group(2))
    return text


_CUE = re.compile(
    r"\b(?:until|till|before|only|rather|instead|in\s+place|not|don'?t|never|avoid|hold\s+off|"
    r"refrain|wait)\b",
    re.I,
)
