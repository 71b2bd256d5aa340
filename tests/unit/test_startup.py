"""What a command pays and prints before it does anything: the statistics libraries are loaded
by the code that decides, never by `manage.py check` or by loading the `validate` command (the
MCP server, a worker and every command import the same modules), and the embedded default
(no broker) prints no broker warning when it runs a task in-process."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
HEAVY = ("scipy.stats", "pandas", "statsmodels")


def embedded_env(tmp_path: Path) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_TASK_ALWAYS_EAGER")
    }
    return {
        **env,
        "CAUTERWEB_VAR_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "cauterweb.settings",
    }


def imported_modules(args: list[str], env: dict) -> set[str]:
    """Every module a run imports, read from `-X importtime` (one line per module)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


@pytest.mark.parametrize(
    "args",
    [
        ["manage.py", "check"],
        ["manage.py", "help", "validate"],
        ["manage.py", "help", "mcp"],
    ],
    ids=["check", "help-validate", "help-mcp"],
)
def test_a_command_starts_without_the_statistics_libraries(args, tmp_path):
    modules = imported_modules(args, embedded_env(tmp_path))
    # The run did import the engine's decision modules (else the test proves nothing)...
    if args[-1] == "validate":
        assert "replay.engine.paired" in modules
    assert "django.core.management" in modules
    # ...and none of the libraries they decide with.
    assert not {m for m in modules for heavy in HEAVY if m == heavy or m.startswith(heavy + ".")}


def test_the_engine_loads_scipy_when_it_decides(tmp_path):
    """The other half: the spending function that needs SciPy's normal quantiles loads it."""
    code = (
        "import sys; from replay.engine import paired; "
        "assert 'scipy.special' not in sys.modules; "
        "print(paired.spent_by(0.5, alpha=0.05, spending='obf')); "
        "assert 'scipy.special' in sys.modules"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    # O'Brien–Fleming at half the information: 2 − 2Φ(1.95996 / √0.5) = 0.005575…
    assert float(done.stdout) == pytest.approx(0.005574596, abs=1e-8)


def test_the_embedded_default_runs_a_task_without_a_broker_warning(tmp_path):
    code = (
        "import django; django.setup(); "
        "from lifecycle.tasks import rules_rescore_task; "
        "from cauterweb.celery import app; "
        "assert app.conf.task_always_eager; "
        "result = rules_rescore_task.delay(rule_ids=[]); "
        "print(result.status)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=embedded_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "SUCCESS"
    assert "No hostname was supplied" not in done.stderr
    assert "WARNING" not in done.stderr
