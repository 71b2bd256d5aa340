"""The Plotly figures and the pure helpers that turn journal evidence into the rule
page's words and colours. No database: figures are plain data built from rows."""

from datetime import UTC, datetime, timedelta

import pytest

from dashboard import figures
from dashboard.presenters import (
    attribution_lines,
    attribution_words,
    case_view,
    delta_class,
    signed,
)
from lifecycle.selectors.rules import bucket_for, case_row, truncate
from tests.builders import case_evidence

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
MARGINS = {"promote_margin": 0.05, "regress_margin": 0.05}


# --- Attribution and deltas in words (semantics §7.6–§7.8) -------------------------------------------


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        (
            {"metric": "coherence", "delta": -0.09, "decision": "not_attributable", "why": ""},
            "coherence \u22120.09: not attributable — not in retire_on",
        ),
        (
            {
                "metric": "task_completion",
                "delta": -0.2,
                "decision": "attributable",
                "why": "in retire_on",
            },
            "task_completion \u22120.20: attributable regression — in retire_on",
        ),
        (
            {"metric": "task_completion", "delta": 0.31, "decision": "improved", "why": ""},
            "task_completion +0.31: improved",
        ),
        (
            {"metric": "coherence", "delta": 0.01, "decision": "within_margin", "why": ""},
            "coherence +0.01: within margin",
        ),
        (
            {"metric": "coherence", "decision": "not_attributable", "why": "tier 3"},
            "coherence: not attributable — tier 3",
        ),
    ],
)
def test_an_attribution_decision_reads_as_a_sentence(entry, words):
    assert attribution_words(entry) == words


@pytest.mark.parametrize(
    ("delta", "css"),
    [
        (-0.05, "delta-bad"),
        (-0.2, "delta-bad"),
        (-0.049, "delta-flat"),
        (0.0, "delta-flat"),
        (0.049, "delta-flat"),
        (0.05, "delta-good"),
        (None, "delta-flat"),
    ],
)
def test_a_delta_is_coloured_against_the_margins(delta, css):
    # semantics §7.7: regression is delta ≤ −margin; §7.8: improvement is delta ≥ +margin.
    assert delta_class(delta, **MARGINS) == css


def test_a_negative_delta_uses_a_typographic_minus():
    assert signed(-0.094) == "\u22120.09" and signed(0.1) == "+0.10"
    assert signed(None) == "—" and signed(True) == "—"


def test_a_case_row_marks_the_deciding_metric_and_keeps_every_metric():
    row = case_row(
        case_evidence("F-001", metrics={"task_completion": (0.2, 0.9), "coherence": (0.8, 0.7)})
    )
    view = case_view(row, **MARGINS)
    assert [(m["name"], m["deciding"], m["css"]) for m in view["metrics"]] == [
        ("coherence", False, "delta-bad"),
        ("task_completion", True, "delta-good"),
    ]
    assert view["has_original"]
    assert (row.case, row.kind, row.outcome, row.candidate_read) == (
        "F-001",
        "failing",
        "scored",
        True,
    )


# --- Delta distributions ------------------------------------------------------------------------


def test_delta_distributions_plot_scored_cases_per_metric_with_the_margin_band():
    cases = [
        case_evidence("F-001", metrics={"task_completion": (0.2, 0.9), "coherence": (0.8, 0.71)}),
        case_evidence("S-022", kind="win", metrics={"task_completion": (0.9, 0.88)}),
        case_evidence("F-002", outcome="inconclusive"),
    ]
    figure = figures.delta_distributions(cases, promote_margin=0.05, regress_margin=0.1)
    (single,) = figure["data"]
    assert single["name"] == figures.SINGLE_LABEL
    points = sorted(zip(single["x"], single["y"], single["text"], strict=True))
    assert points == [
        ("coherence", -0.09, "F-001 (failing)"),
        ("task_completion", -0.02, "S-022 (win)"),
        ("task_completion", 0.7, "F-001 (failing)"),
    ]
    band = figure["layout"]["shapes"][0]
    assert (band["y0"], band["y1"]) == (-0.1, 0.05)


