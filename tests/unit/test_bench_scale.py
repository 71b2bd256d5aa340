"""bench/bench_scale.py runs at a tiny size on every test run, so it cannot rot: every part, on a
fresh embedded default (SQLite in a temporary directory), through the real record, duplicate
check and round code. It prints figures; this checks that each part printed one."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_scale_bench_runs_every_part_at_a_tiny_size():
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    done = subprocess.run(
        [sys.executable, "bench/bench_scale.py", "--tiny"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for command in ("help", "check", "validate"):
        assert f"manage.py {command} [this]:" in out
    assert "MCP stdio server, start to first answer [this]:" in out
    assert "record 40 candidates + 5 reports + standstill" in out
    assert "duplicate check, 60 live rules" in out and "duplicate check, 120 live rules" in out
    assert "record + replay to standstill, 12 candidates in 50 scopes" in out
    assert "record + replay, CPU a candidate at 12 against 6: " in out
