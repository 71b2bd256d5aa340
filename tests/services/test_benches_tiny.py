"""Every bench no other test runs, at a tiny size, as the README runs it (a subprocess), so none
can rot: bench_api, bench_dashboard, bench_journal, bench_engine, bench_import, bench_matching
and dump_comparator. The figures themselves are for full runs (README, docs/benchmarks.md); here each bench
must finish cleanly and print every figure's label. The PostgreSQL benches wipe or seed the
database they are given: each gets one of its own, named after the test database and dropped
afterwards."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def bench(script: str, *args: str, env: dict[str, str], timeout: int = 300) -> str:
    done = subprocess.run(
        [sys.executable, f"bench/{script}", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture
def bench_env(tmp_path) -> dict[str, str]:
    """The suite's environment without the app's own settings and without a broker (no bench
    run here may queue a task for the suite's workers), with its files under tmp_path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CAUTERWEB_") and k not in ("CELERY_BROKER_URL", "DATABASE_URL")
    }
    return {**env, "CAUTERWEB_VAR_DIR": str(tmp_path), "TMPDIR": str(tmp_path)}


@pytest.fixture
def bench_database(bench_env):
    """`make(suffix)`: bench_env pointed at database `<test database>_<suffix>`, which is
    dropped afterwards (with the `_template` and `_run` clones bench_import makes)."""
    import psycopg

    db = connection.settings_dict
    user = f"{db['USER']}@" if db.get("USER") else ""
    server = f"postgres://{user}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}"
    made: list[str] = []

    def make(suffix: str, *, create: bool = False) -> dict[str, str]:
        name = f"{db['NAME']}_{suffix}"
        drop(name)
        made.append(name)
        if create:
            with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
        return {**bench_env, "DATABASE_URL": f"{server}/{name}"}

    def drop(name: str) -> None:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            for each in (name, f"{name}_template", f"{name}_run"):
                admin.execute(f'DROP DATABASE IF EXISTS "{each}" WITH (FORCE)')

    yield make
    for name in made:
        drop(name)


def test_the_comparator_dump_covers_every_pass_and_is_the_same_twice(bench_env, tmp_path):
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    out = bench("dump_comparator.py", str(first), "--limit", "4", env=bench_env)
    assert f"12 lines written to {first}" in out, out
    bench("dump_comparator.py", str(second), "--limit", "4", env=bench_env)
    lines = [json.loads(line) for line in first.read_text().splitlines()]
    assert [(line["pass"], line["pair"]) for line in lines] == [
        (name, pair) for name in ("plain", "signed", "suffixed") for pair in range(4)
    ]
    # Only the `signed` pass declares signatures, so only it has declared features.
    assert all(
        (line["declared_features"] is not None) == (line["pass"] == "signed") for line in lines
    )
    # The dump is for diffing before and after a change: two runs must agree to the last bit.
    assert first.read_text() == second.read_text()


def test_the_import_bench_imports_and_reimports_on_sqlite(bench_env):
    out = bench("bench_import.py", "--n", "200", env=bench_env)
    assert "database: sqlite, trajectories: 200" in out, out
    assert "first import:" in out and "'created': 200" in out, out
    assert "re-import:" in out and "'unchanged': 200" in out, out


def test_the_import_bench_measures_the_python_side_alone(bench_env):
    out = bench("bench_import.py", "--python-cpu", "--runs", "1", "--lines", "300", env=bench_env)
    assert "best of 5 over 300 lines" in out, out
    assert "µs a line" in out, out


@pytest.mark.postgres
def test_the_import_bench_runs_beside_raw_copy_on_postgres(bench_database):
    env = bench_database("bench_import", create=True)
    out = bench("bench_import.py", "--n", "200", env=env)
    assert "database: postgresql, trajectories: 200" in out, out
    assert "'created': 200" in out and "'unchanged': 200" in out, out
    out = bench("bench_import.py", "--vs-copy", "--sizes", "200", "--runs", "1", env=env)
    for label in ("  copy ", "  import ", "median: COPY", "CPU: import", "tracemalloc, import"):
        assert label in out, (label, out)


@pytest.mark.postgres
def test_the_api_bench_times_every_call_on_a_tiny_seed(bench_database):
    env = bench_database("bench_api")
    out = bench("bench_api.py", "--rules", "200", "--events", "600", "--runs", "2", env=env)
    assert "200 rules (66 active" in out and "600 journal events" in out, out
    for label in (
        "GET /rules?limit=100 (first page)",
        "GET /rules?limit=100 (cursor page)",
        "GET /rules?state=active&scope=git&limit=100",
        "rule tool GET /scopes/git/rules",
        "GET /scopes/git (rendered scope file)",
        "GET /journal?limit=100",
        "GET /rules/{id} (detail)",
        "POST /reports (one report)",
    ):
        assert f" ms  {label}" in out, (label, out)


