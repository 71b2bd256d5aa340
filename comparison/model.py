"""The fitted model that turns a pair's features into the probability "same rule"
(semantics §12). Its trees live in `model.json` beside this file, written by
`comparison/train.py` from the labelled pairs; reading and running them needs numpy
only, so the comparator runs without scikit-learn.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from sklearn.ensemble import HistGradientBoostingClassifier

MODEL_JSON = Path(__file__).resolve().parent / "model.json"

_lock = threading.Lock()
_model: Model | None = None


class Model:
    """A sum of regression trees (log-odds), then Platt scaling to a probability."""

    def __init__(self, spec: dict) -> None:
        import numpy as np

        self.spec = spec
        self.features: list[str] = spec["features"]
        self.baseline = float(spec["baseline"])
        # All trees in one table of nodes; a tree is its root's row number.
        self.roots = np.array(spec["roots"], dtype=np.int64)
        self.feature = np.array(spec["feature"], dtype=np.int64)
        self.threshold = np.array(spec["threshold"], dtype=np.float64)
        self.left = np.array(spec["left"], dtype=np.int64)
        self.right = np.array(spec["right"], dtype=np.int64)
        self.value = np.array(spec["value"], dtype=np.float64)
        self.leaf = self.left < 0
        own = np.arange(len(self.left))
        # Where a pair goes from each node, as one flat table: the left children, then the
        # right ones (node + len(left) is its right child's row).
        self.children = np.concatenate(
            [np.where(self.leaf, own, self.left), np.where(self.leaf, own, self.right)]
        )
        self.depth = _depth(self.roots, self.left, self.right)
        self.platt_a = float(spec["platt"]["a"])
        self.platt_b = float(spec["platt"]["b"])
        self.match_at = float(spec["thresholds"]["match"])
        self.partial_at = float(spec["thresholds"]["partial"])
        self.bounds: list[dict] = spec.get("bounds", [])
        # Where the model is not sure (semantics §12): `uncertain` from `low` up to `high`,
        # `match` from `high`. A model fitted without the left-out step has no band.
        band = spec.get("uncertain") or {}
        self.uncertain_low = float(band.get("low", self.match_at))
        self.uncertain_high = max(float(band.get("high", self.match_at)), self.match_at)

    def margins(self, rows: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
        """Log-odds of "same rule" for a (pairs × features) array, all trees at once."""
        import numpy as np

        rows = np.asarray(rows, dtype=np.float64).reshape(-1, len(self.features))
        nodes = np.broadcast_to(self.roots, (len(rows), len(self.roots))).copy()
        flat = rows.ravel()
        offset = (np.arange(len(rows)) * rows.shape[1])[:, None]
        # A leaf is its own child, so every pair takes the deepest tree's number of steps.
        # `take` on one-dimensional tables does what indexing does, faster (no general
        # fancy-indexing set-up, no two-dimensional index into the children).
        count = len(self.left)
        for _ in range(self.depth):
            right = ~(flat.take(offset + self.feature.take(nodes)) <= self.threshold.take(nodes))
            nodes = self.children.take(nodes + count * right)
        return self.baseline + self.value[nodes].sum(axis=1)

    def probabilities(self, rows: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
        """Calibrated P(same rule) for a (pairs × features) array."""
        import numpy as np

        z = self.platt_a * self.margins(rows) + self.platt_b
        return 1.0 / (1.0 + np.exp(-np.clip(z, -700, 700)))

    def bounded(self, probability: float, features: dict[str, float], *, declared: bool) -> float:
        """The probability held within what the training pairs say about a few decisive
        findings: with it, the rate of "same rule" among the training pairs that had it
        (a cap for a conflict, a floor for a pair where every change is accounted for).
        Some bounds hold only for a declared signature, whose atoms are stated rather
        than read from prose."""
        for bound in self.bounds:
            if features.get(bound["feature"], 0.0) <= 0 or (bound["declared"] and not declared):
                continue
            if bound["kind"] == "cap":
                probability = min(probability, bound["rate"])
            else:
                probability = max(probability, bound["rate"])
        return probability

    def vector(self, features: dict[str, float]) -> list[float]:
        return [features[name] for name in self.features]

    def verdict(self, probability: float) -> str:
        """`match`, `uncertain` (a reviewer decides), `partial` or `miss`."""
        if probability >= self.uncertain_high:
            return "match"
        if probability >= self.uncertain_low:
            return "uncertain"
        return "partial" if probability >= self.partial_at else "miss"


def _depth(roots, left, right) -> int:
    """The most splits on any path from a root to a leaf."""
    deepest = 0
    stack = [(int(root), 0) for root in roots]
    while stack:
        node, depth = stack.pop()
        if left[node] < 0:
            deepest = max(deepest, depth)
            continue
        stack.extend(((int(left[node]), depth + 1), (int(right[node]), depth + 1)))
    return deepest


def export_trees(classifier: HistGradientBoostingClassifier) -> dict:
    """A fitted HistGradientBoostingClassifier as plain lists (train.py writes them)."""
    roots, feature, threshold, left, right, value = [], [], [], [], [], []
    for (tree,) in classifier._predictors:
        base = len(feature)
        roots.append(base)
        for node in tree.nodes:
            leaf = bool(node["is_leaf"])
            feature.append(0 if leaf else int(node["feature_idx"]))
            threshold.append(0.0 if leaf else float(node["num_threshold"]))
            left.append(-1 if leaf else base + int(node["left"]))
            right.append(-1 if leaf else base + int(node["right"]))
            value.append(round(float(node["value"]), 9) if leaf else 0.0)
    return {
        "baseline": float(classifier._baseline_prediction.ravel()[0]),
        "roots": roots,
        "feature": feature,
        "threshold": threshold,
        "left": left,
        "right": right,
        "value": value,
    }


def load_model(path: Path | None = None) -> Model:
    """The shipped model, read once per process (thread-safe); another file when given."""
    global _model
    if path is not None:
        return Model(json.loads(path.read_text()))
    if _model is None:
        with _lock:
            if _model is None:
                _model = Model(_read(MODEL_JSON))
    return _model


def _read(path: Path) -> dict:
    from .semantic import ComparatorUnavailable

    if not path.exists():
        raise ComparatorUnavailable(
            f"the extraction comparator's model file {path.name} is missing from "
            f"{path.parent}; reinstall the cauterweb package (it ships the model)"
        )
    return json.loads(path.read_text())
