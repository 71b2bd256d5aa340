"""Fit the comparator's model from the labelled pairs (semantics §12); deterministic.

    python -m comparison.train [--check] [--no-loso]

Reads comparison/data/extraction_eval.jsonl and fits on every split but the held-out ones
(HELD_OUT), which are never read here. Every pair becomes its features
(features.py); a gradient-boosted tree ensemble (scikit-learn's
HistGradientBoostingClassifier), constrained to move the right way on every signal with
a known direction (features.monotone), is scored by cross-validation grouped by domain
(no domain is in both the fitting and the scoring folds). Its out-of-fold log-odds
calibrate the probability (Platt scaling) and give the match threshold with the best
out-of-fold accuracy. A few findings decisive in the training pairs bound the probability
by their rate there (BOUNDS). Then each blind-written split (BLIND) is left out in turn:
the whole fit is made without it and scored on it, an estimate of the accuracy on unseen
text nearer the truth than domain-grouped CV (`--no-loso` skips it). The probabilities of
those left-out pairs choose the band where the verdict is `uncertain` (`uncertain_band`;
without the left-out step there is no band). The labelled pairs
are joined by pairs made from them by readings that keep the label (`made_pairs`: a
trigger copied or reworded), which train and are never scored. Writes model.json
beside this file; `--check` only prints the figures. scikit-learn is needed here only: the comparator reads
model.json with numpy.

Tried and dropped, on the same cross-validation (comparison/README.md has the figures): a
logistic regression over the same features (the signals interact: a kept trigger makes a
changed directive telling), the trees without direction constraints, and pairs made by
rule (a rule against itself, against a rule of another domain, against its negation),
which pull the model toward the easy cases.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "extraction_eval.jsonl"
# Splits kept for a scoring after the model is frozen: nothing is fitted or chosen on them.
# Every other split trains (a held-out split, once scored, joins them).
HELD_OUT = (
    "blind_ca",
    "blind_cb",
    "blind_cc",
    "blind_cd",
    "blind_ce",
    "blind_cf",
    # Written after the train_style_* splits, in their styles mixed otherwise, over 16
    # domains none of them has: how the style pairs carry to new text.
    "blind_style_x",
)
# The splits written blind (by authors who never saw the comparator, over domains no other
# split had): leaving each out in turn estimates the accuracy on unseen text better than
# domain-grouped CV, which overstated it by about five points.
BLIND = (
    "blind_a",
    "blind_b",
    "blind_c",
    "blind_d",
    "blind_e",
    "blind_f",
    "blind_g",
    "blind_h",
    "blind_i",
    "blind_j",
    "blind_m",
    "blind_n",
    "blind_o",
    "blind_p",
    "blind_q",
    "blind_r",
    "blind_t",
    "blind_u",
    "blind_v",
    "blind_w",
    "blind_k",
    "blind_l",
    "blind_s",
    "blind_x",
    "blind_y",
    "blind_z",
    "blind_aa",
    "blind_ab",
    "blind_ac",
    "blind_ad",
    "blind_ae",
    "blind_af",
    "blind_ba",
    "blind_bb",
    "blind_bc",
    "blind_bd",
    "blind_be",
    "blind_bf",
)
_FOLDS = 5
PARAMS = {
    "learning_rate": 0.05,
    "max_iter": 300,
    "max_leaf_nodes": 15,
    "min_samples_leaf": 20,
    "l2_regularization": 1.0,
    "random_state": 0,
}


def read_rows(path: Path = DATA, held_out: tuple[str, ...] = HELD_OUT) -> list[dict]:
    """The training pairs: every labelled pair outside the held-out splits."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["split"] not in held_out]


def _plain(text: str) -> str:
    return " ".join(text.lower().split())


# The readings `made_pairs` uses (README: both together lost 0.04 left out; measured apart).
READINGS = ("trigger_reworded",)
ALL_READINGS = ("trigger_copied", "trigger_reworded")