DASHBOARD_PAGES = (
    "rules page (default)",
    "rules page, filtered + sorted, page 3",
    "rules table fragment (htmx)",
    "rule page BR-00001 (",
    "rule page BR-00010 (with extraction diff)",
    "per-replay fold (htmx)",
    "timeline fold (htmx)",
    "review queue (",
    "review queue, one scope (htmx)",
    "round page",
    "overview",
)


@pytest.mark.postgres
def test_the_dashboard_bench_renders_every_page_on_a_tiny_seed(bench_database):
    env = bench_database("bench_dash")
    out = bench("bench_dashboard.py", "--rules", "20", "--events", "500", "--runs", "1", env=env)
    assert "seeded 20 rules, 500 journal events" in out, out
    for label in DASHBOARD_PAGES:
        assert label in out, (label, out)
    assert out.count(" ms wall = ") == len(DASHBOARD_PAGES), out
    assert "load average while measuring" in out, out


@pytest.mark.postgres
def test_the_journal_bench_pages_filters_and_exports_on_a_tiny_seed(bench_database):
    env = bench_database("bench_journal")
    out = bench("bench_journal.py", "--rules", "20", "--events", "500", "--runs", "1", env=env)
    assert "journal events: 500" in out, out
    for label in (
        "journal, newest page: median",
        "journal, page next to the oldest event: median",
        "journal, type=validation_verdict, deep: median",
        "journal, rule=BR-00001: median",
        "journal, htmx fragment, type=rule_added: median",
        "plan of the deep page:",
        "export JSONL, rule=BR-00001:",
        "export CSV, one day:",
        "lines/s",
    ):
        assert label in out, (label, out)


@pytest.mark.postgres
def test_the_scale_bench_replays_on_postgresql_at_a_tiny_size(bench_database):
    env = bench_database("bench_scale", create=True)
    out = bench(
        "bench_scale.py", "--part", "replay", "--replay", "6,12", "--per-scope", "6", env=env
    )
    assert "record + replay to standstill, 12 candidates in 2 scopes" in out, out
    assert "record + replay, CPU a candidate at 12 against 6: " in out, out


@pytest.mark.postgres
def test_the_engine_bench_runs_its_rounds_and_threads_at_a_tiny_size(bench_database):
    env = bench_database("bench_engine", create=True)
    out = bench("bench_engine.py", "4", "--only", "rounds", env=env)
    assert "N = 4 candidates" in out, out
    for design in ("baseline", "randomized"):
        assert f"forward-trial round deciding 4 candidates ({design}):" in out, out
    for concurrency in (1, 8):
        assert f"instant backend, concurrency {concurrency}:" in out, out
    assert out.count("engine overhead per candidate") == 2, out
    out = bench("bench_engine.py", "--only", "throughput", "--candidates", "4", env=env)
    for concurrency in (1, 8):
        assert f"0.1 s harness, threads, concurrency {concurrency}: 12 replays in" in out, out


@pytest.mark.postgres
@pytest.mark.redis
def test_the_engine_bench_runs_replays_on_its_own_celery_workers(bench_database):
    """Its workers import the replay backend from the bench as `bench.bench_engine`; they are
    stopped by the bench itself (the queue is purged first, so only its replays are taken)."""
    from django.conf import settings

    env = bench_database("bench_celery", create=True)
    env["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL
    out = bench("bench_engine.py", "--only", "celery", "--candidates", "4", env=env)
    assert "in the round's process, concurrency 1: 12 replays in" in out, out
    assert "Celery 2 workers x 4, concurrency 8: 12 replays in" in out, out
    assert out.count("CPU per replay") == 2, out


@pytest.mark.postgres
def test_the_matching_bench_seeds_and_times_every_rule_on_a_tiny_corpus(bench_database):
    env = bench_database("bench_match")
    out = bench("bench_matching.py", "--n", "500", "--runs", "1", env=env)
    assert "seeded 500 trajectories" in out and "500 trajectories," in out, out
    for label in (
        "F-001 rule (tool:git, action:git.push, error:non_fast_forward)",
        "… replay selection: failures, replayable, newest 3",
        "one error atom of the long tail",
        "notice fallback: stall:coherence (broad)",
        "plan of the F-001 query:",
    ):
        assert label in out, (label, out)
