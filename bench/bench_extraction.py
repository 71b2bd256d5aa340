"""Extraction-accuracy bench (semantics §12): the comparator against token-F1, per split,
and against an older comparator (the baseline) on the same pairs.

Prints, for each split of comparison/data/extraction_eval.jsonl and of every `--pairs` file
(the same JSON Lines shape, with `label`, `split` and `category`; scored, never fitted on):
- ROC AUC of the comparator's `score` (with a 95% bootstrap interval) and of token-F1;
- verdict accuracy at the model's match threshold (a pair labelled "same rule" must score
  at least it, any other below it), with a 95% Wilson interval; the share of pairs `uncertain` (a reviewer decides, §12.3) and the accuracy
  of the verdicts outside that band; how many pairs labelled "different rule" score >= 0.9;
- for the splits the model was fitted on, the cross-validated (out-of-fold, grouped by
  domain) figures recorded by comparison/train.py: the figures on the shipped model
  there are in-sample and flatter it; and the leave-one-split-out figures train.py
  recorded for the blind-written splits (each fitted without it, then scored). The
  held-out splits (comparison.train.HELD_OUT) were never fitted on;
- the baseline comparator's AUC and accuracy beside the shipped one's (`--baseline`: a git
  ref whose comparison/ folder is taken with `git archive`, default `main`, or a folder that
  holds a `comparison` package; `--baseline none` skips it; to set an earlier comparator
  beside it, pass that commit, e.g. 7514a75); it runs in its own process.
Then the verdicts by error category on the held-out and `--pairs` splits, baseline beside
shipped, pairs per second through `compare_many` (cold: texts never seen; warm: the same
texts again) in CPU time and in wall time, in one process and over all the machine's cores
(`workers`), the install size of what the comparator needs at run time, and how loaded the
machine was. `--limit N` keeps the first N pairs of each split (CI runs it tiny).

    python bench/bench_extraction.py [--json] [--pairs FILE ...] [--baseline REF|DIR|none]
        [--limit N] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter, defaultdict
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from comparison.compare import compare_many  # noqa: E402
from comparison.model import MODEL_JSON, load_model  # noqa: E402
from comparison.semantic import MODEL_BIN, MODEL_META, VOCAB  # noqa: E402
from comparison.thesaurus import THESAURUS  # noqa: E402
from comparison.train import HELD_OUT  # noqa: E402

EVAL = ROOT / "comparison" / "data" / "extraction_eval.jsonl"
# The held-out splits together, when there are any.
HELD = "held out"
# What the comparator needs at run time beyond the standard library.
RUNTIME_PACKAGES = ["numpy"]
_BOOTSTRAP = 2000


def auc(labels, scores) -> float:
    """Probability that a random positive outscores a random negative (ties count half)."""
    labels, scores = np.asarray(labels), np.asarray(scores, dtype=float)
    pos, neg = scores[labels == 1], scores[labels == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def auc_interval(labels, scores, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval, resampling positives and negatives apart."""
    rng = np.random.default_rng(seed)
    labels, scores = np.asarray(labels), np.asarray(scores, dtype=float)
    pos, neg = scores[labels == 1], scores[labels == 0]
    draws = [
        auc(
            [1] * len(pos) + [0] * len(neg),
            np.concatenate([rng.choice(pos, len(pos)), rng.choice(neg, len(neg))]),
        )
        for _ in range(_BOOTSTRAP)
    ]
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)


def wilson(successes: int, n: int) -> tuple[float, float]:
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(successes, n, alpha=0.05, method="wilson")
    return float(low), float(high)


