"""Engine timings on PostgreSQL: prints figures, asserts nothing.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cw_rounds_bench \
        .venv/bin/python bench/bench_engine.py 1000 [--history 200000] [--only celery]
    (add CELERY_BROKER_URL=redis://127.0.0.1:6379/5 to measure real Celery workers too;
    --only rounds|throughput|celery runs one part; --candidates 64 sizes the throughput parts;
    --batch 1 sends a Celery task per replay, as before batches, docs/semantics.md#s18-batches)

With N candidates (the argument, default 1,000):
- a forward-trial round deciding N candidates;
- a replay round of N candidates with an instant backend (one failing case and two protected
  wins each, single design): the engine's overhead per candidate — the round's wall time less
  what the backend itself costs — which must not grow with N (semantics §9);
- replays per second with a harness that takes 0.1 s per replay, at replay concurrency 1 and
  8: threads in this process, and, with CELERY_BROKER_URL set, replay tasks on 2 Celery
  workers × 4 processes started here (semantics §18), with the CPU per replay of the round,
  the workers and this database's PostgreSQL backends (from /proc).
Each figure is printed with the load average: on a shared machine wall times carry everyone
else's load. The database named in DATABASE_URL is wiped and reused: never point it at real
data.
"""

import json
import os
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")
os.environ["CAUTERWEB_REPLAY_BACKEND"] = ""

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

# As a package module: the Celery workers import this file as `bench.bench_engine` (the replay
# backend), with the repository on their path but not bench/.
from bench.synthetic import T0, Meter, corpus_lines  # noqa: E402
from lifecycle.models import (  # noqa: E402
    Exposure,
    JournalEvent,
    Report,
    Rule,
    RuleRead,
    TrialEnrolment,
)
from lifecycle.services.corpus import import_corpus  # noqa: E402
from replay import kick  # noqa: E402
from replay.rounds import round_run  # noqa: E402

N = 1000
HARNESS_S = 0.1
# Candidates of a throughput round, 3 replays each.
THROUGHPUT_CANDIDATES = 64


def instant(case, context):
    """A backend that costs nothing: reads the rule tool once and returns better metrics."""
    context.mark_execution_started()
    context.rule_tool(scope=case.rule["scope"], query=" ".join(case.trajectory["signature"]))
    return {"traces": [{"metrics": {**case.trajectory["metrics"], "task_completion": 0.9}}]}


def wipe() -> None:
    with connection.cursor() as cursor:
        # The journal refuses TRUNCATE too (its trigger); the bench database's owner lets this
        # session skip triggers, the one way to reset it.
        cursor.execute("SET session_replication_role = replica")
        cursor.execute(
            "TRUNCATE lifecycle_journalevent, lifecycle_trialenrolment, lifecycle_ruleread, "
            "lifecycle_report, lifecycle_trajectoryatom, lifecycle_trajectory, "
            "replay_replaysession, replay_validationround, replay_enginelock, lifecycle_rule "
            "RESTART IDENTITY CASCADE"
        )
        cursor.execute("SET session_replication_role = DEFAULT")


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


def bench_forward_trial_round_of(n: int, design: str) -> Meter:
    """A round deciding n forward trials: §8's five sessions each (`baseline`), or §20's 60
    exposed sessions each, 30 an arm with an outcome (`randomized`)."""
    prefix = "FT" if design == "baseline" else "FR"
    rules(prefix, n)
    settings.CAUTERWEB_TRIAL_DESIGN = design
    if design == "baseline":
        TrialEnrolment.objects.bulk_create(
            [
                TrialEnrolment(
                    rule_id=f"{prefix}-{i:05d}",
                    session_id=f"s{k}",
                    breached=k == 0,
                    enrolled_at=T0,
                    updated_at=T0,
                )
                for i in range(n)
                for k in range(settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS)
            ],
            batch_size=5000,
        )
    else:
        Exposure.objects.bulk_create(
            [
                Exposure(
                    rule_id=f"{prefix}-{i:05d}",
                    session_id=f"s{k}",
                    arm="treatment" if k % 2 else "control",
                    exposed_at=T0,
                    reported_at=T0,
                    # treatment 3 of 30 breached, control 24 of 30: every trial promotes
                    breached=(k % 20 < 2) if k % 2 else (k % 10 < 8),
                    value=0.5,
                )
                for i in range(n)
                for k in range(60)
            ],
            batch_size=5000,
        )
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    with Meter() as meter:
        vround = round_run()
    assert vround.summary["decided"] == n, vround.summary
    Rule.objects.filter(id__startswith=prefix).update(state="retired")
    return meter


def replay_settings(backend: str, concurrency: int) -> None:
    settings.CAUTERWEB_REPLAY_BACKEND = backend
    settings.CAUTERWEB_REPLAY_DESIGN = "single"
    settings.CAUTERWEB_REPLAY_CONCURRENCY = concurrency
    settings.CAUTERWEB_REPLAY_TIMEOUT_S = 60.0


