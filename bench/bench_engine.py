"""Engine timings on PostgreSQL (issue 3 "Done means"): prints figures, asserts nothing.

    DATABASE_URL=postgres://root@127.0.0.1:5432/cw_engine_bench .venv/bin/python bench/bench_engine.py

Measures, at a small and at a large history (journal events, retired rule versions, reports):
- a forward-trial round deciding 1,000 candidates (target ≤ 2 s);
- one report taken in with 1,000 candidates in force: ingest + trial enrolment (≤ 50 ms);
- a replay round of 1,000 candidates with an instant backend: engine overhead per candidate
  (≤ 5 ms), each candidate replaying 1 failing case and 2 protected wins.
The database named in DATABASE_URL is wiped and reused: never point it at real data.
"""

import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")
os.environ["CAUTERWEB_REPLAY_BACKEND"] = ""

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from lifecycle.corpus import import_corpus, read_jsonl  # noqa: E402
from lifecycle.intake import ingest_reports  # noqa: E402
from lifecycle.models import JournalEvent, Report, Rule, RuleRead, TrialEnrolment  # noqa: E402
from replay import receivers  # noqa: E402
from replay.rounds import round_run  # noqa: E402

N = 1000
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Meter:
    """Wall time, this process's CPU time and SQL statements of a block. On a shared machine
    the wall time carries everyone else's load; CPU time and statements do not."""

    def __enter__(self):
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


def instant(case, context):
    """A backend that costs nothing: reads the rule tool once and returns better metrics."""
    context.mark_execution_started()
    context.rule_tool(scope=case.rule["scope"], query=" ".join(case.trajectory["signature"]))
    return {"traces": [{"metrics": {**case.trajectory["metrics"], "task_completion": 0.9}}]}


def wipe() -> None:
    with connection.cursor() as cursor:
        # The journal is append-only, even for us: TRUNCATE is the one way to reset a bench DB.
        cursor.execute(
            "TRUNCATE lifecycle_journalevent, lifecycle_trialenrolment, lifecycle_ruleread, "
            "lifecycle_report, lifecycle_trajectoryatom, lifecycle_trajectory, "
            "replay_replaysession, replay_validationround, replay_enginelock, lifecycle_rule "
            "RESTART IDENTITY CASCADE"
        )


def rules(prefix: str, n: int, *, state: str = "candidate", scope=None) -> list[Rule]:
    now = T0
    return Rule.objects.bulk_create(
        [
            Rule(
                id=f"{prefix}-{i:05d}",
                trigger=f"when bench thing {i} fails",
                directive=f"do bench remedy {i}",
                scope=scope or f"scope-{i % 50}",
                metric="task_completion",
                signature=["tool:bench", f"error:e{i}"],
                state=state,
                author="bench",
                author_kind="import",
                content_hash=f"{prefix}{i}",
                recorded_at=now + timedelta(seconds=i),
                baseline_rate=0.8,
            )
            for i in range(n)
        ],
        batch_size=2000,
    )


