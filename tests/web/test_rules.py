"""The dashboard's frame, overview, rules table, rule detail, reviewer actions and charts
page."""

import re
from datetime import timedelta
from urllib.parse import quote

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import NoReverseMatch, get_resolver, reverse
from django.utils.html import escape

from lifecycle.journal import write as journal_write
from lifecycle.models import JournalEvent, Rule, TrialEnrolment
from lifecycle.selectors import rules as selectors
from tests.builders import (
    F001_EXTRACTION,
    F001_EXTRACTION_BEFORE_CALIBRATION,
    T0,
    case_evidence,
    gate_result,
    install_extraction_scoring,
    make_round,
    make_rule,
    make_rules,
    make_trajectory,
    replay_case,
    verdict,
)

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
PAGES = ["overview", "rule-list", "round-list", "charts"]


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    # The personas hash a password; the production hasher costs seconds on a loaded CI box.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def scoring(monkeypatch):
    """The gate and the extraction scorer with the agreed shapes."""
    monkeypatch.setattr("lifecycle.selectors.gate.gate_both", lambda rule: gate_result())
    return install_extraction_scoring(monkeypatch, for_rule={"R-F001": F001_EXTRACTION})


def count_queries(client, url, **extra) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, **extra)
    assert response.status_code == 200
    return len(ctx.captured_queries)


# --- Login and the frame -----------------------------------------------------------------------


