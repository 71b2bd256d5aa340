"""Words: tokens, the token-F1 baseline, the word diff, crude stems (semantics §12).

Pure functions over strings; the ones called again and again on the same texts (an
expected rule is compared with every candidate extracted for it) are memoised.
"""

from __future__ import annotations

import re
from functools import lru_cache

_TOKEN = re.compile(r"[a-z0-9]+")


class CaseBlind:
    """A pattern written in lower case, matched whatever the case of the text.

    Python's regex engine tries every position several times slower under re.IGNORECASE.
    ASCII text (nearly every rule) is searched lower-cased without the flag: the same
    matches at the same places, since an ASCII letter folds only to its other case and
    lower-casing moves no character. Other text is searched as given, with the flag. On
    ASCII text a match's text is in lower case: callers test for a match or lower-case
    what they read (`any_case` is the pattern with the flag, for anything else)."""

    def __init__(self, pattern: str) -> None:
        self.any_case = re.compile(pattern, re.I)
        self.lower_case = re.compile(pattern)
        # Cues are asked about the same texts again and again (both directions of a pair,
        # several findings, the expected text with every candidate): memoised.
        self.holds = lru_cache(maxsize=32768)(self._holds)

    def _holds(self, text: str) -> bool:
        """Whether the pattern matches anywhere in `text`."""
        return self.search(text) is not None

    def search(self, text: str) -> re.Match | None:
        if text.isascii():
            return self.lower_case.search(text.lower())
        return self.any_case.search(text)

    def finditer(self, text: str):
        if text.isascii():
            return self.lower_case.finditer(text.lower())
        return self.any_case.finditer(text)


# Sized so that a batch of a few thousand pairs with unseen extracted texts does not push
# the expected texts out before they are asked for again (at 16,384 they were, every batch).
@lru_cache(maxsize=32768)
def tokens(text: str) -> tuple[str, ...]:
    return tuple(_TOKEN.findall(text.lower()))


def token_f1(a: str, b: str) -> float:
    """Multiset token-overlap F1 (SQuAD style), the naive baseline of semantics §12."""
    ta, tb = tokens(a), tokens(b)
    if not ta and not tb:
        return 1.0
    if not ta or not tb:
        return 0.0
    common = _common(ta, tb)
    if common == 0:
        return 0.0
    precision, recall = common / len(tb), common / len(ta)
    return 2 * precision * recall / (precision + recall)


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """Size of the multiset intersection of two token lists."""
    left: dict[str, int] = {}
    for w in b:
        left[w] = left.get(w, 0) + 1
    common = 0
    for w in a:
        if left.get(w):
            left[w] -= 1
            common += 1
    return common


def word_diff(expected: str, extracted: str) -> list[tuple[str, str]]:
    """Word-level diff in reading order: ("keep" | "delete" | "insert", word).

    "delete" is a word only the expected rule has, "insert" one only the extracted rule
    has. Words are compared case-insensitively and shown as the extracted text (or, for a
    deletion, the expected text) spells them, so the dashboard can highlight them as is.
    """
    ops: list[tuple[str, str]] = []
    for gone, came, kept in diff_runs(expected, extracted):
        ops.extend(("delete", w) for w in gone.split())
        ops.extend(("insert", w) for w in came.split())
        ops.extend(("keep", w) for w in kept.split())
    return ops


@lru_cache(maxsize=8192)
def diff_runs(expected: str, extracted: str) -> tuple[tuple[str, str, str], ...]:
    """The word diff as runs: per matching block, (the expected words before it that
    went, the extracted words before it that came, the words it keeps), each run's words
    joined by one space. Kept as strings rather than one tuple a word: the memo table
    holds many diffs, and strings are no work for the garbage collector."""
    exp_words, ext_words = expected.split(), extracted.split()
    runs = []
    i = j = 0
    for bi, bj, size in matching_blocks(_norm_words(expected), _norm_words(extracted)):
        # A replacement reads best as "what went, then what came".
        runs.append(
            (
                " ".join(exp_words[i:bi]),
                " ".join(ext_words[j:bj]),
                " ".join(ext_words[bj : bj + size]),
            )
        )
        i, j = bi + size, bj + size
    return tuple(runs)


@lru_cache(maxsize=32768)
def _norm_words(text: str) -> tuple[str, ...]:
    if text.isascii():
        # Lower-cased whole, then split: the same words as each lower-cased alone.
        return tuple([w.strip(".,;:!?\"'()[]") for w in text.lower().split()])
    return tuple(w.lower().strip(".,;:!?\"'()[]") for w in text.split())


