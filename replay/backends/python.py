"""The Python replay backend (semantics §14): a dotted-path callable `function(case, context)`,
run once per case in a worker thread so a hung harness costs a timeout, not the round (§9.3).

A thread cannot be killed: a backend that ignores its timeout keeps running in the background
until it returns on its own, and its result is thrown away. `context.time_left()` is there so a
well-behaved harness can stop in time.
"""

import importlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.db import connections

# How often the engine looks for the started signal while it waits (env-wait, §9.3).
POLL_S = 0.01


@dataclass(frozen=True)
class ReplayCase:
    """What a backend gets for one case (semantics §14)."""

    id: str
    kind: str  # "failing" | "win"
    trajectory: dict
    replay_input: Any
    rule: dict


class ReplayContext:
    """The capability-only context of one case's replay (semantics §7.3, §14).

    `rules_for(scope, query)` is supplied by the engine: it already hides every other candidate
    (and, in the control arm, the candidate too) and never touches the database, so a backend
    running in its own thread is safe to call it. Every rule it returns is remembered for this
    replay only — reads are counted per replay.

    `arm` is "treatment" or "control" (semantics §17.1) and `repeat` the 0-based replay of this
    case in this arm: a harness may use them to seed its own randomness reproducibly."""

    def __init__(
        self,
        *,
        session_id: str,
        rules_for: Callable[[str | None, str | None], list[dict]],
        clock: Callable[[], float] = time.monotonic,
        arm: str = "treatment",
        repeat: int = 0,
    ):
        self.session_id = session_id
        self.arm = arm
        self.repeat = repeat
        self._rules_for = rules_for
        self._clock = clock
        self._lock = threading.Lock()
        self._deadline: float | None = None
        self.started = threading.Event()
        self.returned: list[str] = []

    def rule_tool(self, scope: str | None = None, query: str | None = None) -> list[dict]:
        rules = self._rules_for(scope, query)
        with self._lock:
            self.returned.extend(r["id"] for r in rules)
        return rules

    def mark_execution_started(self) -> None:
        self.started.set()

    def time_left(self) -> float:
        with self._lock:
            deadline = self._deadline
        return float("inf") if deadline is None else max(0.0, deadline - self._clock())

    def set_deadline(self, deadline: float | None) -> None:
        with self._lock:
            self._deadline = deadline


@dataclass
class Execution:
    session: Any = None
    error: str | None = None
    env_wait_expired: bool = False
    timed_out: bool = False
    elapsed_s: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.error is not None or self.timed_out


@cache
def load_callable(dotted: str) -> Callable:
    """`package.module:function` → the function (settings checked the form at start-up)."""
    module_name, _, attr = dotted.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{dotted} is not callable")
    return target


def execute(
    backend: Callable[[ReplayCase, ReplayContext], Any],
    case: ReplayCase,
    context: ReplayContext,
    *,
    replay_timeout_s: float,
    env_wait_timeout_s: float,
    poll_started: Callable[[], bool] | None = None,
) -> Execution:
    """Run one case under the timeouts of semantics §9.3.

    With an env-wait budget, the wait before `mark_execution_started()` is bounded by it and
    `replay_timeout_s` starts fresh at the signal; without one, `replay_timeout_s` covers both.
    A timeout of 0 means no limit. `poll_started` lets a remote harness's signal (which lands in
    the database) count as the call to `mark_execution_started()`."""
    box: dict = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["session"] = backend(case, context)
        except BaseException as exc:  # a harness may raise anything; the round must survive it
            box["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            done.set()
            connections.close_all()

    clock = time.monotonic
    begun = clock()
    thread = threading.Thread(target=run, name=f"replay-{case.id}", daemon=True)
    if env_wait_timeout_s > 0:
        wait_until = begun + env_wait_timeout_s
        context.set_deadline(wait_until)
        thread.start()
        while not (done.is_set() or context.started.is_set()):
            if poll_started is not None and poll_started():
                context.started.set()
                break
            remaining = wait_until - clock()
            if remaining <= 0:
                return Execution(env_wait_expired=True, elapsed_s=clock() - begun)
            done.wait(min(POLL_S, remaining))
        run_until = clock() + replay_timeout_s if replay_timeout_s > 0 else None
    else:
        run_until = begun + replay_timeout_s if replay_timeout_s > 0 else None
        thread.start()
    context.set_deadline(run_until)
    done.wait(None if run_until is None else max(0.0, run_until - clock()))
    elapsed = clock() - begun
    if not done.is_set():
        return Execution(timed_out=True, error="replay timed out", elapsed_s=elapsed)
    return Execution(session=box.get("session"), error=box.get("error"), elapsed_s=elapsed)
