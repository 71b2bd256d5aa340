"""The review dashboard in a real browser on the demo data: every
scenario the issue lists, each page saved as a screenshot in the test's output folder."""

import re
import threading
import time
from pathlib import Path

import pytest
import yaml
from django.db import connections
from playwright.sync_api import expect

from lifecycle.models import Rule
from lifecycle.services import packs
from lifecycle.services.rules import rule_record_candidate
from lifecycle.states import Actor
from replay.models import RoundStatus, ValidationRound

from . import harness

pytestmark = pytest.mark.browser


def test_filtering_the_rules_table_changes_the_url(signed_in, shot):
    page = signed_in
    page.goto("/rules/")
    shot("rules")
    page.locator("#f-state").select_option("retired")
    expect(page).to_have_url(re.compile(r"/rules/\?.*state=retired"))
    table = page.locator("#rule-table")
    expect(table.get_by_role("link", name="C-005")).to_be_visible()
    expect(table.get_by_role("link", name="C-001", exact=True)).to_have_count(0)
    shot("rules filtered to retired")
    # The URL is shareable: loading it afresh shows the same table.
    page.reload()
    expect(page.locator("#f-state")).to_have_value("retired")
    expect(page.locator("#rule-table").get_by_role("link", name="C-005")).to_be_visible()


def test_a_rule_retired_by_replay_shows_its_cases_and_attribution(signed_in, shot):
    # semantics §17.4: C-005 ("retry immediately on 429") was retired on paired evidence at its
    # first look: its failing cases did worse under treatment than under control (a futility
    # stop); the headline says so, and the folded per-replay detail shows both arms of every
    # case. A look's wins are replayed before its failing cases (docs/engine.md): this look's
    # 16 wins' replays came first, then its 24 failing-case replays stopped it.
    page = signed_in
    page.goto("/rules/C-005/")
    headline = page.get_by_test_id("headline")
    expect(headline).to_contain_text("a futility stop")
    # The headline's own figures carry no "p 1" (the p-value of "treatment better" when it was
    # worse); the engine's sentence is quoted beneath, as it wrote it.
    expect(headline.locator("table.facts")).not_to_contain_text("p 1")
    expect(headline.locator("table.facts")).to_contain_text("[\u22120.17, \u22120.1")
    fold = page.locator("#replays-fold details")
    fold.locator("summary").click()
    replay = fold.locator(".fold-body")
    expect(replay).to_contain_text("no improvement on task_completion")
    # Newest first: the last repeats of the look are on the first page.
    treatment = replay.locator(
        "table.cases tr", has_text=re.compile(r"replay:\d+:C-005:F-020:treatment:3")
    )
    control = replay.locator(
        "table.cases tr", has_text=re.compile(r"replay:\d+:C-005:F-020:control:3")
    )
    expect(treatment).to_contain_text("failing")
    expect(treatment).to_contain_text("yes")  # the treatment arm read the candidate
    expect(control).to_contain_text("no")  # the control arm never saw it
    expect(fold).to_contain_text("Per-replay detail (40 replays)")
    shot("rule retired by replay")


def test_f001s_rule_shows_the_extraction_diff_highlighted(signed_in, shot):
    page = signed_in
    page.goto("/rules/C-001/")
    extraction = page.get_by_role("region", name=re.compile("Extraction accuracy"))
    expect(extraction).to_contain_text("Expected (F-001)")
    expect(extraction).to_contain_text("token-F1")
    expect(extraction).to_contain_text("semantic")
    changed = extraction.locator("td.diff ins, td.diff del")
    expect(changed.first).to_be_visible()
    background = changed.first.evaluate("el => getComputedStyle(el).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent")
    shot("F-001 extraction diff")


def test_the_lexical_gate_breaks_s023_and_the_signature_gate_does_not(signed_in, shot):
    # semantics §11: `git status` shares words with the rule, not atoms.
    page = signed_in
    page.goto("/rules/C-001/")
    gate = page.get_by_role("region", name=re.compile("Corpus gate"))
    lexical_broken = gate.locator(".gate-lexical p", has_text="broken")
    signature_broken = gate.locator(".gate-signature p", has_text="broken")
    expect(lexical_broken.get_by_role("link", name="S-023")).to_be_visible()
    expect(signature_broken.get_by_role("link", name="S-023")).to_have_count(0)
    expect(signature_broken).to_contain_text("none")
    gate.scroll_into_view_if_needed()
    shot("corpus gate side by side")


