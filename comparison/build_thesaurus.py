"""Rebuild data/thesaurus.json, the plain-word synonyms and antonyms, from WordNet 3.0.

    python -m comparison.build_thesaurus [--wordnet /usr/share/wordnet] [--senses 3]

Run by a developer, never at run time. The WordNet database comes from Debian's
`wordnet-base` package (`apt-get install -y wordnet-base`, 28 MB under /usr/share/wordnet;
Princeton's WordNet 3.0 licence, copied into the output). Deterministic: the same
database gives the same file, byte for byte.

What is kept, and why:
- Every plain (one-word) verb, adjective and adverb, the words plain synonyms are made of;
  of the nouns, those WordNet's tagged corpus saw or BERT's vocabulary (vocab.txt beside
  this file) holds, the rest being mostly names of things no rule mentions.
- Of each lemma, its most frequent senses only (WordNet lists them by their frequency in
  its tagged corpus): at most `--senses`, and beyond the first only senses seen in that
  corpus at all. Rare senses are what make WordNet call "run" a synonym of "campaign" or
  "fire" of "give notice".
- A lemma's senses as small integers (synsets numbered in the order met), and apart
  from them the senses' direct generalisations (hypernyms: "delete" is a way to
  "remove"). Adjective satellites ("sluggish") also carry their head's sense ("slow"),
  which is how WordNet groups near-synonymous adjectives.
- Antonyms: WordNet's lexical antonym pairs between lemmas, in any sense (an opposite in a
  rare sense is still an opposite word: "raise" / "lower"), and, for the kept senses,
  every lemma of a synset against every lemma of its antonym's synset.
- WordNet's irregular forms ("ran" -> "run") and its suffix rules; thesaurus.py undoes
  regular inflections with the rules at run time.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
VOCAB = HERE / "vocab.txt"
OUT = HERE / "data" / "thesaurus.json"
WORDNET = Path("/usr/share/wordnet")
LICENCE = Path("/usr/share/doc/wordnet-base/copyright")
POS = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
# WordNet's suffix rules (morphy): what an inflected form may end with, and what the
# lemma ends with instead.
DETACH = {
    "n": [("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh")]
    + [("men", "man"), ("ies", "y")],
    "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", "")]
    + [("ing", "e"), ("ing", "")],
    "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    "r": [],
}


def read_index(wordnet: Path) -> dict[str, dict[str, tuple[list[str], int]]]:
    """pos -> lemma -> (synset offsets most frequent first, how many were tagged)."""
    out: dict[str, dict[str, tuple[list[str], int]]] = {}
    for name, pos in POS.items():
        lemmas: dict[str, tuple[list[str], int]] = {}
        for line in (wordnet / f"index.{name}").read_text(encoding="latin-1").splitlines():
            if line.startswith(" "):
                continue
            parts = line.split()
            lemma, p_cnt = parts[0], int(parts[3])
            synset_cnt = int(parts[2])
            tagged = int(parts[5 + p_cnt])
            lemmas[lemma] = (parts[6 + p_cnt : 6 + p_cnt + synset_cnt], tagged)
        out[pos] = lemmas
    return out


def read_data(wordnet: Path) -> dict[tuple[str, str], dict]:
    """(pos, offset) -> {"words": lemmas in order, "ptrs": [(symbol, pos, offset, src, dst)]}."""
    out: dict[tuple[str, str], dict] = {}
    for name, pos in POS.items():
        for line in (wordnet / f"data.{name}").read_text(encoding="latin-1").splitlines():
            if line.startswith(" "):
                continue
            parts = line.split(" | ")[0].split()
            offset, n_words = parts[0], int(parts[3], 16)
            words = [_lemma(parts[4 + 2 * i]) for i in range(n_words)]
            at = 4 + 2 * n_words
            ptrs = []
            for i in range(int(parts[at])):
                sym, target, tpos, st = parts[at + 1 + 4 * i : at + 5 + 4 * i]
                ptrs.append(
                    (sym, "a" if tpos == "s" else tpos, target, int(st[:2], 16), int(st[2:], 16))
                )
            out[(pos, offset)] = {"words": words, "ptrs": ptrs}
    return out


def _lemma(word: str) -> str:
    # Adjectives carry a syntactic marker ("galore(ip)"); lemmas are lower-cased here as
    # the comparator's tokens are.
    return word.split("(")[0].lower()


def read_exceptions(wordnet: Path) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for name, pos in POS.items():
        table: dict[str, list[str]] = {}
        for line in (wordnet / f"{name}.exc").read_text(encoding="latin-1").splitlines():
            form, *lemmas = line.split()
            table[form] = lemmas
        out[pos] = table
    return out


def vocabulary(vocab: Path = VOCAB) -> list[str]:
    words = (w.strip() for w in vocab.read_text().splitlines())
    return sorted({w for w in words if len(w) >= 2 and w.isascii() and w.isalpha()})


def build(wordnet: Path = WORDNET, senses: int = 3, vocab: Path = VOCAB) -> dict:
    index, data, exceptions = read_index(wordnet), read_data(wordnet), read_exceptions(wordnet)
    common = set(vocabulary(vocab))
    ids: dict[tuple[str, str], int] = {}
    lemma_senses: dict[str, set[int]] = {}
    lemma_parents: dict[str, set[int]] = {}
    kept_synsets: set[tuple[str, str]] = set()
    for pos, lemmas in index.items():
        for lemma, (offsets, tagged) in sorted(lemmas.items()):
            # Every plain verb, adjective and adverb (the words of plain synonyms), and of
            # the nouns the common or tagged ones only (most nouns are names of things).
            if not _plain(lemma) or (pos == "n" and lemma not in common and not tagged):
                continue
            for rank, offset in enumerate(offsets[:senses]):
                if rank and rank >= tagged:
                    break
                key = (pos, offset)
                kept_synsets.add(key)
                for synset in (key, *_heads(key, data)):
                    lemma_senses.setdefault(lemma, set()).add(ids.setdefault(synset, len(ids)))
                for synset in _parents(key, data):
                    lemma_parents.setdefault(lemma, set()).add(ids.setdefault(synset, len(ids)))
    antonyms: set[tuple[str, str]] = set()
    for (pos, offset), synset in data.items():
        for sym, tpos, target, src, dst in synset["ptrs"]:
            if sym != "!":
                continue
            other = data[(tpos, target)]
            antonyms.add((synset["words"][src - 1], other["words"][dst - 1]))
            if (pos, offset) in kept_synsets and (tpos, target) in kept_synsets:
                antonyms.update((x, y) for x in synset["words"] for y in other["words"])
    pairs = sorted(
        {tuple(sorted(p)) for p in antonyms if p[0] != p[1] and set(p) <= lemma_senses.keys()}
    )
    irregular = {
        form: sorted({lem for lem in lems if lem in lemma_senses})
        for table in exceptions.values()
        for form, lems in table.items()
        if _plain(form)
    }
    return {
        "source": "WordNet 3.0 (Princeton University), Debian package wordnet-base",
        "licence": _licence(),
        "recipe": {
            "senses": senses,
            "lemmas": "verbs, adjectives, adverbs; nouns tagged or in vocab.txt",
        },
        "senses": {w: sorted(s) for w, s in sorted(lemma_senses.items())},
        "parents": {w: sorted(s) for w, s in sorted(lemma_parents.items())},
        "antonyms": [" ".join(p) for p in pairs],
        # Irregular forms ("ran" -> "run"); regular ones are undone by suffix rules.
        "irregular": {f: lems for f, lems in sorted(irregular.items()) if lems},
        "detach": sorted({rule for rules in DETACH.values() for rule in rules}),
    }


def _plain(lemma: str) -> bool:
    # One plain word: WordNet's collocations ("take_away") are not single tokens.
    return lemma.isascii() and lemma.replace("-", "").isalpha() and len(lemma) >= 2


def _heads(key: tuple[str, str], data) -> list[tuple[str, str]]:
    """An adjective satellite's head synsets ("similar to"): "sluggish" under "slow"."""
    if key[0] != "a":
        return []
    return [(tpos, target) for sym, tpos, target, _, _ in data[key]["ptrs"] if sym == "&"]


def _parents(key: tuple[str, str], data) -> list[tuple[str, str]]:
    """A noun's or verb's direct hypernyms: "delete" is a way to "remove"."""
    return [(tpos, target) for sym, tpos, target, _, _ in data[key]["ptrs"] if sym in ("@", "@i")]


def _licence() -> str:
    text = LICENCE.read_text() if LICENCE.exists() else ""
    start = text.find("This software and database")
    end = text.find("Files: debian/")
    return " ".join(line.strip(" .") or "" for line in text[start:end].splitlines()).strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wordnet", type=Path, default=WORDNET)
    parser.add_argument("--senses", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if not (args.wordnet / "data.noun").exists():
        parser.error(f"{args.wordnet}/data.noun not found: apt-get install -y wordnet-base")
    lexicon = build(args.wordnet, args.senses)
    args.out.write_text(json.dumps(lexicon, separators=(",", ":"), sort_keys=True) + "\n")
    print(
        f"wrote {args.out}: {len(lexicon['senses'])} words, {len(lexicon['antonyms'])} antonym pairs"
    )


if __name__ == "__main__":
    main()
