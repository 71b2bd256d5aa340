"""The WordNet thesaurus of plain words (comparison/thesaurus.py, build_thesaurus.py)."""

from __future__ import annotations

import json

import pytest

from comparison import build_thesaurus
from comparison.thesaurus import THESAURUS, antonym_count, antonyms, synonym_share, synonyms


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("slow", "sluggish"),  # an adjective and its satellite
        ("raise", "increase"),
        ("remove", "delete"),  # "delete" is a way to "remove"
        ("deleted", "removes"),  # in any inflection
        ("big", "large"),
        ("begin", "start"),
        ("stop", "halt"),
        ("repair", "fix"),
        ("file", "files"),
        ("ran", "run"),  # an irregular form
    ],
)
def test_everyday_synonyms_are_matched_both_ways(a, b):
    assert synonyms(a, b) and synonyms(b, a)
    assert not antonyms(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("increase", "decrease"),
        ("increased", "decreases"),
        ("slow", "fast"),
        ("enable", "disable"),
        ("upload", "download"),
        ("public", "private"),
    ],
)
def test_opposites_are_antonyms_and_never_synonyms(a, b):
    assert antonyms(a, b) and antonyms(b, a)
    assert not synonyms(a, b) and not synonyms(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [("increase", "decrease"), ("upload", "remove"), ("cache", "queue"), ("kubectl", "helm")],
)
def test_words_that_share_only_a_broader_term_or_nothing_are_no_synonyms(a, b):
    # "increase" and "decrease" are both ways to "change": siblings, not synonyms.
    assert not synonyms(a, b)


def test_the_share_counts_changed_words_with_a_synonym_on_the_other_side():
    assert synonym_share(frozenset({"slow"}), frozenset({"sluggish"})) == 1.0
    assert synonym_share(frozenset({"slow", "login"}), frozenset({"sluggish", "head"})) == 0.5
    assert synonym_share(frozenset({"slow"}), frozenset({"fast"})) == 0.0
    assert synonym_share(frozenset(), frozenset()) == 1.0
    assert synonym_share(frozenset({"slow"}), frozenset()) == 0.0
    assert antonym_count(frozenset({"raise", "limit"}), frozenset({"lower", "cap"})) == 1


def test_the_shipped_thesaurus_carries_the_wordnet_licence():
    raw = json.loads(THESAURUS.read_text())
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in raw["licence"]
    assert raw["source"].startswith("WordNet 3.0")


# A WordNet of five verbs and three adjectives in the database's own format: "delete" and
# "erase" share a sense whose generalisation is "remove", whose opposite is "add";
# "sluggish" is a satellite of "slow", whose opposite is "fast".
_DATA = {
    "verb": [
        "00000001 30 v 02 delete 0 erase 0 001 @ 00000002 v 0000 | remove digitally",
        "00000002 30 v 01 remove 0 001 ! 00000003 v 0101 | take away",
        "00000003 30 v 01 add 0 001 ! 00000002 v 0101 | put in",
        "00000004 30 v 01 campaign 0 000 | run for office",
    ],
    "adj": [
        "00000010 00 a 01 slow 0 002 & 00000011 a 0000 ! 00000012 a 0101 | not fast",
        "00000011 00 s 01 sluggish 0 001 & 00000010 a 0000 | slow to respond",
        "00000012 00 a 01 fast 0 001 ! 00000010 a 0101 | quick",
    ],
}
_INDEX = {
    "verb": [
        "add v 1 1 ! 1 1 00000003",
        "campaign v 1 0 1 0 00000004",
        "delete v 1 1 @ 1 1 00000001",
        "erase v 1 1 @ 1 1 00000001",
        "remove v 1 1 ! 1 1 00000002",
    ],
    "adj": [
        "fast a 1 1 ! 1 1 00000012",
        "slow a 1 2 & ! 1 1 00000010",
        "sluggish a 1 1 & 1 1 00000011",
    ],
}


def _tiny_wordnet(path):
    for name in ("noun", "verb", "adj", "adv"):
        header = "  1 This software and database is being provided\n"
        (path / f"data.{name}").write_text(header + "".join(f"{x}\n" for x in _DATA.get(name, [])))
        (path / f"index.{name}").write_text(
            header + "".join(f"{x}\n" for x in _INDEX.get(name, []))
        )
        (path / f"{name}.exc").write_text("erased erase\n" if name == "verb" else "")
    vocab = path / "vocab.txt"
    vocab.write_text("[PAD]\nremove\nslow\n##ing\n")
    return vocab


def test_the_build_reads_senses_generalisations_satellites_and_antonyms(tmp_path):
    vocab = _tiny_wordnet(tmp_path)
    built = build_thesaurus.build(tmp_path, senses=3, vocab=vocab)
    senses = {w: set(s) for w, s in built["senses"].items()}
    assert senses["delete"] == senses["erase"]
    assert set(built["parents"]["delete"]) == senses["remove"]
    assert senses["slow"] <= senses["sluggish"]
    assert built["antonyms"] == ["add remove", "fast slow"]
    assert built["irregular"] == {"erased": ["erase"]}
    # Every plain verb is kept, tagged or not: "campaign" is, with its one sense.
    assert len(senses["campaign"]) == 1


def test_the_build_is_deterministic(tmp_path):
    vocab = _tiny_wordnet(tmp_path)
    first = build_thesaurus.build(tmp_path, vocab=vocab)
    second = build_thesaurus.build(tmp_path, vocab=vocab)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


@pytest.mark.skipif(
    not (build_thesaurus.WORDNET / "data.noun").exists(),
    reason="WordNet is not installed (apt-get install -y wordnet-base)",
)
def test_the_shipped_thesaurus_is_what_the_build_writes_from_wordnet():
    built = json.dumps(build_thesaurus.build(), separators=(",", ":"), sort_keys=True) + "\n"
    assert built == THESAURUS.read_text()
