"""The corpus and scope pages: filters, fragments, the rules matching a
trajectory by signature (semantics §11), and scope files as agents read them (semantics §4)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboard.forms import CorpusFilterForm
from lifecycle.matching import matching_trajectories
from lifecycle.models import Rule, Trajectory
from lifecycle.scopes import PROVISIONAL_HEADING
from lifecycle.selectors import corpus as selectors_corpus
from lifecycle.services.corpus import import_corpus
from lifecycle.services.rules import rule_promote, rule_retire_by_reviewer
from lifecycle.states import Actor
from lifecycle.validation import FilterError
from tests.builders import candidate, jsonl, trajectory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
PUSH_FAILS = ["tool:git", "action:git.push", "error:non_fast_forward"]


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # The personas' passwords are hashed once per test; the real hasher costs seconds on CI.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def corpus():
    """F-001 (the push that failed), S-023 (a successful `git status` with plenty of git words)
    and NM-044 (a near miss on a commit hook)."""
    import_corpus(
        jsonl(
            trajectory(
                "F-001",
                task="push the rounding fix; git push fails with non-fast-forward",
                signature=PUSH_FAILS,
                notices=["breach:task_completion"],
                corpus="failures/positive",
                expected_rule={
                    "trigger": "when git push fails with non-fast-forward",
                    "directive": "pull latest changes before pushing",
                },
            ),
            trajectory(
                "S-023",
                "success",
                task="git status before git push: check the push will not fail",
                signature=["tool:git", "action:git.status"],
                corpus="reference-expansion",
            ),
            trajectory(
                "NM-044",
                "near_miss",
                task="git commit hook rejected the commit",
                signature=["tool:git", "action:git.commit", "error:hook_failed"],
                notices=["stall:coherence"],
                corpus="near-misses",
            ),
        )
    )


def table_ids(response) -> list[str]:
    page = response.context["page"]
    return [t.id for t in page.object_list]


# --- The trajectories list ---------------------------------------------------------------------


def test_the_corpus_page_needs_a_login(client):
    assert client.get(reverse("corpus")).status_code == 302


def test_it_lists_every_trajectory_by_id(viewer_client, corpus):
    response = viewer_client.get(reverse("corpus"))
    assert response.status_code == 200
    assert table_ids(response) == ["F-001", "NM-044", "S-023"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"kind": "failure"}, ["F-001"]),
        ({"kind": "near_miss"}, ["NM-044"]),
        ({"corpus": "reference-expansion"}, ["S-023"]),
        ({"atom": "tool:git"}, ["F-001", "NM-044", "S-023"]),
        ({"atom": "action:git.push error:non_fast_forward"}, ["F-001"]),
        ({"atom": "action:git.push, action:git.status"}, []),
        ({"atom": "stall:coherence"}, ["NM-044"]),
        ({"has_expected_rule": "yes"}, ["F-001"]),
        ({"has_expected_rule": "no"}, ["NM-044", "S-023"]),
        ({"q": "hook"}, ["NM-044"]),
        ({"q": "s-02"}, ["S-023"]),
        ({"q": "git push"}, ["F-001", "S-023"]),
    ],
)
def test_it_filters_trajectories(viewer_client, corpus, query, expected):
    assert table_ids(viewer_client.get(reverse("corpus"), query)) == expected


def test_atoms_filter_by_signature_not_by_words_in_the_task(viewer_client, corpus):
    # semantics §11: S-023's task talks about a failing push; its signature says git status.
    response = viewer_client.get(reverse("corpus"), {"atom": "action:git.push"})
    assert table_ids(response) == ["F-001"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"kind": "failed"}, "kind"),
        ({"atom": "no-colon"}, "atom"),
        ({"has_expected_rule": "maybe"}, "has_expected_rule"),
        ({"q": "x" * 201}, "q"),
        ({"atom": " ".join(f"k:{i}" for i in range(11))}, "atom"),
    ],
)
def test_a_bad_filter_shows_a_message_not_a_500(viewer_client, corpus, query, field):
    response = viewer_client.get(reverse("corpus"), query)
    assert response.status_code == 200
    assert response.context["filter_error"].field == field
    assert f"Bad filter <strong>{field}</strong>" in response.content.decode()
    assert table_ids(response) == []


def test_an_htmx_request_gets_only_the_table_fragment(viewer_client, corpus):
    response = viewer_client.get(reverse("corpus"), {"kind": "failure"}, **HTMX)
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="trajectory-table"')
    assert "<html" not in body
    assert "HX-Request" in response["Vary"]


def test_the_filter_form_pushes_the_url_so_filters_are_shareable(viewer_client, corpus):
    body = viewer_client.get(reverse("corpus")).content.decode()
    assert 'hx-push-url="true"' in body
    assert 'hx-target="#trajectory-table"' in body


def test_an_empty_corpus_says_how_to_fill_it(viewer_client):
    body = viewer_client.get(reverse("corpus")).content.decode()
    assert "No trajectories yet" in body


def test_the_list_runs_the_same_queries_for_3_or_120_trajectories(viewer_client, corpus):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert viewer_client.get(reverse("corpus"), {"atom": "tool:git"}).status_code == 200
        return len(ctx.captured_queries)

    small = queries()
    import_corpus(jsonl(*(trajectory(f"F-{i:03d}", signature=PUSH_FAILS) for i in range(100, 220))))
    assert queries() == small


def test_a_long_list_is_paginated_with_links_that_keep_the_filters(viewer_client):
    import_corpus(jsonl(*(trajectory(f"F-{i:03d}", signature=PUSH_FAILS) for i in range(120))))
    response = viewer_client.get(reverse("corpus"), {"kind": "failure", "page": "2"})
    assert table_ids(response)[0] == "F-050"
    body = response.content.decode()
    assert "?kind=failure&amp;page=3" in body
    assert "?kind=failure&amp;page=1" in body


# --- One trajectory ----------------------------------------------------------------------------


def test_a_trajectory_page_shows_steps_metrics_notices_and_the_expected_rule(viewer_client, corpus):
    response = viewer_client.get(reverse("trajectory-detail", args=["F-001"]))
    assert response.status_code == 200
    body = response.content.decode()
    assert "git push" in body  # the step's input
    assert "breach:task_completion" in body
    assert "when git push fails with non-fast-forward" in body
    assert "pull latest changes before pushing" in body
    names = [m.name for m in response.context["metrics"]]
    assert names == ["coherence", "task_completion"]  # by tier, then name


def test_a_trajectory_page_lists_the_rules_matching_its_signature(viewer_client, corpus):
    push = candidate("R-PUSH", signature=["action:git.push", "error:non_fast_forward"])
    candidate("R-HOOK", trigger="when a commit hook fails", signature=["error:hook_failed"])
    response = viewer_client.get(reverse("trajectory-detail", args=["F-001"]))
    assert [r.id for r in response.context["matching_rules"]] == [push.id]


def test_a_rule_sharing_only_words_does_not_match(viewer_client, corpus):
    # semantics §11: "git push … non-fast-forward" and S-023's `git status` share words, not atoms.
    candidate("R-PUSH", signature=["action:git.push", "error:non_fast_forward"])
    response = viewer_client.get(reverse("trajectory-detail", args=["S-023"]))
    assert response.context["matching_rules"] == []
    assert "No rule matches this trajectory" in response.content.decode()


def test_a_rule_without_failure_mode_atoms_matches_by_notice_on_its_metric(viewer_client, corpus):
    candidate("R-COH", trigger="when coherence stalls", signature=[], metric="coherence")
    response = viewer_client.get(reverse("trajectory-detail", args=["NM-044"]))
    assert [r.id for r in response.context["matching_rules"]] == ["R-COH"]


def test_the_page_agrees_with_the_indexed_matcher(corpus):
    rules = [
        candidate("R-PUSH", signature=["action:git.push", "error:non_fast_forward"]),
        candidate("R-GIT", trigger="when git runs", signature=["tool:git"]),
        candidate("R-COH", trigger="when coherence stalls", signature=[], metric="coherence"),
    ]
    for t in Trajectory.objects.all():
        shown = {r.id for r in selectors_corpus.trajectory_detail(t)["matching_rules"]}
        indexed = {r.id for r in rules if matching_trajectories(r).filter(pk=t.pk).exists()}
        assert shown == indexed, t.id


def test_the_trajectory_page_runs_the_same_queries_for_2_or_60_rules(viewer_client, corpus):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            url = reverse("trajectory-detail", args=["F-001"])
            assert viewer_client.get(url).status_code == 200
        return len(ctx.captured_queries)

    candidate("R-A", signature=["action:git.push"])
    candidate("R-B", trigger="when a hook fails", signature=["error:hook_failed"])
    small = queries()
    for i in range(58):
        candidate(f"R-{i:03d}", trigger=f"when push {i} fails", signature=["action:git.push"])
    assert queries() == small


def test_an_unknown_trajectory_is_a_404(viewer_client):
    assert viewer_client.get(reverse("trajectory-detail", args=["F-404"])).status_code == 404


# --- Pure parts --------------------------------------------------------------------------------


def test_filters_normalise_atoms_and_ignore_unknown_keys():
    cleaned = CorpusFilterForm(
        {"atom": " Error:non_fast_forward,tool:git ", "page": "3"}, choices={"corpora": []}
    ).filters()
    assert cleaned["atoms"] == ["error:non_fast_forward", "tool:git"]
    assert "page" not in cleaned


def test_a_bad_atom_names_the_filter():
    with pytest.raises(FilterError) as exc:
        CorpusFilterForm({"atom": "tool"}, choices={"corpora": []}).filters()
    assert exc.value.field == "atom"


# --- Scopes (semantics §4) --------------------------------------------------------------------------


@pytest.fixture
def scoped_rules():
    active = candidate("R-ACT", directive="pull before pushing")
    rule_promote(rule_id=active.id, actor=Actor.engine(), evidence={}, reason="improved F-001")
    candidate("R-CAND", trigger="when push is slow", directive="wait and retry")
    gone = candidate("R-GONE", trigger="when push is rejected", directive="force push")
    rule_retire_by_reviewer(rule_id=gone.id, actor=Actor.reviewer("rita"), reason="dangerous")
    candidate("R-PAY", scope="repo:payments", trigger="when a refund fails", directive="retry")


def test_the_scopes_page_counts_rules_by_state(viewer_client, scoped_rules):
    response = viewer_client.get(reverse("scopes"))
    rows = {
        s.scope: (s.active, s.candidate, s.retired, s.in_force) for s in response.context["scopes"]
    }
    assert rows == {"git": (1, 1, 1, 2), "repo:payments": (0, 1, 0, 1)}


def test_a_scope_page_shows_the_file_agents_read(viewer_client, scoped_rules):
    response = viewer_client.get(reverse("scope-detail", args=["git"]))
    text = response.context["text"]
    assert text.index("[R-ACT]") < text.index(PROVISIONAL_HEADING) < text.index("[R-CAND]")
    assert "R-GONE" not in text  # retired rules are not in force
    assert "R-PAY" not in text


def test_a_scope_with_a_colon_in_its_name_has_a_page(viewer_client, scoped_rules):
    response = viewer_client.get(reverse("scope-detail", args=["repo:payments"]))
    assert response.status_code == 200
    assert "[R-PAY]" in response.context["text"]


def test_a_scope_file_downloads_as_plain_text(viewer_client, scoped_rules):
    response = viewer_client.get(reverse("scope-detail", args=["git"]), {"format": "text"})
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith("# Rules for scope: git")


def test_an_unknown_scope_is_a_404(viewer_client, scoped_rules):
    assert viewer_client.get(reverse("scope-detail", args=["nope"])).status_code == 404


def test_no_rules_means_no_scopes_and_a_hint(viewer_client):
    body = viewer_client.get(reverse("scopes")).content.decode()
    assert "No rules yet, so no scopes" in body


def test_the_scopes_page_is_one_query_whatever_the_number_of_scopes(viewer_client, scoped_rules):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert viewer_client.get(reverse("scopes")).status_code == 200
        return len(ctx.captured_queries)

    small = queries()
    for i in range(20):
        candidate(f"R-S{i}", scope=f"repo:s{i}", trigger=f"when {i}", directive=f"do {i}")
    assert queries() == small
    assert Rule.objects.values("scope").distinct().count() == 22


def test_a_signature_matching_many_rules_lists_the_first_ones_and_counts_all(viewer_client, corpus):
    for i in range(60):
        candidate(f"R-{i:03d}", trigger=f"when push {i} fails", signature=["action:git.push"])
    response = viewer_client.get(reverse("trajectory-detail", args=["F-001"]))
    assert len(response.context["matching_rules"]) == selectors_corpus.MATCHING_SHOWN
    assert response.context["matching_count"] == 60
    assert "60 rules match: 0 active, 60 candidates, 0 retired. The first 50 are listed." in (
        response.content.decode()
    )
