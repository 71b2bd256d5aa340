"""A replay backend that never answers: the worker running it can be killed mid-round. It
leaves a marker file (FAULT_MARKER) when the round reaches it, so the test knows when."""

import os
import threading
from pathlib import Path


def blocking_replay(case, context):
    Path(os.environ["FAULT_MARKER"]).write_text(str(os.getpid()))
    threading.Event().wait()  # until the process is killed


_first = threading.Lock()


def blocking_one_replay(case, context):
    """Hangs in the first replay this process runs, leaving the marker; answers every other as
    the simulated harness does: a worker killed in the middle of a batch, with one of its
    replays done and one not (docs/semantics.md#s18-batches)."""
    if _first.acquire(blocking=False):
        blocking_replay(case, context)
    from replay.backends.simulated import replay

    return replay(case, context)


def nan_replay(case, context):
    """A harness that answers NaN (and, on a protected win, a score out of [0, 1])."""
    value = float("nan") if case.kind == "failing" else 93.0
    return {"traces": [{"metrics": {"task_completion": value}}]}
