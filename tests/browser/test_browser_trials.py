"""Randomized forward trials on the demo (semantics §20.5), in a real browser: the arms of
the promoted candidate and the chart of its effect's bounds narrowing, drawn by charts.js."""

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_a_rule_promoted_by_a_randomized_trial_shows_its_arms_and_narrowing_bounds(signed_in, shot):
    page = signed_in
    page.goto("/rules/C-015/")
    trial = page.get_by_role("region", name="Forward trial")
    expect(trial.locator("table.arms tbody tr")).to_have_count(2)
    expect(trial.locator("table.arms tbody tr").first).to_contain_text("treatment")
    chart = trial.locator(".chart-trial")
    expect(chart).to_have_attribute("data-plotly-rendered", "true")
    expect(chart.locator("svg.main-svg").first).to_be_visible()
    expect(chart).to_contain_text("promote below")
    expect(chart).to_contain_text("sessions in the trial")
    shot("rule promoted by a randomized trial")


def test_a_harmful_rule_is_retired_by_its_randomized_trial(signed_in, shot):
    page = signed_in
    page.goto("/rules/C-016/")
    expect(page.locator("h1")).to_contain_text("retired")
    expect(page.get_by_text("made it worse").first).to_be_visible()
    expect(
        page.get_by_role("region", name="Forward trial").locator(".chart-trial")
    ).to_have_attribute("data-plotly-rendered", "true")
    shot("rule retired by a randomized trial")