def test_paired_effects_are_a_second_series_with_its_own_legend_entry():
    # semantics §17.5: a paired replay has no original; its case's effect is treatment − control.
    paired = [
        {
            "rule": "C-1",
            "case": "F-1",
            "kind": "failing",
            "metric": "task_completion",
            "effect": 0.6,
        },
        {"rule": "C-2", "case": "S-2", "kind": "win", "metric": "coherence", "effect": -0.12},
    ]
    figure = figures.delta_distributions([], paired=paired, **MARGINS)
    (series,) = figure["data"]
    assert series["name"] == figures.PAIRED_LABEL and figure["layout"]["showlegend"]
    assert sorted(zip(series["x"], series["y"], strict=True)) == [
        ("coherence", -0.12),
        ("task_completion", 0.6),
    ]
    assert "C-2 on S-2 (win)" in series["text"]


def test_no_scored_case_gives_an_empty_figure():
    assert figures.delta_distributions([], **MARGINS)["data"] == []


@pytest.mark.parametrize(
    ("points", "offsets"),
    [
        ([(0.5, 0.5)], [(0, -16)]),
        ([(0.1, 0.1), (0.9, 0.9)], [(0, -16), (0, -16)]),
        (
            [(0.85, 0.97), (0.86, 0.92), (0.87, 0.99), (0.2, 0.2)],
            [(0, -16), (0, 18), (26, -30), (0, -16)],
        ),
    ],
)
def test_labels_of_crowded_points_take_turns_around_them(points, offsets):
    assert figures.label_offsets(points) == offsets


def test_many_points_are_drawn_without_labels_that_would_cover_each_other():
    rows = [
        {"rule": f"R-{i}", "token_f1": i / 100, "score": 0.9, "verdict": "match"}
        for i in range(figures.MAX_LABELLED_POINTS + 1)
    ]
    figure = figures.extraction_scatter(rows)
    trace, diagonal = figure["data"]
    assert figure["layout"]["annotations"] == [] and trace["text"][0] == "R-0"
    assert diagonal["name"] == "score = token-F1"
    labels = figures.extraction_scatter(rows[:3])["layout"]["annotations"]
    assert [(a["text"], a["showarrow"]) for a in labels] == [
        ("R-0", True),
        ("R-1", True),
        ("R-2", True),
    ]


# --- Extraction accuracy (semantics §12) -------------------------------------------------------------


def test_extraction_scatter_puts_the_score_against_token_f1_per_verdict():
    # semantics §12: the score decides; `semantic` is a component and is not plotted.
    rows = [
        {"rule": "R-F001", "token_f1": 0.28, "semantic": 0.88, "score": 0.97, "verdict": "match"},
        {"rule": "R-2", "token_f1": 0.9, "semantic": 0.95, "score": 0.91, "verdict": "match"},
        {"rule": "R-3", "token_f1": 0.8, "semantic": 0.99, "score": 0.04, "verdict": "miss"},
    ]
    figure = figures.extraction_scatter(rows)
    traces = {t["name"]: t for t in figure["data"]}
    match, miss = traces["verdict: match"], traces["verdict: miss"]
    assert match["x"] == [0.28, 0.9] and match["y"] == [0.97, 0.91]
    assert miss["y"] == [0.04]
    assert match["text"] == ["R-F001", "R-2"]
    assert miss["marker"]["color"] == figures.BAD
    # The diagonal is in the legend: what it means is said, not left to the caption.
    assert traces["score = token-F1"]["x"] == [0, 1]
    assert figure["layout"]["xaxis"]["title"]["text"].startswith("token-F1")
    assert figure["layout"]["yaxis"]["title"]["text"] == "score (probability of the same rule)"


# --- Verdicts per round -------------------------------------------------------------------------


def test_verdicts_per_round_stack_outcomes_and_fill_missing_with_zero():
    figure = figures.verdicts_per_round([(1, "promote", 2), (1, "pending", 1), (2, "retire", 3)])
    traces = {t["name"]: t for t in figure["data"]}
    assert [t["name"] for t in figure["data"]] == ["promote", "retire", "pending"]
    assert traces["promote"]["x"] == ["round 1", "round 2"]
    assert traces["promote"]["y"] == [2, 0]
    assert traces["retire"]["y"] == [0, 3]
    assert figure["layout"]["barmode"] == "stack"


# --- Lifecycle funnel ---------------------------------------------------------------------------

MINUTE = timedelta(minutes=1)


