"""bench/bench_transcripts.py runs at a tiny size on every test run, so it cannot rot; its
figures are for the README (docs/traces.md, "Coding-agent logs")."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def bench(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    done = subprocess.run(
        [sys.executable, "bench/bench_transcripts.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_bench_reads_and_imports_a_tiny_month_of_transcripts():
    read = bench("--lines", "400", "--read-only")
    assert re.search(r"40\d lines \(.*sessions\): read [\d.]+ s CPU, [\d,]+ lines/s \(load ", read)
    imported = bench("--lines", "400,800")
    assert len(re.findall(r"lines/s CPU; peak RSS \d+ MB \(load .*SQLite\)", imported)) == 2
