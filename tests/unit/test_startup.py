"""What a command pays and prints before it does anything: the statistics libraries are loaded
by the code that decides, never by `manage.py check` or by loading the `validate` command (the
MCP server, a worker and every command import the same modules); the commands an agent calls
(`validate`, `mcp`) do not import the web stack's URLs and API to run system checks; and the
embedded default (no broker) prints no broker warning when it runs a task in-process."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
HEAVY = ("scipy.stats", "pandas", "statsmodels")
# Loaded by the code that uses them: NumPy by a paired test, requests by an HTTP replay, the
# MCP SDK by the MCP server. None of them is the web stack `check` checks.
NOT_FOR_CHECK = (*HEAVY, "numpy", "requests", "mcp")
# The API: its schemas and the trace readers behind it are what `check` costs most.
WEB_STACK = ("cauterweb.api", "dashboard.views")
# Created by a process's first enqueue (lifecycle/follow_ups.py), or by a worker.
QUEUE = ("celery", "kombu")


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


def loaded(modules: set[str], names: tuple[str, ...]) -> set[str]:
    return {m for m in modules for name in names if m == name or m.startswith(name + ".")}


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


def python_code(code: str, env: dict | None = None) -> str:
    """What `python -c code` prints, run from the project's root; it must succeed."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr and "No hostname was supplied" not in done.stderr
    return done.stdout


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
    assert not loaded(modules, HEAVY)


def test_check_imports_the_web_stack_and_nothing_it_does_not_check(tmp_path):
    modules = imported_modules(["manage.py", "check"], embedded_env(tmp_path))
    # By their submodules: a package first imported through importlib (a URL include, an
    # app's ready) has no line of its own in `-X importtime`, its submodules do.
    assert all(loaded(modules, (package,)) for package in WEB_STACK)
    # PyYAML: loaded by the first pack read or written (or by Celery's serializers).
    assert not loaded(modules, (*NOT_FOR_CHECK, *QUEUE, "yaml"))


@pytest.mark.parametrize("args", [["manage.py", "help"], ["manage.py", "help", "validate"]])
def test_a_command_that_enqueues_nothing_does_not_load_celery(args, tmp_path):
    modules = imported_modules(args, embedded_env(tmp_path))
    # The apps did get ready (replay's connects its kick to lifecycle's signal)...
    assert {"lifecycle.signals", "lifecycle.follow_ups"} <= modules
    assert not loaded(modules, QUEUE)


def test_the_first_enqueue_creates_the_app_with_every_task(tmp_path):
    """What a web or command process enqueues through, and what `celery -A cauterweb` finds."""
    code = (
        "import django; django.setup(); import sys; "
        "assert 'celery' not in sys.modules; "
        "from lifecycle.follow_ups import celery_app; from celery.app.utils import find_app; "
        "app = celery_app(); "
        "assert find_app('cauterweb') is app; "
        "print(' '.join(sorted(t for t in app.tasks if not t.startswith('celery.'))))"
    )
    assert set(python_code(code, embedded_env(tmp_path)).split()) >= {
        "lifecycle.tasks.rule_compare_task",
        "lifecycle.tasks.rules_compare_task",
        "lifecycle.tasks.rules_rescore_task",
        "lifecycle.tasks.webhook_deliver_task",
        "lifecycle.tasks.webhooks_sweep_task",
        "replay.tasks.replay_task",
        "replay.tasks.round_run_task",
    }


def test_validate_with_nothing_to_do_skips_the_web_stack_and_the_libraries(tmp_path):
    env = embedded_env(tmp_path)
    subprocess.run(
        [sys.executable, "manage.py", "migrate"], cwd=ROOT, env=env, check=True, capture_output=True
    )
    modules = imported_modules(["manage.py", "validate", "--json"], env)
    assert "replay.rounds" in modules  # it did run a round's code
    assert not loaded(modules, (*NOT_FOR_CHECK, *WEB_STACK))


def test_the_mcp_server_loads_its_sdk_and_not_the_web_stack(tmp_path):
    modules = imported_modules(["manage.py", "help", "mcp"], embedded_env(tmp_path))
    assert "cauterweb.mcp_server" in modules and "mcp" in modules
    assert not loaded(modules, (*HEAVY, "numpy", "requests", *WEB_STACK))


def test_the_engine_loads_scipy_when_it_decides(tmp_path):
    """The other half: the spending function that needs SciPy's normal quantiles loads it."""
    code = (
        "import sys; from replay.engine import paired; "
        "assert 'scipy.special' not in sys.modules; "
        "print(paired.spent_by(0.5, alpha=0.05, spending='obf')); "
        "assert 'scipy.special' in sys.modules"
    )
    # O'Brien–Fleming at half the information: 2 − 2Φ(1.95996 / √0.5) = 0.005575…
    assert float(python_code(code)) == pytest.approx(0.005574596, abs=1e-8)


def test_the_embedded_default_runs_a_task_without_a_broker_warning(tmp_path):
    code = (
        "import django; django.setup(); "
        "from lifecycle.tasks import rules_rescore_task; "
        "from cauterweb.celery import app; "
        "assert app.conf.task_always_eager; "
        "result = rules_rescore_task.delay(rule_ids=[]); "
        "print(result.status)"
    )
    # (python_code: and no broker warning on stderr.)
    assert python_code(code, embedded_env(tmp_path)).strip() == "SUCCESS"
