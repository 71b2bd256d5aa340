"""Every feature and result of the comparator over the labelled pairs, one JSON line each.

A dev script for speed work on comparison/: dump before a change, dump after it, diff the
two files. A change that only makes the comparator faster must leave them identical to the
last bit (floats are written with `repr`, so any rounding shows).

Three passes over comparison/data/extraction_eval.jsonl, each in its own batch:
- `plain`: the pairs as labelled (`evidence_many` features, then `compare_many` results);
- `signed`: the same pairs with the atoms read from the expected trigger as the extracted
  rule's declared signature, so the declared-signature features are dumped too;
- `suffixed`: every extracted text with " v0" appended, the bench's texts never seen.

    python bench/dump_comparator.py OUT.jsonl [--limit N]   # N: the first N pairs only
    diff OUT-before.jsonl OUT-after.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from comparison.compare import compare_many, evidence_many  # noqa: E402
from comparison.triggers import trigger_atoms  # noqa: E402

EVAL = ROOT / "comparison" / "data" / "extraction_eval.jsonl"


def passes(rows: list[dict]) -> dict[str, tuple[list[tuple[dict, dict]], list | None]]:
    pairs = [(r["extracted"], r["expected"]) for r in rows]
    signed = [sorted(trigger_atoms(e["trigger"])) for _, e in pairs]
    suffixed = [({k: v + " v0" for k, v in x.items()}, e) for x, e in pairs]
    return {"plain": (pairs, None), "signed": (pairs, signed), "suffixed": (suffixed, None)}


def dump(out, limit: int | None = None) -> int:
    rows = [json.loads(line) for line in EVAL.read_text().splitlines() if line.strip()][:limit]
    written = 0
    for name, (pairs, signatures) in passes(rows).items():
        evidence = evidence_many(pairs, signatures=signatures)
        results = compare_many(pairs, signatures=signatures)
        for i, (found, result) in enumerate(zip(evidence, results, strict=True)):
            line = {
                "pass": name,
                "pair": i,
                "features": found.features,
                "declared_features": found.declared_features,
                "result": result,
            }
            out.write(json.dumps(line, sort_keys=True) + "\n")
            written += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the file to write (JSON lines)")
    parser.add_argument("--limit", type=int, help="the first N labelled pairs only (default all)")
    args = parser.parse_args()
    with args.out.open("w") as out:
        written = dump(out, args.limit)
    print(f"{written} lines written to {args.out}")


if __name__ == "__main__":
    main()
