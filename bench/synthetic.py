"""What the engine benches share: the synthetic corpus they replay (failing cases each with its
own error atom and the common `tool:bench` atom — an atom every case carries, as `tool:git` is
in a real corpus — spread over scopes, and two protected wins) and the meter of a block."""

import time
from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def corpus_lines(n: int, scopes: int = 50) -> list[dict]:
    """n failing cases over `scopes` scopes, and two protected wins."""
    return [
        {
            "id": f"F-{i:05d}",
            "kind": "failure",
            "task": "bench",
            "steps": [{"tool": "bench"}],
            "outcome": {},
            "metrics": {"task_completion": 0.3, "coherence": 0.8, "outcome_correct": 0.0},
            "signature": ["tool:bench", f"error:e{i}"],
            "notices": ["breach:task_completion"],
            "started_at": (T0 + timedelta(seconds=i)).isoformat(),
            "replay_input": {"scope": f"scope-{i % scopes}"},
        }
        for i in range(n)
    ] + [
        {
            "id": f"S-{i}",
            "kind": "success",
            "task": "bench",
            "steps": [{"tool": "bench"}],
            "outcome": {},
            "metrics": {"task_completion": 0.9, "coherence": 0.8},
            "signature": ["tool:bench", "action:ok"],
            "started_at": T0.isoformat(),
        }
        for i in range(2)
    ]


class Meter:
    """Wall time, this process's CPU time and SQL statements of a block. On a shared machine
    the wall time carries everyone else's load; CPU time and statements do not."""

    def __enter__(self):
        from django.db import connection

        self.statements = 0
        self._hook = connection.execute_wrapper(self._count)
        self._hook.__enter__()
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def _count(self, execute, sql, params, many, context):
        self.statements += 1
        return execute(sql, params, many, context)

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu
        self._hook.__exit__(*exc)
