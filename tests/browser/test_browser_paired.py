"""A rule promoted on paired evidence (semantics §17.5), in a real browser on the demo data:
the case × arm matrix, the effect figure drawn by charts.js, and the sort swapped in by htmx."""

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_a_rule_promoted_on_paired_evidence_shows_its_matrix_and_effect(signed_in, shot):
    page = signed_in
    page.goto("/rules/C-001/")
    evidence = page.get_by_role("region", name="Paired evidence: treatment vs control")
    expect(evidence).to_be_visible()
    matrix = evidence.locator("#paired-matrix table.matrix")
    expect(matrix.locator("tbody tr").first).to_be_visible()
    expect(matrix.locator("tbody tr").first).to_contain_text("failing")
    expect(matrix.locator(".cell-treatment .chip").first).to_be_visible()
    # charts.js drew the figure from its data attribute: Plotly's SVG is in the page.
    chart = evidence.locator(".chart-effect")
    expect(chart).to_have_attribute("data-plotly-rendered", "true")
    expect(chart.locator("svg.main-svg").first).to_be_visible()
    expect(chart).to_contain_text("promote margin")
    shot("rule promoted on paired evidence")

    evidence.get_by_role("link", name="Effect").click()
    expect(page).to_have_url(re.compile(r"/rules/C-001/\?metric=\w+&sort=regression"))
    expect(evidence.locator("#paired-matrix th", has_text="Effect ▲")).to_be_visible()
    # The swap replaced the matrix only: the figure is still the one drawn before.
    expect(chart).to_have_attribute("data-plotly-rendered", "true")
    shot("matrix sorted by regression")
