"""The evidence about one pair of rules, as named numbers for the model (semantics §12).

Every signal the comparator reads becomes one feature: how close the two texts are for
the embedding model (as a whole, and over the words they do not share), how the trigger
atoms agree, which stance findings separate the directives, whether amounts, status
classes or the order of shared terms changed. The model (model.py) weighs them; the
findings that name a difference are also kept as sentences for the page.
"""

from __future__ import annotations

import bisect
import math
import re
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from .directives import HARD_KINDS, directive_findings, stances_of, verb_classes
from .identifiers import name_agreement
from .paraphrase import paraphrase_share
from .quantities import digits_replaced, quantity_agreement, status_class_agreement
from .swaps import explained_share, key_term_swapped, opposites, rejected_alternative
from .text import (
    STOP,
    content,
    negation_only_difference,
    overlap,
    residual,
    stem,
    stems,
    token_f1,
    tokens,
)
from .thesaurus import changed_words
from .triggers import CONFLICT_KEYS, atoms_of, other_message_quoted, signature_agreement

if TYPE_CHECKING:
    import numpy as np

    from .semantic import StaticEmbedder

FINDING_KINDS = (
    "opposed",
    "negated",
    "only_hard",
    "unsafe",
    "only_soft",
    "swapped",
    "negation",
    "flipped",
    "forbidden",
    "rejected",
    "numbers",
    "flags",
    "acts",
    "tools",
)
_FIELD = (
    "whole",
    "residual",
    "align",
    "changed",
    "f1",
    "swap",
    "explained",
    "unexplained",
    "one_sided",
    "opposites",
    "amounts",
    "status",
    "order",
    "digits",
)
FEATURES: tuple[str, ...] = (
    *(f"trigger_{n}" for n in _FIELD),
    *(f"directive_{n}" for n in _FIELD),
    "trigger_agreement",
    *(f"trigger_conflict_{k}" for k in CONFLICT_KEYS),
    "trigger_negation",
    "trigger_quoted",
    *(f"directive_{k}" for k in FINDING_KINDS),
    "directive_acts_overlap",
    "directive_stances_overlap",
    "directive_precondition",
    "trigger_conflicts",
    "directive_conflicts",
    "directive_doubts",
    "pair_clean",
    "pair_whole",
    *(f"{field}_{n}" for n in ("synonyms", "antonyms") for field in ("trigger", "directive")),
    "trigger_paraphrase",
    "directive_paraphrase",
    "pair_literals_shared",
    "pair_literals_replaced",
    "pair_length_ratio",
)


# Which way each feature may move the probability, whatever the data say: more similarity
# or agreement never makes "same rule" less likely, a conflict never makes it more likely.
# How much was reworded (`changed`, `f1`) may go either way.
_RISING = frozenset(
    {"whole", "residual", "align", "explained", "amounts", "status", "agreement", "clean"}
    | {"synonyms", "paraphrase", "literals_shared"}
    | {"acts_overlap", "stances_overlap"}
)
_EITHER = frozenset({"changed", "f1", "one_sided", "length_ratio"})


def monotone(name: str) -> int:
    """+1, -1 or 0: the direction the model is constrained to for a feature."""
    signal = name.partition("_")[2]
    if signal in _EITHER:
        return 0
    return 1 if signal in _RISING else -1


class Evidence(NamedTuple):
    features: dict[str, float]
    semantic: dict[str, float]  # per field, the labelled component shown on the page
    agreement: float
    conflicts: list[str]
    doubts: list[str]
    declared_features: dict[str, float] | None = None


def field_texts(expected: str, extracted: str) -> list[str]:
    """The four texts of a field the embedding model reads: both sides and what differs."""
    gone, came = residual(expected, extracted)
    return [expected, extracted, gone, came]


