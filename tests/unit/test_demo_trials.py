"""The demo's randomized trials (semantics §20) decide as documented on any installation: the
arms come from the installation's key, so the demo's sessions are replayed here under many
keys, through the engine's own decision."""

import json
import random
from pathlib import Path

from lifecycle.assignment import TREATMENT, arm_for
from replay.engine.randomized import Arm, Design, RandomizedTrial, decide
from replay.management.commands.demo_setup import DEMO_DIR, session_breached

SPEC = json.loads((Path(DEMO_DIR) / "trial_sessions.json").read_text(encoding="utf-8"))


def trials_under(key: bytes) -> dict[str, str]:
    rng = random.Random(SPEC["seed"])
    counts = {rule: {True: [0, 0], False: [0, 0]} for rule in SPEC["effects"]}
    for n in range(SPEC["sessions"]):
        session_id = f"release-{n:03d}"
        treated = {
            rule: arm_for(rule, session_id, allocation=0.5, key=key) == TREATMENT
            for rule in SPEC["effects"]
        }
        breached = session_breached(rng, SPEC, [r for r, t in treated.items() if t])
        for rule, arm in treated.items():
            counts[rule][arm][0] += 1
            counts[rule][arm][1] += breached
    return {
        rule: decide(RandomizedTrial(Arm(*arms[True]), Arm(*arms[False]), Design())).outcome
        for rule, arms in counts.items()
    }


def test_the_demo_promotes_c015_and_retires_c016_whatever_the_key():
    outcomes = [trials_under(f"installation {n}".encode()) for n in range(200)]
    assert [o for o in outcomes if o != {"C-015": "promote", "C-016": "retire"}] == []