def test_the_funnel_accumulates_recorded_promoted_retired_and_pending():
    series = figures.funnel_series(
        recorded=[(T0, 1), (T0 + MINUTE, 1), (T0 + 2 * MINUTE, 1)],
        decided=[(T0 + 3 * MINUTE, "active", 1), (T0 + 2 * MINUTE, "retired", 1)],
        start=T0,
        now=T0 + 4 * MINUTE,
        size=MINUTE,
    )
    assert series["recorded"] == [0, 1, 2, 3, 3, 3]
    assert series["retired"] == [0, 0, 0, 1, 1, 1]
    assert series["promoted"] == [0, 0, 0, 0, 1, 1]
    assert series["pending"] == [0, 1, 2, 2, 1, 1]
    assert series["at"][1] == (T0 + MINUTE).isoformat()


def test_a_reviewer_retirement_counts_as_retired_and_other_states_are_ignored():
    series = figures.funnel_series(
        recorded=[(T0, 2)],
        decided=[(T0, "retired", 1), (T0, "candidate", 5)],
        start=T0,
        now=T0,
        size=MINUTE,
    )
    assert series["retired"][-1] == 1 and series["pending"][-1] == 1


@pytest.mark.parametrize(
    ("span", "bucket"),
    [
        (timedelta(minutes=2), ("second", timedelta(seconds=1))),
        (timedelta(minutes=30), ("minute", timedelta(minutes=1))),
        (timedelta(days=3), ("hour", timedelta(hours=1))),
        (timedelta(days=60), ("day", timedelta(days=1))),
        (timedelta(days=900), ("week", timedelta(weeks=1))),
    ],
)
def test_the_funnel_picks_a_bucket_that_fits_the_history(span, bucket):
    assert bucket_for(span) == bucket


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("second", datetime(2026, 11, 4, 13, 27, 41, tzinfo=UTC)),
        ("minute", datetime(2026, 11, 4, 13, 27, tzinfo=UTC)),
        ("hour", datetime(2026, 11, 4, 13, 0, tzinfo=UTC)),
        ("day", datetime(2026, 11, 4, tzinfo=UTC)),
        ("week", datetime(2026, 11, 2, tzinfo=UTC)),  # the Monday, as the database truncates
    ],
)
def test_truncate_matches_the_databases_buckets(kind, expected, settings):
    settings.TIME_ZONE = "UTC"
    assert truncate(datetime(2026, 11, 4, 13, 27, 41, 5, tzinfo=UTC), kind) == expected


def test_a_rule_decided_in_the_future_lands_in_the_last_bucket():
    # Clocks drift between workers: a decision stamped after `now` must not crash the chart.
    series = figures.funnel_series(
        recorded=[(T0, 1)],
        decided=[(T0 + timedelta(hours=1), "active", 1)],
        start=T0,
        now=T0 + 5 * MINUTE,
        size=MINUTE,
    )
    assert series["promoted"][-1] == 1


def test_no_rules_give_an_empty_funnel():
    figure = figures.lifecycle_funnel(figures.EMPTY_FUNNEL)
    assert [t["x"] for t in figure["data"]] == [[], [], [], []]


def test_metrics_within_the_margins_are_named_together_on_one_line():
    lines = attribution_lines(
        [
            {"metric": "coherence", "delta": 0.0, "decision": "within_margin", "why": ""},
            {"metric": "task_completion", "delta": -0.2, "decision": "attributable", "why": ""},
            {"metric": "tool_correctness", "delta": 0.01, "decision": "within_margin", "why": ""},
        ]
    )
    assert lines == [
        "task_completion \u22120.20: attributable regression",
        "within margin: coherence, tool_correctness",
    ]


def test_a_reason_that_restates_the_decision_is_not_repeated():
    entry = {
        "metric": "task_completion",
        "delta": 0.31,
        "decision": "improved",
        "why": "improved past the promote margin",
    }
    assert attribution_words(entry) == "task_completion +0.31: improved — past the promote margin"


# --- The paired effect against the promote margin (semantics §17.4, §17.5) --------------------