def pair_evidence(
    expected: dict[str, str],
    extracted: dict[str, str],
    vectors: np.ndarray,
    embedder: StaticEmbedder,
    declared: frozenset[str] = frozenset(),
) -> Evidence:
    """All features of one pair; `vectors` are the eight of `field_texts` for both fields.

    With a declared signature (the candidate's own atoms, what the matcher will fire on,
    semantics §11) there is a second feature set in which those atoms stand for the
    extracted trigger's: the rule must be the expected one both as written and as it
    will match."""
    features: dict[str, float] = {}
    semantic: dict[str, float] = {}
    swaps: dict[str, str | None] = {}
    for n, field in enumerate(("trigger", "directive")):
        exp, ext = expected[field], extracted[field]
        values, semantic[field], swaps[field] = _field_features(
            exp, ext, vectors[4 * n : 4 * n + 4], embedder
        )
        features.update({f"{field}_{k}": v for k, v in values.items()})
    exp_t, ext_t = expected["trigger"], extracted["trigger"]
    agreement, t_conflicts = _trigger_features(exp_t, ext_t, atoms_of(ext_t), features)
    d_conflicts, doubts = _directive_features(
        expected["directive"], extracted["directive"], embedder, features
    )
    for field, found in (("trigger", t_conflicts), ("directive", d_conflicts)):
        if swaps[field] and not found:
            found.append(swaps[field])
    _pool(features, t_conflicts, d_conflicts, doubts)
    _thesaurus_features(expected, extracted, features)
    _name_features(expected, extracted, features)
    features["pair_clean"] = _clean(features)
    # Both fields at once: an unrelated rule is far in both, a rewording of the same rule
    # is seldom far in both; each field alone leaves the two overlapping.
    features["pair_whole"] = (features["trigger_whole"] + features["directive_whole"]) / 2
    conflicts = [f"trigger {c}" for c in t_conflicts] + [f"directive {c}" for c in d_conflicts]
    evidence = Evidence(
        features, semantic, agreement, conflicts, [f"directive {d}" for d in doubts]
    )
    return _with_declared(evidence, exp_t, ext_t, declared, d_conflicts) if declared else evidence


def _thesaurus_features(
    expected: dict[str, str], extracted: dict[str, str], out: dict[str, float]
) -> None:
    # Everyday words the lexicon does not list, read from WordNet: the share of changed
    # words with a synonym on the other side ("sluggish" for "slow"), and how many were
    # replaced by their opposite ("raise" for "lower").
    for field in ("trigger", "directive"):
        gone, came = residual(expected[field], extracted[field])
        gone_content, came_content = content(gone), content(came)
        share, opposed = changed_words(gone_content, came_content)
        out[f"{field}_synonyms"] = share
        out[f"{field}_antonyms"] = float(opposed)
        # Everyday equivalents WordNet misses ("launch" for "start"): paraphrase.py.
        out[f"{field}_paraphrase"] = paraphrase_share(gone_content, came_content)


def _name_features(
    expected: dict[str, str], extracted: dict[str, str], out: dict[str, float]
) -> None:
    # What the rules name (messages, flags, codes, files) is kept by a rewording and
    # changed by a rule about another error, wherever in the rule it stands.
    exp = (expected["trigger"], expected["directive"])
    ext = (extracted["trigger"], extracted["directive"])
    shared, replaced = name_agreement(exp, ext)
    out["pair_literals_shared"] = shared
    out["pair_literals_replaced"] = float(replaced)
    # How much longer or shorter the extracted rule is written (terse notes, wordy
    # advice): what a rewording or a trap looks like depends on the style, and a model
    # fitted on both styles can tell them apart.
    words_exp = len(tokens(exp[0])) + len(tokens(exp[1]))
    words_ext = len(tokens(ext[0])) + len(tokens(ext[1]))
    out["pair_length_ratio"] = math.log2((words_ext + 1) / (words_exp + 1))


def _pool(out: dict[str, float], t_conflicts: list, d_conflicts: list, doubts: list) -> None:
    # Pooled counts: each kind of conflict is rare on its own, together they are not.
    out["trigger_conflicts"] = float(len(t_conflicts))
    out["directive_conflicts"] = float(len(d_conflicts))
    out["directive_doubts"] = float(len(doubts))


