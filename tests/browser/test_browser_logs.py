"""A reviewer uploads a Claude Code transcript in a real browser (docs/traces.md, "Coding-agent
logs"), sees its session in a failure family on the corpus page, follows the link to the step
where it failed, and has the extractor propose the rule the family's recovery teaches."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
TRANSCRIPT = (
    Path(__file__).parents[1]
    / "fixtures"
    / "logs"
    / "claude"
    / "-home-ana-shop"
    / "0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e.jsonl"
)


def test_a_transcript_uploaded_becomes_a_family_with_a_link_to_its_failing_step(
    signed_in, shot, tmp_path
):
    # The demo has this family too: the session is made the newest so the table shows it.
    upload = tmp_path / TRANSCRIPT.name
    upload.write_text(TRANSCRIPT.read_text().replace("2025-11-03T", "2027-01-05T"))
    page = signed_in
    page.goto("/corpus/upload/")
    page.get_by_label("Trace file").set_input_files(str(upload))
    shot("upload a transcript")
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_role("status")).to_contain_text(
        f"{TRANSCRIPT.name}: 1 created, 0 unchanged, 0 updated."
    )
    families = page.get_by_test_id("failure-families")
    row = families.locator("tr", has_text="error:non_fast_forward").filter(
        has=page.get_by_role("link", name=re.compile("claude-0b7f0a52"))
    )
    expect(row).to_be_visible()
    shot("failure families")
    row.get_by_role("link", name=re.compile("claude-0b7f0a52")).click()
    expect(page).to_have_url(
        re.compile(r"/corpus/claude-0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e/#step-1$")
    )
    failed = page.locator("#step-1")
    expect(failed).to_contain_text("git push origin main")
    expect(failed).to_contain_text("error:non_fast_forward")
    shot("the step where it failed")
    page.go_back()
    row.get_by_role("button", name="Propose a rule").click()
    proposed = page.locator("ul.messages")
    expect(proposed).to_contain_text("when git push fails with non-fast-forward")
    expect(proposed).to_contain_text("pull the latest changes before pushing")
    expect(page).to_have_url(re.compile(r"/rules/R-[0-9A-F]+/$"))
    shot("the candidate proposed")