def split_figures(
    rows: list[dict], results: list[dict], idx: list[int], match_at: float | None = None
) -> dict:
    """AUC and accuracy of one split; accuracy at `match_at` (the model's threshold: every
    pair decided by its score), and of the verdicts outside the uncertain band."""
    labels = [rows[i]["label"] for i in idx]
    score = [results[i]["score"] for i in idx]
    if match_at is None:
        at = sum((results[i]["verdict"] == "match") == bool(rows[i]["label"]) for i in idx)
    else:
        at = sum((results[i]["score"] >= match_at) == bool(rows[i]["label"]) for i in idx)
    decided = [i for i in idx if results[i]["verdict"] != "uncertain"]
    hits = sum((results[i]["verdict"] == "match") == bool(rows[i]["label"]) for i in decided)
    return {
        "pairs": len(idx),
        "domains": len({rows[i]["domain"] for i in idx if "domain" in rows[i]}),
        "auc": round(auc(labels, score), 4),
        "auc_95": [round(v, 4) for v in auc_interval(labels, score)],
        "token_f1_auc": round(auc(labels, [results[i]["token_f1"] for i in idx]), 4),
        "accuracy": round(at / len(idx), 4),
        "accuracy_95": [round(v, 4) for v in wilson(at, len(idx))],
        "uncertain_share": round(1 - len(decided) / len(idx), 4),
        "accuracy_decided": round(hits / len(decided), 4) if decided else None,
        "different_at_0_9": sum(
            1 for i in idx if not rows[i]["label"] and results[i]["score"] >= 0.9
        ),
    }


VERDICTS = ("match", "uncertain", "partial", "miss")


def by_category(rows: list[dict], results: list[dict], idx: list[int]) -> dict:
    """Per error category: pairs, how many are labelled "same rule", each verdict, and the
    errors among the decided verdicts (an `uncertain` pair is a reviewer's, counted apart)."""
    table: dict[str, Counter] = defaultdict(Counter)
    for i in idx:
        row = table[rows[i].get("category", "uncategorised")]
        row["pairs"] += 1
        row[results[i]["verdict"]] += 1
        if results[i]["verdict"] != "uncertain":
            row["errors"] += (results[i]["verdict"] == "match") != bool(rows[i]["label"])
        row["label_same"] += rows[i]["label"]
    return {k: dict(v) for k, v in sorted(table.items())}


# The baseline comparator, run from its own folder in a child process: it reads the pairs as
# JSON on stdin and writes its score and verdict for each.
_BASELINE_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from comparison.compare import compare_many
from comparison.model import load_model
pairs = json.load(sys.stdin)
results = compare_many([(x, e) for x, e in pairs])
json.dump({"match_at": load_model().match_at,
           "results": [{"score": r["score"], "verdict": r["verdict"],
                        "token_f1": r["token_f1"]} for r in results]}, sys.stdout)
"""


def baseline_folder(baseline: str, scratch: Path) -> Path | None:
    """A folder holding the baseline's `comparison` package: the one given, or the git
    ref's comparison/ unpacked into `scratch`; None for "none"."""
    if baseline == "none":
        return None
    given = Path(baseline)
    if (given / "comparison" / "compare.py").is_file():
        return given
    archive = scratch / "baseline.tar"
    with archive.open("wb") as out:
        subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", baseline, "comparison"],
            stdout=out,
            check=True,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(scratch, filter="data")
    return scratch


