"""Every list page and every htmx fragment runs the same number of queries however much data
there is — including the partials and the pages this module alone guards (the packs page, a
scope page, the corpus and journal fragments)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from lifecycle.journal import write as journal_write
from lifecycle.services.corpus import import_corpus
from tests.builders import T0, candidate, jsonl, trajectory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def queries(client, url, query=None, **extra) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url, query or {}, **extra).status_code == 200
    return len(ctx.captured_queries)


def grow(n: int, start: int) -> None:
    for i in range(start, start + n):
        candidate(f"R-{i}", scope=f"repo:team/{i % 7}", trigger=f"when {i} fails", directive="x")
        journal_write(type="report_received", actor="engine", at=T0 + timedelta(seconds=i))
    import_corpus(jsonl(*(trajectory(f"F-{i:04d}") for i in range(start, start + n))))


PAGES = [
    ("corpus", {"kind": "failure"}, HTMX),
    ("journal", {"actor": "engine"}, HTMX),
    ("rule-list", {"scope": "repo:team/1"}, HTMX),
    ("round-list", {}, HTMX),
    ("packs", {}, {}),
    ("scopes", {}, {}),
]


@pytest.mark.parametrize(("name", "query", "extra"), PAGES)
def test_a_page_or_fragment_runs_the_same_queries_for_3_or_60_rows(
    reviewer_client, name, query, extra
):
    grow(3, 0)
    small = queries(reviewer_client, reverse(name), query, **extra)
    grow(57, 3)
    assert queries(reviewer_client, reverse(name), query, **extra) == small


def test_a_scope_page_runs_the_same_queries_for_3_or_60_rules(reviewer_client):
    grow(3, 0)
    url = reverse("scope-detail", args=["repo:team/1"])
    small = queries(reviewer_client, url)
    grow(57, 3)
    assert queries(reviewer_client, url) == small


@pytest.mark.parametrize("name", ["rule-replays", "rule-timeline"])
def test_a_rule_pages_folds_run_the_same_queries_for_3_or_60_events(reviewer_client, name):
    from tests.builders import case_evidence, make_rule, replay_case, verdict

    rule = make_rule("R-FOLD")

    def grow(start: int, n: int) -> None:
        for round_id in range(start, start + n):
            replay_case(rule, round_id, case_evidence("F-001"), at=T0 + timedelta(minutes=round_id))
            verdict(rule, round_id, "pending", pending_reason="replay_inconclusive")

    url = reverse(name, args=[rule.id])
    grow(1, 3)
    small = queries(reviewer_client, url, **HTMX)
    grow(4, 57)
    assert queries(reviewer_client, url, **HTMX) == small
