"""What the lifecycle announces after a commit, for the apps above it to act on.

Lifecycle never imports the engine. The replay app connects `work_arrived` to kicking a
validation round (replay/apps.py). A state change that gives the engine work calls `announce`;
a bulk service wraps its items in `one_announcement()`, so a file of 500 candidates or a pack
asks for one round when it commits, whoever called it (semantics §9.1).

Trial enrolment is not announced: it is part of storing a report
(`lifecycle.services.reports.reports_ingest`), which announces the report.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import transaction
from django.dispatch import Signal

# Sent after commit. sender=None, reason=str ("report", "candidate", "bulk:candidate,report").
work_arrived = Signal()

_batch = threading.local()


def announce(reason: str) -> None:
    """Ask for a round once the current transaction commits (at once outside of one)."""
    if getattr(_batch, "depth", 0):
        _batch.reasons.add(reason)
        return
    transaction.on_commit(lambda: work_arrived.send(sender=None, reason=reason))


@contextmanager
def one_announcement() -> Iterator[None]:
    """Collect the announcements of a bulk change into one, sent when the outermost block ends
    (after its commit). A block that raises announces nothing: nothing was stored."""
    outermost = not getattr(_batch, "depth", 0)
    if outermost:
        _batch.reasons = set()
    _batch.depth = getattr(_batch, "depth", 0) + 1
    try:
        yield
    except BaseException:
        if outermost:
            _batch.reasons = set()
        raise
    finally:
        _batch.depth -= 1
    if outermost and _batch.reasons:
        reason = "bulk:" + ",".join(sorted(_batch.reasons))
        _batch.reasons = set()
        transaction.on_commit(lambda: work_arrived.send(sender=None, reason=reason))