def baseline_results(folder: Path, pairs: list[tuple[dict, dict]]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _BASELINE_SCRIPT, str(folder)],
        input=json.dumps(pairs),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def read_pairs(path: Path) -> list[dict]:
    """Labelled pairs of a JSON Lines file (each with extracted, expected, label, split)."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        missing = [k for k in ("extracted", "expected", "label", "split") if k not in row]
        if missing:
            raise SystemExit(f"{path}: line {number} lacks {', '.join(missing)}")
        rows.append(row)
    return rows


def throughput(pairs: list[tuple[dict, dict]], repeats: int | None = None) -> dict:
    repeats = repeats or max(5, 6000 // len(pairs))
    cold, cold_cpu, warm, both_cpu = [], [], [], []
    for n in range(repeats):
        # A fresh suffix each time so no per-text cache flatters the cold figure: the
        # extracted rules are new, the expected ones known (a rescoring, where the cases'
        # expected rules stay the same while candidates come and go).
        fresh = [({k: v + f" v{n}" for k, v in x.items()}, e) for x, e in pairs]
        started, cpu = time.perf_counter(), time.process_time()
        compare_many(fresh)
        cold_cpu.append(len(pairs) / (time.process_time() - cpu))
        cold.append(len(pairs) / (time.perf_counter() - started))
        started = time.perf_counter()
        compare_many(fresh)
        warm.append(len(pairs) / (time.perf_counter() - started))
        # Both sides never seen: the strict figure, which no per-text cache helps and the
        # size of the labelled set does not move.
        new = [
            ({k: v + f" w{n}" for k, v in x.items()}, {k: v + f" w{n}" for k, v in e.items()})
            for x, e in pairs
        ]
        cpu = time.process_time()
        compare_many(new)
        both_cpu.append(len(pairs) / (time.process_time() - cpu))
    # All of the machine's cores (`compare_many(workers=...)`, one forked process each): wall
    # time, since the work is in the children; texts never seen by the parent or them.
    workers = os.cpu_count() or 1
    parallel = []
    for n in range(min(3, repeats) if workers > 1 else 0):
        fresh = [({k: v + f" p{n}" for k, v in x.items()}, e) for x, e in pairs]
        started = time.perf_counter()
        compare_many(fresh, workers=workers)
        parallel.append(len(pairs) / (time.perf_counter() - started))
    # CPU time counts only this process's work (garbage collection included), which wall
    # time on a shared machine does not; best of the repeats as timeit does, and the
    # median beside it.
    return {
        "cold_cpu_median": round(statistics.median(cold_cpu), 1),
        "cold_cpu_best": round(max(cold_cpu), 1),
        "cold_best": round(max(cold), 1),
        "cold_median": round(statistics.median(cold), 1),
        "warm_best": round(max(warm), 1),
        "both_new_cpu_median": round(statistics.median(both_cpu), 1),
        "both_new_cpu_best": round(max(both_cpu), 1),
        "workers": workers,
        "parallel_wall_median": round(statistics.median(parallel), 1) if parallel else None,
        "parallel_wall_best": round(max(parallel), 1) if parallel else None,
    }


def package_size_mb(name: str, seen: set[str]) -> float:
    """Installed size of a distribution and its requirements (each counted once)."""
    key = name.lower().replace("_", "-")
    if key in seen:
        return 0.0
    seen.add(key)
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return 0.0
    size = sum(
        Path(dist.locate_file(f)).stat().st_size
        for f in dist.files or []
        if Path(dist.locate_file(f)).is_file()
    )
    for req in dist.requires or []:
        if "extra ==" in req:
            continue
        dep = req.split(";")[0].split("[")[0]
        for sep in "<>=!~ (":
            dep = dep.split(sep)[0]
        size += int(package_size_mb(dep.strip(), seen) * 1e6)
    return size / 1e6


def machine() -> dict:
    started = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i
    return {
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "cpus": os.cpu_count(),
        "python_loop_1m_seconds": round(time.perf_counter() - started, 3),
    }


def report(
    extra: list[Path] = (),
    baseline: str = "none",
    limit: int | None = None,
    repeats: int | None = None,
) -> dict:
    rows = [json.loads(line) for line in EVAL.read_text().splitlines() if line.strip()]
    for path in extra:
        rows += [{**r, "split": f"{path.stem}:{r['split']}"} for r in read_pairs(path)]
    if limit:
        kept: Counter = Counter()
        rows = [r for r in rows if (kept.update([r["split"]]) or kept[r["split"]] <= limit)]
    pairs = [(r["extracted"], r["expected"]) for r in rows]
    started = time.perf_counter()
    results = compare_many(pairs)
    first_call = time.perf_counter() - started
    model = load_model()
    out: dict = {"pairs": len(rows), "domains": len({r.get("domain") for r in rows})}
    out["model"] = {
        **model.spec["fitted_on"],
        "match_at": model.match_at,
        "uncertain": [model.uncertain_low, model.uncertain_high],
    }
    out["cv"] = model.spec["cv"]
    out["leave_one_split_out"] = model.spec.get("leave_one_split_out", {})
    out["uncertain_band"] = model.spec.get("uncertain", {})
    present = list(dict.fromkeys(r["split"] for r in rows))
    extra_splits = [s for s in present if ":" in s]
    out["training_splits"] = sorted(set(present) - set(HELD_OUT) - set(extra_splits))
    out["held_out_splits"] = [s for s in HELD_OUT if s in present]
    out["extra_splits"] = extra_splits
    old = None
    with tempfile.TemporaryDirectory() as scratch:
        folder = baseline_folder(baseline, Path(scratch))
        if folder is not None:
            old = baseline_results(folder, pairs)
            out["baseline"] = {"from": baseline, "match_at": old["match_at"]}
    split_names = (*out["training_splits"], *out["held_out_splits"], *extra_splits)
    index = {s: [i for i, r in enumerate(rows) if r["split"] == s] for s in split_names}
    for split in split_names:
        out[split] = split_figures(rows, results, index[split], model.match_at)
        if old:
            out[split]["baseline"] = split_figures(rows, old["results"], index[split])
    held = [i for i, r in enumerate(rows) if r["split"] in HELD_OUT]
    if len(out["held_out_splits"]) > 1:
        out[HELD] = split_figures(rows, results, held, model.match_at)
        if old:
            out[HELD]["baseline"] = split_figures(rows, old["results"], held)
    out["held_out_by_category"] = by_category(rows, results, held) if held else {}
    out["by_category"] = {}
    for split in (*out["held_out_splits"], *extra_splits):
        out["by_category"][split] = {"shipped": by_category(rows, results, index[split])}
        if old:
            out["by_category"][split]["baseline"] = by_category(rows, old["results"], index[split])
    out["first_call_seconds"] = round(first_call, 2)
    out["pairs_per_second"] = throughput(pairs, repeats)
    seen: set[str] = set()
    deps = sum(package_size_mb(name, seen) for name in RUNTIME_PACKAGES)
    files = [MODEL_JSON, MODEL_BIN, MODEL_META, VOCAB, THESAURUS]
    out["install_mb"] = {
        "dependencies": round(deps, 1),
        "packages": sorted(seen),
        "model_files": round(sum(p.stat().st_size for p in files) / 1e6, 1),
    }
    out["machine"] = machine()
    return out


def _interval(pair: list[float]) -> str:
    return f"[{pair[0]:.3f}, {pair[1]:.3f}]"


def _figures(s: dict) -> str:
    decided = s["accuracy_decided"]
    return (
        f"{s['auc']:>6.3f} {s['accuracy']:>6.3f} {s['uncertain_share']:>6.1%} "
        f"{(f'{decided:.3f}' if decided is not None else '—'):>6} {s['different_at_0_9']:>4}"
    )


def print_report(r: dict) -> None:
    print(f"extraction bench: {r['pairs']} labelled pairs over {r['domains']} domains")
    print(f"model fitted on {', '.join(r['model']['splits'])} ({r['model']['pairs']} pairs)")
    low, high = r["model"]["uncertain"]
    print(
        f"match at p >= {high:.2f}; uncertain (a reviewer decides) from {low:.2f}; accuracy at "
        f"the threshold {r['model']['match_at']}; 'decided': accuracy outside the band; "
        "'d>=.9': pairs labelled different scored >= 0.9"
    )
    base = r.get("baseline")
    old_head = f"  | baseline ({base['from']}): AUC    acc" if base else ""
    print(
        f"{'split':14} {'pairs':>5}  {'AUC':>6} {'acc':>6} {'uncert':>6} {'decided':>6} "
        f"{'d>=.9':>4}  {'95% CI (acc)':>16}  {'f1 AUC':>6}  {'CV AUC':>6} {'CV acc':>6}{old_head}"
    )
    for split in (*r["training_splits"], *r["held_out_splits"], HELD, *r["extra_splits"]):
        if split not in r:
            continue
        s, cv = r[split], r["cv"].get(split)
        cv_text = f"{cv['cv_auc']:>6.3f} {cv['cv_accuracy']:>6.3f}" if cv else f"{'not fitted':>13}"
        old = s.get("baseline")
        old_text = f"  | {'':>19}{old['auc']:>6.3f} {old['accuracy']:>6.3f}" if old else ""
        print(
            f"{split:14} {s['pairs']:>5}  {_figures(s)}  {_interval(s['accuracy_95']):>16}"
            f"  {s['token_f1_auc']:>6.3f}  {cv_text}{old_text}"
        )
    print(
        f"cross-validated over all training splits: AUC {r['cv']['cv_auc']:.3f}, "
        f"accuracy {r['cv']['cv_accuracy']:.3f} (match at p >= {r['model']['match_at']})"
    )
    loso, band = r["leave_one_split_out"], r["uncertain_band"]
    if loso:
        print("leave one blind split out (fitted without it, then scored; not blind):")
        for split, s in loso.items():
            inside = band.get("per_split", {}).get(split)
            band_text = (
                f"  uncertain {inside['uncertain_share']:.1%}, accuracy outside "
                f"{inside['accuracy_outside']:.3f}"
                if inside
                else ""
            )
            print(
                f"  {split:8} {s['pairs']:>5}  AUC {s['auc']:.3f}  accuracy {s['accuracy']:.3f}"
                f"{band_text}"
            )
    if band:
        print(
            f"uncertain band [{band['low']}, {band['high']}) chosen on them ({band['rule']}): "
            f"{band['uncertain_share']:.1%} inside, accuracy outside {band['accuracy_outside']:.3f}"
            f" (without a band {band['without_band']['accuracy_outside']:.3f})"
        )
    if not r["held_out_splits"] and not r["extra_splits"]:
        print(
            f"no held-out split ({', '.join(HELD_OUT)}) in the labelled pairs yet: the figures"
            " above are training, cross-validated and leave-one-split-out figures only"
        )
    for split, tables in r["by_category"].items():
        print(
            f"{split} by category (shipped | baseline): pairs same  match uncert partial miss  errors"
        )
        names = sorted(set(tables["shipped"]) | set(tables.get("baseline", {})))
        for name in names:
            line = f"  {name:30}"
            for which in ("shipped", "baseline"):
                if which not in tables:
                    continue
                c = tables[which].get(name, {})
                line += (
                    f" | {c.get('pairs', 0):>4} {c.get('label_same', 0):>4}  {c.get('match', 0):>5}"
                    f" {c.get('uncertain', 0):>6} {c.get('partial', 0):>7} {c.get('miss', 0):>4}"
                    f"  {c.get('errors', 0):>6}"
                )
            print(line)
    t, m, mb = r["pairs_per_second"], r["machine"], r["install_mb"]
    print(
        f"throughput on unseen texts: {t['cold_cpu_median']:.0f} pairs/s of CPU time (best "
        f"{t['cold_cpu_best']:.0f}); wall {t['cold_best']:.0f} best, {t['cold_median']:.0f} median;"
        f" {t['warm_best']:.0f} pairs/s on texts seen before; first call (model load) "
        f"{r['first_call_seconds']} s"
    )
    print(
        f"throughput with both sides never seen: {t['both_new_cpu_median']:.0f} pairs/s of CPU"
        f" time (best {t['both_new_cpu_best']:.0f})"
    )
    if t["parallel_wall_median"]:
        print(
            f"throughput on unseen texts over {t['workers']} processes (workers="
            f"{t['workers']}): {t['parallel_wall_median']:.0f} pairs/s of wall time (best "
            f"{t['parallel_wall_best']:.0f})"
        )
    print(
        f"machine: load average {m['load_average']} on {m['cpus']} CPUs; a 1M-step Python "
        f"loop took {m['python_loop_1m_seconds']} s (~0.05 s idle)"
    )
    print(
        f"install size: dependencies {mb['dependencies']:.1f} MB ({', '.join(mb['packages'])}),"
        f" model files {mb['model_files']:.1f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--pairs",
        action="append",
        type=Path,
        default=[],
        help="another JSON Lines file of labelled pairs to score (never fitted on); repeatable",
    )
    parser.add_argument(
        "--baseline",
        default="main",
        help="the comparator to set beside the shipped one: a git ref (default main), a folder "
        "holding a comparison package, or none",
    )
    parser.add_argument("--limit", type=int, help="the first N pairs of each split only")
    parser.add_argument("--repeats", type=int, help="throughput batches (default: ~6,000 pairs)")
    args = parser.parse_args()
    r = report(args.pairs, args.baseline, args.limit, args.repeats)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        print_report(r)


if __name__ == "__main__":
    main()