@pytest.mark.parametrize("name", PAGES)
def test_every_page_sends_anonymous_visitors_to_the_login_page(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_rule_page_needs_a_login_too(client):
    make_rule("R-1")
    response = client.get(reverse("rule-detail", args=["R-1"]))
    assert response.status_code == 302


def test_the_login_page_renders_a_labelled_form(client):
    body = client.get(reverse("login")).content.decode()
    assert '<label for="id_username">' in body and '<label for="id_password">' in body


def test_the_navigation_links_every_page_and_a_logout(viewer_client):
    body = viewer_client.get(reverse("overview")).content.decode()
    for label in ("Overview", "Rules", "Rounds", "Corpus", "Scopes", "Journal", "Packs", "Charts"):
        assert f">{label}</a>" in body
    assert 'action="/accounts/logout/"' in body
    assert 'aria-current="page">Overview<' in body


def test_htmx_and_plotly_come_from_our_static_files_with_csrf_on_body(viewer_client):
    body = viewer_client.get(reverse("overview")).content.decode()
    assert "/static/vendor/htmx.min.js" in body
    assert "/static/vendor/plotly.min.js" in body
    assert "/static/js/charts.js" in body
    # No script or style from another host (the page's random CSRF token may hold "cdn").
    assert not re.search(r"""(?:src|href)=["'](?:https?:)?//""", body)
    assert "<script>" not in body
    assert 'hx-headers=\'{"X-CSRFToken": "' in body


def test_only_pages_with_charts_load_plotly(viewer_client):
    # Plotly's script is 4.8 MB: the rules table has no chart and must not pay for one.
    assert "plotly.min.js" in viewer_client.get(reverse("charts")).content.decode()
    assert "plotly.min.js" not in viewer_client.get(reverse("rule-list")).content.decode()


# --- Rules table -------------------------------------------------------------------------------


def test_the_rules_page_lists_rules_newest_first(viewer_client):
    make_rules(3)
    body = viewer_client.get(reverse("rule-list")).content.decode()
    assert body.index("R-0002") < body.index("R-0001") < body.index("R-0000")
    assert "<html" in body


def test_an_htmx_request_gets_the_table_fragment_only(viewer_client):
    make_rules(2)
    response = viewer_client.get(reverse("rule-list"), {"state": "candidate"}, **HTMX)
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="rule-table"')
    assert "<html" not in body and "<form" not in body
    assert "R-0001" in body
    assert "HX-Request" in response["Vary"]


def test_a_history_restore_request_gets_the_whole_page(viewer_client):
    make_rules(1)
    body = viewer_client.get(
        reverse("rule-list"), **HTMX, HTTP_HX_HISTORY_RESTORE_REQUEST="true"
    ).content.decode()
    assert "<html" in body


def test_the_filter_form_swaps_the_table_and_pushes_the_url(viewer_client):
    body = viewer_client.get(reverse("rule-list")).content.decode()
    assert 'hx-target="#rule-table"' in body and 'hx-push-url="true"' in body
    assert 'hx-get="/rules/"' in body and 'action="/rules/"' in body


def _ids(client, **params) -> list[str]:
    return [rule.id for rule in client.get(reverse("rule-list"), params).context["page"]]


def test_filters_change_the_results(viewer_client):
    make_rule("A-1", state="active", last_validator="replay", scope="git", decided_at=T0)
    make_rule("C-1", pending_reason="trial_in_progress", first_attempted_at=T0, scope="git")
    make_rule("C-2", scope="repo:payments", metric="coherence")
    make_rule("X-1", state="retired", last_validator="forward_trial", decided_at=T0)
    assert _ids(viewer_client, state="active") == ["A-1"]
    assert sorted(_ids(viewer_client, scope="git")) == ["A-1", "C-1", "X-1"]
    assert _ids(viewer_client, validator="forward_trial") == ["X-1"]
    assert sorted(_ids(viewer_client, validator="none")) == ["C-1", "C-2"]
    assert _ids(viewer_client, pending_reason="trial_in_progress") == ["C-1"]
    assert _ids(viewer_client, pending_reason="not_attempted") == ["C-2"]
    assert _ids(viewer_client, metric="coherence") == ["C-2"]
    assert _ids(viewer_client, q="c-2") == ["C-2"]
    assert _ids(viewer_client, sort="id") == ["A-1", "C-1", "C-2", "X-1"]
    assert _ids(viewer_client, sort="-id") == ["X-1", "C-2", "C-1", "A-1"]


def test_ground_truth_filter_follows_the_source_cases_expected_rule(viewer_client):
    # semantics §12: only a source case carrying expected_rule gives ground truth.
    make_trajectory("F-001", expected_rule={"trigger": "t", "directive": "d"})
    make_trajectory("F-002")
    make_rule("R-GT", source_case="F-001")
    make_rule("R-NOGT", source_case="F-002")
    make_rule("R-NOSRC")
    assert _ids(viewer_client, has_ground_truth="yes") == ["R-GT"]
    assert sorted(_ids(viewer_client, has_ground_truth="no")) == ["R-NOGT", "R-NOSRC"]


def test_the_metric_filter_matches_the_whole_family(settings):
    # semantics §1: a metric's family is the metric plus its aliases.
    from lifecycle.models import MetricDefinition

    MetricDefinition.objects.filter(name="task_completion").update(aliases=["completion"])
    make_rule("R-1", metric="task_completion")
    make_rule("R-2", metric="completion")
    make_rule("R-3", metric="coherence")
    rules = selectors.rule_list(filters={"metric": "completion"})
    assert sorted(rules.values_list("id", flat=True)) == ["R-1", "R-2"]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("state", "zombie"),
        ("validator", "oracle"),
        ("pending_reason", "bored"),
        ("metric", "vibes"),
        ("has_ground_truth", "maybe"),
        ("sort", "colour"),
        ("q", "x" * 201),
    ],
)
def test_a_bad_filter_value_raises_a_filter_error_naming_it(key, value):
    with pytest.raises(selectors.FilterError) as caught:
        selectors.rule_list(filters={key: value})
    assert caught.value.field == key


@pytest.mark.parametrize("params", [{"state": "zombie"}, {"sort": "colour"}, {"page": "abc"}])
def test_a_bad_query_parameter_shows_a_message_never_a_500(viewer_client, params):
    make_rules(1)
    response = viewer_client.get(reverse("rule-list"), params)
    assert response.status_code == 200
    if "page" not in params:
        assert "Bad filter" in response.content.decode()


def test_an_empty_rule_table_says_so(viewer_client):
    assert "No rules yet" in viewer_client.get(reverse("rule-list")).content.decode()
    make_rules(1)
    body = viewer_client.get(reverse("rule-list"), {"state": "active"}).content.decode()
    assert "No rule matches these filters" in body