def made_pairs(rows: list[dict], readings: tuple[str, ...] = ALL_READINGS) -> list[dict]:
    """Pairs made from the labelled ones by readings that keep their label, so that how a
    pair was written tells the model nothing a writer's habit put there.

    The writers reworded a same-rule pair from end to end and mostly copied the trigger of a
    trap whose directive differs (of the training pairs with the trigger copied and the
    directive largely reworded, 17 in 792 are the same rule): a trigger copied word for word
    read as a sign of a different rule, and a reworded one as a sign of the same (demo C-006,
    the same rule with its trigger copied, scored `miss`; C-007, another directive under a
    reworded trigger, `match`). Two readings undo that:
    - a same-rule pair with the expected trigger copied for its own extracted trigger is the
      same rule still (its triggers are equivalent, its directives too);
    - a pair labelled another rule whose triggers are the same words is another rule for its
      directive; with its trigger reworded as a same-rule pair of its split rewords that same
      expected trigger, it is another rule still.
    A made pair keeps its source's split and domain (it is left out with it, never scored:
    `made` says which reading made it)."""
    reworded: dict[tuple[str, str], str] = {}
    for r in rows:
        if r["label"] == 1 and _plain(r["extracted"]["trigger"]) != _plain(
            r["expected"]["trigger"]
        ):
            reworded.setdefault(
                (r["split"], _plain(r["expected"]["trigger"])), r["extracted"]["trigger"]
            )
    made = []
    for r in rows:
        same_trigger = _plain(r["extracted"]["trigger"]) == _plain(r["expected"]["trigger"])
        if r["label"] == 1 and not same_trigger and "trigger_copied" in readings:
            trigger, how = r["expected"]["trigger"], "trigger_copied"
        elif r["label"] == 0 and same_trigger and "trigger_reworded" in readings:
            trigger = reworded.get((r["split"], _plain(r["expected"]["trigger"])))
            how = "trigger_reworded"
            if trigger is None:
                continue
        else:
            continue
        made.append({**r, "extracted": {**r["extracted"], "trigger": trigger}, "made": how})
    return made


def training_rows(rows: list[dict], readings: tuple[str, ...] = READINGS) -> list[dict]:
    """The labelled pairs and the pairs made from them (`made_pairs`)."""
    return rows + made_pairs(rows, readings)


def feature_matrix(rows: list[dict]) -> np.ndarray:
    """One row of features per pair, in the model's feature order."""
    import numpy as np

    from .compare import evidence_many
    from .features import FEATURES

    evidence = evidence_many([(r["extracted"], r["expected"]) for r in rows])
    return np.array([[e.features[n] for n in FEATURES] for e in evidence], dtype=np.float64)


def _classifier(params: dict):
    from sklearn.ensemble import HistGradientBoostingClassifier

    from .features import FEATURES, monotone

    return HistGradientBoostingClassifier(
        **params, monotonic_cst=[monotone(n) for n in FEATURES], early_stopping=False
    )


def out_of_fold(X: np.ndarray, y: np.ndarray, domains: np.ndarray, params: dict) -> np.ndarray:
    """Each pair's log-odds from a model fitted without its domain."""
    from sklearn.model_selection import GroupKFold, cross_val_predict

    return cross_val_predict(
        _classifier(params),
        X,
        y,
        groups=domains,
        cv=GroupKFold(_FOLDS),
        method="decision_function",
    )


def _auc(y, s) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, s))


def _platt(margins, y) -> tuple[float, float]:
    from sklearn.linear_model import LogisticRegression

    fit = LogisticRegression(C=1e6, max_iter=5000).fit(margins.reshape(-1, 1), y)
    return float(fit.coef_[0][0]), float(fit.intercept_[0])


# Findings decisive enough to bound the probability by their rate in the training pairs
# (feature, cap or floor, only for a declared signature): an extracted rule that adds an
# unsafe act; a pair whose every change is accounted for; a declared signature naming
# another error class or status.
BOUNDS = (
    ("directive_unsafe", "cap", False),
    ("pair_clean", "floor", False),
    ("trigger_conflict_error", "cap", True),
    ("trigger_conflict_status", "cap", True),
)