def bench_replay_round(n: int, concurrency: int) -> tuple[Meter, float]:
    # Every round starts from the same baseline: no active rule. The rules an earlier round
    # promoted would be every replay's baseline (semantics §7.3), and each replay's rule tool
    # narrows its scope's active rules one by one: N / 50 of them, a cost per candidate that
    # grew with N in the second round measured (concurrency 8), not with the concurrency.
    Rule.objects.filter(state__in=("candidate", "active")).update(state="retired")
    rules(f"RR{concurrency}", n)
    replay_settings("bench.bench_engine:instant", concurrency)
    with ProcessCPU(postgres_backends()) as cpu, Meter() as meter:
        vround = round_run()
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    assert vround.summary["promoted"] == n, vround.summary
    meter.postgres_cpu = cpu.by_name["postgres"]
    meter.cpu -= cpu.own_cpu  # the sampler's, not the round's
    return meter, _instant_cost(corpus_lines(1)[0], n * 3)


def postgres_backends() -> dict[str, str]:
    """The PostgreSQL backends of this database, as `ProcessCPU` finds them."""
    return {"postgres": f" postgres {settings.DATABASES['default']['NAME']} "}


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


def slow(case, context):
    """A harness that takes 0.1 s per replay."""
    time.sleep(HARNESS_S)
    return instant(case, context)


def threads_only(eager: bool) -> None:
    """Eager Celery: replays run on this process's threads, whatever the broker."""
    from cauterweb.celery import app

    app.conf.task_always_eager = eager


def bench_throughput(
    concurrency: int, *, via: str, candidates: int = THROUGHPUT_CANDIDATES
) -> tuple[int, float]:
    """(replays, seconds) of one round of `candidates` fresh candidates, 3 replays each; the
    round's summary in `last_summary` (its Celery tasks)."""
    Rule.objects.filter(state="candidate").update(state="retired")
    rules(f"TP{via}{concurrency}", candidates)
    replay_settings("bench.bench_engine:slow", concurrency)
    began = time.perf_counter()
    vround = round_run()
    elapsed = time.perf_counter() - began
    settings.CAUTERWEB_REPLAY_BACKEND = ""
    assert vround.summary["promoted"] == candidates, vround.summary
    last_summary.clear()
    last_summary.update(vround.summary)
    return vround.summary["replays"], elapsed


last_summary: dict = {}


def celery_workers():
    """2 workers × 4 processes on this database and broker; stopped by pid at the end."""
    import subprocess

    env = {
        **os.environ,
        "CAUTERWEB_REPLAY_BACKEND": "bench.bench_engine:slow",
        "CAUTERWEB_REPLAY_TIMEOUT_S": "60",
        "CAUTERWEB_ROUND_SCHEDULE_S": "3600",
    }
    root = Path(__file__).resolve().parent.parent
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "cauterweb",
                "worker",
                "--concurrency=4",
                "--without-heartbeat",
                "--without-mingle",
                "--without-gossip",
                "-n",
                f"bench-{k}@%h",
                "--loglevel=WARNING",
            ],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for k in (1, 2)
    ]
    from cauterweb.celery import app

    deadline = time.monotonic() + 60
    while len(app.control.ping(timeout=0.5) or []) < 2 and time.monotonic() < deadline:
        pass
    return procs


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} / {five:.1f} on {os.cpu_count()} CPUs"


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int, nargs="?", default=N, help="candidates (default 1000)")
    parser.add_argument("--history", type=int, default=0, help="journal events of history")
    parser.add_argument(
        "--only",
        choices=("rounds", "throughput", "celery"),
        help="one part: the rounds (forward trial and instant replay), the threads' "
        "throughput, or the Celery workers' (with CELERY_BROKER_URL)",
    )
    parser.add_argument(
        "--candidates",
        type=int,
        default=THROUGHPUT_CANDIDATES,
        help=f"candidates of a throughput round, 3 replays each (default {THROUGHPUT_CANDIDATES})",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=settings.CAUTERWEB_REPLAY_BATCH,
        help="replays per Celery task at most (CAUTERWEB_REPLAY_BATCH, default "
        f"{settings.CAUTERWEB_REPLAY_BATCH}); 1: a task per replay",
    )
    args = parser.parse_args()
    settings.CAUTERWEB_REPLAY_BATCH = args.batch
    n = args.n
    if connection.vendor != "postgresql":
        sys.exit("run me on PostgreSQL: DATABASE_URL=postgres://…/cw_rounds_bench")
    call_command("migrate", verbosity=0)
    kick.kick_round = lambda **kw: {"queued": False, "detail": "bench"}
    threads_only(True)
    print(f"engine bench on PostgreSQL {connection.pg_version}, N = {n} candidates", flush=True)
    wipe()
    if args.only == "celery":
        import_corpus([json.dumps(line) for line in corpus_lines(args.candidates)])
        bench_celery(args.candidates)
        return
    if args.only in (None, "rounds"):
        bench_rounds(n, args.history)
    else:
        import_corpus([json.dumps(line) for line in corpus_lines(args.candidates)])
    if args.only in (None, "throughput"):
        bench_threads(args.candidates)
    if args.only is None and settings.CELERY_BROKER_URL.startswith("redis"):
        bench_celery(args.candidates)


