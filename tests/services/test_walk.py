"""A report's way to its rule's page stays short (scripts/walk_report.py lists it): the modules of
the project a POST /reports runs, and those of the rule page it leads to, each and together
(the ceiling `scripts/walk_report.py --max` checks, and the README's figure)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("walk_report", ROOT / "scripts" / "walk_report.py")
walk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(walk)

pytestmark = pytest.mark.django_db

# The README's figures (`scripts/walk_report.py --max 31`: 15, 20 and 31 together) less what
# does not run here: the round's kick runs on commit, after the recorded POST, and the page of
# a rule with no randomized trial does not reach replay/engine/randomized.py.
MAX_POST, MAX_PAGE, MAX_BOTH = 14, 19, 29


def test_a_report_and_its_rule_page_run_no_more_modules_than_the_readme_says(
    monkeypatch, django_capture_on_commit_callbacks
):
    from replay.tasks import round_run_task

    monkeypatch.setattr(round_run_task, "delay", lambda **kwargs: None)
    rule, agent, viewer = walk.actors()
    with django_capture_on_commit_callbacks(execute=True):
        walk.walk_once(0, rule, agent, viewer)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        recorders = walk.walk_once(1, rule, agent, viewer)
    assert callbacks, "the report asked for a round"
    post = set(recorders["POST /api/v1/reports"].modules)
    page = set(recorders[f"GET /rules/{rule.id}/"].modules)
    # (The round it asks for is kicked on commit, after the recorded request here.)
    assert {"lifecycle/services/reports.py", "cauterweb/api/reports.py"} <= post
    assert len(post) <= MAX_POST, sorted(post)
    assert "dashboard/views/rules.py" in page and len(page) <= MAX_PAGE, sorted(page)
    assert len(post | page) <= MAX_BOTH, sorted(post | page)
    # Library and test code is not counted.
    assert all(not m.startswith((".venv", "tests/")) for m in post | page)