def bounds(X: np.ndarray, y: np.ndarray, names: list[str]) -> list[dict]:
    """Each bound's rate of "same rule" where its finding fires (Laplace-smoothed)."""
    out = []
    for feature, kind, declared in BOUNDS:
        fires = X[:, names.index(feature)] > 0
        rate = (float(y[fires].sum()) + 1) / (int(fires.sum()) + 2)
        out.append({"feature": feature, "kind": kind, "declared": declared, "rate": round(rate, 4)})
    return out


def _best_threshold(probabilities, y) -> float:
    import numpy as np

    candidates = np.round(np.arange(0.2, 0.81, 0.01), 2)
    accuracy = [((probabilities >= t) == y).mean() for t in candidates]
    # Ties go to the threshold nearest 0.5, where a calibrated probability says "as likely".
    best = max(zip(accuracy, -abs(candidates - 0.5), candidates, strict=True))
    return float(best[2])


def fit(rows: list[dict], params: dict = PARAMS) -> tuple[dict, dict]:
    """(model spec, cross-validated report) from the training rows."""
    return fit_matrix(rows, feature_matrix(rows), params)


def fit_matrix(rows: list[dict], X: np.ndarray, params: dict = PARAMS) -> tuple[dict, dict]:
    """`fit` over features already computed (one row of X per row of `rows`)."""
    import numpy as np

    from .features import FEATURES
    from .model import export_trees

    y = np.array([r["label"] for r in rows])
    domains = np.array([r["domain"] for r in rows])
    # Made pairs train; only the labelled ones calibrate, choose the threshold and are scored.
    written = np.array([not r.get("made") for r in rows])
    margins = out_of_fold(X, y, domains, params)
    a, b = _platt(margins[written], y[written])
    probabilities = _bounded_out_of_fold(X, y, domains, 1 / (1 + np.exp(-(a * margins + b))))
    probabilities, y_written = probabilities[written], y[written]
    written_rows = [r for r, w in zip(rows, written, strict=True) if w]
    match_at = _best_threshold(probabilities, y_written)
    final = _classifier(params).fit(X, y)
    spec = {
        "kind": "gradient-boosted trees (monotone) with Platt scaling",
        "features": list(FEATURES),
        **export_trees(final),
        "platt": {"a": round(a, 6), "b": round(b, 6)},
        "bounds": bounds(X, y, list(FEATURES)),
        "thresholds": {"match": match_at, "partial": round(match_at / 2, 2)},
        "fitted_on": {
            "splits": sorted({r["split"] for r in rows}),
            "pairs": len(written_rows),
            "made_pairs": len(rows) - len(written_rows),
            "params": params,
        },
    }
    report = cv_report(written_rows, y_written, probabilities, match_at)
    return {**spec, "cv": report}, report


def leave_one_split_out(
    rows: list[dict], X: np.ndarray, params: dict = PARAMS, splits: tuple[str, ...] = BLIND
) -> dict:
    """Each blind-written split scored by the whole fit (CV, calibration, threshold,
    bounds) made without it: the nearest thing to text nobody tuned on that the training
    pairs hold. Not blind: the features were written with these pairs in view."""
    return left_out_predictions(rows, X, params, splits)[0]


