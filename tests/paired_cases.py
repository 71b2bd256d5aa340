"""The cases the paired design's pure tests decide over (replay/engine/paired.py): three
failing cases decided on the verifier's outcome, and two protected wins."""

from replay.engine.paired import PairedCase

T, C = "treatment", "control"
OC = "outcome_correct"
FAILING = [PairedCase(f"F{i}", "failing", OC, frozenset({OC})) for i in (1, 2, 3)]
WINS = [PairedCase(f"W{i}", "win", None) for i in (1, 2)]
