"""bench/bench_faults.py runs at a tiny size in CI, so it cannot rot: its fault scenarios on
real services (a database of its own, created afresh; the suite's broker; a private Redis),
each printing its figure. Its two worker-killing scenarios cost several worker start-ups
each; tests/faults/test_leases.py runs the same faults."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

pytestmark = [pytest.mark.postgres, pytest.mark.redis]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_the_faults_bench_runs_its_fault_scenarios_at_a_tiny_size():
    db = connection.settings_dict
    user = f"{db['USER']}@" if db.get("USER") else ""
    where = f"{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CAUTERWEB_")},
        "DATABASE_URL": f"postgres://{user}{where}/{db['NAME']}_bench",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
    }
    scenarios = "redis-paused,nan-answers"
    done = subprocess.run(
        [sys.executable, "bench/bench_faults.py", "--reports", "3", "--pause", "2",
         "--only", scenarios],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "redis paused 2 s:" in out and " 0 slots stuck" in out
    assert "NaN / out-of-range answers:" in out