def test_pagination_links_keep_the_filters_and_an_href(viewer_client):
    make_rules(60)
    body = viewer_client.get(reverse("rule-list"), {"state": "candidate"}).content.decode()
    assert 'href="?state=candidate&amp;page=2" hx-get="?state=candidate&amp;page=2"' in body
    page2 = viewer_client.get(reverse("rule-list"), {"state": "candidate", "page": 2})
    assert len(page2.context["page"]) == 10


def test_the_rules_page_and_fragment_run_a_constant_number_of_queries(
    viewer_client, django_assert_max_num_queries
):
    make_rules(3)
    small = count_queries(viewer_client, reverse("rule-list") + "?q=R&state=candidate")
    small_fragment = count_queries(viewer_client, reverse("rule-list") + "?q=R", **HTMX)
    make_rules(80, prefix="S")
    with django_assert_max_num_queries(small):
        viewer_client.get(reverse("rule-list") + "?q=R&state=candidate")
    with django_assert_max_num_queries(small_fragment):
        viewer_client.get(reverse("rule-list") + "?q=R", **HTMX)
    assert small <= 8


# --- Rule detail -------------------------------------------------------------------------------


def test_an_unknown_rule_is_a_404(viewer_client, scoring):
    assert viewer_client.get(reverse("rule-detail", args=["R-NOPE"])).status_code == 404


def test_a_never_attempted_candidate_says_not_yet_attempted(viewer_client, scoring):
    # semantics §10: "never attempted" is distinguishable from "no verdict yet".
    make_rule("R-NEW")
    make_rule("R-WAIT", first_attempted_at=T0, pending_reason="no_matching_replayable_case")
    body = viewer_client.get(reverse("rule-detail", args=["R-NEW"])).content.decode()
    assert '<p class="lead" id="headline-lead">Not yet attempted</p>' in body
    body = viewer_client.get(reverse("rule-detail", args=["R-WAIT"])).content.decode()
    assert (
        '<p class="lead" id="headline-lead">No replayable failing case matches its signature</p>'
        in body
    )


def test_the_rule_page_shows_fields_and_signature_atoms(viewer_client, scoring):
    make_rule("R-1", tags=["git"])
    body = viewer_client.get(reverse("rule-detail", args=["R-1"])).content.decode()
    assert '<span class="atom">action:git.push</span>' in body
    assert "pull latest changes before pushing" in body
    assert "Only the validation engine promotes rules." not in body  # viewers see no actions


def _retired_by_replay():
    rule = make_rule("R-RET", state="retired", decided_at=T0, last_validator="replay")
    failing = case_evidence(
        "F-001",
        metrics={"task_completion": (0.2, 0.21), "coherence": (0.8, 0.71)},
        attribution=[
            {"metric": "coherence", "delta": -0.09, "decision": "not_attributable", "why": ""},
            {"metric": "task_completion", "delta": 0.01, "decision": "within_margin", "why": ""},
        ],
    )
    win = case_evidence(
        "S-022",
        kind="win",
        metrics={"task_completion": (0.9, 0.7)},
        deciding_metric=None,
        regressed=True,
        attribution=[
            {
                "metric": "task_completion",
                "delta": -0.2,
                "decision": "attributable",
                "why": "a protected win regressed",
            }
        ],
    )
    replay_case(rule, 7, failing)
    replay_case(rule, 7, win)
    verdict(rule, 7, "retire", reason="regressed protected win S-022")
    journal_write(
        type="rule_retired",
        actor="engine",
        rule_id=rule.id,
        round_id=7,
        at=T0,
        evidence={
            "from": "candidate",
            "to": "retired",
            "reason": "regressed protected win S-022",
            "validator": "replay",
            "cases": [failing, win],
            "deciding_metric": "task_completion",
            "retire_on": ["outcome_correct", "task_completion"],
            "trial": None,
        },
    )
    return rule