def matching_blocks(a: tuple[str, ...], b: tuple[str, ...]) -> list[tuple[int, int, int]]:
    """`difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks()`, the same
    blocks without the class around it (rule texts are a few dozen words, and its set-up
    cost more than the matching): the longest common run of words, then the same on each
    side of it; ties go to the earliest in `a`, then in `b`. Where each word of `a` comes
    in `b` is looked up once, not in every range the search narrows to."""
    if a == b:
        # Near copies are common: one block, the search would find it first.
        return [(0, 0, len(a)), (len(a), len(b), 0)] if a else [(0, 0, 0)]
    b2j: dict[str, list[int]] = {}
    for j, w in enumerate(b):
        b2j.setdefault(w, []).append(j)
    where = [b2j.get(w, ()) for w in a]
    blocks = []
    queue = [(0, len(a), 0, len(b))]
    while queue:
        alo, ahi, blo, bhi = queue.pop()
        i, j, k = _longest_match(where, alo, ahi, blo, bhi)
        if k:
            blocks.append((i, j, k))
            if alo < i and blo < j:
                queue.append((alo, i, blo, j))
            if i + k < ahi and j + k < bhi:
                queue.append((i + k, ahi, j + k, bhi))
    blocks.sort()
    merged = []
    i1 = j1 = k1 = 0
    for i2, j2, k2 in blocks:
        if i1 + k1 == i2 and j1 + k1 == j2:
            k1 += k2
            continue
        if k1:
            merged.append((i1, j1, k1))
        i1, j1, k1 = i2, j2, k2
    if k1:
        merged.append((i1, j1, k1))
    merged.append((len(a), len(b), 0))
    return merged


def _longest_match(where, alo, ahi, blo, bhi) -> tuple[int, int, int]:
    """`where[i]`: the places in `b` of the word at `i` in `a`, in order."""
    besti, bestj, bestsize = alo, blo, 0
    j2len: dict[int, int] = {}
    for i in range(alo, ahi):
        js = where[i]
        if not js:
            # A word `b` lacks ends every run.
            if j2len:
                j2len = {}
            continue
        grown = {}
        for j in js:
            if j < blo:
                continue
            if j >= bhi:
                break
            k = grown[j] = j2len.get(j - 1, 0) + 1
            if k > bestsize:
                besti, bestj, bestsize = i - k + 1, j - k + 1, k
        j2len = grown
    return besti, bestj, bestsize


@lru_cache(maxsize=8192)
def residual(expected: str, extracted: str) -> tuple[str, str]:
    """The words each side has that the other lacks, in order."""
    runs = diff_runs(expected, extracted)
    return (
        " ".join(gone for gone, _, _ in runs if gone),
        " ".join(came for _, came, _ in runs if came),
    )


def change_blocks(expected: str, extracted: str) -> list[tuple[str, str]]:
    """Runs of words that differ, as (expected words, extracted words)."""
    return [(gone, came) for gone, came, _ in diff_runs(expected, extracted) if gone or came]


# Function words: they carry no term of a rule, so a change in them is no change of term.
# Negations, "before"/"after", "only" and the particles of phrasal verbs ("scale up",
# "turn off") are not among them: they change what a rule says.
STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "of",
        "in",
        "on",
        "at",
        "for",
        "with",
        "and",
        "or",
        "it",
        "its",
        "is",
        "are",
        "be",
        "by",
        "from",
        "as",
        "this",
        "that",
        "use",
        "using",
        "into",
        "onto",
        "via",
        "due",
        "per",
        "within",
        "across",
        "through",
        "during",
        "upon",
        "about",
        "than",
        "there",
        "here",
        "which",
        "who",
        "whose",
        "what",
        "where",
        "whether",
        "all",
        "any",
        "each",
        "every",
        "some",
        "these",
        "those",
        "their",
        "them",
        "they",
        "you",
        "your",
        "we",
        "our",
        "us",
        "i",
        "my",
        "was",
        "were",
        "has",
        "have",
        "had",
        "been",
        "being",
        "do",
        "does",
        "did",
        "can",
        "could",
        "will",
        "would",
        "should",
        "may",
        "might",
        "must",
        "shall",
        "just",
        "so",
        "if",
        "when",
        "while",
        "once",
        "since",
        "because",
        "then",
    ]
)
# Words that open or link a condition: "if" for "when" swaps no key term.
CONNECTIVES = frozenset(
    ["when", "whenever", "if", "once", "while", "because", "since", "as", "so", "then"]
)
NEGATIONS = frozenset({"not", "no", "never", "don't", "dont", "n't", "without", "cannot", "can't"})
# Stand-ins that a rewording may put for a named thing ("packages" → "anything").
PRONOUNS = frozenset(
    [
        "anything",
        "something",
        "everything",
        "nothing",
        "whatever",
        "whichever",
        "everyone",
        "someone",
        "one",
        "ones",
    ]
)


