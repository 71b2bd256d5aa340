"""A replay backend the round test can hold mid-round: each case waits for `release` before the
shipped simulated harness answers, so the dashboard can be watched while the round runs."""

import threading

from replay.backends.simulated import replay as simulated_replay

release = threading.Event()
WAIT_S = 60


def gated_replay(case, context):
    release.wait(WAIT_S)
    return simulated_replay(case, context)