def test_a_rule_retired_by_replay_is_headed_by_the_case_that_regressed(viewer_client, scoring):
    # semantics §7.7: the headline names the case, the metric and the effect, from the
    # structured evidence of the decision, whatever the engine's sentence says.
    _retired_by_replay()
    response = viewer_client.get(reverse("rule-detail", args=["R-RET"]))
    headline = response.context["headline"]
    assert headline.lead == "Retired: protected win S-022 regressed on task_completion"
    (fact,) = headline.facts
    assert (fact.case, fact.metric, fact.original, fact.replayed) == (
        "S-022",
        "task_completion",
        0.9,
        0.7,
    )
    body = response.content.decode()
    assert "original 0.90 → replayed 0.70" in body and "\u22120.20" in body
    assert "In the engine's words: regressed protected win S-022" in body


def test_the_per_replay_detail_is_a_fold_read_only_when_opened(viewer_client, scoring):
    # semantics §7.6–§7.7: deltas coloured against the margins, attribution named in words.
    _retired_by_replay()
    page = viewer_client.get(reverse("rule-detail", args=["R-RET"])).content.decode()
    assert "not attributable" not in page
    url = reverse("rule-replays", args=["R-RET"])
    assert f'hx-get="{url}" hx-trigger="toggle once"' in page
    body = viewer_client.get(url, **HTMX).content.decode()
    assert "<html" not in body
    assert "coherence \u22120.09: not attributable — not in retire_on" in body
    assert "task_completion \u22120.20: attributable regression — a protected win regressed" in body
    assert '<span class="delta-bad">\u22120.09</span>' in body
    assert '<span class="delta-flat">+0.01</span>' in body
    assert "protected win" in body
    assert "★ task_completion 0.20 → 0.21" in body
    assert 'href="/rounds/7/">Round 7</a>' in body
    assert "In the engine's words: regressed protected win S-022" in body
    # Without htmx the same URL is a page of its own.
    assert "<html" in viewer_client.get(url).content.decode()


def test_the_timeline_folds_runs_of_alike_events_and_keeps_each_evidence(viewer_client, scoring):
    _retired_by_replay()
    url = reverse("rule-timeline", args=["R-RET"])
    groups = viewer_client.get(url).context["groups"]
    assert [(g["type"], g["count"]) for g in groups] == [
        ("rule_retired", 1),
        ("validation_verdict", 1),
        ("validation_replay_case", 2),
    ]
    body = viewer_client.get(url, **HTMX).content.decode()
    assert "validation replay case</strong> ×2" in body
    assert body.count("<details><summary>evidence</summary>") == 4
    assert "&quot;deciding_metric&quot;: &quot;task_completion&quot;" in body


def test_the_trial_panel_counts_enrolments_and_says_the_baseline_runs_high(viewer_client, scoring):
    rule = make_rule("R-T", baseline_rate=0.8, baseline_sessions=10, first_attempted_at=T0)
    for i, (breached, read) in enumerate([(True, True), (False, True), (False, False)]):
        TrialEnrolment.objects.create(
            rule=rule,
            session_id=f"s{i}",
            breached=breached,
            read_candidate=read,
            enrolled_at=T0,
            updated_at=T0,
        )
    trial = selectors.rule_detail(rule)["trial"]
    assert (trial.enrolled, trial.breached, trial.read_candidate, trial.needed) == (3, 1, 2, 5)
    body = viewer_client.get(reverse("rule-detail", args=["R-T"])).content.decode()
    assert "3 of 5 enrolled, 1 breached" in body
    assert "2 of 3 enrolled sessions" in body
    assert "80% of 10 sessions with an incident" in body
    assert "so it runs high" in body


def test_the_extraction_diff_highlights_words_apart_from_replay(viewer_client, scoring):
    # semantics §12: the F-001-style diff, each score, never fused with replay fidelity.
    make_rule("R-F001", source_case="F-001")
    body = viewer_client.get(reverse("rule-detail", args=["R-F001"])).content.decode()
    assert "<del>git</del> <ins>a</ins> push" in body
    assert "<del>pull</del> <ins>fetch</ins> before pushing" in body
    assert "(separate from replay fidelity)" in body


