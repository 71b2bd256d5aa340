"""bench/bench_reports.py runs at a tiny size on PostgreSQL, so it cannot rot (its figures are in
the README and docs/ingest.md, from full runs). It wipes its database: a database of its own,
named after the test database."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.postgres


def test_the_reports_bench_runs_both_designs_at_a_tiny_size():
    url = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    database = f"{connection.settings_dict['NAME']}_bench_reports"
    result = subprocess.run(
        [sys.executable, "bench/bench_reports.py", "--runs", "2", "--seconds", "0.3"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": f"{url}/{database}"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert out.count("POST /reports, one worker") == 2, out
    # One report is four statements under `randomized` and five under `baseline`.
    assert "4 statements" in out and "5 statements" in out, out
    assert "ms this process" in out, out
