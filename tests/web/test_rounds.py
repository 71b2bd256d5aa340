"""The rounds pages: queue order with rotation, validator and verdict per
candidate, live polling while a round runs, and the reviewers' "Start a round" button."""

import pytest
from django.urls import reverse

from lifecycle.journal import write as journal_write
from lifecycle.models import JournalEvent
from replay import selectors
from replay.models import ValidationRound
from tests.builders import T0, make_round, make_rule, verdict

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    # The personas hash a password; the production hasher costs seconds on a loaded CI box.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def kicks(monkeypatch):
    calls = []

    def kick_round(*, reason):
        calls.append(reason)
        return {"queued": True, "detail": "round queued"}

    monkeypatch.setattr("replay.reviewer.kick_round", kick_round)
    return calls


def candidate_started(rule_id, round_id, validator, **extra):
    journal_write(
        type="validation_candidate_started",
        actor="engine",
        rule_id=rule_id,
        round_id=round_id,
        at=T0,
        evidence={"validator": validator, "replay_attempts": extra.pop("attempts", 0), **extra},
    )


def rotated_rounds():
    """Three candidates, two rounds: ABC then BCA (semantics §9.2)."""
    for rule_id in ("A", "B", "C"):
        make_rule(rule_id)
    first = make_round(["A", "B", "C"])
    second = make_round(["B", "C", "A"], budget_s=10)
    candidate_started("B", second.id, "replay", attempts=1)
    verdict("B", second.id, "promote", reason="improved task_completion on F-001")
    candidate_started("C", second.id, "forward_trial", round_budget_exhausted=True)
    verdict(
        "C",
        second.id,
        "pending",
        validator="forward_trial",
        reason="trial: 2/5 sessions observed",
        pending_reason="round_budget_exhausted",
        round_budget_exhausted=True,
    )
    return first, second


def test_the_queue_keeps_the_rounds_order_with_validator_and_verdict():
    first, second = rotated_rounds()
    rows = selectors.round_detail(second)["queue"]
    assert [(r.position, r.rule_id, r.validator, r.outcome) for r in rows] == [
        (1, "B", "replay", "promote"),
        (2, "C", "forward_trial", "pending"),
        (3, "A", "", ""),
    ]
    assert rows[1].budget_exhausted and rows[1].pending_reason == "round_budget_exhausted"
    assert not rows[0].budget_exhausted


def test_the_round_page_shows_the_rotation_budget_and_verdicts(viewer_client):
    first, second = rotated_rounds()
    body = viewer_client.get(reverse("round-detail", args=[second.id])).content.decode()
    assert f"Round {first.id} started with A; this one starts one past it, with B" in body
    assert "3.0 s / 10 s" in body
    assert body.index(">B</a>") < body.index(">C</a>") < body.index(">A</a>")
    assert "improved task_completion on F-001" in body
    assert "(pending: round_budget_exhausted)" in body
    assert "not reached" in body
    assert "baseline runs high, so a forward trial is lenient about promotion" in body


def test_the_first_round_explains_where_its_queue_starts(viewer_client):
    vround = make_round([])
    body = viewer_client.get(reverse("round-detail", args=[vround.id])).content.decode()
    assert "First round" in body
    assert "This round had no candidate to validate." in body


def test_a_running_round_polls_every_two_seconds_until_it_finishes(viewer_client):
    make_rule("A")
    vround = make_round(["A"], status="running")
    url = reverse("round-detail", args=[vround.id])
    body = viewer_client.get(url).content.decode()
    assert f'hx-get="{url}" hx-trigger="every 2s" hx-swap="outerHTML"' in body

    fragment = viewer_client.get(url, **HTMX).content.decode()
    assert fragment.lstrip().startswith('<div id="round-status"')
    assert "<html" not in fragment and 'hx-trigger="every 2s"' in fragment

    vround.status = "finished"
    vround.finished_at = T0
    vround.summary = {"decided": 1, "promoted": 1, "elapsed_s": 4.2}
    vround.save()
    fragment = viewer_client.get(url, **HTMX).content.decode()
    # The finished fragment carries no trigger, so the swap stops the polling.
    assert "hx-trigger" not in fragment
    assert "finished" in fragment and "1 decided (1 promoted, 0 retired)" in fragment