def left_out_predictions(
    rows: list[dict], X: np.ndarray, params: dict = PARAMS, splits: tuple[str, ...] = BLIND
) -> tuple[dict, np.ndarray, np.ndarray]:
    """`leave_one_split_out`'s figures, and each left-out pair's probability and label (in
    the order of `splits`), from which the uncertain band is chosen."""
    import numpy as np

    from .model import Model

    y = np.array([r["label"] for r in rows])
    out: dict = {}
    scored, labels = [], []
    for split in splits:
        held = np.array([r["split"] == split for r in rows])
        # Its made pairs leave with it and are never scored.
        scored_here = held & np.array([not r.get("made") for r in rows])
        if not scored_here.any():
            continue
        keep = [r for r, h in zip(rows, held, strict=True) if not h]
        spec, _ = fit_matrix(keep, X[~held], params)
        model = Model(spec)
        probabilities = score_matrix(model, X[scored_here])
        hits = (probabilities >= model.match_at) == y[scored_here]
        out[split] = {
            "pairs": int(scored_here.sum()),
            "auc": round(_auc(y[scored_here], probabilities), 4),
            "accuracy": round(float(hits.mean()), 4),
            "match_at": model.match_at,
        }
        scored.append(probabilities)
        labels.append(y[scored_here])
    if not scored:
        return out, np.zeros(0), np.zeros(0, dtype=int)
    p, t = np.concatenate(scored), np.concatenate(labels)
    # Each split at its own model's threshold: the pooled accuracy is the hits summed.
    hits = sum(round(out[s]["accuracy"] * out[s]["pairs"]) for s in out)
    out["all"] = {
        "pairs": len(t),
        "auc": round(_auc(t, p), 4),
        "accuracy": round(hits / len(t), 4),
    }
    return out, p, t


# The uncertain band (semantics §12): outside it the verdict must be right at least this
# often on the pairs left out, and no more than this share of them may fall inside it.
# Left out, the shipped fit already reaches 0.9465 without a band, so the band chosen is
# narrow (0.7% of the pairs); comparison/README.md has what a wider one would buy.
BAND_ACCURACY = 0.95
BAND_MAX_SHARE = 0.10
_GRID = 0.01


def band_figures(p: np.ndarray, y: np.ndarray, low: float, high: float) -> dict:
    """How a band [low, high) reads the pairs: the share inside it (`uncertain`), the
    accuracy of `match` (p >= high) against the rest outside it, and the errors there."""
    inside = (p >= low) & (p < high)
    outside = ~inside
    hits = ((p[outside] >= high) == y[outside].astype(bool)).sum()
    decided = int(outside.sum())
    return {
        "uncertain_share": round(float(inside.mean()), 4) if len(p) else 0.0,
        "accuracy_outside": round(float(hits / decided), 4) if decided else 0.0,
        "errors_outside": int(decided - hits),
        "pairs": len(p),
    }


def band_curve(p: np.ndarray, y: np.ndarray, lows: list[float], highs: list[float]) -> list:
    """What a wider band buys: for each most share inside, the best accuracy outside (and
    its band), on the same pairs and grid as `uncertain_band`."""
    best: dict[float, dict] = {}
    shares = (0.0, 0.02, 0.04, 0.06, 0.08, 0.10, 0.15, 0.20)
    for low in lows:
        for high in highs:
            f = band_figures(p, y, low, high)
            for share in shares:
                if f["uncertain_share"] <= share and (
                    share not in best or f["accuracy_outside"] > best[share]["accuracy_outside"]
                ):
                    best[share] = {"most_inside": share, "low": low, "high": high, **f}
    return [best[share] for share in shares if share in best]


def uncertain_band(p: np.ndarray, y: np.ndarray, match_at: float) -> dict:
    """The band of probabilities where the verdict is `uncertain`, chosen on the pairs left
    out (each scored by a fit made without its split), deterministically: among the bands
    [low, high) on a 0.01 grid holding the match threshold, the one with the fewest pairs
    inside that reaches BAND_ACCURACY outside within BAND_MAX_SHARE (ties: the higher
    accuracy outside, then the narrower band); when none reaches it, the most accurate
    outside within BAND_MAX_SHARE."""
    import numpy as np

    grid = np.round(np.arange(_GRID, 1.0, _GRID), 2)
    lows = [float(v) for v in grid if v <= match_at]
    highs = [float(v) for v in grid if v > match_at]
    best_key, best = None, None
    for low in lows:
        for high in highs:
            f = band_figures(p, y, low, high)
            if f["uncertain_share"] > BAND_MAX_SHARE:
                continue
            reached = f["accuracy_outside"] >= BAND_ACCURACY
            key = (
                reached,
                -f["uncertain_share"] if reached else f["accuracy_outside"],
                f["accuracy_outside"] if reached else -f["uncertain_share"],
                -(high - low),
                -abs((low + high) / 2 - match_at),
            )
            if best_key is None or key > best_key:
                best_key, best = key, {"low": low, "high": high, **f}
    chosen = best or {"low": match_at, "high": match_at, **band_figures(p, y, 0, 0)}
    return {
        **chosen,
        "curve": band_curve(p, y, lows, highs),
        "rule": (
            f"fewest pairs inside with accuracy outside >= {BAND_ACCURACY} and at most "
            f"{BAND_MAX_SHARE:.0%} inside, on the blind splits left out one at a time"
        ),
        "without_band": band_figures(p, y, match_at, match_at),
    }