def _paired_evidence(lift: float, repeats: int, *, win_harm: float = 0.0) -> dict:
    """What decide_paired writes for three failing cases and a win, from fixed samples."""
    from replay.engine import paired

    cases = [
        paired.PairedCase(f"F-{i}", "failing", "task_completion", frozenset({"task_completion"}))
        for i in (1, 2, 3)
    ] + [paired.PairedCase("S-1", "win", None)]
    samples = []
    for case in cases:
        for arm in paired.ARMS:
            for repeat in range(repeats):
                base = 0.3 if case.case_kind == "failing" else 0.9
                shift = lift if case.case_kind == "failing" else -win_harm
                value = base + (shift if arm == "treatment" else 0) + 0.01 * (repeat % 3)
                samples.append(
                    paired.Sample(
                        case.case_id, case.case_kind, arm, repeat, {"task_completion": value}
                    )
                )
    return paired.decide_paired(
        samples,
        cases,
        paired.PairedConfig(
            max_repeats=8, futility_beta=None, retire_spending="last", wins_lead=False
        ),
    ).evidence


def test_the_effect_figure_draws_the_improvement_with_its_interval_first():
    evidence = _paired_evidence(0.4, 4)
    improvement = evidence["improvement"]
    figure = figures.paired_effect(evidence, **MARGINS)
    first = figure["data"][0]
    assert first["y"] == ["task_completion (failing cases)"]
    assert first["x"] == [improvement["effect"]]
    low, high = improvement["ci"]
    assert first["x"][0] + first["error_x"]["array"][0] == pytest.approx(high, abs=1e-6)
    assert first["x"][0] - first["error_x"]["arrayminus"][0] == pytest.approx(low, abs=1e-6)
    # Significant and past the margin: the colour of a promotion.
    assert improvement["significant"] and first["marker"]["color"] == figures.GOOD


def test_the_effect_figure_marks_zero_and_both_margins_with_a_legend_entry_each():
    figure = figures.paired_effect(_paired_evidence(0.4, 4), **MARGINS)
    lines = {(s["x0"], s["line"]["color"]) for s in figure["layout"]["shapes"]}
    assert lines == {(0.0, figures.NEUTRAL), (0.05, figures.GOOD), (-0.05, figures.BAD)}
    low, high = figure["layout"]["xaxis"]["range"]
    assert low < -0.05 and high > figure["data"][0]["x"][0]
    keys = [t["name"] for t in figure["data"] if t["mode"] == "lines"]
    assert keys == ["promote margin +0.05", "regress margin \u22120.05"]
    # The row labels take the room they need instead of a fixed margin that clips them.
    assert figure["layout"]["yaxis"]["automargin"] is True


def test_each_colour_of_the_effect_figure_has_one_legend_entry():
    evidence = _paired_evidence(0.4, 8, win_harm=0.5)
    points = [
        t for t in figures.paired_effect(evidence, **MARGINS)["data"] if t["mode"] == "markers"
    ]
    shown = [t["name"] for t in points if t["showlegend"]]
    assert len(shown) == len({t["marker"]["color"] for t in points}) == len(set(shown))
    assert all(t["name"] == figures.EFFECT_STATUS[t["marker"]["color"]] for t in points)


def test_regression_tests_without_an_interval_at_this_look_are_left_out():
    # At the first look no error rate is spent on regressions ("last"): nothing to draw.
    early = _paired_evidence(0.0, 4)
    assert all(r["ci"] == [None, None] for r in early["regressions"])
    drawn = [t["y"][0] for t in figures.paired_effect(early, **MARGINS)["data"] if t["y"][0]]
    assert drawn == ["task_completion (failing cases)"]


def test_a_significant_regression_is_drawn_red_under_the_improvement():
    evidence = _paired_evidence(0.4, 8, win_harm=0.5)
    rows = {t["y"][0]: t for t in figures.paired_effect(evidence, **MARGINS)["data"] if t["y"][0]}
    harmed = rows["task_completion on S-1"]
    assert harmed["marker"]["color"] == figures.BAD and harmed["x"][0] < -0.05
    assert list(rows)[0] == "task_completion (failing cases)"


def test_an_unbounded_side_reaches_the_axis_edge_and_says_so():
    evidence = {
        "improvement": {
            "metric": "task_completion",
            "effect": 0.1,
            "ci": [-0.2, None],
            "p_value": 0.3,
            "significant": False,
        }
    }
    figure = figures.paired_effect(evidence, **MARGINS)
    trace = figure["data"][0]
    assert trace["x"][0] + trace["error_x"]["array"][0] == figure["layout"]["xaxis"]["range"][1]
    assert trace["customdata"] == [["\u22120.200", "open", "0.3"]]
    assert trace["marker"]["color"] == figures.PENDING
