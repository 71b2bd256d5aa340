"""Failure families on the corpus page (docs/traces.md, "Failure families"): the imported
sessions grouped by what failed and how, counted across sessions and agents, each linking to
the step where its newest session failed; a reviewer asks the recovery extractor for the rule
a family's recoveries teach, and it is recorded as a candidate by the extractor."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle.models import JournalEvent, Rule
from lifecycle.services.corpus import import_corpus
from tests.builders import jsonl, trajectory

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parents[1] / "fixtures" / "logs"
PUSH = "action:git.push error:non_fast_forward"


@pytest.fixture
def logs_imported() -> None:
    call_command("import_traces", str(FIXTURES), stdout=StringIO(), stderr=StringIO())


def families_table(client) -> str:
    page = client.get("/corpus/")
    assert page.status_code == 200
    html = page.content.decode()
    start = html.index('data-testid="failure-families"')
    return html[start : html.index("</section>", start)]


def test_sessions_of_three_agents_share_a_family_that_links_to_the_failing_step(
    logs_imported, viewer_client
):
    table = families_table(viewer_client)
    row = table[table.index('action:git.push</span> <span class="atom">error:non_fast_forward') :]
    row = row[: row.index("</tr>")]
    cells = [c.split("</td>")[0] for c in row.split("<td>")[1:]]
    assert cells[:3] == ["3", "0", "3"]  # sessions, unrecovered, recovered
    assert 'href="/corpus/openhands-a3f9c2e1b7d04e58/#step-0"' in row
    assert "Propose a rule" not in table  # viewers only read
    detail = viewer_client.get("/corpus/openhands-a3f9c2e1b7d04e58/").content.decode()
    assert '<li id="step-0" class="failed">' in detail


def test_the_families_cost_the_same_queries_for_a_few_or_many_failing_sessions(
    logs_imported, reviewer_client
):
    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert reviewer_client.get("/corpus/").status_code == 200
        return len(ctx.captured_queries)

    few = count()
    import_corpus(
        jsonl(
            *(
                trajectory(f"F-{i:03d}", signature=["action:make.build", f"error:tmpl_{i:010d}"])
                for i in range(60)
            )
        )
    )
    assert count() == few


def test_a_reviewer_has_the_extractor_propose_the_rule_a_family_teaches(
    logs_imported, reviewer_client
):
    response = reviewer_client.post("/corpus/families/propose/", {"family": PUSH})
    rule = Rule.objects.get(source_case="openhands-a3f9c2e1b7d04e58")
    assert response.status_code == 302 and response["Location"] == f"/rules/{rule.id}/"
    assert (rule.state, rule.trigger, rule.directive) == (
        "candidate",
        "when git push fails with non-fast-forward",
        "pull the latest changes before pushing: git pull --rebase origin main",
    )
    assert rule.signature == ["action:git.push", "error:non_fast_forward"]
    assert rule.provenance["support"] == "2/3" and rule.provenance["extractor"] == "recovery"
    (added,) = JournalEvent.objects.filter(rule=rule)
    assert (added.type, added.actor) == ("rule_added", "recovery")
    assert (added.evidence["state"], added.evidence["author_kind"]) == ("candidate", "extractor")
    assert added.evidence["provenance"] == {
        "extractor": "recovery",
        "family": PUSH,
        "step": "action:git.pull",
        "support": "2/3",
    }
    # Asked again: the same rule, unchanged.
    reviewer_client.post("/corpus/families/propose/", {"family": PUSH})
    assert Rule.objects.filter(source_case="openhands-a3f9c2e1b7d04e58").count() == 1


def test_a_family_without_recoveries_or_sessions_proposes_nothing(logs_imported, reviewer_client):
    refused = reviewer_client.post(
        "/corpus/families/propose/", {"family": "action:git.push error:tool_refused"}, follow=True
    )
    assert (
        "Nothing proposed: no session of this family recovered from it." in refused.content.decode()
    )
    unknown = reviewer_client.post(
        "/corpus/families/propose/", {"family": "action:nope error:nope"}, follow=True
    )
    assert "no failing session carries action:nope error:nope" in unknown.content.decode()
    assert not Rule.objects.exists()


def test_a_viewer_cannot_have_a_rule_proposed(logs_imported, viewer_client):
    assert viewer_client.post("/corpus/families/propose/", {"family": PUSH}).status_code == 403
    assert not Rule.objects.exists()


def test_the_command_line_proposes_from_a_family_too(logs_imported):
    out = StringIO()
    call_command("extract_candidates", "--family", PUSH, stdout=out)
    assert (
        "[recovery] openhands-a3f9c2e1b7d04e58 (global): when git push fails with" in out.getvalue()
    )
    assert Rule.objects.get().provenance["support"] == "2/3"
