"""The Content-Security-Policy holds on the dashboard: scripts and styles only from our own
static files, and still every chart renders and every htmx swap works — no violation reported
by the browser on any page."""

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

# Collected in the page before any of its scripts runs.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`);
});
"""

PAGES = [
    "/",
    "/rules/",
    "/rules/C-001/",
    "/rounds/",
    "/corpus/",
    "/scopes/",
    "/journal/",
    "/packs/",
    "/charts/",
    "/api/v1/docs",
]


def test_no_page_breaks_the_content_security_policy(signed_in):
    page = signed_in
    console = []
    page.on("console", lambda message: console.append(message.text))
    page.add_init_script(RECORD_VIOLATIONS)
    for path in PAGES:
        response = page.goto(path)
        assert "script-src 'self'" in response.headers["content-security-policy"]
        page.wait_for_load_state("networkidle")
        for chart in page.locator("[data-plotly]").all():
            expect(chart).to_have_attribute("data-plotly-rendered", "true")
        assert page.evaluate("window.__cspViolations") == [], path
    # An htmx swap (the rules table filter) under the same policy.
    page.goto("/rules/")
    page.locator("#f-state").select_option("retired")
    expect(page).to_have_url(re.compile(r"/rules/\?.*state=retired"))
    expect(page.locator("#rule-table").get_by_role("link", name="C-005")).to_be_visible()
    assert page.evaluate("window.__cspViolations") == []
    assert [text for text in console if "Content Security Policy" in text] == []
