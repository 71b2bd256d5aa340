"""The trace parsers and the derivation are pure: importing them loads no Django (the layering
of the project: plain decisions over plain data, I/O at the edges)."""

import subprocess
import sys

import pytest

PURE = [
    "traces.derive",
    "traces.detect",
    "traces.otlp",
    "traces.openinference",
    "traces.langfuse",
    "traces.inspect_ai",
    "traces.export",
    "traces.logs",
    "traces.sources",
    "traces.redact",
    "traces.session_log",
    "traces.claude_code",
    "traces.codex",
    "traces.openhands",
    "traces.swe_agent",
]


@pytest.mark.parametrize("module", PURE)
def test_the_module_imports_without_django(module):
    code = f"import sys, {module}; print(any(m == 'django' or m.startswith('django.') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_client_module_runs_on_its_own_without_django():
    # The `cauterweb` package starts Celery (and so Django) on import; the client module itself
    # needs neither, so it can be copied into an agent's code base as it is.
    code = (
        "import importlib.util, sys; "
        "spec = importlib.util.spec_from_file_location('client', 'cauterweb/client.py'); "
        "module = importlib.util.module_from_spec(spec); sys.modules['client'] = module; "
        "spec.loader.exec_module(module); "
        "print(any(m == 'django' or m.startswith('django.') for m in sys.modules), "
        "callable(module.serve_harness))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