def test_a_reviewer_retires_a_rule_by_hand_and_finds_the_journal_event(signed_in, shot):
    page = signed_in
    page.goto("/rules/C-003/")
    page.get_by_label("Reason to retire this rule by hand").fill("flaky fix, masks real timeouts")
    page.get_by_role("button", name=re.compile("Retire")).click()
    shot("retire confirmation")
    page.get_by_role("button", name="Yes, retire C-003").click()
    expect(page.locator("h1")).to_contain_text("retired")
    shot("rule retired by hand")

    page.get_by_role("link", name="Journal", exact=True).click()
    page.get_by_label("Type").fill("rule_retired_by_reviewer")
    page.get_by_label("Type").press("Enter")
    expect(page).to_have_url(re.compile(r"/journal/\?.*type=rule_retired_by_reviewer"))
    row = page.locator("#journal-table tbody tr").first
    expect(row.get_by_role("link", name="C-003")).to_be_visible()
    expect(row).to_contain_text("demo")
    expect(row).to_contain_text("flaky fix, masks real timeouts")
    shot("journal shows the reviewer's retirement")
    assert Rule.objects.get(pk="C-003").state == "retired"


@pytest.fixture
def worker(monkeypatch, settings):
    """Celery as if a worker ran it: a kick starts the round in a thread, and each replay waits
    for harness.release so the test sees the round while it runs."""
    from replay.rounds import round_run
    from replay.tasks import round_run_task

    settings.CAUTERWEB_REPLAY_BACKEND = "tests.browser.harness:gated_replay"
    harness.release.clear()
    threads = []

    def run(**kwargs):
        try:
            round_run(**kwargs)
        finally:
            connections.close_all()

    def delay(**kwargs):
        thread = threading.Thread(target=run, kwargs=kwargs, daemon=True)
        thread.start()
        threads.append(thread)
        # A broker acknowledges before the worker starts; wait for the row so the page the
        # reviewer lands on already lists the running round.
        deadline = time.monotonic() + 10
        while not ValidationRound.objects.filter(status=RoundStatus.RUNNING).exists():
            assert time.monotonic() < deadline, "the round never started"
            time.sleep(0.05)

    monkeypatch.setattr(round_run_task, "delay", lambda **kwargs: None)
    rule_record_candidate(
        actor=Actor.agent("repair-bot"),
        trigger="when git push is rejected as non-fast-forward",
        directive="fetch and rebase onto the remote branch, then push again",
        scope="git",
        metric="task_completion",
        signature=["tool:git", "action:git.push", "error:non_fast_forward"],
    )
    monkeypatch.setattr(round_run_task, "delay", delay)
    yield
    harness.release.set()
    for thread in threads:
        thread.join(30)


def test_a_started_round_updates_its_status_without_reloading(signed_in, shot, worker):
    page = signed_in
    page.goto("/rounds/")
    page.get_by_role("button", name="Start a round").click()
    newest = page.locator("#round-table tbody tr").first
    expect(newest.locator(".round-status")).to_have_text("running")
    shot("round running")
    page.evaluate("window.__stillTheSamePage = true")

    harness.release.set()
    expect(newest.locator(".round-status")).to_have_text("finished", timeout=20_000)
    assert page.evaluate("window.__stillTheSamePage === true"), "the page was reloaded"
    # One look per candidate (semantics §17.3). C-014, pending for more samples since the
    # demo, gets its second look and is promoted. The new push rule rescues F-006..F-008 as
    # C-001 does, and C-001 is active: the control arm is rescued too, so its first look shows
    # exactly no difference on every replay, which rules a lift of 0.2 out: retired, a
    # futility stop (semantics §21.3). C-009, C-010 and C-013 still wait for sessions that
    # read their scopes (semantics §20).
    expect(newest).to_contain_text("1 promoted · 1 retired · 3 pending")
    assert Rule.objects.get(pk="C-014").state == "active"
    new = Rule.objects.get(directive__startswith="fetch and rebase")
    assert new.state == "retired"
    assert new.verdict_reason.endswith("at look 1 of 3 (a futility stop)")
    shot("round finished")


def test_exporting_a_pack_downloads_a_valid_pack_of_the_active_rules(signed_in, shot):
    page = signed_in
    page.goto("/packs/")
    page.get_by_label("Format").select_option("yaml")
    shot("packs")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download").click()
    download = info.value
    assert re.fullmatch(r"cauterweb-pack-\d{8}T\d{6}Z\.yaml", download.suggested_filename)
    document = yaml.safe_load(Path(download.path()).read_text(encoding="utf-8"))
    assert document["checksum"] == packs.pack_checksum(document)
    active = set(Rule.objects.filter(state="active").values_list("id", flat=True))
    # C-001 and C-012 are flagged as duplicates of each other: one ships, not both.
    withheld = {rule for rule, _ in packs.withheld_duplicates(states=["active"])}
    assert withheld == {"C-001"}
    assert {r["id"] for r in document["rules"]} == active - withheld
    assert {r["state"] for r in document["rules"]} == {"active"}