def test_the_extraction_panel_leads_with_score_and_verdict_then_labelled_components(
    viewer_client, scoring
):
    # semantics §12: the calibrated score decides; the similarities are components only.
    make_rule("R-F001", source_case="F-001")
    body = viewer_client.get(reverse("rule-detail", args=["R-F001"])).content.decode()
    panel = body[body.index('id="h-extraction"') :]
    headline = "Score <strong>0.97</strong> · verdict <strong>match</strong>"
    assert headline in panel
    components = [
        'Semantic similarity <span class="muted">(component)</span></dt><dd>0.88 — '
        "embedding similarity of the wording; a component only",
        'Signature agreement <span class="muted">(component)</span></dt><dd>1.00 — '
        "how far the failure-mode atoms of both triggers agree",
        'Token-F1 <span class="muted">(component)</span></dt><dd>0.28 — '
        "share of words in common, the naive baseline; never decides",
    ]
    positions = [panel.index(line) for line in components]
    assert panel.index(headline) < positions[0] < positions[1] < positions[2]
    assert "Score: probability that the extracted rule is the expected rule." in panel
    assert "<dt>Doubts</dt><dd>different acts</dd>" in panel
    assert "not a calibrated probability" not in panel


def test_a_comparison_stored_before_calibration_shows_the_comparators_meanings(
    viewer_client, monkeypatch
):
    from comparison.compare import COMPONENTS

    monkeypatch.setattr("lifecycle.selectors.gate.gate_both", lambda rule: gate_result())
    install_extraction_scoring(monkeypatch, for_rule={"R-F001": F001_EXTRACTION_BEFORE_CALIBRATION})
    make_rule("R-F001", source_case="F-001")
    response = viewer_client.get(reverse("rule-detail", args=["R-F001"]))
    body = response.content.decode()
    assert response.status_code == 200
    assert "Score <strong>0.81</strong> · verdict <strong>match</strong>" in body
    for meaning in COMPONENTS.values():
        assert escape(meaning) in body
    assert "Scored by an earlier comparator: this score is not a calibrated probability" in body


def test_a_rule_without_ground_truth_says_so(viewer_client, scoring):
    make_rule("R-1")
    body = viewer_client.get(reverse("rule-detail", args=["R-1"])).content.decode()
    assert "No ground truth" in body


def test_the_gates_sit_side_by_side_with_the_trajectories_each_fired_on(viewer_client, scoring):
    # semantics §11: the lexical gate counts S-023 (git status) as broken; the signature gate not.
    make_rule("R-1")
    response = viewer_client.get(reverse("rule-detail", args=["R-1"]))
    lexical, signature = response.context["gate_columns"]
    assert lexical["matcher"] == "lexical" and signature["matcher"] == "signature"
    body = response.content.decode()
    lexical_html = body[
        body.index('class="gate gate-lexical"') : body.index('class="gate gate-signature"')
    ]
    signature_html = body[body.index('class="gate gate-signature"') :]
    assert '<a href="/corpus/S-023/">S-023</a>' in lexical_html
    assert "S-023" not in signature_html
    assert "Lexical matcher — INCONCLUSIVE" in body and "Signature matcher — PASS" in body


def test_the_rule_page_runs_a_constant_number_of_queries_as_its_journal_grows(
    viewer_client, scoring, django_assert_max_num_queries
):
    rule = _retired_by_replay()
    few = count_queries(viewer_client, reverse("rule-detail", args=[rule.id]))
    for round_id in range(8, 30):
        replay_case(rule, round_id, case_evidence("F-001"), at=T0 + timedelta(minutes=round_id))
        verdict(rule, round_id, "pending", pending_reason="replay_inconclusive")
    with django_assert_max_num_queries(few):
        viewer_client.get(reverse("rule-detail", args=[rule.id]))


# --- Reviewer actions --------------------------------------------------------------------------


def test_retiring_by_hand_asks_for_confirmation_first(reviewer_client, scoring):
    make_rule("R-1")
    response = reviewer_client.post(reverse("rule-retire", args=["R-1"]), {"reason": "too broad"})
    assert response.status_code == 200
    assert "Yes, retire R-1" in response.content.decode()
    assert Rule.objects.get(pk="R-1").state == "candidate"
    assert not JournalEvent.objects.filter(type="rule_retired_by_reviewer").exists()


