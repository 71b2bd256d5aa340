"""Triggers: failure-mode atoms read from prose and how two atom sets agree (semantics §1, §11, §12).

"when git push fails with non-fast-forward" → {"tool:git", "action:git.push",
"error:non_fast_forward"}: a conflicting error class, status code, action or tool is strong
evidence of a different rule, and an atom one side does not state is never a conflict.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from .lexicon import (
    ACTION_LEXICON,
    COMPILED_ACTIONS,
    ERROR_LEXICON,
    KNOWN_LEXICON,
    STATE_LEXICON,
    TOOL_LEXICON,
)
from .text import CaseBlind, frozen, overlap, stems

_HTTP_STATUS = re.compile(
    r"\b([45]\d\d)\b(?!\s*(?:mb|gb|kb|ms|s\b|sec|seconds|minutes|%|mib|gib|bytes|lines|rows|files))",
    re.I,
)
_EXIT_CODE = re.compile(
    r"\b(?:exit(?:s|ed)?|exit code|code|status)\s*(?:with\s*)?(?:code\s*)?(\d{1,3})\b"
)
# Identifiers a tool prints verbatim (ERESOLVE, ExpiredToken, invalid_grant): they name a
# failure exactly, so two different ones are as good as two different error classes.
_IDENTIFIER = re.compile(
    r"\b(?:[A-Z]{4,}[A-Z0-9_]*|[a-z]+_[a-z_]+|[A-Z][a-z]+(?:[A-Z][a-z0-9]+)+)\b"
)
_IGNORED_IDENTIFIERS = {"HEAD", "TODO", "NULL", "JSON", "HTTP", "HTTPS", "CORS", "UTF"}

_TOOL_VERB = CaseBlind(
    r"\b(git|npm|pip3?|yarn|pnpm|cargo|go|docker|kubectl|helm|terraform|mvn|gradle|conda|poetry|"
    r"gcloud|az|aws)\s+([a-z][a-z-]+)\b"
)
_TOOL_ALIASES = {"pip3": "pip", "mvn": "maven", "kubectl": "kubernetes"}
_NOT_SUBCOMMANDS = {
    "says",
    "say",
    "reports",
    "report",
    "complains",
    "cannot",
    "can",
    "fails",
    "fail",
    "failed",
    "is",
    "was",
    "has",
    "the",
    "a",
    "an",
    "with",
    "over",
    "to",
    "and",
    "or",
    "commands",
    "command",
    "refuses",
    "rejects",
    "returns",
    "toolchain",
    "cli",
    "daemon",
    "will",
    "does",
    "did",
    "errors",
    "error",
    "asks",
    "warns",
    "keeps",
    "hangs",
    "times",
}

# The word a trigger hangs on ("when X fails with Y"): the action closest to the start.
_TRIGGER_CONDITION = CaseBlind(
    r"\b(?:fails?|failed|failing|errors?|rejected|refused|returns?|responds?|answers?|raises?|"
    r"exits?|stops?|complains?|breaks?|says|reports?|stuck|hangs?|times? out|with|because|on)\b"
)


def trigger_atoms(text: str) -> set[str]:
    """Failure-mode atoms read from prose, e.g.

    "when git push fails with non-fast-forward"
    → {"tool:git", "action:git.push", "error:non_fast_forward"}.

    Keys: `tool`, `action` (`<tool>.<verb>` when one tool is named, else the bare verb),
    `error` (canonical class), `status` (HTTP status), `exit` (process exit code), `code`
    (a verbatim identifier such as `invalid_grant` that no error class covers) and `state`
    (qualifiers such as behind/ahead). Atoms that are not said are absent: absence is never
    a conflict.
    """
    return set(atoms_of(text))


# An expected rule is compared with every candidate extracted for it, and duplicate
# detection compares the same candidates again and again: memoise the prose parsing.
@lru_cache(maxsize=32768)
def atoms_of(text: str) -> frozenset[str]:
    atoms = {f"tool:{t}" for t in TOOL_LEXICON.found(text)}
    atoms |= _actions(text)
    atoms.update(f"error:{e}" for e in ERROR_LEXICON.found(text))
    atoms.update(f"state:{s}" for s in STATE_LEXICON.found(text))
    # Each pattern below is tried at every position of the text; a substring test first
    # spares most texts the scan: a status needs a 4 or a 5, an exit code one of the
    # three words, an identifier a capital or an underscore.
    if "4" in text or "5" in text:
        atoms.update(f"status:{m.group(1)}" for m in _HTTP_STATUS.finditer(text))
    low = text.lower()
    if "exit" in low or "code" in low or "status" in low:
        atoms.update(
            f"exit:{m.group(1)}"
            for m in _EXIT_CODE.finditer(low)
            if not 400 <= int(m.group(1)) < 600
        )
    if "_" in text or not text.islower():
        for m in _IDENTIFIER.finditer(text):
            word = m.group(0)
            if word not in _IGNORED_IDENTIFIERS and not _known(word):
                atoms.add(f"code:{word.lower()}")
    return frozen(atoms)


@lru_cache(maxsize=32768)
def _known(word: str) -> bool:
    # The same identifiers come back in text after text.
    return bool(KNOWN_LEXICON.found(word))


def _actions(text: str) -> set[str]:
    # "git push", "npm ci", "kubectl apply": a tool's own subcommand names the action
    # exactly, so two different ones are two different triggers.
    atoms: set[str] = set()
    for m in _TOOL_VERB.finditer(text):
        word = m.group(2).lower()
        if word in _NOT_SUBCOMMANDS:
            continue
        canonical = next(
            (v for v in ACTION_LEXICON.found(word) if COMPILED_ACTIONS[v].fullmatch(word)), word
        )
        tool = _TOOL_ALIASES.get(m.group(1).lower(), m.group(1).lower())
        atoms.add(f"action:{tool}.{canonical}")
    if atoms:
        return atoms
    # Otherwise the verbs named before the failure is described are what the trigger is
    # about; verbs after it ("…because local edits would be lost") describe it.
    low = text.lower()
    cut = _TRIGGER_CONDITION.search(low)
    if not cut:
        return {f"action:{v}" for v in _first_verbs(low, low)}
    verbs = _first_verbs(low[: cut.end()], low) or _first_verbs(low, low)
    return {f"action:{v}" for v in verbs}


def _first_verbs(low: str, whole: str) -> list[str]:
    """The first two actions named in `low`, a lower-cased start of `whole`.

    The patterns tried are those the prefilter gives for `whole`: every string a start
    holds is found in the whole text, inside the longest string found where it starts, so
    they include those it gives for `low`, and a start is not scanned again. Each pattern
    is searched once, its first match giving both the verb and its place."""
    if not low.isascii():
        hits = sorted(
            (m.start(), v)
            for v in ACTION_LEXICON.found(low)
            for m in [COMPILED_ACTIONS[v].search(low)]
        )
        return [v for _, v in hits[:2]]
    members = ACTION_LEXICON.members
    hits = []
    for i in ACTION_LEXICON.prefilter.candidates(whole):
        name, rx, _ = members[i]
        m = rx.search(low)
        if m:
            hits.append((m.start(), name))
    hits.sort()
    return [v for _, v in hits[:2]]


def atom_key(atom: str) -> str:
    return atom.partition(":")[0]


def _action_verb(atom: str) -> str:
    return atom.partition(":")[2].rpartition(".")[2]


# How much a disagreement on each key counts. An error class or status code is the
# failure itself; a tool or action names where it happened; a verbatim identifier is
# exact but rare.
_KEY_WEIGHT = {
    "error": 3.0,
    "status": 3.0,
    "code": 2.0,
    "exit": 2.0,
    "action": 1.5,
    "tool": 1.0,
    "state": 2.0,
}
# Keys whose disjoint values are a conflict (two different failures), not just detail.
CONFLICT_KEYS = ("error", "status", "code", "exit", "action", "tool", "state")
_STATE_OPPOSITES = {
    frozenset(pair)
    for pair in [
        ("behind", "ahead"),
        ("intended", "unintended"),
        ("production", "staging"),
        ("production", "local"),
        ("staging", "local"),
        ("windows", "macos"),
        ("windows", "linux"),
        ("macos", "linux"),
    ]
}
# "fails" against "passes" only counts when one side says only one and the other only
# the other ("tests pass alone but fail together" says both).
_EXCLUSIVE_STATES = [("failing", "passing")]
_POLARITY_STATES = frozenset({"failing", "passing"})


def signature_agreement(
    expected_atoms: Iterable[str], extracted_atoms: Iterable[str]
) -> tuple[float, list[str]]:
    """Agreement in [0, 1] of two atom sets, key by key, and the conflicts found.

    Per key present on both sides: equal sets 1.0; one inside the other 0.8 (one side
    says more); overlapping with extras on both sides 0.35; disjoint 0.0 (a conflict).
    A key present on one side only is "not said" and counts 0.6, so a rewording that
    leaves out the tool is not punished like a wrong error class. No atoms at all: 0.5.
    """
    exp, ext = set(expected_atoms), set(extracted_atoms)
    by_key_exp, by_key_ext = _by_key(exp), _by_key(ext)
    qualified = _qualified(exp) and _qualified(ext)
    total = weight_sum = 0.0
    conflicts: list[str] = []
    for key in sorted(set(by_key_exp) | set(by_key_ext)):
        a, b = by_key_exp.get(key, set()), by_key_ext.get(key, set())
        score = _key_score(key, a, b, qualified)
        if score is None:
            continue  # nearly every trigger "fails": that says nothing unless the other passes
        if score == 0.0 and key in CONFLICT_KEYS:
            conflicts.append(f"{key}: {', '.join(sorted(a))} vs {', '.join(sorted(b))}")
        if key == "error" and a and b and score == 0.35:
            conflicts.append(f"{key}: {', '.join(sorted(a - b))} vs {', '.join(sorted(b - a))}")
        weight = _KEY_WEIGHT.get(key, 1.0)
        total += weight * score
        weight_sum += weight
    if weight_sum == 0:
        return 0.5, []
    return total / weight_sum, conflicts


def _by_key(atoms: set[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for atom in atoms:
        out.setdefault(atom_key(atom), set()).add(_comparable(atom))
    return out


def _key_score(key: str, a: set[str], b: set[str], qualified: bool) -> float | None:
    if not a or not b:
        score = 0.6
    elif a == b:
        score = 1.0
    elif a <= b or b <= a:
        score = 0.8
    elif a & b:
        score = 0.35
    else:
        score = 0.0
    if key in {"tool", "action"} and score == 0.0:
        # Tools co-occur (git over ssh) and loose verbs are noisy ("cannot build the
        # dependency graph" for "npm install fails"): a mismatch lowers the agreement;
        # only two different subcommands of the same tool conflict outright.
        score = 0.0 if key == "action" and qualified else 0.2
    if key == "state" and a and b:
        score = 0.0 if _opposite_states(a, b) else max(score, 0.6)
    if key == "state" and score > 0.0 and not (a | b) - _POLARITY_STATES:
        return None
    return score


def _opposite_states(a: set[str], b: set[str]) -> bool:
    # Only a state one side names and the other does not can oppose: two triggers that
    # both say "between staging and production" agree, though the two states oppose.
    only_a, only_b = a - b, b - a
    return any(frozenset({x, y}) in _STATE_OPPOSITES for x in only_a for y in only_b) or any(
        (x in a and y not in a and y in b and x not in b)
        or (y in a and x not in a and x in b and y not in b)
        for x, y in _EXCLUSIVE_STATES
    )


def _qualified(atoms: set[str]) -> bool:
    return any(a.startswith("action:") and "." in a for a in atoms)


def _comparable(atom: str) -> str:
    # `action:git.push` and a bare `action:push` name the same action; the tool is
    # compared on its own key.
    return _action_verb(atom) if atom_key(atom) == "action" else atom.partition(":")[2]


def declared_atoms(atoms: Iterable[str]) -> frozenset[str]:
    """A candidate's own signature, read into this module's vocabulary.

    Signatures are free-form (`error:http_429`, `error:file_not_found`, `tool:kubectl`):
    each value is read as prose, so `error:http_429` counts as `status:429` and
    `error:rate_limited`. An atom that reads as nothing known is left out rather than
    set against the prose atoms: an unknown name is not a different failure. Notice
    atoms (breach:/stall:/regression:) say which metric suffered, not what failed.
    """
    out: set[str] = set()
    for atom in atoms:
        key, _, value = atom.partition(":")
        if key in {"breach", "stall", "regression"} or not value:
            continue
        prose = re.sub(r"[_.:/-]+", " ", value)
        if key == "tool":
            out.update(f"tool:{t}" for t in TOOL_LEXICON.found(prose))
        elif key == "action":
            verb = prose.split()[-1]
            known = [v for v in ACTION_LEXICON.found(verb) if COMPILED_ACTIONS[v].fullmatch(verb)]
            out.update(f"action:{v}" for v in known)
        else:
            out.update(
                a for a in atoms_of(prose) if atom_key(a) in {"error", "status", "exit", "code"}
            )
    return frozenset(out)


# A single quote opens only where no letter stands before it and closes only where none
# follows: the apostrophes of "the user's build doesn't start" quote nothing, and a
# quoted message may hold one ("'can't locate revision'").
_QUOTED = re.compile(r"(?<!\w)'(\S.{2,}?)'(?!\w)|\"([^\"]{3,})\"")
# Share of stems two quoted messages must have in common to be read as the same message.
_QUOTED_MIN_OVERLAP = 0.25
_GENERIC_MESSAGE = stems(
    "error errors failed fail failure fatal warning cannot cant unable could not found invalid "
    "exception the a an to of for in on is was with no"
)


def other_message_quoted(expected: str, extracted: str) -> str | None:
    """Both triggers quote the message they fire on, and the messages share next to no
    words: "'Multiple head revisions are present'" is not "'Can't locate revision'"."""
    a = [x or y for x, y in _QUOTED.findall(expected)]
    b = [x or y for x, y in _QUOTED.findall(extracted)]
    if not a or not b:
        return None
    # What one side quotes and the other says unquoted is the same thing ("'unauthorized'"
    # against "shows the device as unauthorized"; a command in backticks on one side only).
    a = [q for q in a if not stems(q) <= stems(extracted)]
    b = [q for q in b if not stems(q) <= stems(expected)]
    if not a or not b:
        return None
    # Words every error message says ("Error: X failed") do not make two messages one.
    sa, sb = stems(" ".join(a)) - _GENERIC_MESSAGE, stems(" ".join(b)) - _GENERIC_MESSAGE
    if sa and sb and overlap(sa, sb) < _QUOTED_MIN_OVERLAP:
        return f"another message: {a[0]!r} vs {b[0]!r}"
    return None
