"""Directives: the stance a piece of advice takes and the ways two pieces differ (semantics §12).

Each finding is `(kind, message)`: the kind is what the model reads (a feature), the
message what the page shows. "back off" against "retry at once", a bypass on one side
only, the preferred and rejected option swapped, the same steps in the other order, a
switch set the other way, one rule doing what the other forbids.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .lexicon import (
    ACTION_LEXICON,
    ASYMMETRIC_HARD,
    ASYMMETRIC_SOFT,
    COMPILED_ACTIONS,
    NEGATED,
    OPPOSED,
    STANCE_LEXICON,
    TOOL_LEXICON,
    VERB_LEXICON,
)
from .text import (
    STOP,
    CaseBlind,
    frozen,
    negation_only_difference,
    overlap,
    same_stem,
    stem,
    stems,
    tokens,
)

Finding = tuple[str, str]

# Finding kinds that say the advice is different, as against a doubt about it.
HARD_KINDS = frozenset(
    {
        "opposed",
        "negated",
        "only_hard",
        "unsafe",
        "swapped",
        "negation",
        "flipped",
        "forbidden",
        "rejected",
    }
)
# Acts one rule takes and the other does not: forcing, bypassing a check, retrying at once.
# An extracted rule that adds one has an agent do what the author ruled out; one that drops
# it (the expected rule's "retry at once" against "back off") is the opposite advice. Either
# way round, never the same rule: duplicate detection compares rules in both orders.
UNSAFE = frozenset({"force", "bypass", "retry_now"})
SOFT_KINDS = frozenset({"only_soft", "numbers", "flags", "acts", "tools"})


def directive_stances(text: str) -> set[str]:
    """Stances a directive takes; a negated one reads `no_<stance>` ("never force push")."""
    return set(stances_of(text))


@lru_cache(maxsize=32768)
def stances_of(text: str) -> frozenset[str]:
    """A stance taken anywhere outside a negation is taken ("truncate it rather than
    removing it" destroys); one only ever negated reads `no_<stance>`; a text may hold
    both."""
    low = text.lower()
    found: set[str] = set()
    for name in STANCE_LEXICON.found(low):
        negated = NEGATED[name]
        if negated.search(low):
            found.add(f"no_{name}")
            if STANCE_LEXICON.patterns[name].search(negated.sub(" ", low)):
                found.add(name)
        else:
            found.add(name)
    return frozen(found)


def stance_conflicts(expected: str, extracted: str) -> list[str]:
    """Reasons the two directives give different advice ([] when none is seen)."""
    return [msg for kind, msg in directive_findings(expected, extracted) if kind in HARD_KINDS]


def directive_findings(expected: str, extracted: str) -> list[Finding]:
    """Every way the two directives differ in what they advise, hard and soft."""
    found = _stance_findings(stances_of(expected), stances_of(extracted))
    swapped = (
        preference_swapped(expected, extracted)
        or _order_swapped(expected, extracted)
        or _steps_reversed(expected, extracted)
    )
    if swapped:
        found.append(("swapped", swapped))
    if negation_only_difference(expected, extracted):
        found.append(("negation", "one side negates the other"))
    flipped = _settings_flipped(expected, extracted)
    if flipped:
        found.append(("flipped", flipped))
    forbidden = forbidden_done(expected, extracted)
    if forbidden:
        found.append(("forbidden", forbidden))
    return found + _detail_findings(expected, extracted)


def _stance_findings(a: frozenset[str], b: frozenset[str]) -> list[Finding]:
    found: list[Finding] = []
    for x, y in OPPOSED:
        # One side takes x and not y, the other y and not x: "raise" vs "lower", but not
        # "give it more memory or reduce its footprint" (both) against "raise the limit".
        if (x in a and y not in a and y in b and x not in b) or (
            y in a and x not in a and x in b and y not in b
        ):
            found.append(("opposed", f"{x.replace('_', ' ')} vs {y.replace('_', ' ')}"))
    for name in (*ASYMMETRIC_HARD, *ASYMMETRIC_SOFT):
        label = name.replace("_", " ")
        no = f"no_{name}"
        if (name in a and no not in a and no in b and name not in b) or (
            no in a and name not in a and name in b and no not in b
        ):
            found.append(("negated", f"{label} vs never {label}"))
        elif (name in a) != (name in b) and f"no_{name}" not in a | b:
            side = "extracted" if name in b else "expected"
            kind = "only_hard" if name in ASYMMETRIC_HARD else "only_soft"
            if name in UNSAFE:
                kind = "unsafe"
            found.append((kind, f"only the {side} rule says {label}"))
    return found


def _detail_findings(expected: str, extracted: str) -> list[Finding]:
    found: list[Finding] = []
    for label in _DETAIL_PATTERNS:
        da = _details(expected, label)
        db = _details(extracted, label) if da else da
        if da and db and not da & db:
            found.append(
                (label, f"different {label}: {', '.join(sorted(da))} vs {', '.join(sorted(db))}")
            )
    va, vb = verb_classes(expected), verb_classes(extracted)
    if va and vb and not va & vb:
        found.append(
            ("acts", f"different acts: {', '.join(sorted(va))} vs {', '.join(sorted(vb))}")
        )
    ta, tb = _tools_named(expected), _tools_named(extracted)
    if ta and tb and not ta & tb:
        found.append(
            ("tools", f"different tools: {', '.join(sorted(ta))} vs {', '.join(sorted(tb))}")
        )
    return found


@lru_cache(maxsize=32768)
def _details(text: str, label: str) -> frozenset[str]:
    # Memoised: the expected rule's are read again for every candidate compared with it.
    # A number needs a digit: one quick scan spares most texts the pattern.
    if label == "numbers" and not _DIGIT.search(text):
        return frozen(())
    return frozen(_DETAIL_PATTERNS[label].findall(text.lower()))


@lru_cache(maxsize=32768)
def _tools_named(text: str) -> frozenset[str]:
    return frozen(TOOL_LEXICON.found(text))


@lru_cache(maxsize=32768)
def verb_classes(text: str) -> frozenset[str]:
    return frozen(VERB_LEXICON.found(text))


# Details a directive states exactly: two different ones are probably two different rules.
_DETAIL_PATTERNS = {
    "numbers": re.compile(r"(?<![\w.-])(\d+(?:\.\d+)?)(?![\w.])"),
    "flags": re.compile(r"(?<![\w-])(--?[a-z][\w-]*)"),
}

_DIGIT = re.compile(r"\d")
_SETTING = re.compile(r"([a-z_][\w.-]*)\s*[=:]\s*(true|false|yes|no|on|off)\b")
_HAS_ASSIGNMENT = re.compile(r"[=:]")
_TRUTH = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


def _settings_flipped(expected: str, extracted: str) -> str | None:
    """ "set acks_late=True" against "set acks_late=False": the same switch, the other way."""
    if not (_HAS_ASSIGNMENT.search(expected) and _HAS_ASSIGNMENT.search(extracted)):
        return None  # cheap test first: the pattern tries every word as a switch's name
    a = {k: _TRUTH[v] for k, v in _SETTING.findall(expected.lower())}
    b = {k: _TRUTH[v] for k, v in _SETTING.findall(extracted.lower())}
    flipped = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
    return f"{', '.join(flipped)} set the other way" if flipped else None


PREFERENCE_CUE = CaseBlind(r"instead of|rather than|in place of")
PREFERENCE = re.compile(r"(.+?)\s+(?:instead of|rather than|in place of)\s+(.+)", re.I)
# A flag is one token ("--extra-index-url" is not "--index-url" plus "extra").
_OPTION_TOKEN = re.compile(r"(?<![\w-])--?[a-z][\w-]*|[a-z0-9_]+|[^\sa-z0-9_]+")
# A pronoun names the option of the other clause ("drop the slot instead of leaving it"):
# it is no word of either option.
_OPTION_STOP = frozenset(
    {"use", "the", "a", "an", "to", "with", "and", "then", "it", "them", "this", "that", "one"}
)


def _option(text: str) -> set[str]:
    # Symbols count here: "IS NULL" against "= NULL" differ by one of them.
    return {t for t in _OPTION_TOKEN.findall(text.lower()) if t not in _OPTION_STOP}


def preference_swapped(expected: str, extracted: str) -> str | None:
    """ "use IS NULL instead of = NULL" against "use = NULL instead of IS NULL"."""
    if not (PREFERENCE_CUE.holds(expected) and PREFERENCE_CUE.holds(extracted)):
        return None  # cheap test first: the lazy pattern below backtracks over the text
    ma, mb = PREFERENCE.search(expected), PREFERENCE.search(extracted)
    if not ma or not mb:
        return None
    keep_a, drop_a = _option(ma.group(1)), _option(ma.group(2))
    keep_b, drop_b = _option(mb.group(1)), _option(mb.group(2))
    if overlap(drop_a, keep_b) > overlap(drop_a, drop_b) and overlap(keep_a, drop_b) > overlap(
        keep_a, keep_b
    ):
        return "the preferred and the rejected option are swapped"
    return None


# A "not" after a comma, a dash or "but" refuses what follows ("decode it as cp1252, not UTF-8";
# "map on the code, but not on the name"); a "not" elsewhere may negate anything.
_NEGATED_PHRASE = CaseBlind(
    r"(?:\b(?:never|don'?t|do not|avoid|without|no longer|instead of|rather than)|"
    r"(?:[,;:\u2013\u2014]|\s-|\bbut)\s+not)\s+([^;,.:!?]+)"
)


def forbidden_done(expected: str, extracted: str) -> str | None:
    """ "deduplicate by event ID" against "do not deduplicate; process every delivery": one
    rule does what the other forbids. The forbidden act is the first content words after
    the negation (two at most: "do not retry immediately" forbids retrying immediately,
    not retrying); the other rule does it when it has them all outside its own negations."""
    for rule, other, side in (
        (expected, extracted, "extracted"),
        (extracted, expected, "expected"),
    ):
        acts = _forbidden_acts(rule)
        if not acts:
            continue
        other_done, rule_done = _done_outside_negations(other), _done_outside_negations(rule)
        for act in acts:
            if all(any(same_stem(w, o) for o in other_done) for w in act):
                # A rule that reads as doing what it forbids ("use xQueueSendFromISR
                # instead of xQueueSend": one name starts the other) tells nothing.
                if all(any(same_stem(w, o) for o in rule_done) for w in act):
                    continue
                return f"the {side} rule does what the other forbids ({' '.join(act)})"
    return None


# Both memoised per text: the expected rule's are read again for every candidate.
@lru_cache(maxsize=32768)
def _forbidden_acts(text: str) -> tuple[tuple[str, ...], ...]:
    """The acts a rule forbids, in order: the stems of the first two content words after
    each negation that has any."""
    acts = []
    for found in _NEGATED_PHRASE.finditer(text.lower()):
        act = tuple([stem(w) for w in tokens(found.group(1)) if w not in STOP][:2])
        if act:
            acts.append(act)
    return tuple(acts)


@lru_cache(maxsize=32768)
def _done_outside_negations(text: str) -> frozenset[str]:
    return stems(_NEGATED_PHRASE.any_case.sub(" ", text.lower()))


_SEQUENCE_CUE = CaseBlind(r"\b(?:first|then|before|after|afterwards|later|until)\b")


def _order_swapped(expected: str, extracted: str) -> str | None:
    """ "deploy the code first and drop the column later" against the reverse order."""
    if not (_SEQUENCE_CUE.holds(expected) and _SEQUENCE_CUE.holds(extracted)):
        return None
    seq_a, seq_b = _verb_sequence(expected), _verb_sequence(extracted)
    common = [v for v in seq_a if v in seq_b]
    if len(common) < 2:
        return None
    if common != sorted(common, key=seq_b.index):
        return f"the steps come in the opposite order ({' then '.join(common)})"
    return None


_AFTER = re.compile(r"\bafter\b")


def _verb_sequence(text: str) -> list[str]:
    text = _without_rejected(text.lower())
    hits = sorted(
        (m.start(), v)
        for v in ACTION_LEXICON.found(text)
        for m in COMPILED_ACTIONS[v].finditer(text)
    )
    seen: list[str] = []
    for _, verb in hits:
        if verb not in seen:
            seen.append(verb)
    # "before"/"after" reorder their clause: "pull before pushing" is pull, push;
    # "push after pulling" is pull, push as well.
    if len(seen) == 2 and _AFTER.search(text):
        first_clause = _AFTER.split(text)[0]
        if COMPILED_ACTIONS[seen[0]].search(first_clause):
            seen.reverse()
    return seen


# "instead of X" and "rather than X" name an option the rule rejects, not a step of it:
# "rebuild the lock file instead of editing it" has one step.
_REJECTED_CLAUSE = re.compile(r"\s*\b(?:instead of|rather than|in place of)\b[^;,.]*")
_LEADING_TIME = re.compile(r"^\s*(?:only )?(before|after|once)\s+([^,]+),\s*(.+)$")
_TRAILING_TIME = re.compile(r"^(.+?)\s+(?:only )?(before|after|once)\s+(.+)$")
_STEP_SPLIT = re.compile(r"\s*(?:;|,|\band then\b|\bthen\b|\band\b)\s*")
# Words that place a step in time rather than name it.
_STEP_WORDS = frozenset(["first", "afterwards", "later", "next", "finally", "only", "also"])


def _without_rejected(low: str) -> str:
    return _REJECTED_CLAUSE.sub("", low)


@lru_cache(maxsize=32768)
def steps(text: str) -> tuple[str, ...]:
    """The acts of a directive in the order it wants them done, each read as the stem of
    its step's first content word: "verify the signature before processing the event" and
    "after verifying the signature, process it" both give verify, process."""
    low = _without_rejected(text.lower())
    lead = _LEADING_TIME.match(low)
    trail = None if lead else _TRAILING_TIME.match(low)
    if lead:
        kind, sub, main = lead.groups()
        parts = [main, sub] if kind == "before" else [sub, main]
    elif trail:
        main, kind, sub = trail.groups()
        parts = [main, sub] if kind == "before" else [sub, main]
    else:
        parts = [low]
    heads: list[str] = []
    for part in parts:
        for step in _STEP_SPLIT.split(part):
            words = [w for w in tokens(step) if w not in STOP and w not in _STEP_WORDS]
            if words and stem(words[0]) not in heads:
                heads.append(stem(words[0]))
    return tuple(heads)


def _steps_reversed(expected: str, extracted: str) -> str | None:
    """ "verify the signature before processing" against "process first, verify afterwards"."""
    if not (_SEQUENCE_CUE.holds(expected) or _SEQUENCE_CUE.holds(extracted)):
        return None
    a, b = steps(expected), steps(extracted)
    # Where each of the expected rule's acts comes in the extracted one ("proces" is
    # "process": the stems are crude, so a shared start of four letters will do).
    at = {h: next((i for i, k in enumerate(b) if same_stem(h, k)), None) for h in a}
    common = [h for h in a if at[h] is not None]
    if len(common) >= 2 and common != sorted(common, key=at.__getitem__):
        return f"the steps come in the opposite order ({' then '.join(common)})"
    return None