def test_a_confirmed_retirement_journals_the_reviewer_and_the_reason(reviewer_client, scoring):
    # semantics §3: a reviewer may retire by hand, journaled with the reviewer and a reason.
    make_rule("R-1", state="active", decided_at=T0)
    response = reviewer_client.post(
        reverse("rule-retire", args=["R-1"]), {"reason": "too broad", "confirm": "yes"}
    )
    assert response.status_code == 302
    assert Rule.objects.get(pk="R-1").state == "retired"
    events = list(JournalEvent.objects.filter(rule_id="R-1").values("type", "actor", "evidence"))
    assert events == [
        {
            "type": "rule_retired_by_reviewer",
            "actor": "rita",
            "evidence": {
                "from": "active",
                "to": "retired",
                "reason": "too broad",
                "reviewer": "rita",
            },
        }
    ]
    page = reviewer_client.get(response["Location"]).content.decode()
    assert "R-1 retired: too broad" in page


def test_retiring_without_a_reason_changes_nothing(reviewer_client, scoring):
    make_rule("R-1")
    response = reviewer_client.post(
        reverse("rule-retire", args=["R-1"]), {"reason": "  ", "confirm": "yes"}, follow=True
    )
    assert "Give a reason" in response.content.decode()
    assert not JournalEvent.objects.exists()


def test_requeue_confirms_then_records_a_new_candidate_version(reviewer_client, scoring):
    make_rule("R-1", state="retired", decided_at=T0)
    confirm = reviewer_client.post(reverse("rule-requeue", args=["R-1"]))
    assert "Yes, re-queue R-1" in confirm.content.decode()
    assert not JournalEvent.objects.exists()
    response = reviewer_client.post(reverse("rule-requeue", args=["R-1"]), {"confirm": "yes"})
    version = Rule.objects.get(replaces_id="R-1")
    assert response["Location"] == reverse("rule-detail", args=[version.id])
    assert version.state == "candidate"
    event = JournalEvent.objects.get()
    assert (event.type, event.actor, event.rule_id) == ("rule_added", "rita", version.id)
    assert event.evidence["replaces"] == "R-1"


@pytest.mark.parametrize("action", ["rule-retire", "rule-requeue"])
def test_viewers_get_403_and_nothing_changes(viewer_client, action):
    make_rule("R-1", state="retired" if action == "rule-requeue" else "candidate")
    response = viewer_client.post(
        reverse(action, args=["R-1"]), {"reason": "nope", "confirm": "yes"}
    )
    assert response.status_code == 403
    assert not JournalEvent.objects.exists()


@pytest.mark.parametrize("action", ["rule-retire", "rule-requeue"])
def test_reviewer_actions_refuse_get(reviewer_client, action):
    make_rule("R-1")
    assert reviewer_client.get(reverse(action, args=["R-1"])).status_code == 405


def test_retiring_an_already_retired_rule_says_so_without_a_second_event(reviewer_client, scoring):
    make_rule("R-1", state="retired", decided_at=T0)
    response = reviewer_client.post(
        reverse("rule-retire", args=["R-1"]), {"reason": "again", "confirm": "yes"}, follow=True
    )
    assert "R-1 was already retired." in response.content.decode()
    assert not JournalEvent.objects.exists()


def test_reviewers_see_retire_and_never_a_promote_button(reviewer_client, scoring):
    make_rule("R-1")
    body = reviewer_client.get(reverse("rule-detail", args=["R-1"])).content.decode()
    assert 'action="/rules/R-1/retire/"' in body
    assert "promote" not in body.lower().replace("only the validation engine promotes", "")


def test_no_promote_route_exists():
    # semantics §3: no dashboard user can promote.
    with pytest.raises(NoReverseMatch):
        reverse("rule-promote", args=["R-1"])
    patterns = [str(p.pattern) for p in get_resolver().url_patterns]

    def walk(resolver, prefix=""):
        for p in resolver.url_patterns:
            if hasattr(p, "url_patterns"):
                yield from walk(p, prefix + str(p.pattern))
            else:
                yield prefix + str(p.pattern)

    assert patterns
    dashboard_routes = [r for r in walk(get_resolver()) if not r.startswith(("admin/", "api/"))]
    assert not [r for r in dashboard_routes if "promot" in r]


