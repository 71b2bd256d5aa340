"""Which arm of a candidate's randomized trial a session is in (semantics §20.1), as a pure
function: the same (candidate, session, key) always give the same arm, in every process, and
different candidates are assigned independently of each other."""

import hashlib
import hmac

TREATMENT = "treatment"
CONTROL = "control"


def arm_for(rule_id: str, session_id: str, *, allocation: float, key: bytes) -> str:
    """TREATMENT for a share `allocation` of sessions, CONTROL for the rest.

    HMAC-SHA256 under the installation's key makes the draw uniform and unpredictable to a
    harness that does not hold the key, so nothing a session chooses (its id) can steer it
    into an arm. The rule id is length-prefixed, so no pair of ids runs into another's."""
    message = f"{len(rule_id)}:{rule_id}{session_id}".encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()
    draw = int.from_bytes(digest[:8], "big") / 2**64
    return TREATMENT if draw < allocation else CONTROL
