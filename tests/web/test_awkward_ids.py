"""Rule ids and scopes are any text the API accepts: `/`, `:`, spaces, `%`, dots and non-ASCII
letters included. Every dashboard page and action works for each of them, and the links the
pages print lead back to the same rule or scope."""

import pytest
from django.urls import reverse

from dashboard.converters import escape_segment, unescape_segment
from lifecycle.models import Rule, RuleState
from lifecycle.services.corpus import import_corpus
from tests.builders import candidate, jsonl, trajectory

pytestmark = pytest.mark.django_db

AWKWARD = [
    "X/slash",
    "a:b",
    "with space",
    "50%off",
    "%2F",
    "ünï/規則",
    "..",
    ".",
    "a/retire",
    "end/",
]
SCOPES = ["repo:acme/payments", "team x/y z", "100%", "ünï/規則", "a/b/rules", "."]


@pytest.mark.parametrize("value", [*AWKWARD, *SCOPES, "plain", "%25", "a%2Fb", "%"])
def test_the_segment_escape_is_exact_both_ways(value):
    segment = escape_segment(value)
    assert "/" not in segment and segment not in (".", "..")
    assert unescape_segment(segment) == value


def test_ordinary_ids_keep_the_urls_they_always_had():
    assert reverse("rule-detail", args=["C-001"]) == "/rules/C-001/"
    assert reverse("scope-detail", args=["repo:payments"]) == "/scopes/repo:payments/"


@pytest.mark.parametrize("rule_id", AWKWARD)
def test_every_page_shows_a_rule_whatever_its_id(viewer_client, rule_id):
    candidate(rule_id, scope="git")
    url = reverse("rule-detail", args=[rule_id])
    page = viewer_client.get(url)
    assert page.status_code == 200
    assert page.context["rule"].id == rule_id
    for name in ("overview", "rule-list", "journal", "scopes"):
        response = viewer_client.get(reverse(name))
        assert response.status_code == 200, name
    assert f'href="{url}"' in viewer_client.get(reverse("rule-list")).content.decode()
    journal = viewer_client.get(reverse("journal"), {"rule": rule_id})
    assert [e.rule_id for e in journal.context["page"].events] == [rule_id]


@pytest.mark.parametrize("rule_id", AWKWARD)
def test_a_reviewer_retires_and_requeues_a_rule_whatever_its_id(reviewer_client, rule_id):
    candidate(rule_id, scope="git")
    retire = reverse("rule-retire", args=[rule_id])
    response = reviewer_client.post(retire, {"reason": "wrong advice", "confirm": "yes"})
    assert response.status_code == 302
    assert response["Location"] == reverse("rule-detail", args=[rule_id])
    assert Rule.objects.get(pk=rule_id).state == RuleState.RETIRED
    response = reviewer_client.post(reverse("rule-requeue", args=[rule_id]), {"confirm": "yes"})
    version = Rule.objects.get(replaces_id=rule_id)
    assert response["Location"] == reverse("rule-detail", args=[version.id])


@pytest.mark.parametrize("scope", SCOPES)
def test_every_scope_has_its_page_and_plain_text(viewer_client, scope):
    candidate("R-1", scope=scope)
    listing = viewer_client.get(reverse("scopes"))
    assert listing.status_code == 200
    url = reverse("scope-detail", args=[scope])
    assert f'href="{url}"' in listing.content.decode()
    page = viewer_client.get(url)
    assert page.status_code == 200
    assert page.context["scope"].scope == scope
    text = viewer_client.get(url, {"format": "text"})
    assert "[R-1] When git push fails" in text.content.decode()
    assert viewer_client.get(reverse("rule-list"), {"scope": scope}).status_code == 200


@pytest.mark.parametrize("trajectory_id", ["T/1", "T 2 ü", "50%", ".."])
def test_a_trajectory_page_opens_whatever_its_id(viewer_client, trajectory_id):
    import_corpus(jsonl(trajectory(trajectory_id)))
    url = reverse("trajectory-detail", args=[trajectory_id])
    assert f'href="{url}"' in viewer_client.get(reverse("corpus")).content.decode()
    assert viewer_client.get(url).status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/rules/%00/",
        "/rules/a%00b/retire/",
        "/scopes/%00/",
        "/corpus/%00/",
        "/rules/?q=%00",
        "/rules/?scope=a%00",
        "/journal/?rule=%00",
        "/journal/?before=%00",
        "/journal/export.csv?actor=%00",
        "/corpus/?atom=tool:%00",
        "/packs/export/?scope=%00",
        "/rounds/?page=%00",
    ],
)
def test_a_nul_in_a_dashboard_address_is_a_bad_request_page(reviewer_client, path):
    candidate("R-1")
    response = reviewer_client.get(path)
    assert response.status_code == 400
    assert "Bad request" in response.content.decode()


def test_a_nul_in_a_form_field_is_a_bad_request_page(reviewer_client):
    candidate("R-1")
    url = reverse("rule-retire", args=["R-1"])
    response = reviewer_client.post(url, {"reason": "bad\x00", "confirm": "yes"})
    assert response.status_code == 400
    assert Rule.objects.get(pk="R-1").state == RuleState.CANDIDATE


def test_the_literal_text_backslash_u0000_is_ordinary_text(reviewer_client):
    candidate("R-1")
    assert reviewer_client.get(reverse("rule-list"), {"q": "\\u0000"}).status_code == 200
    url = reverse("rule-retire", args=["R-1"])
    reviewer_client.post(url, {"reason": "mentions \\u0000", "confirm": "yes"})
    assert Rule.objects.get(pk="R-1").state == RuleState.RETIRED
