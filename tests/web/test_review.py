"""The review queue page (docs/dashboard.md): every kind with the evidence to decide it, its
actions in place (htmx answers with the resolved card and the navigation's new count), filters
pushed to the URL, and a page that costs the same with 3 items or 30."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from lifecycle.models import ReviewItem, Rule
from lifecycle.services.packs import export_pack, pack_stage
from lifecycle.services.rules import rule_retire
from lifecycle.states import Actor
from tests.builders import candidate, make_rule, suspected_duplicate, uncertain_rule, verdict

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def harm(rule_id: str) -> None:
    rule = candidate(rule_id)
    rule_retire(
        rule_id=rule.id,
        actor=Actor.engine(),
        reason="regressed",
        evidence={
            "validator": "replay",
            "cases": [
                {
                    "case": "S-1",
                    "kind": "win",
                    "regressed": True,
                    "metrics": {
                        "task_completion": {"original": 0.9, "replayed": 0.4, "delta": -0.5}
                    },
                    "attribution": [
                        {"metric": "task_completion", "delta": -0.5, "decision": "attributable"}
                    ],
                }
            ],
        },
    )


def staged() -> None:
    make_rule("K-1", state="active", scope="git")
    text = export_pack(scopes=["git"], name="team", version="3")
    Rule.objects.filter(pk="K-1").delete()
    pack_stage(text, actor=Actor.agent("sync-bot"))


@pytest.fixture
def every_kind():
    a, b = make_rule("A"), make_rule("B")
    suspected_duplicate(b, of=a)
    make_rule("C-1", scope="docs", replay_attempts=3)
    verdict("C-1", 5, "pending", replay_attempts=3)
    uncertain_rule("C-9")
    harm("C-2")
    staged()


def item(kind: str) -> ReviewItem:
    return ReviewItem.objects.get(kind=kind)


def test_the_queue_shows_each_kind_with_its_evidence_and_actions(reviewer_client, every_kind):
    body = reviewer_client.get(reverse("review")).content.decode()
    assert "Keep A, retire the other" in body and "Keep B, retire the other" in body
    assert "semantic similarity 0.93" in body
    assert "3 of 3 attempts spent: replay will not try again" in body
    assert "when a push is rejected as non-fast-forward" in body  # the extraction's text
    assert "Same rule" in body and "Another rule" in body
    assert "Retired: protected win S-1 regressed on task_completion" in body
    assert "Import 1 rule as candidates" in body
    # The navigation counts what waits.
    assert 'id="nav-review-count" class="count">5<' in body


def test_a_viewer_sees_the_queue_but_no_action(viewer_client, every_kind):
    body = viewer_client.get(reverse("review")).content.decode()
    assert "Keep A, retire the other" not in body and "Suspected duplicate" in body
    url = reverse("review-action", args=[item("duplicate").pk, "dismiss"])
    assert viewer_client.post(url).status_code == 403
    assert item("duplicate").closed_at is None


def test_an_action_in_place_answers_with_the_resolved_card_and_the_new_count(
    reviewer_client, every_kind
):
    pk = item("inconclusive").pk
    url = reverse("review-action", args=[pk, "retire"])
    response = reviewer_client.post(url, {"reason": "stuck"}, **HTMX)
    body = response.content.decode()
    assert body.lstrip().startswith('<article class="panel review-card kind-inconclusive resolved"')
    assert "Resolved by rita: retired." in body
    assert 'id="nav-review-count" class="count" hx-swap-oob="true">4<' in body
    assert Rule.objects.get(pk="C-1").state == "retired"


def test_a_refused_action_says_why_on_the_card_and_changes_nothing(reviewer_client, every_kind):
    pk = item("inconclusive").pk
    response = reviewer_client.post(reverse("review-action", args=[pk, "retire"]), **HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "Nothing done: reason is required to retire a rule by hand" in body
    assert item("inconclusive").closed_at is None


def test_without_htmx_an_action_redirects_back_to_the_queue(reviewer_client, every_kind):
    url = reverse("review-action", args=[item("extraction").pk, "confirm"])
    response = reviewer_client.post(url)
    assert response.status_code == 302 and response["Location"] == reverse("review")
    assert item("extraction").resolution == "same rule"


def test_the_filters_swap_the_list_and_push_the_url(reviewer_client, every_kind):
    body = reviewer_client.get(reverse("review")).content.decode()
    assert 'hx-target="#review-list" hx-swap="outerHTML" hx-push-url="true"' in body
    assert "data-history-form" in body
    fragment = reviewer_client.get(reverse("review"), {"kind": "pack"}, **HTMX).content.decode()
    assert fragment.lstrip().startswith('<div id="review-list"')
    assert "Pack waiting for import" in fragment and "Suspected duplicate</span>" not in fragment
    bad = reviewer_client.get(reverse("review"), {"kind": "everything"}).content.decode()
    assert "Bad filter <strong>kind</strong>" in bad


def test_a_waiting_pack_has_a_page_with_every_rule(reviewer_client, every_kind):
    pack = item("pack").pack
    body = reviewer_client.get(reverse("staged-pack", args=[pack.pk])).content.decode()
    assert "team @ 3" in body and "K-1" in body and "Valid pack: 1 rule" in body


def test_the_labelled_pairs_download_as_json_lines(reviewer_client, every_kind):
    reviewer_client.post(reverse("review-action", args=[item("extraction").pk, "deny"]))
    response = reviewer_client.get(reverse("extraction-labels"))
    (line,) = b"".join(response.streaming_content).decode().splitlines()
    assert json.loads(line)["label"] == 0


def test_the_queue_runs_the_same_queries_for_3_or_30_items(reviewer_client):
    def grow(start: int, n: int) -> None:
        for i in range(start, start + n):
            make_rule(f"C-{i}", scope=f"s{i % 3}")
            verdict(f"C-{i}", i, "pending", replay_attempts=3)
            harm(f"H-{i}")
            if i % 2:
                uncertain_rule(f"U-{i}")

    def count(**extra) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert reviewer_client.get(reverse("review"), **extra).status_code == 200
        return len(ctx.captured_queries)

    grow(0, 1)
    small, fragment = count(), count(**HTMX)
    grow(1, 9)
    assert ReviewItem.objects.count() > 20
    assert (count(), count(**HTMX)) == (small, fragment)
