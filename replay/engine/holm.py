"""Holm's step-down correction over one look's family of regression tests
(docs/semantics.md#s17-4). Pure, a few lines over sorted p-values: no statistics
library is loaded for it.

With the m p-values sorted ascending, p(1) ≤ … ≤ p(m):
- the adjusted value of p(i) is min(1, max over j ≤ i of (m − j + 1) · p(j));
- the hypotheses are rejected in order while p(i) ≤ alpha / (m − i + 1); the first that is not
  stops the descent and every later one is kept, whatever its own value.
Tied p-values get the same adjusted value whatever order the sort leaves them in.
"""

from collections.abc import Sequence


def holm(p_values: Sequence[float], alpha: float) -> tuple[list[bool], list[float]]:
    """(rejected, Holm-adjusted p-value) for each p-value, in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    rejected = [False] * m
    adjusted = [0.0] * m
    running = 0.0
    descending = True
    for rank, i in enumerate(order):
        factor = m - rank
        running = max(running, factor * p_values[i])
        adjusted[i] = min(1.0, running)
        descending = descending and p_values[i] <= alpha / factor
        rejected[i] = descending
    return rejected, adjusted


def holm_weighted(
    p_values: Sequence[float], alpha: float, first: Sequence[bool], share: float
) -> tuple[list[bool], list[float]]:
    """Holm's correction with the family split in two (docs/semantics.md#s17-4): the tests
    marked `first` share `share` of alpha and the others the rest, each part corrected by Holm
    within itself; a part whose every hypothesis is rejected passes its share on to the other
    (the graphical procedure with two nodes), so the whole family's error stays at alpha. A part
    with no test leaves its share to the other. Adjusted values are each part's Holm-adjusted
    value over the share it was tested at, so that `adjusted <= alpha` is `rejected`."""
    parts = [[i for i, f in enumerate(first) if f], [i for i, f in enumerate(first) if not f]]
    shares = [share, 1.0 - share] if all(parts) else [1.0, 1.0]
    rejected = [False] * len(p_values)
    adjusted = [1.0] * len(p_values)
    for _ in range(2):  # a part all rejected at its share hands it on, once at most each way
        for part, part_share in zip(parts, shares, strict=True):
            if not part:
                continue
            r, a = holm([p_values[i] for i in part], alpha * part_share)
            for i, rj, adj in zip(part, r, a, strict=True):
                rejected[i], adjusted[i] = rj, min(1.0, adj / part_share)
        done = [all(rejected[i] for i in part) for part in parts]
        if not any(done) or all(done) or shares == [1.0, 1.0]:
            break
        shares = [1.0 if not d else s for d, s in zip(done, shares, strict=True)]
    return rejected, adjusted
