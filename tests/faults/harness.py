"""A replay backend that never answers: the worker running it can be killed mid-round. It
leaves a marker file (FAULT_MARKER) when the round reaches it, so the test knows when."""

import os
import threading
from pathlib import Path


def blocking_replay(case, context):
    Path(os.environ["FAULT_MARKER"]).write_text(str(os.getpid()))
    threading.Event().wait()  # until the process is killed
