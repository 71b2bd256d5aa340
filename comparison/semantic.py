"""The offline semantic model behind extraction accuracy (semantics §12).

A static word-piece embedding from sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0):
the model's input word-piece table, reduced with PCA and down-weighted by frequency
(model2vec's weighting), shipped here as a float16 matrix. A sentence is the mean of its
pieces' vectors. `build_semantic.py` rebuilds it, and can also distil the table through the
transformer (model2vec's recipe); README.md beside this file has the measured figures of
both and of the other candidates.

Why static and not the transformer itself: 2 CPU cores give the full MiniLM about 55
sentences/s under numpy, i.e. ~14 rule pairs/s (4 texts a pair), far from the ≥ 300
pairs/s that the dashboard and `compare_rules --pairs` need. Why shipped in the repo: no
PyPI package carries a torch-free MiniLM-family static model, and nothing may be
downloaded at run time. The only runtime dependency is numpy; tokenisation is BERT's own
uncased WordPiece, written out below so that no Rust tokenizer (and its hub client)
comes along.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from functools import lru_cache
from itertools import chain, islice
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL_META = HERE / "minilm_static.json"
MODEL_BIN = HERE / "minilm_static.bin"
VOCAB = HERE / "vocab.txt"


class ComparatorUnavailable(RuntimeError):
    """The semantic model cannot be loaded; the message names what is missing."""


def _numpy():
    try:
        import numpy
    except ImportError as exc:  # pragma: no cover - exercised only on a broken install
        raise ComparatorUnavailable(
            "the extraction comparator needs the 'numpy' package (declared in "
            "pyproject.toml); install the project with `pip install -e .`"
        ) from exc
    return numpy


def _is_punctuation(ch: str) -> bool:
    # BERT treats every non-alphanumeric ASCII symbol as punctuation, so "--force"
    # and "go.sum" split the way the model saw them in training.
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(ch: str) -> bool:
    # BERT gives every CJK ideograph a word of its own.
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2FA1F
        or 0xF900 <= cp <= 0xFAFF
    )


# Plain ASCII text (nearly all rule text) splits with one regex; anything else takes the
# character-by-character path below, which is BERT's BasicTokenizer.
_ASCII_TOKENS = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _basic_tokens(text: str) -> list[str]:
    if text.isascii():
        low = text.lower()
        # Control characters are rare, and a printable text has none to drop.
        return _ASCII_TOKENS.findall(low if low.isprintable() else _ASCII_CONTROL.sub("", low))
    text = unicodedata.normalize("NFD", text.lower())
    text = "".join(
        ch
        for ch in text
        if ch in "\t\n\r" or unicodedata.category(ch) not in {"Mn", "Cc", "Cf", "Co", "Cs", "Cn"}
    )
    out: list[str] = []
    for word in text.split():
        current = ""
        for ch in word:
            if _is_punctuation(ch) or _is_cjk(ch):
                if current:
                    out.append(current)
                    current = ""
                out.append(ch)
            else:
                current += ch
        if current:
            out.append(current)
    return out


# Sentence vectors kept per text (1 KB each): at most this many before the cache restarts.
_VECTOR_CACHE = 32768


class StaticEmbedder:
    """Mean-of-word-pieces sentence vectors, L2-normalised."""

    def __init__(self, matrix, vocab: dict[str, int], unk_id: int) -> None:
        self.matrix = matrix
        self.vocab = vocab
        self.unk_id = unk_id
        self.dim = int(matrix.shape[1])
        # Word → piece ids is pure and rule text is repetitive: memoise per word.
        self._pieces = lru_cache(maxsize=65536)(self._wordpiece)
        self._vectors: dict[str, object] = {}
        # Unit rows and norms of the whole table, made on first use of `pieces`.
        self._unit = self._norms = None

    def _wordpiece(self, word: str) -> tuple[int, ...]:
        if len(word) > 100:
            return ()
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    found = self.vocab[piece]
                    break
                end -= 1
            if found is None:
                return ()  # [UNK]: carries no meaning, so it is left out of the mean
            ids.append(found)
            start = end
        return tuple(ids)

    def piece_ids(self, text: str) -> list[int]:
        return list(chain.from_iterable(map(self._pieces, _basic_tokens(text))))

    def pieces(self, text: str):
        """(unit vectors, weights) of a text's word pieces, for soft word alignment.

        A row's norm is its frequency weight (the table was scaled by SIF weights), so it
        is returned as the piece's weight and the vector itself normalised.
        """
        np = _numpy()
        ids = self.piece_ids(text)
        if not ids:
            return np.zeros((0, self.dim), dtype=np.float32), np.zeros(0, dtype=np.float32)
        if self._unit is None:
            # Row by row, so the same numbers as normalising a text's rows on each call.
            norms = np.linalg.norm(self.matrix, axis=1)
            self._norms = norms  # before `_unit`: another thread tests `_unit` alone
            self._unit = self.matrix / np.maximum(norms, 1e-9)[:, None]
        # The same rows as indexing with the list, which numpy would convert to an array
        # once per index; `take` also skips the general fancy-indexing machinery.
        ids = np.array(ids, dtype=np.intp)
        return self._unit.take(ids, axis=0), self._norms.take(ids)

    def encode(self, texts: list[str]):
        """One unit vector per text (a zero vector for a text with no known piece).

        A text's vector depends on that text alone, so each is computed once and kept:
        an expected rule is compared with every candidate extracted for it. The texts
        least recently asked for go first when the cache is full, so a batch of unseen
        candidates does not push out the expected rules they are compared with."""
        np = _numpy()
        cache = self._vectors
        # This call's vectors, taken out of the cache and put back last (the most
        # recent); read from this dict, so another thread's eviction cannot lose one.
        vectors = {}
        for text in texts:
            vector = cache.pop(text, None)
            if vector is not None:
                vectors[text] = vector
        missing = [t for t in dict.fromkeys(texts) if t not in vectors]
        if missing:
            vectors.update(zip(missing, self._encode(missing), strict=True))
        excess = len(cache) + len(vectors) - _VECTOR_CACHE
        if excess > 0:
            # Bounded: rule texts are short, but a process lives long.
            for text in list(islice(cache, excess)):
                cache.pop(text, None)
        cache.update(vectors)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([vectors[t] for t in texts])

    def _encode(self, texts: list[str]):
        np = _numpy()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        ids_per_text = [self.piece_ids(text) for text in texts]
        rows = [i for i, ids in enumerate(ids_per_text) if ids]
        if rows:
            flat = np.fromiter((p for i in rows for p in ids_per_text[i]), dtype=np.int64)
            lengths = np.array([len(ids_per_text[i]) for i in rows], dtype=np.int64)
            out[rows] = _segment_sums(self.matrix, flat, lengths)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def _segment_sums(matrix, flat, lengths):
    """The sum of `matrix[flat]` over each run of `lengths` rows, texts of one length at
    a time: a few gathers and additions per length, where per-text numpy calls cost more
    than the arithmetic and `np.add.reduceat` walks the rows one by one. The sums come
    out exactly as `np.add.reduceat` makes them (the first row plus the pairwise sum of
    the rest), so vectors do not move by a rounding. The rows are gathered piece by
    piece (every text's first piece, then every text's second, ...) and added as they
    come, rather than gathered into one (texts, pieces, dim) block and read again."""
    np = _numpy()
    starts = np.cumsum(lengths) - lengths
    out = np.empty((len(lengths), matrix.shape[1]), dtype=matrix.dtype)
    for length in np.unique(lengths).tolist():
        which = np.flatnonzero(lengths == length)
        base = starts[which]

        def row(j, base=base):
            return matrix.take(flat.take(base + j), axis=0)

        first = row(0)
        out[which] = first if length == 1 else first + _pairwise(row, 1, length - 1)
    return out


def _pairwise(row, lo: int, m: int):
    """numpy's pairwise summation of the rows `row(lo)` … `row(lo + m - 1)` (each a fresh
    (texts, dim) array), in its order: one by one under 8 terms, 8 running sums up to
    128, halves beyond."""
    if m < 8:
        res = row(lo)
        for i in range(1, m):
            res += row(lo + i)
        return res
    if m <= 128:
        r = [row(lo + k) for k in range(8)]
        end = m - m % 8
        for i in range(8, end, 8):
            for k in range(8):
                r[k] += row(lo + i + k)
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for i in range(end, m):
            res += row(lo + i)
        return res
    half = m // 2 - (m // 2) % 8
    return _pairwise(row, lo, half) + _pairwise(row, lo + half, m - half)


_lock = threading.Lock()
_model: StaticEmbedder | None = None


def load_embedder() -> StaticEmbedder:
    """The process-wide model, loaded once on first use (thread-safe)."""
    global _model
    if _model is not None:
        return _model
    with _lock:
        if _model is None:
            _model = _load()
    return _model


def _load() -> StaticEmbedder:
    np = _numpy()
    for path in (MODEL_META, MODEL_BIN, VOCAB):
        if not path.exists():
            raise ComparatorUnavailable(
                f"the extraction comparator's model file {path.name} is missing from "
                f"{HERE}; reinstall the cauterweb package (it ships the model)"
            )
    meta = json.loads(MODEL_META.read_text())
    rows, dim = meta["shape"]
    matrix = np.fromfile(MODEL_BIN, dtype=np.dtype(meta["dtype"])).reshape(rows, dim)
    # float32 for the arithmetic: float16 sums lose precision on long texts.
    matrix = matrix.astype(np.float32)
    vocab = {line.rstrip("\n"): i for i, line in enumerate(VOCAB.open(encoding="utf-8"))}
    return StaticEmbedder(matrix, vocab, vocab.get("[UNK]", 100))
