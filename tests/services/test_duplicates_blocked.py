"""The duplicate check reads a block, not the scope (lifecycle/duplicate_keys.py,
docs/matching.md "Probable duplicates"), and finds what the full scan it replaced found: the
same duplicates on the demo's candidates with the real comparator, and the same rules sent to
the comparator for every labelled pair of the comparator's own set, recorded as rules with
signatures that are compatible in every way the check allows (one rule more specific than the
other, notices on a metric) and incompatible in every other.

`full_scan` is the check as it was: every live rule of the scope, newest first (at most
DUPLICATE_SCAN), those with compatible signatures, at most DUPLICATE_COMPARE of them."""

import json
import random
from datetime import timedelta
from pathlib import Path

import pytest

from comparison.compare import compare_many
from lifecycle import limits
from lifecycle.duplicate_keys import index_rules
from lifecycle.metrics import load_registry
from lifecycle.models import DuplicateKey, Rule, RuleState
from lifecycle.services import duplicates
from lifecycle.services.candidates import candidates_record
from lifecycle.services.rules import rule_record_candidate
from lifecycle.states import Actor
from lifecycle.validation import read_jsonl

from ..builders import T0, make_rule, make_rules

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent.parent
DEMO = ROOT / "lifecycle" / "fixtures" / "demo"
PAIRS = ROOT / "comparison" / "data" / "extraction_eval.jsonl"
BOT = Actor.extractor("bot")
DUPLICATE_SCAN = 2_000


def full_scan(rule: Rule, registry) -> list[str]:
    """The ids the old check sent to the comparator, newest first."""
    live = Rule.objects.filter(
        scope=rule.scope, state__in=[RuleState.CANDIDATE, RuleState.ACTIVE]
    ).exclude(pk=rule.pk)
    if rule.replaces_id:
        live = live.exclude(pk=rule.replaces_id)
    family = registry.family(rule.metric)
    return [
        other.id
        for other in live.order_by("-recorded_at", "-id").only("id", "metric", "signature")[
            :DUPLICATE_SCAN
        ]
        if duplicates.signatures_compatible(
            rule.signature,
            family,
            other.signature,
            registry.family(other.metric),
            a_metric=rule.metric,
            b_metric=other.metric,
        )
    ][: limits.DUPLICATE_COMPARE]


def blocked(rule: Rule, registry) -> list[str]:
    """The ids the check sends to the comparator now, newest first."""
    family = registry.family(rule.metric)
    return [
        other.id
        for other, _ in duplicates._live_heads(rule, family)
        if duplicates.signatures_compatible(
            rule.signature,
            family,
            other.signature,
            registry.family(other.metric),
            a_metric=rule.metric,
            b_metric=other.metric,
        )
    ][: limits.DUPLICATE_COMPARE]


def old_duplicate(rule: Rule, registry) -> str | None:
    """What the old check linked the rule to, with the real comparator."""
    ids = full_scan(rule, registry)[::-1]  # oldest first: the oldest wins a tie
    if not ids:
        return None
    others = Rule.objects.in_bulk(ids)
    results = compare_many(
        [
            (
                {"trigger": rule.trigger, "directive": rule.directive},
                {"trigger": others[i].trigger, "directive": others[i].directive},
            )
            for i in ids
        ]
    )
    matches = [
        (i, r["semantic"]) for i, r in zip(ids, results, strict=True) if r["verdict"] == "match"
    ]
    return max(matches, key=lambda m: m[1])[0] if matches else None


@pytest.fixture
def no_rounds(monkeypatch):
    monkeypatch.setattr("replay.kick.kick_round", lambda *, reason: None)


def test_the_demo_candidates_get_the_duplicates_the_full_scan_found(
    no_rounds, django_capture_on_commit_callbacks
):
    registry = load_registry()
    files = ["candidates.jsonl", "candidates_trials.jsonl", "candidates_late.jsonl"]
    files.append("candidates_arriving.jsonl")
    linked = {}
    for name in files:
        with django_capture_on_commit_callbacks(execute=True):
            result, rules = candidates_record(
                read_jsonl((DEMO / name).read_text().splitlines()), actor=BOT
            )
        assert result.created == len(rules)
        for rule in rules:
            rule.refresh_from_db()
            assert blocked(rule, registry) == full_scan(rule, registry), rule.id
            assert rule.duplicate_of_id == old_duplicate(rule, registry), rule.id
            linked[rule.id] = rule.duplicate_of_id
    # The demo's one reworded copy (docs/matching.md): the check did run and link it.
    assert linked["C-012"] == "C-001"