def test_importing_a_pack_shows_a_preview_before_writing(signed_in, shot):
    page = signed_in
    document = yaml.safe_load(packs.export_pack(scopes=["git"], states=["active"], fmt="yaml"))
    document["rules"][0]["scope"] = "repo:mirror"
    document["checksum"] = packs.pack_checksum(document)
    before = Rule.objects.count()
    page.goto("/packs/")
    page.get_by_label("…or paste it").fill(yaml.safe_dump(document))
    page.get_by_role("button", name="Validate and preview").click()
    preview = page.get_by_test_id("pack-preview")
    expect(preview).to_contain_text("Valid pack")
    expect(preview).to_contain_text("new candidate")
    shot("pack import preview")
    assert Rule.objects.count() == before
    page.get_by_role("button", name="Import 1 new rule as candidate").click()
    expect(page.locator(".messages")).to_contain_text("Imported 1 rule(s) as candidates")
    assert Rule.objects.filter(scope="repo:mirror", state="candidate").count() == 1
    shot("pack imported")


def test_the_corpus_filters_by_signature_and_a_trajectory_lists_its_matching_rules(signed_in, shot):
    page = signed_in
    page.goto("/")
    page.get_by_role("link", name="Corpus", exact=True).click()
    shot("corpus")
    page.get_by_label("Kind").select_option("failure")
    page.get_by_label("Signature atoms").fill("error:non_fast_forward")
    page.get_by_label("Signature atoms").press("Enter")
    expect(page).to_have_url(re.compile(r"/corpus/\?.*atom=error%3Anon_fast_forward"))
    table = page.get_by_test_id("trajectory-table")
    expect(table.get_by_role("link", name="F-001")).to_be_visible()
    expect(table.get_by_role("link", name="S-023")).to_have_count(0)
    shot("corpus filtered by atom")
    table.get_by_role("link", name="F-001").click()
    matching = page.get_by_test_id("matching-rules")
    expect(matching.get_by_role("link", name="C-001")).to_be_visible()
    expect(page.get_by_test_id("expected-rule")).to_contain_text(
        "when git push fails with non-fast-forward"
    )
    shot("trajectory F-001")
    page.goto("/corpus/S-023/")
    expect(page.get_by_test_id("matching-rules")).to_contain_text("No rule matches")
    shot("trajectory S-023")


def test_a_scope_reads_as_agents_see_it(signed_in, shot):
    page = signed_in
    page.goto("/")
    page.get_by_role("link", name="Scopes", exact=True).click()
    shot("scopes")
    page.get_by_test_id("scope-table").get_by_role("link", name="git", exact=True).click()
    scope_file = page.get_by_test_id("scope-file")
    expect(scope_file).to_contain_text("# Rules for scope: git")
    expect(scope_file).to_contain_text("[C-001]")
    expect(scope_file).not_to_contain_text("[C-002]")  # retired: out of the file
    shot("scope git")


def test_the_journal_exports_its_filtered_events(signed_in, shot):
    page = signed_in
    page.goto("/journal/?type=rule_promoted")
    shot("journal")
    with page.expect_download() as info:
        page.get_by_role("link", name="JSON Lines").click()
    lines = Path(info.value.path()).read_text(encoding="utf-8").splitlines()
    active = Rule.objects.filter(state="active").count()
    assert len(lines) == active
    assert all('"type": "rule_promoted"' in line for line in lines)


@pytest.mark.parametrize(
    "path", ["/corpus/", "/corpus/F-001/", "/scopes/git/", "/journal/", "/packs/"]
)
def test_the_pages_fit_a_phone_width_screen(signed_in, shot, path):
    page = signed_in
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(path)
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    shot(f"phone {path}")
    # Wide tables scroll inside their own box; the page itself never scrolls sideways.
    assert overflow <= 1, f"{path} is {overflow}px wider than the screen"


NAVIGATION = ["Overview", "Rules", "Rounds", "Corpus", "Scopes", "Journal", "Packs", "Charts"]


def test_every_page_is_reachable_from_the_navigation_and_shows_demo_data(signed_in, shot):
    page = signed_in
    page.goto("/")
    for name in NAVIGATION:
        page.get_by_role("navigation", name="Main").get_by_role("link", name=name).click()
        expect(page.locator("h1")).to_be_visible()
        expect(page.get_by_role("link", name=name, exact=True)).to_have_attribute(
            "aria-current", "page"
        )
        # Demo data, not an empty state: every page names a demo rule, case or scope.
        expect(page.locator("main")).to_contain_text(re.compile(r"C-0\d\d|F-0\d\d|git"))
        for chart in page.locator("[data-plotly]").all():
            expect(chart).to_have_attribute("data-plotly-rendered", "true")
        shot(f"nav {name}")