def _clean(f: dict[str, float]) -> float:
    """1 when every change is accounted for: no conflict or doubt found, no word replaced
    by an unrelated one, no shared words reordered, no amount changed and no number
    written in digits replaced by another, the atoms agree,
    and each field keeps some of its words (an empty directive is no copy of one). Most
    near copies of a rule are clean; most wrong rules in the same words are not."""
    fields_clean = all(
        f[f"{k}_unexplained"] == 0
        and f[f"{k}_opposites"] == 0
        and f[f"{k}_changed"] < 1
        and f[f"{k}_order"] == 0
        and f[f"{k}_amounts"] >= 0
        and f[f"{k}_swap"] == 0
        and f[f"{k}_digits"] == 0
        for k in ("trigger", "directive")
    )
    found = f["trigger_conflicts"] + f["directive_conflicts"] + f["directive_doubts"]
    # 0.5 is two triggers that name no atom at all: nothing disagrees.
    return float(fields_clean and not found and f["trigger_agreement"] >= 0.5)


def _with_declared(
    evidence: Evidence, exp: str, ext: str, declared: frozenset[str], d_conflicts: list
) -> Evidence:
    features = dict(evidence.features)
    agreement, conflicts = _trigger_features(exp, ext, declared, features)
    _pool(features, conflicts, d_conflicts, [None] * int(features["directive_doubts"]))
    features["pair_clean"] = _clean(features)
    shown = [f"trigger (declared signature) {c}" for c in conflicts]
    return evidence._replace(
        declared_features=features,
        agreement=(evidence.agreement + agreement) / 2,
        conflicts=evidence.conflicts + [c for c in shown if c not in evidence.conflicts],
    )


# Static-embedding cosines are compressed: unrelated rule texts sit near 0.25 and true
# rewordings near 0.75. The shown similarity maps that band onto [0, 1].
_COS_FLOOR, _COS_CEIL = 0.15, 0.70
# The shown similarity is read mostly from the words the two texts do not share.
_RESIDUAL_WEIGHT = 0.8


def _scaled(cos: float) -> float:
    return min(1.0, max(0.0, (cos - _COS_FLOOR) / (_COS_CEIL - _COS_FLOOR)))


def _field_features(
    exp: str, ext: str, vectors, embedder
) -> tuple[dict[str, float], float, str | None]:
    e_full, x_full, e_res, x_res = vectors
    whole = 1.0 if not exp.strip() and not ext.strip() else float(e_full @ x_full)
    gone, came = residual(exp, ext)
    gone_content, came_content = content(gone), content(came)
    all_content = content(exp) | content(ext)
    changed = len(gone_content | came_content) / len(all_content) if all_content else 0.0
    if not gone_content and not came_content:
        resid = 1.0
    elif gone_content and came_content and e_res.any() and x_res.any():
        resid = float(e_res @ x_res)
    else:
        resid = whole
    shown = _RESIDUAL_WEIGHT * _scaled(resid) + (1 - _RESIDUAL_WEIGHT) * _scaled(whole)
    if resid == 1.0 and whole >= 0.999:
        shown = 1.0
    swap = key_term_swapped(exp, ext, embedder)
    explained, unexplained, one_sided = explained_share(exp, ext)
    values = {
        "whole": whole,
        "residual": resid,
        "align": _alignment(gone_content, came_content, embedder, whole),
        "changed": changed,
        "f1": token_f1(exp, ext),
        "swap": float(swap is not None),
        "explained": explained,
        "unexplained": unexplained,
        "one_sided": one_sided,
        "opposites": float(opposites(exp, ext)),
        "amounts": quantity_agreement(exp, ext),
        "status": status_class_agreement(exp, ext),
        "order": _order_discordance(exp, ext),
        "digits": digits_replaced(exp, ext),
    }
    return values, shown, swap


def _alignment(gone: frozenset[str], came: frozenset[str], embedder, whole: float) -> float:
    """How well the words only one side has find a counterpart among the other side's
    (BERTScore's greedy matching, over word pieces of the static model): "scrub" finds
    "redact", "vault" finds nothing in "become". 1 when nothing differs; words only added
    or only dropped have nothing to align with and count as the whole text does."""
    if not gone and not came:
        return 1.0
    if not gone or not came:
        return whole
    p, pw = embedder.pieces(" ".join(sorted(gone)))
    q, qw = embedder.pieces(" ".join(sorted(came)))
    if not len(p) or not len(q):
        return whole
    import numpy as np

    # numpy's own reductions called directly: `.max()` and `.sum()` are Python wrappers
    # around them, which cost more than the arithmetic on a few word pieces.
    most, total = np.maximum.reduce, np.add.reduce
    sim = p @ q.T
    recall = float(total(most(sim, axis=1) * pw) / total(pw))
    precision = float(total(most(sim, axis=0) * qw) / total(qw))
    return 2 * recall * precision / (recall + precision) if recall + precision > 0 else 0.0


