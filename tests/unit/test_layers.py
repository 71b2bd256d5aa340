"""The one-way dependency contract of `.importlinter`: dashboard | API → replay → lifecycle →
comparison, the comparator imports neither Django nor the domain, nothing below the project
package imports its settings or urls, and no import cycle runs between
lifecycle's modules or between replay's."""

from pathlib import Path

from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[2]


def test_imports_run_one_way(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert lint_imports(config_filename=str(ROOT / ".importlinter"), no_cache=True) == 0