def test_posting_to_a_made_up_promote_url_is_a_404(reviewer_client):
    make_rule("R-1")
    assert reviewer_client.post("/rules/R-1/promote/").status_code == 404


# --- Overview and charts -----------------------------------------------------------------------


def test_the_overview_counts_states_and_pending_reasons(viewer_client):
    make_rule("A-1", state="active", decided_at=T0)
    make_rule("C-1", pending_reason="trial_in_progress", first_attempted_at=T0)
    make_rule("C-2")
    make_rule("C-3")
    response = viewer_client.get(reverse("overview"))
    assert response.context["counts"] == {"candidate": 3, "active": 1, "retired": 0}
    assert response.context["pending"] == [
        ("not_attempted", "not yet attempted", 2),
        ("trial_in_progress", "forward trial in progress: waiting for sessions", 1),
    ]
    body = response.content.decode()
    assert "data-plotly=" in body


def test_the_overview_shows_latest_transitions_and_last_rounds(viewer_client):
    _retired_by_replay()
    make_round(["R-RET"], budget_s=30, summary={"retired": 1, "elapsed_s": 12.5, "decided": 1})
    body = viewer_client.get(reverse("overview")).content.decode()
    assert "rule_retired" in body and "regressed protected win S-022" in body
    assert "12.5 s of 30 s" in body


def test_the_overview_and_charts_run_a_constant_number_of_queries(
    viewer_client, scoring, django_assert_max_num_queries
):
    _retired_by_replay()
    overview = count_queries(viewer_client, reverse("overview"))
    charts = count_queries(viewer_client, reverse("charts"))
    for i in range(20):
        rule = make_rule(f"R-{i}", recorded_at=T0 + timedelta(hours=i))
        replay_case(rule, 100 + i, case_evidence("F-001"))
        verdict(rule, 100 + i, "promote")
        make_round([rule.id])
    with django_assert_max_num_queries(overview):
        viewer_client.get(reverse("overview"))
    with django_assert_max_num_queries(charts):
        viewer_client.get(reverse("charts"))


def test_the_charts_page_renders_every_figure_as_data(viewer_client, monkeypatch):
    install_extraction_scoring(
        monkeypatch,
        rows=[{"rule": "R-F001", "token_f1": 0.28, "semantic": 0.88, "verdict": "match"}],
    )
    _retired_by_replay()
    body = viewer_client.get(reverse("charts")).content.decode()
    assert body.count('data-plotly="') == 4
    assert "R-F001" in body
    assert "Shown apart from replay fidelity" in body


def test_empty_charts_say_there_is_nothing_yet(viewer_client, monkeypatch):
    install_extraction_scoring(monkeypatch)
    body = viewer_client.get(reverse("charts")).content.decode()
    assert "No scored replay yet." in body and "No verdict yet." in body


def test_the_funnel_is_counted_in_the_database_per_bucket():
    make_rule("A", recorded_at=T0, state="active", decided_at=T0 + timedelta(minutes=2))
    make_rule("B", recorded_at=T0 + timedelta(seconds=30))
    make_rule(
        "C",
        recorded_at=T0 + timedelta(minutes=1),
        state="retired",
        decided_at=T0 + timedelta(minutes=1),
    )
    counts = selectors.funnel_counts(now=T0 + timedelta(minutes=30))
    assert counts["start"] == T0 and counts["size"] == timedelta(minutes=1)
    assert sorted(counts["recorded"]) == [(T0, 2), (T0 + timedelta(minutes=1), 1)]
    assert sorted(counts["decided"]) == [
        (T0 + timedelta(minutes=1), "retired", 1),
        (T0 + timedelta(minutes=2), "active", 1),
    ]
    assert selectors.funnel_counts(now=T0) is not None
    Rule.objects.all().delete()
    assert selectors.funnel_counts(now=T0) is None