def test_the_round_list_polls_only_while_a_round_runs(viewer_client):
    make_round([])
    assert 'hx-trigger="every 2s"' not in viewer_client.get(reverse("round-list")).content.decode()
    make_round([], status="running")
    body = viewer_client.get(reverse("round-list")).content.decode()
    assert 'hx-trigger="every 2s"' in body
    fragment = viewer_client.get(reverse("round-list"), **HTMX).content.decode()
    assert fragment.lstrip().startswith('<div id="round-table"')


def test_an_unknown_round_is_a_404(viewer_client):
    assert viewer_client.get(reverse("round-detail", args=[999])).status_code == 404


def test_no_rounds_yet_says_so(viewer_client):
    assert (
        "No validation round has run yet."
        in viewer_client.get(reverse("round-list")).content.decode()
    )


def test_a_reviewer_starts_a_round_through_kick_round(reviewer_client, kicks):
    # semantics §9.1: the dashboard only asks for a round; the kick never raises.
    response = reviewer_client.post(reverse("round-start"), follow=True)
    assert kicks == ["dashboard:rita"]
    assert "Round requested: round queued." in response.content.decode()
    # Journaled with who asked, as a kick over the API is.
    assert list(
        JournalEvent.objects.filter(type="round_kicked").values_list("actor", "evidence")
    ) == [("rita", {"queued": True, "detail": "round queued"})]


def test_a_kick_that_could_not_queue_says_why(reviewer_client, monkeypatch):
    monkeypatch.setattr(
        "replay.reviewer.kick_round",
        lambda *, reason: {"queued": False, "detail": "broker unavailable: refused"},
    )
    response = reviewer_client.post(reverse("round-start"), follow=True)
    assert "No round started: broker unavailable: refused." in response.content.decode()


def test_viewers_cannot_start_a_round(viewer_client, kicks):
    assert viewer_client.post(reverse("round-start")).status_code == 403
    assert kicks == []
    assert 'id="start-round"' not in viewer_client.get(reverse("round-list")).content.decode()


def test_start_refuses_get(reviewer_client, kicks):
    assert reviewer_client.get(reverse("round-start")).status_code == 405
    assert kicks == []


def test_reviewers_see_the_start_button(reviewer_client):
    assert 'id="start-round"' in reviewer_client.get(reverse("round-list")).content.decode()


def test_round_pages_run_a_constant_number_of_queries(viewer_client, django_assert_max_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    first, second = rotated_rounds()

    def count(url, **extra):
        with CaptureQueriesContext(connection) as ctx:
            assert viewer_client.get(url, **extra).status_code == 200
        return len(ctx.captured_queries)

    list_queries = count(reverse("round-list"))
    detail_queries = count(reverse("round-detail", args=[second.id]))
    fragment_queries = count(reverse("round-detail", args=[second.id]), **HTMX)
    queue = [f"R-{i}" for i in range(40)]
    for rule_id in queue:
        make_rule(rule_id)
    big = make_round(queue)
    for rule_id in queue:
        candidate_started(rule_id, big.id, "forward_trial")
        verdict(
            rule_id,
            big.id,
            "pending",
            validator="forward_trial",
            pending_reason="trial_in_progress",
        )
    for _ in range(40):
        make_round(queue[:3])
    with django_assert_max_num_queries(list_queries):
        viewer_client.get(reverse("round-list"))
    with django_assert_max_num_queries(detail_queries):
        viewer_client.get(reverse("round-detail", args=[big.id]))
    with django_assert_max_num_queries(fragment_queries):
        viewer_client.get(reverse("round-detail", args=[big.id]), **HTMX)
    assert JournalEvent.objects.filter(round_id=big.id).count() == 80


def test_the_start_button_runs_a_round_through_the_real_kick(reviewer_client):
    # With eager Celery (the default set-up) the kick runs the round before the redirect.
    make_rule("A")
    response = reviewer_client.post(reverse("round-start"), follow=True)
    vround = ValidationRound.objects.get()
    assert vround.kicked_by == "dashboard:rita" and vround.queue == ["A"]
    started = JournalEvent.objects.get(type="validation_round_started")
    assert started.round_id == vround.id
    assert f'href="/rounds/{vround.id}/">Round {vround.id}</a>' in response.content.decode()