def bench_rounds(n: int, history: int) -> None:
    grow_history(history)
    for design in ("baseline", "randomized"):
        ft = bench_forward_trial_round_of(n, design)
        print(
            f"  forward-trial round deciding {n} candidates ({design}): {ft.wall:6.3f} s wall / "
            f"{ft.cpu:6.3f} s CPU / {ft.statements} statements  ({load()})",
            flush=True,
        )
    import_corpus([json.dumps(line) for line in corpus_lines(n)])
    for concurrency in (1, 8):
        replay, backend_s = bench_replay_round(n, concurrency)
        overhead = (replay.wall - backend_s) / n * 1000
        print(
            f"  replay round, {n} candidates x 3 replays, instant backend, concurrency "
            f"{concurrency}: {replay.wall:6.2f} s; engine overhead per candidate {overhead:5.2f} "
            f"ms wall, {(replay.cpu - backend_s) / n * 1000:5.2f} ms CPU "
            f"(+ {replay.postgres_cpu / n * 1000:4.2f} ms PostgreSQL's), "
            f"{replay.statements / n:4.1f} statements on the round's connection  ({load()})",
            flush=True,
        )


def bench_threads(candidates: int) -> None:
    for concurrency in (1, 8):
        replays, seconds = bench_throughput(concurrency, via="T", candidates=candidates)
        print(
            f"  {HARNESS_S:.1f} s harness, threads, concurrency {concurrency}: {replays} replays "
            f"in {seconds:5.2f} s = {replays / seconds:5.1f} replays/s  ({load()})",
            flush=True,
        )


class ProcessCPU:
    """CPU seconds (user + system, from /proc) of the processes whose command line contains
    one of `marks`, by mark, over a block. A sampler thread sees processes that start and end
    inside the block too (a PostgreSQL backend per connection); what one uses after its last
    sample is missed."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, marks: dict[str, str]):
        self.marks = marks
        self._first: dict[int, float] = {}
        self._last: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()

    def _sample(self, *, first: bool = False) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
                with open(f"/proc/{entry.name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            name = next((n for n, mark in self.marks.items() if mark in cmdline), None)
            if name is None:
                continue
            pid, cpu = int(entry.name), (int(fields[11]) + int(fields[12])) / self.TICK
            if first:
                self._first[pid] = cpu
            self._last[pid] = (name, cpu)

    def _loop(self) -> None:
        began = time.thread_time()
        while not self._stop.wait(0.1):
            self._sample()
        self.own_cpu = time.thread_time() - began

    def __enter__(self):
        self._sample(first=True)
        self.round_cpu = time.process_time()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        # This process's CPU is the round's, less what the sampler itself cost.
        self.round_cpu = time.process_time() - self.round_cpu - self.own_cpu
        self._sample()
        self.by_name = dict.fromkeys(self.marks, 0.0)
        self.processes = dict.fromkeys(self.marks, 0)
        for pid, (name, cpu) in self._last.items():
            self.by_name[name] += cpu - self._first.get(pid, 0.0)
            self.processes[name] += 1


def bench_celery(candidates: int) -> None:
    from cauterweb.celery import app

    threads_only(False)
    app.control.purge()
    procs = celery_workers()
    marks = {"workers": "-n bench-", **postgres_backends(), "redis": "redis-server"}
    try:
        # Concurrency 1 replays in the round's own process (semantics §7.4), broker or not;
        # the first pass at 8 warms the workers' processes and is not printed.
        bench_throughput(8, via="W", candidates=candidates)
        for concurrency in (1, 8):
            with ProcessCPU(marks) as cpu:
                replays, seconds = bench_throughput(concurrency, via="C", candidates=candidates)
            where = "in the round's process" if concurrency == 1 else "Celery 2 workers x 4"
            parts = {"round": cpu.round_cpu, **cpu.by_name}
            mine = sum(v for k, v in parts.items() if k != "redis")
            tasks = last_summary.get("replay_tasks")
            batches = f" ({tasks} tasks, batches of up to {settings.CAUTERWEB_REPLAY_BATCH}"
            if "replays_taken" in last_summary:  # docs/semantics.md#s18-batches
                batches += f"; {last_summary['replays_taken']} replays taken by the workers"
            batches += ")"
            print(
                f"  {HARNESS_S:.1f} s harness, {where}, concurrency {concurrency}: {replays} "
                f"replays in {seconds:5.2f} s{batches if tasks else ''} = "
                f"{replays / seconds:5.1f} replays/s; CPU per replay {mine / replays * 1000:5.1f} "
                f"ms, {(mine + parts['redis']) / replays * 1000:.1f} with Redis ("
                + ", ".join(f"{k} {v / replays * 1000:.1f}" for k, v in parts.items())
                + f", redis shared; {cpu.processes['postgres']} PostgreSQL backends)  ({load()})",
                flush=True,
            )
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