def grow_history(size: int) -> None:
    """Journal events, retired rule versions with their trials, and reports: history the
    engine must not re-read."""
    if not size:
        return
    rules("OLD", size // 10, state="retired")
    JournalEvent.objects.bulk_create(
        [
            JournalEvent(type="report_received", at=T0, actor="bench", evidence={"i": i})
            for i in range(size)
        ],
        batch_size=5000,
    )
    Report.objects.bulk_create(
        [
            Report(
                session_id=f"old-{i}",
                at=T0 + timedelta(seconds=i),
                notices=["breach:task_completion"] if i % 3 else [],
                metrics={"task_completion": 0.5},
                has_notice=bool(i % 3),
                content_hash=str(i),
                received_at=T0,
            )
            for i in range(size // 2)
        ],
        batch_size=5000,
    )
    TrialEnrolment.objects.bulk_create(
        [
            TrialEnrolment(
                rule_id=f"OLD-{i % (size // 10):05d}",
                session_id=f"old-{i}",
                breached=bool(i % 2),
                enrolled_at=T0,
                updated_at=T0,
            )
            for i in range(size // 2)
        ],
        batch_size=5000,
    )
    RuleRead.objects.bulk_create(
        [
            RuleRead(session_id=f"old-{i}", rule_id=f"OLD-{i % (size // 10):05d}", at=T0)
            for i in range(size)
        ],
        batch_size=5000,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def bench_forward_trial_round() -> Meter:
    rules("FT", N)
    TrialEnrolment.objects.bulk_create(
        [
            TrialEnrolment(
                rule_id=f"FT-{i:05d}",
                session_id=f"s{k}",
                breached=k == 0,
                enrolled_at=T0,
                updated_at=T0,
            )
            for i in range(N)
            for k in range(settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS)
        ],
        batch_size=5000,
    )
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    with Meter() as meter:
        vround = round_run()
    assert vround.summary["decided"] == N, vround.summary
    return meter


def bench_one_report(repeat: int = 15) -> list[Meter]:
    times = []
    for k in range(repeat):
        # Each report meets 1,000 fresh candidates, so it enrols into all 1,000 trials; the
        # previous ones retire and stay behind as history.
        Rule.objects.filter(id__startswith="RP").update(state="retired")
        rules(f"RP{k:02d}", N)
        line = json.dumps(
            {
                "session_id": f"live-{k}",
                "at": f"2026-02-01T00:{k:02d}:00Z",
                "notices": ["breach:task_completion"],
                "metrics": {"task_completion": 0.4},
                "rules_read": [f"RP{k:02d}-00001"],
            }
        )
        with Meter() as meter:
            ingest_reports(read_jsonl([line]))
        times.append(meter)
        assert TrialEnrolment.objects.filter(rule__id__startswith=f"RP{k:02d}-").count() == N
    Rule.objects.filter(id__startswith="RP").update(state="retired")
    return times


def bench_replay_round() -> tuple[Meter, float]:
    lines = [
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
            "replay_input": {"scope": f"scope-{i % 50}"},
        }
        for i in range(N)
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
    import_corpus([json.dumps(line) for line in lines])
    rules("RR", N)
    settings.CAUTERWEB_REPLAY_BACKEND = "bench.bench_engine:instant"
    with Meter() as meter:
        vround = round_run()
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    assert vround.summary["promoted"] == N, vround.summary
    return meter, _instant_cost(lines[0], N * 3)


def _instant_cost(line: dict, calls: int) -> float:
    """What the backend itself costs, to subtract: the engine's overhead is the rest."""
    from replay.backends.python import ReplayCase, ReplayContext

    case = ReplayCase(
        id="x", kind="failing", trajectory=line, replay_input={}, rule={"id": "x", "scope": "s"}
    )
    context = ReplayContext(session_id="x", rules_for=lambda scope, query: [])
    began = time.perf_counter()
    for _ in range(calls):
        instant(case, context)
    return time.perf_counter() - began


def main() -> None:
    if connection.vendor != "postgresql":
        sys.exit("run me on PostgreSQL: DATABASE_URL=postgres://…/cw_engine_bench")
    call_command("migrate", verbosity=0)
    receivers.kick_round = lambda **kw: {"queued": False, "detail": "bench"}
    print(
        f"engine bench on PostgreSQL {connection.pg_version}, N = {N} candidates, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
        flush=True,
    )
    for history in (0, 200_000):
        wipe()
        grow_history(history)
        label = (
            f"history {history:>7,} journal events / {history // 2:,} reports / "
            f"{history // 10:,} retired rules with {history // 2:,} trial enrolments"
        )
        # Each stage's rules stay behind as more history for the next one.
        ft = bench_forward_trial_round()
        reports = bench_one_report()
        replay, backend_s = bench_replay_round()
        median = sorted(reports, key=lambda m: m.wall)[len(reports) // 2]
        print(f"\n[{label}]  (wall / this process's CPU / SQL statements)")
        print(
            f"  forward-trial round deciding {N} candidates: {ft.wall:6.3f} s / {ft.cpu:6.3f} s"
            f" / {ft.statements}  (target ≤ 2 s)"
        )
        print(
            f"  one report, {N} candidates in force (median of {len(reports)}): "
            f"{median.wall * 1000:6.1f} ms / {median.cpu * 1000:6.1f} ms / {median.statements}"
            "  (target ≤ 50 ms)"
        )
        overhead = (replay.wall - backend_s) / N * 1000
        print(
            f"  replay round of {N} candidates (1 failing case + 2 wins each, instant backend): "
            f"{replay.wall:6.2f} s / {replay.cpu:6.2f} s / {replay.statements}; engine overhead "
            f"{overhead:5.2f} ms wall, {(replay.cpu - backend_s) / N * 1000:5.2f} ms CPU, "
            f"{replay.statements / N:4.1f} statements per candidate  (target ≤ 5 ms)",
            flush=True,
        )


if __name__ == "__main__":
    main()
