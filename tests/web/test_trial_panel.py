"""A rule's randomized forward trial on its page (semantics §20.5): the two arms, the effect
with its bounds, and the chart of the bounds as they narrowed — with the same number of
queries for 10 sessions or 300."""

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from lifecycle.assignment import CONTROL, TREATMENT
from lifecycle.scopes import rule_tool_read
from lifecycle.services.reports import reports_ingest
from lifecycle.validation import numbered
from replay.trials import rule_trial
from tests.builders import T0, candidate, report, sessions_in_arm

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("randomized_trials")]


def sessions(count: int, *, start: int = 0) -> None:
    """`count` sessions per arm read the scope and report: treatment breaches one in four,
    control one in two."""
    for arm, every in ((TREATMENT, 4), (CONTROL, 2)):
        ids = sessions_in_arm("C-1", arm, start + count, prefix=arm)[start:]
        for session_id in ids:
            rule_tool_read(scope="git", session_id=session_id, now=T0)
        lines = [
            report(s, T0, notices=["breach:task_completion"] if n % every == 0 else [])
            for n, s in enumerate(ids)
        ]
        reports_ingest(numbered(lines), now=T0)


def page(client) -> tuple[str, int]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(reverse("rule-detail", args=["C-1"]))
    assert response.status_code == 200
    return response.content.decode(), len(ctx.captured_queries)


def test_the_rule_page_shows_the_arms_the_effect_and_the_narrowing_bounds(viewer_client):
    candidate("C-1")
    sessions(12)
    html, _ = page(viewer_client)
    assert re.search(r"<th scope=\"row\">treatment</th>\s*<td[^>]*>12</td>\s*<td[^>]*>3</td>", html)
    assert re.search(r"<th scope=\"row\">control</th>\s*<td[^>]*>12</td>\s*<td[^>]*>6</td>", html)
    trial = rule_trial("C-1")
    lower, upper = trial["interval"]
    words = f"{trial['effect']:+.2f} [{lower:+.2f}, {upper:+.2f}]".replace("-", "−")
    assert words in html
    figure = json.loads(
        re.search(r'class="chart chart-trial" data-plotly="([^"]*)"', html)
        .group(1)
        .replace("&quot;", '"')
    )
    effect = figure["data"][2]
    assert effect["x"][-1] == 24 and effect["y"][-1] == pytest.approx(trial["effect"])
    assert figure["data"][1]["y"][-1] == pytest.approx(lower)
    assert "vendor/plotly.min.js" in html


def test_the_trial_panel_runs_the_same_queries_for_10_or_300_sessions(viewer_client):
    candidate("C-1")
    sessions(5)
    _, few = page(viewer_client)
    sessions(145, start=5)
    html, many = page(viewer_client)
    assert many == few
    assert "150" in html


def test_under_the_baseline_design_the_page_shows_the_trial_of_spec_8(viewer_client, settings):
    settings.CAUTERWEB_TRIAL_DESIGN = "baseline"
    candidate("C-1")
    html, _ = page(viewer_client)
    assert "Baseline rate" in html and "chart-trial" not in html