def score_matrix(model, X: np.ndarray) -> np.ndarray:
    """The model's bounded probabilities for rows of features (no declared signature)."""
    import numpy as np

    probabilities = model.probabilities(X)
    names = model.features
    return np.array(
        [
            model.bounded(float(p), dict(zip(names, row, strict=True)), declared=False)
            for p, row in zip(probabilities, X, strict=True)
        ]
    )


def _bounded_out_of_fold(X, y, domains, probabilities):
    """The out-of-fold probabilities held within bounds taken from the other folds."""
    from sklearn.model_selection import GroupKFold

    from .features import FEATURES
    from .model import Model

    out = probabilities.copy()
    for fit_idx, score_idx in GroupKFold(_FOLDS).split(X, y, domains):
        model = Model.__new__(Model)
        model.bounds = bounds(X[fit_idx], y[fit_idx], list(FEATURES))
        for i in score_idx:
            features = dict(zip(FEATURES, X[i], strict=True))
            out[i] = model.bounded(float(out[i]), features, declared=False)
    return out


def cv_report(rows: list[dict], y: np.ndarray, probabilities: np.ndarray, match_at: float) -> dict:
    report = {
        "cv_auc": round(_auc(y, probabilities), 4),
        "cv_accuracy": round(float(((probabilities >= match_at) == y).mean()), 4),
        "match_at": match_at,
    }
    for split in sorted({r["split"] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r["split"] == split]
        report[split] = {
            "pairs": len(idx),
            "cv_auc": round(_auc(y[idx], probabilities[idx]), 4),
            "cv_accuracy": round(float(((probabilities[idx] >= match_at) == y[idx]).mean()), 4),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="print the CV figures only")
    parser.add_argument(
        "--no-loso",
        action="store_true",
        help="skip the leave-one-split-out estimate (fitting without each blind split)",
    )
    parser.add_argument(
        "--readings",
        default=",".join(READINGS),
        help="the readings that make pairs, comma-separated (trigger_copied, trigger_reworded;"
        " empty for none); the default is the shipped model's",
    )
    parser.add_argument("--out", type=Path, default=HERE / "model.json", help="where to write")
    args = parser.parse_args()
    readings = tuple(r for r in args.readings.split(",") if r)
    if set(readings) - set(ALL_READINGS):
        parser.error(f"--readings: each of {', '.join(ALL_READINGS)}")
    rows = training_rows(read_rows(), readings)
    X = feature_matrix(rows)
    spec, report = fit_matrix(rows, X)
    if not args.no_loso:
        loso, p, y = left_out_predictions(rows, X)
        spec["leave_one_split_out"] = report["leave_one_split_out"] = loso
        band = uncertain_band(p, y, spec["thresholds"]["match"])
        per_split, start = {}, 0
        for split in BLIND:
            if split in loso:
                n = loso[split]["pairs"]
                per_split[split] = band_figures(
                    p[start : start + n], y[start : start + n], band["low"], band["high"]
                )
                start += n
        band["per_split"] = per_split
        spec["uncertain"] = report["uncertain"] = band
    print(json.dumps(report, indent=2))
    if not args.check:
        spec["fitted_on"]["readings"] = list(readings)
        args.out.write_text(json.dumps(spec, separators=(",", ":")) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
