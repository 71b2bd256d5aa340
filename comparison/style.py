"""A rule's style made plain: telegraphic shorthand spelt out, hedges and framing dropped
(semantics §12).

Extractions come in styles: terse notes ("quiz stuck >24 min: open ticket w/ quiz ID") and
wordy advice ("Whenever the quiz has been stuck for over a day, it is usually best to open
a ticket"). Neither the shorthand nor the hedge says anything about which rule it is, yet
both count as changed words; made plain, only the words that state the rule are compared.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Shorthand of notes, spelt out. A comparison sign is read only before a number, so
# "a -> b" or "x=1" in code are left alone.
_SHORTHAND = [
    (re.compile(r"(?<!\w)w/o(?!\w)", re.I), "without"),
    (re.compile(r"(?<!\w)w/(?=\s|\w)", re.I), "with "),
    (re.compile(r"(?<!\w)b/c(?!\w)", re.I), "because"),
    (re.compile(r"(?<!\w)(?:thru)(?!\w)", re.I), "through"),
    (re.compile(r"(?<!\w)(?:till|'til|til)(?!\w)", re.I), "until"),
    (re.compile(r"(?<!\w)asap(?!\w)", re.I), "immediately"),
    (re.compile(r"(?<!\w)approx\.?(?!\w)", re.I), "about"),
    (re.compile(r"\s&\s"), " and "),
    (re.compile(r">=\s*(?=\d)"), "at least "),
    (re.compile(r"<=\s*(?=\d)"), "at most "),
    (re.compile(r"(?<![\w-])>\s*(?=\d)"), "more than "),
    (re.compile(r"(?<![\w<-])<\s*(?=\d)"), "less than "),
    (re.compile(r"(?<![\w~])~\s*(?=\d)"), "about "),
    (re.compile(r"\s+(?:->|→)\s+"), " then "),
]

# Hedges and framing: what only says how sure or polite the writer is, or that what
# follows is the advice. Each is dropped, with the comma that set it off.
_HEDGE = re.compile(
    r"\b(?:"
    r"it(?: is|'s) (?:usually |generally |normally |often |typically |probably |almost always )?"
    r"(?:best|wise|advisable|sensible|safest|easiest|preferable|recommended|a good idea|"
    r"good practice|better) (?:to|that you)|"
    r"the (?:sensible|best|right|usual|correct|safest|recommended|standard) "
    r"(?:fix|approach|move|course|thing to do|option|remedy|step) is (?:usually |generally |"
    r"normally |often |typically )?(?:to )?|"
    r"a (?:reasonable|good|sensible) (?:starting point|default|first step) is "
    r"(?:usually |generally |normally )?to|"
    r"(?:you|one) (?:should|ought to|will want to|would want to) (?:really |generally |"
    r"usually |normally |probably )?|"
    r"it (?:usually |generally |often )?pays to|"
    r"(?:in practice|as a rule|in general|generally speaking),?|"
    r"(?:usually|generally|normally|typically|really|actually|simply|basically|"
    r"just|probably|likely)"
    r")\b,?\s*",
    re.I,
)
# Framing of a situation that `framing.unframed` (which runs first and turns "whenever",
# "each time", "in cases where" into "when") leaves: "in situations where", "in the event
# that", "in cases that" are "when".
_WHEN = re.compile(
    r"^(?:in (?:situations (?:where|that)|the event (?:where|that)|cases that))"
    r"(?:\s+(?:you|we) (?:find|notice|see|intend to|want to|are about to)(?: that)?)?(?=\s|$)",
    re.I,
)


# A word every hedge holds, and a mark every shorthand holds: most texts hold none and
# are passed over with a few substring tests and one set test.
_HEDGE_WORDS = frozenset(
    [
        "usually",
        "generally",
        "normally",
        "typically",
        "really",
        "actually",
        "simply",
        "just",
        "probably",
        "likely",
        "practice",
        "best",
        "wise",
        "advisable",
        "sensible",
        "safest",
        "easiest",
        "preferable",
        "recommended",
        "idea",
        "better",
        "should",
        "ought",
        "want",
        "pays",
        "reasonable",
        "rule",
        "general",
        "right",
        "correct",
        "standard",
    ]
)
# What follows a comparison word when it compares an amount: a number in digits or words,
# a span ("an hour"), or a limit named as such.
_AMOUNT = (
    r"(?= (?:-|\$|[-+]?\d|(?:about |around |roughly |nearly )?(?:one|two|three|four|five|six|"
    r"seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|sixty|hundred|"
    r"half|a (?:few|couple)|an? (?:hour|minute|second|day|week|month|year|dozen|hundred|"
    r"thousand|million|billion))\b|(?:about|around|roughly|nearly) |the (?:limit|threshold|"
    r"tolerance|quota|maximum|cap|budget)\b))"
)
# Phrases that say what a shorter word says, in its words: "prior to" is "before",
# "beforehand" is "first", "over 5 GB" is "more than 5 GB" (a comparison word read only
# before a number: "over HTTP", "under load" stay), "errors out" is "fails".
_PHRASES = [
    (re.compile(r"\b(?:prior to|ahead of)\b", re.I), "before"),
    (re.compile(r"\b(?:beforehand|in advance)\b", re.I), "first"),
    (
        re.compile(
            r"\b(?:over|above|exceeding|greater than|higher than|in excess of|upwards of)"
            + _AMOUNT,
            re.I,
        ),
        "more than",
    ),
    (re.compile(r"\b(?:under|below|fewer than|lower than)" + _AMOUNT, re.I), "less than"),
    (re.compile(r"\berror(s|ed|ing)? out\b", re.I), "fail\\1"),
    (re.compile(r"\b(?:does not work|stops working)\b", re.I), "fails"),
    (re.compile(r"\b(?:do not work|stop working)\b", re.I), "fail"),
    (re.compile(r"\b(?:did not work|stopped working)\b", re.I), "failed"),
    (re.compile(r"\bget(?:ting)? rid of\b", re.I), "remove"),
    (
        re.compile(r"\b(?:take|have) a (?:quick |close )?look at\b|\blook(?: closely)? at\b", re.I),
        "inspect",
    ),
    (re.compile(r"^switch(?: over)? to\b", re.I), "use"),
    # "following a failover" is "after a failover"; "the following steps", "when following
    # the guide", "by following it" are another word.
    (
        re.compile(
            r"(?<!\bthe )(?<!\bby )(?<!\bof )(?<!\bis )(?<!\bare )(?<!\bwas )(?<!\bwhen )"
            r"(?<!\bwhile )(?<!\bkeep )(?<!\btry )(?<!\bstart )(?<!\bstop )(?<!\bavoid )"
            r"(?<!\bnot )(?<!\bfrom )\bfollowing(?= (?:\d|(?:a|an|the|each|every|any|its|their|"
            r"this|that|another|several|some|[a-z]+ing)\b))",
            re.I,
        ),
        "after",
    ),
]
# A word each of those phrases holds (after lower-casing).
_PHRASE_CUES = (
    "prior",
    "ahead",
    "beforehand",
    "advance",
    "over",
    "above",
    "exceed",
    "greater",
    "higher",
    "excess",
    "upwards",
    "under",
    "below",
    "fewer",
    "lower",
    "error",
    "following",
    "work",
    "rid",
    "look",
    "switch",
)
_SHORTHAND_MARKS = ("w/", "b/c", "thru", "til", "asap", "approx", "&", "<", ">", "~", "→")
# "non" joined to its word ("nonroot", "nonempty") is the hyphenated word ("non-root"): the
# prefix kept apart, so the word after it is still read, and its negation with it. A word
# of four letters or more follows ("none", "nonce" stay).
_NON_JOINED = re.compile(r"\b(non)(?=[a-z]{4,}\b)", re.I)
_WHEN_CUE = ("in situations", "in cases", "in the event")


@lru_cache(maxsize=32768)
def plain_style(text: str) -> str:
    """The text with shorthand spelt out and hedges dropped; what it says is kept."""
    low = text.lower()
    if any(mark in low for mark in _SHORTHAND_MARKS):
        for rx, replacement in _SHORTHAND:
            text = rx.sub(replacement, text)
        text = " ".join(text.split())
        low = text.lower()
    if any(cue in low for cue in _PHRASE_CUES):
        for rx, replacement in _PHRASES:
            text = rx.sub(replacement, text)
        low = text.lower()
    if "non" in low:
        text = _NON_JOINED.sub(r"\1-", text)
        low = text.lower()
    if low.startswith(_WHEN_CUE):
        text = _WHEN.sub("when", text)
    if not _HEDGE_WORDS.isdisjoint(low.replace(",", " ").split()):
        text = " ".join(_HEDGE.sub("", text).split())
    return text