# Signatures for one labelled domain: failure atoms in subset relations and not, atom-less
# rules on a metric (its family's notices) and on notice atoms.
def _signatures(domain: str) -> list[tuple[list[str], str]]:
    tool, action = f"tool:{domain}", f"action:{domain}.run"
    e1, e2 = f"error:{domain}_one", f"error:{domain}_two"
    return [
        ([tool, action, e1], "task_completion"),
        ([tool, action, e1], "task_completion"),
        ([tool, e1], "task_completion"),
        ([action, e1, e2], "task_completion"),
        ([action, e2], "task_completion"),
        ([tool], "task_completion"),
        ([tool, action], ""),
        ([], "task_completion"),
        (["breach:task_completion"], ""),
        (["stall:coherence"], "coherence"),
        ([], "coherence"),
        ([e2], ""),
    ]


def test_every_labelled_pair_reaches_the_same_rules_as_the_full_scan(no_rounds):
    """A domain of the labelled set is a scope: its expected rules, then its extracted ones,
    each with a signature drawn from the domain's; a few retired. For every rule, the block
    filtered by compatibility is exactly what the full scan compared."""
    rng = random.Random(34)
    by_domain: dict[str, list[dict]] = {}
    for line in PAIRS.read_text().splitlines():
        pair = json.loads(line)
        by_domain.setdefault(pair["domain"], []).append(pair)
    # Every fourth domain (206 of 823, some 1,900 pairs, 3,900 rules): a test of seconds.
    domains = sorted(by_domain)[::4]
    rules = []
    for domain in domains:
        scope = f"d:{domain}"[: limits.SCOPE]
        signatures = _signatures(domain.replace(" ", "_").replace("/", "_")[:40])
        for side in ("expected", "extracted"):
            for pair in by_domain[domain]:
                signature, metric = rng.choice(signatures)
                n = len(rules)
                rules.append(
                    Rule(
                        id=f"L-{n:05d}",
                        scope=scope,
                        signature=signature,
                        metric=metric,
                        author="bot",
                        author_kind="extractor",
                        content_hash=f"L-{n:05d}",
                        recorded_at=T0 + timedelta(seconds=n),
                        **pair[side],
                    )
                )
    # Stored at once and filed as recording files each rule (`rule_record_candidate` files
    # its rule with this same function: test_a_recorded_rule_is_filed_under_its_keys).
    index_rules(Rule.objects.bulk_create(rules, batch_size=2000))
    n = len(rules)
    retired = rng.sample(range(n), n // 10)
    Rule.objects.filter(pk__in=[f"L-{i:05d}" for i in retired]).update(state=RuleState.RETIRED)
    registry = load_registry()
    compared = 0
    for rule in Rule.objects.filter(pk__startswith="L-").order_by("id"):
        old = full_scan(rule, registry)
        assert blocked(rule, registry) == old, rule.id
        compared += len(old)
    # The grid made real work: most rules had compatible neighbours, many rules were not.
    assert compared > n


def test_a_crowded_block_is_read_by_the_words_it_shares():
    """More than DUPLICATE_COMPARE rules under one key: the ones sharing the candidate's words
    are read first, however old; the block's other rules fill the rest."""
    make_rule(
        "OLD-1",
        trigger="when the terraform state lock times out",
        directive="release the dynamodb lock",
    )
    make_rules(limits.DUPLICATE_COMPARE + 20)
    new = make_rule(
        "NEW-1",
        trigger="if terraform cannot get the state lock",
        directive="force-unlock the dynamodb lock, then plan again",
    )
    registry = load_registry()
    ids = blocked(new, registry)
    assert len(ids) == limits.DUPLICATE_COMPARE
    assert "OLD-1" in ids
    # The old check read the newest rules and never reached it.
    assert "OLD-1" not in full_scan(new, registry)


def test_a_recorded_rule_is_filed_under_its_keys():
    rule, _ = rule_record_candidate(
        actor=BOT,
        rule_id="K-1",
        scope="git",
        signature=["tool:git", "action:git.push", "error:non_fast_forward"],
        trigger="when git push fails with non-fast-forward",
        directive="pull the latest changes with rebase",
    )
    keys = set(DuplicateKey.objects.filter(rule=rule).values_list("key", flat=True))
    assert {k for k in keys if not k.startswith("w:")} == {
        "a:tool:git",
        "a:action:git.push",
        "a:error:non_fast_forward",
        "k:error:non_fast_forward",  # the most specific atom
    }
    assert {"w:git", "w:push", "w:fails", "w:non", "w:fast", "w:forwa", "w:pull"} <= keys
    assert "w:the" not in keys and "w:when" not in keys
    assert set(DuplicateKey.objects.values_list("scope", flat=True)) == {"git"}