# Memoised results live as long as the process, and each full pass of the cyclic garbage
# collector walks every set among them; most texts name no stance, tool or amount, so
# their empty results are one shared set.
EMPTY: frozenset = frozenset()


def frozen(items) -> frozenset:
    found = frozenset(items)
    return found if found else EMPTY


@lru_cache(maxsize=32768)
def content(text: str) -> frozenset[str]:
    found = frozenset(tokens(text)) - STOP
    return found if found else EMPTY


def overlap(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    """Jaccard overlap; two empty sets share nothing."""
    return len(a & b) / len(a | b) if a | b else 0.0


def only(text: str, words: set[str] | frozenset[str]) -> str:
    """The words of `text` that are in `words`, in their order."""
    return " ".join(t for t in tokens(text) if t in words)


_SUFFIX = re.compile(r"(?:ations?|ing|ed|es|s|er|ers|ion|ions|ment|ments|ly)$")
_DOUBLED = re.compile(r"([b-df-hj-np-rtv-z])\1$")


@lru_cache(maxsize=32768)
def stem(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"  # "advisories" is "advisory", "retries" is "retry"
    stemmed = _SUFFIX.sub("", word)
    if stemmed != word and _DOUBLED.search(stemmed):
        stemmed = stemmed[:-1]  # "running" is "run", "stopped" is "stop"
    return stemmed if len(stemmed) >= 3 else word


@lru_cache(maxsize=32768)
def stems(text: str) -> frozenset[str]:
    return frozen(stem(w) for w in tokens(text) if w not in STOP)


def same_stem(a: str, b: str) -> bool:
    """The crude stems of one word: equal, or one starts the other (four letters at least)."""
    return a == b or (min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)))


# The positive word a negation may stand against: "with" for "without", "can" for "cannot".
_POSITIVE_OF_NEGATION = frozenset({"with", "can"})


def negation_only_difference(expected: str, extracted: str) -> bool:
    """ "when the service is running" against "when the service is not running"; "a job
    with checkpointing" against "a job without checkpointing"."""
    gone, came = residual(expected, extracted)
    # Every changed word a negation or its positive, and one a negation: nearly every
    # pair fails on its first changed word.
    negated = False
    for word in (gone + " " + came).split():
        word = word.lower().strip(".,;:!?")
        if word in NEGATIONS:
            negated = True
        elif word not in _POSITIVE_OF_NEGATION:
            return False
    return negated


# --- spelling that carries no meaning ---------------------------------------------------------

