"""The rule page's paired evidence (semantics §17.5): the case × arm matrix of samples with its
flips, sorted by regression; its CSV and JSON export; the effect against the promote margin;
the control arm's noise floor; and why the rule is pending, in words. The data comes from real
paired rounds run by the engine against the simulated flaky agent."""

import csv
import io
import json
import re
import statistics

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from freezegun import freeze_time

from dashboard import presenters
from dashboard.presenters import signed
from lifecycle.models import Rule
from replay.backends.simulated import StochasticAgent
from replay.models import ReplaySample
from replay.rounds import round_run
from tests.builders import T0
from tests.scenarios import corpus, failing, rule, win

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
CLOCK: list = []


class Ticking(StochasticAgent):
    """The flaky agent, each replay taking one (frozen) second: a round budget runs out after
    a known number of replays, with nothing slept through."""

    def __call__(self, case, context):
        CLOCK[0].tick(1.0)
        return super().__call__(case, context)


# A rule that lifts a 0.5 success rate by 0.2: not decided after the first batch of 4 repeats.
modest = Ticking(effect=0.2, seed=3)


@pytest.fixture
def paired(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.web.test_paired_evidence:modest"
    settings.CAUTERWEB_REPLAY_DESIGN = "paired"
    settings.CAUTERWEB_REPLAY_CONCURRENCY = 1
    settings.CAUTERWEB_VERIFIER = ""
    settings.CAUTERWEB_LOCK_URL = ""
    # One batch (5 cases × 2 arms × 4 repeats = 40 one-second replays), then the budget is out.
    settings.CAUTERWEB_VALIDATION_ROUND_BUDGET_S = 30.0
    return settings


@pytest.fixture
def pending_rule(paired):
    """R-1 after one paired round: three failing cases and two protected wins, 4 of 10 repeats
    per case and arm, pending."""
    corpus(
        failing("F-1"),
        failing("F-2", minutes=1),
        failing("F-3", minutes=2),
        win("S-1"),
        win("S-2", minutes=1),
    )
    rule()
    with freeze_time(T0, tick=False) as frozen:
        CLOCK[:] = [frozen]
        round_run()
    CLOCK.clear()
    return Rule.objects.get(pk="R-1")


def test_the_engine_left_the_rule_pending_for_more_samples(pending_rule):
    assert (pending_rule.state, pending_rule.pending_reason) == ("candidate", "replay_inconclusive")
    assert ReplaySample.objects.filter(rule=pending_rule).count() == 40
    assert pending_rule.verdict_reason.endswith("needs more samples: 4 of 10 repeats per case")


def stored(rule_id: str = "R-1") -> dict:
    """{(case, arm): [task_completion by repeat]} as the engine stored them."""
    out: dict = {}
    for s in ReplaySample.objects.filter(rule_id=rule_id).order_by("repeat"):
        out.setdefault((s.case_id, s.arm), []).append(s.metrics["task_completion"])
    return out


def latest_paired(rule_id: str = "R-1") -> dict:
    from lifecycle.models import JournalEvent

    event = JournalEvent.objects.filter(rule_id=rule_id, type="validation_verdict").latest("id")
    return event.evidence["details"]["replay"]


def minority(values: list[float]) -> int:
    passes = sum(v >= 0.5 for v in values)
    fails = len(values) - passes
    return 0 if passes == fails else min(passes, fails)


def page(client, **params) -> str:
    return client.get(reverse("rule-detail", args=["R-1"]), params).content.decode()


# --- Why pending, in words ------------------------------------------------------------------------


def test_the_headline_says_why_the_rule_is_pending_from_its_evidence(pending_rule, viewer_client):
    # The headline is built from the verdict's figures; the engine's sentence stays beside it.
    paired = latest_paired()
    reason = paired["reason"]
    assert re.fullmatch(
        r"effect [+−]\d\.\d\d \[[+−]\d\.\d\d, [+−]\d\.\d\d\]; "
        r"needs more samples: 4 of 10 repeats per case",
        reason,
    )
    improvement = paired["paired"]["improvement"]
    response = viewer_client.get(reverse("rule-detail", args=["R-1"]))
    headline = response.context["headline"]
    assert headline.tone == "pending"
    assert headline.lead.startswith(f"Pending: task_completion {signed(improvement['effect'])} on ")
    assert "needs more replays: 4 of 10 repeats per case and arm so far" in headline.lead
    body = response.content.decode()
    assert f"In the engine's words: replay inconclusive: {reason}" in body
    assert "Look</dt><dd>1 of 3" in body and "40 weighed by this verdict" in body


# --- The matrix -----------------------------------------------------------------------------------


def test_the_matrix_has_failing_cases_first_then_wins_with_each_arms_repeats(
    pending_rule, viewer_client
):
    response = viewer_client.get(reverse("rule-detail", args=["R-1"]))
    rows = response.context["paired"]["rows"]
    assert [(r.case, r.kind) for r in rows] == [
        ("F-3", "failing"),
        ("F-2", "failing"),
        ("F-1", "failing"),
        ("S-2", "win"),
        ("S-1", "win"),
    ]
    summary = latest_paired()["paired"]["cases"]
    values = stored()
    for r in rows:
        for cell in r.cells:
            assert [c.value for c in cell.chips] == values[(r.case, cell.arm)]
            # n, mean and sd per cell are the figures the verdict weighed.
            weighed = summary[r.case]["arms"][cell.arm]["metrics"]["task_completion"]
            assert cell.n == weighed["n"] == 4
            assert cell.mean == pytest.approx(weighed["mean"], abs=1e-6)
            assert cell.sd == pytest.approx(weighed["sd"], abs=1e-6)


def test_flips_are_highlighted_where_a_replay_went_against_its_arm(pending_rule, viewer_client):
    body = page(viewer_client)
    expected = sum(minority(v) for v in stored().values())
    assert expected > 0
    assert body.count('<span class="visually-hidden"> (flip)</span>') == expected
    assert len(re.findall(r'class="chip chip-(?:pass|fail) flip" title="repeat', body)) == expected


def test_sorting_by_regression_puts_the_most_harmed_case_first(pending_rule, viewer_client):
    values = stored()
    effect = {
        case: statistics.fmean(values[(case, "treatment")])
        - statistics.fmean(values[(case, "control")])
        for case, _ in values
    }
    response = viewer_client.get(reverse("rule-detail", args=["R-1"]), {"sort": "regression"})
    rows = response.context["paired"]["rows"]
    assert [r.case for r in rows] == sorted(effect, key=effect.get)
    assert [r.effect for r in rows] == pytest.approx(sorted(effect.values()))


def test_the_sort_swaps_only_the_matrix_and_pushes_the_url(pending_rule, viewer_client):
    url = reverse("rule-detail", args=["R-1"])
    body = page(viewer_client)
    link = f"{url}?metric=task_completion&amp;sort=regression"
    assert f'<a href="{link}" hx-get="{link}">Effect</a>' in body
    assert 'hx-target="#paired-matrix" hx-swap="outerHTML" hx-push-url="true"' in body
    response = viewer_client.get(url, {"sort": "regression"}, **HTMX)
    fragment = response.content.decode()
    assert fragment.lstrip().startswith('<div id="paired-matrix"')
    assert "<html" not in fragment and "Effect ▲" in fragment
    assert "HX-Request" in response["Vary"]


def test_another_metric_can_be_shown_and_a_bad_one_falls_back(pending_rule, viewer_client):
    response = viewer_client.get(reverse("rule-detail", args=["R-1"]), {"metric": "coherence"})
    assert response.context["paired"]["metric"] == "coherence"
    response = viewer_client.get(
        reverse("rule-detail", args=["R-1"]), {"metric": "nope", "sort": "sideways"}
    )
    assert response.status_code == 200
    paired = response.context["paired"]
    assert (paired["metric"], paired["sort"]) == ("task_completion", "cases")
    assert "nope is not one of the offered values" in response.content.decode()


def test_the_noise_floor_is_the_control_arms_spread_within_each_case(pending_rule, viewer_client):
    floors = {n.metric: n for n in page_context(viewer_client)["noise"]}
    control = [v for (case, arm), v in stored().items() if arm == "control"]
    pooled = sum(statistics.variance(v) * (len(v) - 1) for v in control) / sum(
        len(v) - 1 for v in control
    )
    assert floors["task_completion"].sd == pytest.approx(pooled**0.5)
    assert (floors["task_completion"].samples, floors["task_completion"].cases) == (20, 5)
    assert set(floors) == {"coherence", "outcome_correct", "task_completion"}


def page_context(client) -> dict:
    return client.get(reverse("rule-detail", args=["R-1"])).context["paired"]


def test_the_effect_figure_is_rendered_by_charts_js_without_inline_scripts(
    pending_rule, viewer_client
):
    body = page(viewer_client)
    assert 'class="chart chart-effect" data-plotly="' in body
    assert "/static/vendor/plotly.min.js" in body and "<script>" not in body


def test_a_rule_without_paired_replays_has_no_matrix_and_no_plotly(viewer_client, paired):
    rule()
    body = page(viewer_client)
    assert "Paired evidence" not in body and "plotly.min.js" not in body


# --- Export -----------------------------------------------------------------------------------------


def test_the_csv_export_has_one_line_per_case_with_each_arms_values(pending_rule, viewer_client):
    response = viewer_client.get(reverse("rule-samples-csv", args=["R-1"]))
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="R-1-samples.csv"' in response["Content-Disposition"]
    lines = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [line["case"] for line in lines] == ["F-3", "F-2", "F-1", "S-2", "S-1"]
    values = stored()
    for line in lines:
        for arm in ("treatment", "control"):
            assert [float(v) for v in line[f"{arm}_values"].split()] == pytest.approx(
                values[(line["case"], arm)]
            )
            assert int(line[f"{arm}_flips"]) == minority(values[(line["case"], arm)])
            assert line[f"{arm}_n"] == "4"
        assert line["metric"] == "task_completion"


def test_the_json_export_follows_the_pages_sort_and_keeps_every_sample(pending_rule, viewer_client):
    response = viewer_client.get(reverse("rule-samples-json", args=["R-1"]), {"sort": "regression"})
    body = json.loads(response.content)
    page_rows = viewer_client.get(reverse("rule-detail", args=["R-1"]), {"sort": "regression"})
    assert [c["case"] for c in body["cases"]] == [
        r.case for r in page_rows.context["paired"]["rows"]
    ]
    values = stored()
    for case in body["cases"]:
        for arm in ("treatment", "control"):
            samples = case[arm]["samples"]
            assert [s["value"] for s in samples] == pytest.approx(values[(case["case"], arm)])
            assert [s["repeat"] for s in samples] == [0, 1, 2, 3]
            assert sum(s["flip"] for s in samples) == case[arm]["flips"]


def test_the_export_needs_a_login_and_a_known_rule(pending_rule, viewer_client):
    for name in ("rule-samples-csv", "rule-samples-json"):
        response = Client().get(reverse(name, args=["R-1"]))
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
        assert viewer_client.get(reverse(name, args=["R-404"])).status_code == 404


# --- Queries ----------------------------------------------------------------------------------------


def test_the_rule_page_runs_the_same_queries_for_40_or_80_samples(
    pending_rule, viewer_client, django_assert_max_num_queries
):
    url = reverse("rule-detail", args=["R-1"])

    def count(**extra) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert viewer_client.get(url, **extra).status_code == 200
        return len(ctx.captured_queries)

    page_queries, fragment_queries = count(), count(**HTMX)
    # A second round adds the second batch of repeats.
    with freeze_time(T0, tick=False) as frozen:
        CLOCK[:] = [frozen]
        round_run()
    CLOCK.clear()
    assert ReplaySample.objects.filter(rule_id="R-1").count() == 80
    assert count() == page_queries
    assert count(**HTMX) == fragment_queries


# --- The matrix's rules on fixed samples (no engine) -----------------------------------------------


def sample(case, arm, repeat, value, *, outcome="scored", metric="task_completion"):
    metrics = {metric: value} if outcome == "scored" else {}
    return {
        "case_id": case,
        "case__kind": "failure",
        "arm": arm,
        "repeat": repeat,
        "round_id": 1,
        "outcome": outcome,
        "metrics": metrics,
    }


def one_row(samples, **kwargs):
    (row,) = presenters.sample_matrix(samples, figures=None, metric="task_completion", **kwargs)
    return row


def test_a_replay_against_its_arms_majority_is_a_flip_and_disagreeing_arms_are_flagged():
    row = one_row(
        [sample("F-1", "treatment", i, v) for i, v in enumerate([0.9, 0.8, 0.2, 0.85])]
        + [sample("F-1", "control", i, v) for i, v in enumerate([0.3, 0.2, 0.25, 0.3])]
    )
    assert [c.flip for c in row.treatment.chips] == [False, False, True, False]
    assert row.treatment.flips == 1 and row.control.flips == 0
    assert (row.treatment.majority, row.control.majority, row.disagree) == (True, False, True)
    assert row.effect == pytest.approx(0.6875 - 0.2625)


def test_a_split_arm_has_no_majority_so_no_flip_and_no_disagreement():
    row = one_row(
        [sample("F-1", "treatment", i, v) for i, v in enumerate([0.9, 0.1])]
        + [sample("F-1", "control", i, v) for i, v in enumerate([0.1, 0.2])]
    )
    assert row.treatment.majority is None and row.treatment.flips == 0 and not row.disagree


def test_a_replay_that_scored_nothing_is_a_chip_without_a_value_and_counts_for_nothing():
    row = one_row(
        [
            sample("F-1", "treatment", 0, 0.9),
            sample("F-1", "treatment", 1, None, outcome="candidate_not_exercised"),
            sample("F-1", "control", 0, 0.2),
        ]
    )
    chips = row.treatment.chips
    assert [(c.outcome, c.value, c.flip) for c in chips] == [
        ("scored", 0.9, False),
        ("candidate_not_exercised", None, False),
    ]
    assert (row.treatment.n, row.treatment.sd) == (1, None)
    assert presenters.short_outcome("candidate_not_exercised") == "not read"


def test_a_lower_is_better_metric_passes_low_and_its_effect_is_turned_round():
    row = one_row(
        [sample("F-1", "treatment", i, v) for i, v in enumerate([0.1, 0.2, 0.9])]
        + [sample("F-1", "control", i, v) for i, v in enumerate([0.8, 0.7, 0.9])],
        lower_is_better=frozenset({"task_completion"}),
    )
    assert [c.passed for c in row.treatment.chips] == [True, True, False]
    assert [c.flip for c in row.treatment.chips] == [False, False, True]
    assert row.effect == pytest.approx(0.8 - 0.4)


def test_cases_no_longer_selected_come_last_and_are_marked_not_counted():
    figures = {"cases": {"F-2": {"kind": "failing"}, "S-1": {"kind": "win"}}}
    samples = [
        sample(c, a, 0, 0.5) for c in ("F-1", "F-2", "S-1") for a in ("treatment", "control")
    ]
    rows = presenters.sample_matrix(samples, figures=figures, metric="task_completion")
    assert [(r.case, r.kind, r.counted) for r in rows] == [
        ("F-2", "failing", True),
        ("S-1", "win", True),
        ("F-1", "failing", False),
    ]