def test_a_long_timeline_is_paged_newest_first_and_links_to_the_journal(viewer_client, scoring):
    rule = make_rule("R-LONG")
    for i in range(selectors.TIMELINE_LIMIT + 5):
        journal_write(
            type="validation_verdict" if i % 2 else "validation_candidate_started",
            actor="engine",
            rule_id=rule.id,
            round_id=i + 1,
            at=T0 + timedelta(minutes=i),
            evidence={"outcome": "pending", "pending_reason": "trial_in_progress"},
        )
    url = reverse("rule-timeline", args=[rule.id])
    response = viewer_client.get(url)
    rounds = [g["round_id"] for g in response.context["groups"]]
    assert rounds == list(range(selectors.TIMELINE_LIMIT + 5, 5, -1))
    body = response.content.decode()
    assert 'href="/journal/?rule=R-LONG"' in body
    older = response.context["page"].older
    assert f'hx-get="{url}?before={quote(older)}"' in body
    rest = viewer_client.get(url, {"before": older}).context["groups"]
    assert [g["round_id"] for g in rest] == [5, 4, 3, 2, 1]
    assert viewer_client.get(url, {"before": "nonsense"}).status_code == 200


def test_error_pages_explain_themselves_inside_the_frame(viewer_client):
    missing = viewer_client.get(reverse("rule-detail", args=["R-NOPE"]))
    assert missing.status_code == 404 and "Not found" in missing.content.decode()
    assert ">Rules</a>" in missing.content.decode()
    make_rule("R-1")
    denied = viewer_client.post(reverse("rule-retire", args=["R-1"]), {"reason": "x"})
    assert denied.status_code == 403 and "reviewers" in denied.content.decode()


def test_the_replays_are_paged_newest_first_each_round_with_its_verdict(viewer_client, scoring):
    rule = make_rule("R-MANY")
    for round_id in range(1, 9):
        for case in ("F-001", "F-002", "S-001"):
            replay_case(rule, round_id, case_evidence(case), at=T0 + timedelta(minutes=round_id))
        verdict(rule, round_id, "pending", pending_reason="replay_inconclusive")
    url = reverse("rule-replays", args=[rule.id])
    first = viewer_client.get(url).context
    assert first["page"].paginator.count == 24
    assert [r.round_id for r, _ in first["rounds"]] == [8, 7, 6, 5, 4, 3, 2]
    assert all(r.verdict["outcome"] == "pending" for r, _ in first["rounds"])
    assert sum(len(cases) for _, cases in first["rounds"]) == selectors.REPLAYS_PER_PAGE
    second = viewer_client.get(url, {"page": 2}).context
    assert [r.round_id for r, _ in second["rounds"]] == [2, 1]


@pytest.mark.parametrize(
    "fields",
    [
        {"signature": [], "metric": ""},
        {"signature": ["breach:coherence"], "metric": "coherence", "source_case": "F-404"},
        {"signature": ["action:git.push"], "source_case": "F-001"},
    ],
)
def test_the_rule_page_renders_with_the_real_gate_and_scorer(viewer_client, fields):
    # No stand-ins: the page must survive rules that match nothing or cite a missing case.
    make_trajectory(
        "F-001", expected_rule={"trigger": "when git push fails", "directive": "pull first"}
    )
    make_trajectory("S-001", kind="success", signature=["action:git.push"])
    make_rule("R-REAL", **fields)
    response = viewer_client.get(reverse("rule-detail", args=["R-REAL"]))
    assert response.status_code == 200
    assert [c["matcher"] for c in response.context["gate_columns"]] == ["lexical", "signature"]


def test_the_rules_list_counts_replays_run_beside_replay_attempts(viewer_client, scoring):
    # One vocabulary: a replay is one run of one case; an attempt is a round's try (§7.10).
    rule = make_rule("R-REP", replay_attempts=1)
    for repeat in range(3):
        replay_case(rule, 4, case_evidence("F-001"), at=T0 + timedelta(seconds=repeat))
    make_rule("R-NONE")
    response = viewer_client.get(reverse("rule-list"))
    assert response.context["replays"] == {"R-REP": 3}
    body = response.content.decode()
    assert '<td class="num wide-only nowrap">3<br><span class="muted">1 attempt</span></td>' in body
    assert (
        '<td class="num wide-only nowrap">0<br><span class="muted">0 attempts</span></td>' in body
    )