def _order_discordance(exp: str, ext: str) -> float:
    """Share of pairs of shared words that come in the other order, scaled by how much of
    the wording is shared: "fix the code so the tests pass" against "change the tests to
    pass with the new code" keeps code and tests and swaps their roles."""
    first_a = _first_positions(exp)
    first_b = _first_positions(ext)
    # In the expected text's order, where each shared word first comes in the extracted
    # one: a pair in the other order is an inversion of that sequence.
    where = [first_b[w] for w in first_a if w in first_b]
    n = len(where)
    if n < 2:
        return 0.0
    seen: list[int] = []
    discordant = 0
    for i, position in enumerate(where):
        discordant += i - bisect.bisect_right(seen, position)
        bisect.insort(seen, position)
    kept = n / max(1, len(first_a.keys() | first_b.keys()))
    return kept * discordant / (n * (n - 1) // 2)


@lru_cache(maxsize=32768)
def _first_positions(text: str) -> dict[str, int]:
    # Memoised (the expected text's are asked for with every candidate); read only. By
    # stem: a word made plural in one place ("the build" -> "the builds") is the same
    # word, not one that moved.
    out: dict[str, int] = {}
    for i, w in enumerate(tokens(text)):
        if w not in STOP:
            out.setdefault(stem(w), i)
    return out


def _trigger_features(
    exp: str, ext: str, extracted_atoms: frozenset[str], out: dict[str, float]
) -> tuple[float, list[str]]:
    agreement, conflicts = signature_agreement(atoms_of(exp), extracted_atoms)
    out["trigger_agreement"] = agreement
    for key in CONFLICT_KEYS:
        out[f"trigger_conflict_{key}"] = float(any(c.startswith(f"{key}:") for c in conflicts))
    out["trigger_negation"] = float(negation_only_difference(exp, ext))
    if out["trigger_negation"]:
        conflicts.append("one side negates the other")
    quoted = other_message_quoted(exp, ext)
    out["trigger_quoted"] = float(quoted is not None)
    if quoted and not conflicts:
        conflicts.append(quoted)
    return agreement, conflicts


def _directive_features(
    exp: str, ext: str, embedder, out: dict[str, float]
) -> tuple[list[str], list[str]]:
    findings = directive_findings(exp, ext)
    rejected = rejected_alternative(exp, ext, embedder)
    if rejected:
        findings.append(("rejected", rejected))
    counts: dict[str, int] = {}
    for kind, _ in findings:
        counts[kind] = counts.get(kind, 0) + 1
    for kind in FINDING_KINDS:
        out[f"directive_{kind}"] = float(counts.get(kind, 0))
    va, vb = verb_classes(exp), verb_classes(ext)
    out["directive_acts_overlap"] = overlap(va, vb) if va and vb else 0.5
    sa, sb = stances_of(exp), stances_of(ext)
    out["directive_stances_overlap"] = overlap(sa, sb) if sa or sb else 1.0
    out["directive_precondition"] = _precondition_change(exp, ext)
    hard = [msg for kind, msg in findings if kind in HARD_KINDS]
    soft = [msg for kind, msg in findings if kind not in HARD_KINDS]
    return hard, soft


_CONDITION = re.compile(
    r"\b(?:only (?:after|when|if|once)|unless|until|as long as|provided|as soon as)\b([^;,.]+)"
)
# One of which every condition holds: a few substring tests spare most texts the pattern,
# which is tried at every position.
_CONDITION_WORDS = ("only ", "unless", "until", "as long as", "provided", "as soon as")


def _conditions(text: str) -> list[str]:
    low = text.lower()
    return _CONDITION.findall(low) if any(w in low for w in _CONDITION_WORDS) else []


def _precondition_change(exp: str, ext: str) -> float:
    """How much the conditions a directive puts on itself differ ("only after the backup
    finished" against "only after the migration finished"): 0 when either states none."""
    a = _conditions(exp)
    b = _conditions(ext)
    if not a or not b:
        return 0.0
    return 1.0 - overlap(stems(" ".join(a)), stems(" ".join(b)))
