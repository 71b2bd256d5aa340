"""Extraction accuracy of stored rules (semantics §12): each rule whose source case carries an
`expected_rule`, scored against it by `comparison.compare.compare_rules` once, after the rule
(or its source case) is stored, and read back from `Rule.comparison` by the pages.

This is a separate number from replay fidelity and stays one: nothing here reads a verdict,
a delta or a trial, and nothing elsewhere folds these scores into a rule's validation.
"""

from comparison.compare import compare_many
from lifecycle.validation import ImportRejected, LineError

from .. import atoms as atom_lib
from ..models import Rule, Trajectory


def _parts(rule: dict) -> dict:
    return {"trigger": rule["trigger"], "directive": rule["directive"]}


def _scored(rows: list[tuple[dict, dict, list[str] | None]], workers: int = 1) -> list[dict]:
    """(extracted, expected, extracted signature) → compare results, embedded in one batch
    (spread over `workers` processes when it is large)."""
    if not rows:
        return []
    results = compare_many(
        [(extracted, expected) for extracted, expected, _ in rows],
        signatures=[signature for _, _, signature in rows],
        workers=workers,
    )
    return [
        {"expected": expected, "extracted": extracted, **result}
        for (extracted, expected, _), result in zip(rows, results, strict=True)
    ]


def scores_against_expected(rules: list[tuple[str, str, str, dict]]) -> list[dict]:
    """(source case, trigger, directive, the case's expected rule) → each rule's extraction
    scores as stored on it, embedded in one batch. Plain values in: `score_rule` uses it, and so
    does the migration that scores the rules recorded before scores were stored."""
    # Signature agreement compares the atoms read from both triggers by the same reader. The
    # rule's stored signature speaks the corpus's own atom vocabulary (`error:http_429`),
    # which the reader of the expected prose cannot know (`error:rate_limited`, `status:429`):
    # mixing the two would call a correct rewording a different rule.
    scored = _scored(
        [({"trigger": t, "directive": d}, _parts(expected), None) for _, t, d, expected in rules]
    )
    return [{"source_case": case, **row} for (case, *_), row in zip(rules, scored, strict=True)]


def score_rule(rule: Rule) -> dict | None:
    """Run the comparator: the rule against its source case's expected rule; None when there
    is none. Slow (it embeds both texts): called after commit, its result stored on the rule."""
    if not rule.source_case:
        return None
    expected = (
        Trajectory.objects.filter(pk=rule.source_case)
        .values_list("expected_rule", flat=True)
        .first()
    )
    if not expected:
        return None
    return scores_against_expected([(rule.source_case, rule.trigger, rule.directive, expected)])[0]


def extraction_for_rule(rule: Rule) -> dict | None:
    """The rule's stored extraction scores (`score_rule`'s result); None when there are none."""
    return rule.comparison


def extraction_rows() -> list[dict]:
    """One row per rule (any state) with stored extraction scores, in the order rules were
    recorded. One query whatever the number of rules; the comparator does not run."""
    rules = (
        Rule.objects.filter(comparison__isnull=False)
        .order_by("recorded_at", "id")
        .values_list("id", "state", "comparison")
    )
    return [{"rule": rid, "state": state, **comparison} for rid, state, comparison in rules]


def _rule_part(number: int, obj: dict, name: str) -> tuple[dict | None, list[LineError]]:
    value = obj.get(name)
    if not isinstance(value, dict):
        return None, [LineError(number, name, "is required: an object with trigger and directive")]
    errors = [
        LineError(number, f"{name}.{part}", "is required and must be a non-empty string")
        for part in ("trigger", "directive")
        if not isinstance(value.get(part), str) or not value[part].strip()
    ]
    return (None if errors else {p: value[p] for p in ("trigger", "directive")}), errors


def parse_pairs(rows) -> list[tuple[int, dict, dict, list[str] | None]]:
    """Lines of `compare_rules --pairs` (semantics §15): each `{"extracted": {trigger, directive},
    "expected": {trigger, directive}}`, optionally `extracted_signature` (atoms); other keys
    (labels, notes) are ignored. Raises ImportRejected naming every bad line."""
    good, errors = [], []
    for number, obj, error in rows:
        if error:
            errors.append(error)
            continue
        if not isinstance(obj, dict):
            errors.append(LineError(number, "", "each line must be a JSON object"))
            continue
        extracted, bad_extracted = _rule_part(number, obj, "extracted")
        expected, bad_expected = _rule_part(number, obj, "expected")
        signature = None
        line_errors = bad_extracted + bad_expected
        if obj.get("extracted_signature") is not None:
            try:
                signature = atom_lib.parse_atoms(obj["extracted_signature"])
            except atom_lib.BadAtom as exc:
                line_errors.append(LineError(number, "extracted_signature", str(exc)))
        if line_errors:
            errors.extend(line_errors)
            continue
        good.append((number, extracted, expected, signature))
    if errors:
        raise ImportRejected(errors)
    return good


def score_pairs(rows, workers: int = 1) -> list[dict]:
    """Score every line of a pairs file; all lines are checked before any is scored."""
    pairs = parse_pairs(rows)
    scored = _scored(
        [(extracted, expected, signature) for _, extracted, expected, signature in pairs],
        workers,
    )
    return [{"line": pair[0], **row} for pair, row in zip(pairs, scored, strict=True)]


def verdict_counts(rows: list[dict]) -> dict[str, int]:
    """Rows per verdict; `uncertain` (a reviewer decides, semantics §12) is counted apart,
    never as a match or a miss."""
    counts = {"match": 0, "partial": 0, "miss": 0, "uncertain": 0}
    for row in rows:
        counts[row["verdict"]] += 1
    return counts


def summary_line(counts: dict[str, int]) -> str:
    """The verdict counts in words, `uncertain` named as what it is."""
    words = {"uncertain": "uncertain (a reviewer decides)"}
    return ", ".join(f"{n} {words.get(verdict, verdict)}" for verdict, n in counts.items())
