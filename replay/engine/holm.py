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