# A contraction is its two words: "doesn't" and "does not" say the same thing, and a negation
# read in one spelling only must not look like a negation added or dropped.
_CONTRACTIONS = [
    (re.compile(r"\b(can)(?:'|’)t\b", re.I), r"\1not"),
    (re.compile(r"\b(won)(?:'|’)t\b", re.I), "will not"),
    (re.compile(r"\b(shan)(?:'|’)t\b", re.I), "shall not"),
    (re.compile(r"\b(\w+)n(?:'|’)t\b", re.I), r"\1 not"),
    (re.compile(r"\b(\w+)(?:'|’)re\b", re.I), r"\1 are"),
    (re.compile(r"\b(\w+)(?:'|’)ve\b", re.I), r"\1 have"),
    (re.compile(r"\b(\w+)(?:'|’)ll\b", re.I), r"\1 will"),
    (re.compile(r"\b(it|that|there|what|here)(?:'|’)s\b", re.I), r"\1 is"),
]
# What each pattern above cannot match without, in the lower-cased text with its curly
# apostrophes made straight.
_CONTRACTION_ENDINGS = ("'t", "'t", "'t", "'t", "'re", "'ve", "'ll", "'s")
# Quotation marks of every kind, made one: which marks quote a message changes nothing.
_QUOTES = frozenset('"`“”‘’')
_QUOTED = re.compile(r"[\"`“]([^\"`“”']*)[\"`”]")
# British and American spellings of the same word: the regular endings by rule (below), the
# rest word by word.
_SPELLINGS = {
    "cheque": "check",
    "cheques": "checks",
    "catalogue": "catalog",
    "catalogues": "catalogs",
    "analogue": "analog",
    "dialogue": "dialog",
    "dialogues": "dialogs",
    "programme": "program",
    "programmes": "programs",
    "licence": "license",
    "licences": "licenses",
    "defence": "defense",
    "offence": "offense",
    "pretence": "pretense",
    "practise": "practice",
    "grey": "gray",
    "tyre": "tire",
    "tyres": "tires",
    "aluminium": "aluminum",
    "sulphur": "sulfur",
    "judgement": "judgment",
    "acknowledgement": "acknowledgment",
    "ageing": "aging",
    "enrol": "enroll",
    "enrols": "enrolls",
    "enrolment": "enrollment",
    "fulfil": "fulfill",
    "fulfils": "fulfills",
    "fulfilment": "fulfillment",
    "instalment": "installment",
    "mould": "mold",
    "moulds": "molds",
    "plough": "plow",
    "storey": "story",
    "draught": "draft",
    "manoeuvre": "maneuver",
    "centre": "center",
    "centres": "centers",
    "centred": "centered",
    "metre": "meter",
    "metres": "meters",
    "litre": "liter",
    "litres": "liters",
    "fibre": "fiber",
    "fibres": "fibers",
    "theatre": "theater",
    "calibre": "caliber",
    "spectre": "specter",
    "whilst": "while",
    "amongst": "among",
    "towards": "toward",
    "afterwards": "afterward",
    "backwards": "backward",
    "forwards": "forward",
}
# Words that end like a British spelling and are spelt so in American too.
_LOOK_BRITISH_ISE = (
    "advise revise promise exercise otherwise precise concise raise arise wise likewise "
    "clockwise expertise franchise enterprise comprise surprise compromise premise devise "
    "supervise televise improvise disguise merchandise paradise excise incise chastise despise "
    "poise praise bruise cruise guise treatise reprise demise appraise apprise noise rise "
    "sunrise upraise advertise porpoise tortoise turquoise anise valise circumcise"
)
_ISE_WORDS = frozenset(_LOOK_BRITISH_ISE.split())
_LOOK_BRITISH_OUR = (
    "four hour our your pour tour flour sour dour contour detour velour devour scour "
    "troubadour paramour amour"
)
_OUR_WORDS = frozenset(_LOOK_BRITISH_OUR.split())
# -ise/-ize, -yse/-yze, -our/-or, a doubled l before -ed/-ing in an unstressed final
# syllable, "ae"/"oe" in medical words.
_BRITISH = re.compile(
    r"\b(?:[a-z]{2,}[iy]s(?:e|es|ed|ing|ation|ations|er|ers)"
    r"|[a-z]{2,}our(?:s|ed|ing|ite|ites|able|ably|ful|less|al|ally|ist|ists|er|ers)?"
    r"|(?:cancel|label|model|travel|signal|level|channel|tunnel|total|fuel|marshal|dial|duel|"
    r"jewel|panel|pedal|shovel|counsel|equal|rival|libel|quarrel|funnel|barrel|bevel|parcel|"
    r"pencil|stencil|initial)l(?:ed|ing|er|ers)"
    r"|(?:paed|anaes|haem|oesoph|leukaem|encyclopaed|orthopaed|oestr|foet|diarrhoe)[a-z]*)\b"
)
# One of which every match of `_BRITISH` holds: a few substring tests spare nearly every
# text the pattern, which is tried at every word (3 texts in 100 have a British spelling).
_BRITISH_CUES = (
    "ise",
    "isi",
    "isa",
    "yse",
    "ysi",
    "ysa",
    "our",
    "lle",
    "lli",
    "paed",
    "anaes",
    "haem",
    "oesoph",
    "leukaem",
    "oestr",
    "foet",
    "diarrhoe",
)
_PREFIXES = (
    ("paed", "ped"),
    ("anaes", "anes"),
    ("haem", "hem"),
    ("oesoph", "esoph"),
    ("leukaem", "leukem"),
    ("encyclopaed", "encycloped"),
    ("orthopaed", "orthoped"),
    ("oestr", "estr"),
    ("foet", "fet"),
    ("diarrhoe", "diarrhe"),
)
_ENDINGS = re.compile(r"(?:e|es|ed|ing|ation|ations|er|ers)$")
_SPELLING = re.compile(r"\b(" + "|".join(sorted(_SPELLINGS, key=len, reverse=True)) + r")\b", re.I)
_WORDS = re.compile(r"[a-z]+")
_BRITISH_ANY_CASE = re.compile(_BRITISH.pattern, re.I)


