"""The code stays lint-clean under the project's ruff settings (pyproject.toml), the size and
complexity ceilings of a function included: a function over them fails the suite, not a review."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    run = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_function_over_the_statement_ceiling_is_refused(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(41))
    source = tmp_path / "long.py"
    source.write_text(f"def long():\n{body}\n    return x0\n")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--output-format",
            "concise",
            "--config",
            str(ROOT / "pyproject.toml"),
            str(source),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert "PLR0915" in run.stdout, run.stdout + run.stderr