def _american(word: str) -> str:
    """One word as American English spells it; `word` is in lower case."""
    for british, american in _PREFIXES:
        if word.startswith(british):
            return american + word[len(british) :]
    if word.endswith(("lled", "lling", "ller", "llers")):
        at = word.index("ll", len(word) - 6)
        return word[:at] + word[at + 1 :]
    if "our" in word[-8:]:
        at = word.rindex("our")
        return word if word[: at + 3] in _OUR_WORDS else word[:at] + "or" + word[at + 3 :]
    ending = _ENDINGS.search(word)
    at = ending.start() if ending else len(word)
    # "organis|ed" → "organiz|ed", unless the stem is a word that ends so in American too
    # ("advis|ed" is "advise" + "d").
    if word[at - 2 : at] not in ("is", "ys") or word[:at] + "e" in _ISE_WORDS:
        return word
    return word[: at - 1] + "z" + word[at:]


def _british_to_american(match: re.Match) -> str:
    word = match.group(0)
    american = _american(word.lower())
    return american if word.islower() else _same_case(word, american)


# The comma between digit groups of a number: "5,000", "1,048,576" (not "1,2" or "3, 4").
_DIGIT_GROUP = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,]*\d)")


@lru_cache(maxsize=32768)
def plain_spelling(text: str) -> str:
    """The text with spelling that changes no meaning made one: contractions spelt out,
    British spellings in American, a capital that only starts the sentence and the full stop
    that only ends it dropped. What the words say is untouched."""
    text = text.strip()
    if "'" in text or "’" in text:
        text = _spelt_out(text)
    if not _QUOTES.isdisjoint(text):
        # 'Resources exceeded', "Resources exceeded" and `Resources exceeded` quote alike (a
        # quotation holding a single quote keeps its marks).
        text = _QUOTED.sub(r"'\1'", text.replace("‘", "'").replace("’", "'"))
    low = text.lower()
    # Most texts hold none of these words: one scan of the lower-cased words decides.
    if not _SPELLINGS.keys().isdisjoint(_WORDS.findall(low)):
        text = _SPELLING.sub(lambda m: _same_case(m.group(1), _SPELLINGS[m.group(1).lower()]), text)
    if _holds_any(low, _BRITISH_CUES) and _BRITISH.search(low):
        text = _BRITISH_ANY_CASE.sub(_british_to_american, text)
    if "," in text:
        # "5,000" is 5000: a comma grouping the thousands is no change of number.
        text = _DIGIT_GROUP.sub(lambda m: m.group(0).replace(",", ""), text)
    text = text.rstrip(".").rstrip()
    if len(text) > 1 and text[0].isupper() and text[1:2].islower():
        text = text[0].lower() + text[1:]
    return text


def _holds_any(text: str, strings: tuple[str, ...]) -> bool:
    # A loop, not `any` over a generator: the generator cost more than the tests.
    for s in strings:  # noqa: SIM110
        if s in text:
            return True
    return False


def _spelt_out(text: str) -> str:
    """The contractions spelt out. A pattern whose ending ("'t", "'re", ...) the text does
    not hold is not tried: with one apostrophe in five texts and eight patterns, most of
    the patterns tried found nothing. Outside ASCII (the curly apostrophe aside) every
    pattern is tried: under re.IGNORECASE "ſ" matches "s" and "K" (the Kelvin sign) "k",
    which lower-casing does not show."""
    if not text.replace("’", "'").isascii():
        for rx, replacement in _CONTRACTIONS:
            text = rx.sub(replacement, text)
        return text
    low = text.replace("’", "'").lower()
    for (rx, replacement), ending in zip(_CONTRACTIONS, _CONTRACTION_ENDINGS, strict=True):
        if ending in low:
            spelt = rx.sub(replacement, text)
            if spelt != text:
                text, low = spelt, spelt.replace("’", "'").lower()
    return text


def _same_case(word: str, replacement: str) -> str:
    return replacement.capitalize() if word[:1].isupper() else replacement
