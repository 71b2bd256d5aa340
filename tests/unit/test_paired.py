"""The paired replay design's verdict (semantics §17.4) and its batches (§17.1, §17.3), as pure
functions over fixed samples. Expected p-values are computed here independently, by listing the
relabellings by hand. No database."""

import json
import math
from dataclasses import replace
from itertools import combinations, product

import pytest

from replay.engine.paired import (
    PairedCase,
    PairedConfig,
    Sample,
    decide_paired,
    look,
    next_requests,
    spent_by,
)
from tests.paired_cases import FAILING, OC, WINS, C, T

# The mechanics with four looks: batches of 2, Pocock-style spending for promotion, OBF-like
# for regressions (the defaults, tuned by bench/bench_noise.py, are tested on their own below),
# every case of a look decided at once (the wins first is test_paired_lead.py's).
CFG = PairedConfig(
    batch=2,
    spending="pocock",
    retire_spending="obf",
    max_repeats=8,
    futility_beta=None,
    wins_lead=False,
)


def samples_of(table: dict, kind: str = "failing", metric: str = OC) -> list[Sample]:
    """{case: (treatment values, control values)} → samples, repeats numbered per arm."""
    out = []
    for case, arms in table.items():
        for arm, values in zip((T, C), arms, strict=True):
            out += [
                Sample(case, kind, arm, i, {} if v is None else {metric: v})
                for i, v in enumerate(values)
            ]
    return out


def p_by_hand(table: dict, *, greater: bool = True) -> float:
    """One-sided p-value of the treatment sum, relabelling within each case, all listed."""
    observed = sum(sum(t) for t, _ in table.values())
    per_case = []
    for t, c in table.values():
        pooled = list(t) + list(c)
        per_case.append(
            [sum(pooled[i] for i in p) for p in combinations(range(len(pooled)), len(t))]
        )
    sums = [sum(x) for x in product(*per_case)]
    hits = [s for s in sums if (s >= observed - 1e-9 if greater else s <= observed + 1e-9)]
    return len(hits) / len(sums)


# --- spending and looks ---------------------------------------------------------------------


@pytest.mark.parametrize("spending", ["pocock", "obf", "bonferroni", "last"])
@pytest.mark.parametrize("looks", [1, 2, 4, 8])
def test_the_looks_together_spend_exactly_alpha(spending, looks):
    levels = [
        spent_by(k / looks, alpha=0.05, spending=spending)
        - spent_by((k - 1) / looks, alpha=0.05, spending=spending)
        for k in range(1, looks + 1)
    ]
    assert all(level > 0 for level in levels[-1:]) and all(level >= 0 for level in levels)
    assert sum(levels) == pytest.approx(0.05)


def test_spending_functions_have_their_textbook_values():
    assert spent_by(0.25, alpha=0.05, spending="pocock") == pytest.approx(
        0.05 * math.log(1 + (math.e - 1) / 4)
    )
    # Lan–DeMets O'Brien–Fleming: 2 − 2Φ(z_{0.975} / √t); at t = 1/4 that is 2 − 2Φ(3.92).
    assert spent_by(0.25, alpha=0.05, spending="obf") == pytest.approx(8.857e-5, rel=1e-3)
    assert spent_by(0.5, alpha=0.05, spending="bonferroni") == pytest.approx(0.025)
    assert spent_by(0.0, alpha=0.05, spending="pocock") == 0.0
    assert spent_by(0.99, alpha=0.05, spending="last") == 0.0
    assert spent_by(1.0, alpha=0.05, spending="last") == 0.05


@pytest.mark.parametrize(
    "repeats, index", [(0, 1), (1, 1), (2, 1), (3, 2), (4, 2), (6, 3), (7, 4), (8, 4)]
)
def test_a_look_is_numbered_by_the_batches_the_most_replayed_arm_has_had(repeats, index):
    samples = samples_of({"F1": ([1.0] * repeats, [])})
    at = look(samples, CFG)
    assert (at.index, at.count) == (index, 4)
    first = spent_by((index - 1) / 4, alpha=0.05, spending="pocock")
    assert at.level == pytest.approx(spent_by(index / 4, alpha=0.05, spending="pocock") - first)


# --- next batch -------------------------------------------------------------------------------


def test_the_first_batch_interleaves_arms_and_cases():
    assert next_requests([], FAILING[:2], CFG) == [
        ("F1", T), ("F1", C), ("F2", T), ("F2", C),
        ("F1", T), ("F1", C), ("F2", T), ("F2", C),
    ]  # fmt: skip


def test_a_batch_cut_short_is_completed_before_a_new_one_starts():
    samples = samples_of({"F1": ([1.0, 0.0], [1.0]), "F2": ([1.0, 1.0], [0.0, 0.0])})
    assert next_requests(samples, FAILING[:2], CFG) == [
        ("F1", C),
        ("F2", T),
        ("F2", C),
        ("F2", T),
        ("F2", C),
    ]


def test_the_arm_behind_catches_up_at_most_a_batch_at_a_time():
    samples = samples_of({"F1": ([1.0] * 4, [])})
    assert next_requests(samples, FAILING[:1], CFG) == [("F1", C), ("F1", C)]


def test_never_past_max_repeats_and_nothing_left_to_ask_at_the_end():
    cfg = replace(CFG, max_repeats=3)
    samples = samples_of({"F1": ([1.0] * 2, [0.0] * 2)})
    assert next_requests(samples, FAILING[:1], cfg) == [("F1", T), ("F1", C)]
    samples = samples_of({"F1": ([1.0] * 3, [0.0] * 3)})
    assert next_requests(samples, FAILING[:1], cfg) == []


def test_a_replay_that_scored_nothing_still_took_its_repeat():
    # Inconclusive replays come as samples without metrics: they count against max_repeats.
    samples = samples_of({"F1": ([None] * 8, [None] * 8)})
    assert next_requests(samples, FAILING[:1], CFG) == []


# --- promote ----------------------------------------------------------------------------------


def test_a_rule_that_rescues_every_case_is_promoted_at_the_first_look_with_its_exact_p_value():
    table = {f"F{i}": ([1.0, 1.0], [0.0, 0.0]) for i in (1, 2, 3)}
    verdict = decide_paired(samples_of(table), FAILING, CFG)
    assert verdict.outcome == "promote" and verdict.pending_reason is None
    improvement = verdict.evidence["improvement"]
    assert improvement["p_value"] == pytest.approx(p_by_hand(table)) == pytest.approx(1 / 216)
    assert improvement["method"] == "exact" and improvement["relabellings"] == 216
    assert improvement["effect"] == 1.0
    assert verdict.evidence["alpha_look"]["promote"] == pytest.approx(
        0.05 * math.log(1 + (math.e - 1) / 4)
    )
    assert verdict.reason == f"improved {OC}: effect +1.00 [+1.00, +1.00], p 0.00463"
    assert verdict.evidence["decisive"] == {"case": None, "metric": OC}


def test_the_same_evidence_that_promotes_at_the_last_look_waits_at_the_first():
    # p = 1/36 ≈ 0.028: below alpha, above what the first look may spend (≈ 0.018).
    table = {"F1": ([1.0, 1.0], [0.0, 0.0]), "F2": ([1.0, 1.0], [0.0, 0.0])}
    assert p_by_hand(table) == pytest.approx(1 / 36)
    first = decide_paired(samples_of(table), FAILING[:2], CFG)
    assert first.outcome == "pending" and first.pending_reason == "replay_inconclusive"
    one_look = PairedConfig(
        batch=8, spending="pocock", max_repeats=8, futility_beta=None
    )  # a single look spends all of alpha
    assert decide_paired(samples_of(table), FAILING[:2], one_look).outcome == "promote"


def test_pending_says_the_effect_its_interval_and_how_many_repeats_there_are():
    table = {
        "F1": ([1.0, 0.0], [0.0, 1.0]),
        "F2": ([1.0, 1.0], [1.0, 0.0]),
        "F3": ([0.0, 1.0], [0.0, 1.0]),
    }
    verdict = decide_paired(samples_of(table), FAILING, CFG)
    assert verdict.outcome == "pending"
    assert (
        verdict.reason == "effect +0.17 [−1.00, +1.00]; needs more samples: 2 of 8 repeats per case"
    )
    assert verdict.evidence["improvement"]["p_value"] == pytest.approx(p_by_hand(table))


def test_a_significant_effect_below_the_margin_does_not_promote():
    # Every treatment replay exactly 0.03 higher: significant, but less than the 0.05 margin.
    table = {f"F{i}": ([0.53] * 8, [0.50] * 8) for i in (1, 2, 3)}
    verdict = decide_paired(
        samples_of(table, metric="task_completion"), _deciding("task_completion"), CFG
    )
    assert verdict.evidence["improvement"]["significant"]
    assert (
        verdict.outcome == "retire"
    )  # and, every repeat spent, its upper bound is under the margin
    assert verdict.reason.startswith(
        "no improvement on task_completion: effect +0.03 [+0.03, +0.03]"
    )


def test_a_lower_is_better_metric_is_negated_before_it_is_tested():
    table = {f"F{i}": ([0.1, 0.1], [0.9, 0.9]) for i in (1, 2, 3)}
    cases = _deciding("latency")
    lower = replace(CFG, lower_is_better=frozenset({"latency"}))
    verdict = decide_paired(samples_of(table, metric="latency"), cases, lower)
    assert verdict.outcome == "promote" and verdict.evidence["improvement"][
        "effect"
    ] == pytest.approx(0.8)
    # Read the wrong way round it looks worse under treatment: stopped for futility.
    assert decide_paired(samples_of(table, metric="latency"), cases, CFG).outcome == "retire"


# --- retire -----------------------------------------------------------------------------------


def test_a_rule_that_breaks_the_protected_wins_is_retired_naming_metric_and_case():
    table = {"W1": ([0.0] * 8, [1.0] * 8), "W2": ([1.0] * 4 + [0.0] * 4, [1.0] * 8)}
    failing = {f"F{i}": ([0.0, 1.0] * 4, [1.0, 0.0] * 4) for i in (1, 2, 3)}
    samples = samples_of(failing) + samples_of(table, kind="win")
    verdict = decide_paired(samples, FAILING + WINS, CFG)
    assert verdict.outcome == "retire"
    row = next(r for r in verdict.evidence["regressions"] if r["kind"] == "win")
    assert row["cases"] == ["W1", "W2"] and row["case"] == "W1"
    assert row["by_case"] == {"W1": -1.0, "W2": -0.5}
    assert row["rejected"] and row["effect"] == pytest.approx(-0.75)
    assert verdict.reason.startswith(
        f"regressed {OC} on protected win W1 (−1.00); pooled over protected wins W1, W2: "
        "effect −0.75 ["
    )
    assert verdict.evidence["decisive"] == {"case": "W1", "metric": OC}


def test_the_regression_family_spends_most_of_its_level_on_the_deciding_metric():
    """Holm within two parts (docs/semantics.md#s17-4): the tests of the metric the rule is
    decided on share 80 % of the level, the other metrics' tests the rest."""
    # One look (the whole alpha), 5 tests.
    cfg = PairedConfig(family="cases", batch=8, max_repeats=8, futility_beta=None)
    outcomes = {"W1": ([0.0] * 5 + [1.0] * 3, [1.0] * 8), "W2": ([1.0] * 8, [1.0] * 8)}
    samples = samples_of({"F1": ([1.0] * 8, [1.0] * 8)})
    for case, arms in outcomes.items():
        for arm, values in zip((T, C), arms, strict=True):
            samples += [
                Sample(case, "win", arm, i, {OC: v, "coherence": 0.5}) for i, v in enumerate(values)
            ]
    verdict = decide_paired(samples, [FAILING[0], *WINS], cfg)
    rows = verdict.evidence["regressions"]
    assert len(rows) == 5  # F1 on its retire_on metric; each win on each metric

    def holm_over(part, share):
        raw = sorted(r["p_value"] for r in part)
        return [
            min(1.0, max((len(raw) - j) * raw[j] for j in range(i + 1)) / share)
            for i in range(len(raw))
        ]

    deciding = [r for r in rows if r["metric"] == OC]  # F1, W1, W2
    others = [r for r in rows if r["metric"] != OC]  # coherence on W1, W2
    assert (len(deciding), len(others)) == (3, 2)
    for part, share in ((deciding, 0.8), (others, 0.2)):
        got = sorted(r["p_holm"] for r in part)
        assert got == pytest.approx(sorted(holm_over(part, share)))
    # W1 lost 5 of 8 outcomes: p = C(11,3)/C(16,8) ≈ 0.0128. Holm over all five tests would
    # keep it (5p ≈ 0.064 > 0.05); within the deciding metric's part it is 3p / 0.8 ≈ 0.048.
    w1 = min(deciding, key=lambda r: r["p_value"])
    assert (w1["case"], w1["metric"]) == ("W1", OC)
    assert w1["p_value"] == pytest.approx(p_by_hand({"W1": outcomes["W1"]}, greater=False))
    assert w1["p_value"] == pytest.approx(165 / 12870)
    assert w1["p_holm"] == pytest.approx(3 * 165 / 12870 / 0.8) and w1["rejected"]
    assert [r for r in rows if r["rejected"]] == [w1]
    assert verdict.outcome == "retire" and verdict.evidence["decisive"] == {
        "case": "W1",
        "metric": OC,
    }


def test_a_dip_on_a_failing_case_counts_only_on_its_retire_on_metrics():
    dip = {f"F{i}": ([0.2] * 8, [0.9] * 8) for i in (1, 2, 3)}
    failing = samples_of(dip, metric="coherence")
    verdict = decide_paired(failing, FAILING, CFG)
    assert verdict.evidence["regressions"] == [] and verdict.outcome == "pending"
    blamed = [PairedCase(c.case_id, "failing", OC, frozenset({OC, "coherence"})) for c in FAILING]
    assert decide_paired(failing, blamed, CFG).outcome == "retire"


def test_no_improvement_retires_only_once_every_repeat_is_spent():
    table = {f"F{i}": ([0.5] * 8, [0.5] * 8) for i in (1, 2, 3)}
    cases = _deciding("task_completion")
    verdict = decide_paired(samples_of(table, metric="task_completion"), cases, CFG)
    assert verdict.outcome == "retire"
    assert verdict.reason == (
        "no improvement on task_completion: effect +0.00 [+0.00, +0.00], p 1; the upper bound "
        "stays below the margin 0.05 after 8 repeats per case"
    )
    six = {case: (t[:6], c[:6]) for case, (t, c) in table.items()}
    # An estimate of exactly 0 is not below zero: the sign boundary waits for the last look.
    assert decide_paired(samples_of(six, metric="task_completion"), cases, CFG).outcome == (
        "pending"
    )
    # The test-based boundary stops it a look early: 6 flat replays a case and arm rule out a
    # lift of 0.2.
    tested = replace(CFG, futility_beta=0.02)
    early = decide_paired(samples_of(six, metric="task_completion"), cases, tested)
    assert early.outcome == "retire" and early.reason.endswith("(a futility stop)")


def test_a_wide_interval_at_the_last_look_stays_pending_for_the_forward_trial():
    table = {f"F{i}": ([1.0, 0.0] * 4, [0.0, 1.0] * 4) for i in (1, 2, 3)}
    verdict = decide_paired(samples_of(table), FAILING, CFG)
    assert verdict.outcome == "pending" and verdict.pending_reason == "replay_inconclusive"
    assert "the interval still holds the margin after the last look" in verdict.reason


def test_an_inconclusive_last_look_says_how_many_more_repeats_would_decide():
    # docs/semantics.md#s21-3: +0.25 [−0.10, +0.60] at 8 repeats; at 16 the interval, √2
    # narrower, would clear 0 if the estimate held.
    table = {f"F{i}": ([1.0, 1.0, 1.0, 0.0] * 2, [0.0, 1.0, 0.0, 1.0] * 2) for i in (1, 2, 3)}
    verdict = decide_paired(samples_of(table), FAILING, CFG)
    assert verdict.outcome == "pending"
    assert verdict.reason == (
        "effect +0.25 [−0.10, +0.60]; the interval still holds the margin after the last look; "
        "about 8 more repeats per case and arm would decide (replay_max_repeats 8 → 16)"
    )


# --- missing metrics, determinism, evidence ---------------------------------------------------


def test_a_metric_absent_from_a_sample_is_skipped_never_scored_as_a_failure():
    table = {f"F{i}": ([1.0, 1.0], [0.0, 0.0]) for i in (1, 2, 3)}
    with_gaps = {f"F{i}": ([1.0, None, 1.0], [0.0, 0.0, None]) for i in (1, 2, 3)}
    full = decide_paired(samples_of(table), FAILING, CFG)
    gaps = decide_paired(samples_of(with_gaps), FAILING, CFG)
    assert gaps.evidence["improvement"]["p_value"] == full.evidence["improvement"]["p_value"]
    assert gaps.evidence["cases"]["F1"]["arms"][T] == {
        "replays": 3,
        "metrics": {OC: {"n": 2, "mean": 1.0, "sd": 0.0}},
    }


def test_no_comparison_without_both_arms_of_the_deciding_metric():
    verdict = decide_paired(samples_of({"F1": ([1.0, 1.0], [])}), FAILING[:1], CFG)
    assert verdict.outcome == "pending" and verdict.evidence["improvement"] is None
    assert (
        verdict.reason
        == "no comparison on the deciding metric yet; needs more samples: 0 of 8 repeats per case"
    )


def test_the_verdict_is_a_function_of_its_inputs_whatever_their_order():
    table = {
        f"F{i}": (
            [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0],
            [0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0],
        )
        for i in (1, 2, 3)
    }
    samples = samples_of(table)
    first = decide_paired(samples, FAILING, CFG)
    again = decide_paired(list(reversed(samples)), FAILING, CFG)
    assert first.evidence["improvement"]["method"] == "monte_carlo"
    assert first == again


def test_the_evidence_is_json_and_names_the_test_the_looks_and_the_replays_spent():
    table = {f"F{i}": ([1.0, 1.0], [0.0, 1.0]) for i in (1, 2, 3)}
    wins = {"W1": ([1.0, 1.0], [1.0, 1.0])}
    verdict = decide_paired(
        samples_of(table) + samples_of(wins, kind="win"), FAILING + WINS[:1], CFG
    )
    evidence = json.loads(json.dumps(verdict.evidence, allow_nan=False))
    assert evidence["replays"] == 16 and (evidence["look"], evidence["looks"]) == (1, 4)
    assert evidence["test"].startswith("permutation test") and evidence["alpha"] == 0.05
    assert evidence["cases"]["F1"]["arms"][C]["metrics"][OC] == {
        "n": 2,
        "mean": 0.5,
        "sd": pytest.approx(0.707107),
    }
    assert set(evidence["cases"]) == {"F1", "F2", "F3", "W1"}


@pytest.mark.parametrize(
    "bad",
    [
        {"alpha": 0},
        {"alpha": 1},
        {"max_repeats": 0},
        {"batch": 0},
        {"spending": "x"},
        {"family": "x"},
    ],
)
def test_a_config_that_makes_no_sense_is_refused(bad):
    with pytest.raises(ValueError):
        PairedConfig(**bad)


def _deciding(metric: str) -> list[PairedCase]:
    return [PairedCase(c.case_id, "failing", metric, frozenset({OC})) for c in FAILING]


def _rescue_and_break_one_win(repeats: int) -> list[Sample]:
    failing = {f"F{i}": ([1.0] * repeats, [0.0] * repeats) for i in (1, 2, 3)}
    wins = {"W1": ([0.0] * repeats, [1.0] * repeats), "W2": ([1.0] * repeats, [1.0] * repeats)}
    return samples_of(failing) + samples_of(wins, kind="win")


def test_a_rule_that_visibly_breaks_a_win_is_not_promoted_before_the_harm_can_show():
    # Look 1: the improvement is significant (p = 1/216) but one win's harm cannot be yet
    # (2 against 2: p ≥ 1/6); the win looks worse, so the promotion waits.
    verdict = decide_paired(_rescue_and_break_one_win(2), FAILING + WINS, CFG)
    assert verdict.outcome == "pending" and verdict.evidence["improvement"]["significant"]
    assert verdict.evidence["held_back_by"] == {"case": "W1", "metric": OC}
    assert verdict.reason == (
        f"improved {OC} (effect +1.00 [+1.00, +1.00]), but {OC} looks worse on W1 "
        "(effect −0.50 [−∞, +∞]); needs more samples: 2 of 8 repeats per case"
    )
    # Look 3: 6 against 6, p = 1/924 for the broken win, significant after Holm → retire.
    later = decide_paired(_rescue_and_break_one_win(6), FAILING + WINS, CFG)
    assert later.outcome == "retire" and later.evidence["decisive"] == {"case": "W1", "metric": OC}


@pytest.mark.parametrize(
    "treated, control, held",
    [
        # −0.10 with every replay agreeing: a visible regression, not yet significant.
        ([0.85, 0.9] * 2, [1.0, 0.95] * 2, True),
        # −0.10 on average, but the replays scatter by ±0.25: noise, not a reason to wait.
        ([0.5, 1.0] * 2, [0.8, 0.9] * 2, False),
    ],
)
def test_only_a_visible_regression_on_a_win_holds_back_a_promotion(treated, control, held):
    cfg = CFG
    failing = {f"F{i}": ([1.0] * 4, [0.0, 1.0] * 2) for i in (1, 2, 3)}
    win = samples_of({"W1": (treated, control)}, kind="win", metric="coherence")
    verdict = decide_paired(samples_of(failing) + win, FAILING + WINS[:1], cfg)
    # 70³ relabellings, drawn: the exact (15/70)³ ≈ 0.0098 within Monte Carlo error.
    assert verdict.evidence["improvement"]["p_value"] == pytest.approx((15 / 70) ** 3, abs=0.003)
    assert not any(r["rejected"] for r in verdict.evidence["regressions"])
    if held:
        assert verdict.outcome == "pending"
        assert verdict.evidence["held_back_by"] == {"case": "W1", "metric": "coherence"}
    else:
        assert verdict.outcome == "promote" and "held_back_by" not in verdict.evidence


# --- the defaults -------------------------------------------------------------------------------


def test_eight_repeats_are_two_looks_obf_for_promotion_and_regressions_at_the_last_look():
    # The defaults before the grid retuned them (test_paired_defaults.py has today's).
    cfg = PairedConfig(max_repeats=8, futility_beta=None, retire_spending="last", wins_lead=False)
    assert (cfg.alpha, cfg.promote_margin, cfg.regress_margin) == (0.05, 0.05, 0.05)
    assert (cfg.max_repeats, cfg.batch, cfg.family) == (8, 4, "pooled")
    assert (cfg.spending, cfg.retire_spending) == ("obf", "last")
    assert (cfg.futility, cfg.futility_beta) == (True, None)  # the sign boundary
    first = look(_rescue_and_break_one_win(4), cfg)
    assert (first.index, first.count) == (1, 2)
    assert first.level == pytest.approx(spent_by(0.5, alpha=0.05, spending="obf"))
    assert look(_rescue_and_break_one_win(4), cfg, "last").level == 0.0


def test_with_two_looks_a_clear_rescue_is_promoted_at_the_first_look():
    table = {f"F{i}": ([1.0] * 4, [0.0, 1.0, 0.0, 0.0]) for i in (1, 2, 3)}
    wins = {f"W{i}": ([1.0] * 4, [1.0] * 4) for i in (1, 2)}
    verdict = decide_paired(
        samples_of(table) + samples_of(wins, kind="win"),
        FAILING + WINS,
        PairedConfig(max_repeats=8, futility_beta=None),
    )
    assert verdict.outcome == "promote"
    assert verdict.evidence["replays"] == 40


def test_with_two_looks_a_broken_win_holds_back_then_retires_at_the_last_look():
    cfg = PairedConfig(max_repeats=8, futility_beta=None)
    first = decide_paired(_rescue_and_break_one_win(4), FAILING + WINS, cfg)
    assert first.outcome == "pending" and first.evidence["held_back_by"]["case"] == "W1"
    last = decide_paired(_rescue_and_break_one_win(8), FAILING + WINS, cfg)
    assert last.outcome == "retire" and last.evidence["decisive"] == {"case": "W1", "metric": OC}
    assert last.reason.startswith(f"regressed {OC} on protected win W1 (−1.00); pooled over")


# --- ties on a 0/1 deciding metric ----------------------------------------------------------


def _two_metrics(table: dict) -> list[Sample]:
    """{case: (treatment [(outcome, completion, coherence)], control [...])} → samples."""
    out = []
    for case, arms in table.items():
        for arm, rows in zip((T, C), arms, strict=True):
            out += [
                Sample(case, "failing", arm, i, {OC: o, "task_completion": tc, "coherence": co})
                for i, (o, tc, co) in enumerate(rows)
            ]
    return out


def test_the_rules_other_accountable_metric_breaks_the_deciding_metrics_ties():
    # One case, 2 against 2, outcome 1 0 against 0 0: on the outcome alone half the six
    # relabellings tie or beat the observed one (p = 1/2). Task completion (a retire_on metric:
    # the rule answers for it) breaks the ties: of the three relabellings that keep the success
    # in treatment, those whose completions sum to 0.9 + 0.2 = 1.1 or more are {0.9, 0.2} and
    # {0.9, 0.3}: p = 2/6. Coherence (not accountable) breaks nothing, whatever its values.
    cases = [PairedCase("F1", "failing", OC, frozenset({OC, "task_completion"}))]
    table = {"F1": ([(1.0, 0.9, 0.1), (0.0, 0.2, 0.1)], [(0.0, 0.1, 0.9), (0.0, 0.3, 0.9)])}
    verdict = decide_paired(_two_metrics(table), cases, CFG)
    improvement = verdict.evidence["improvement"]
    assert improvement["p_value"] == pytest.approx(2 / 6)
    assert improvement["metric"] == OC and improvement["effect"] == 0.5  # the outcome alone
    plain = [PairedCase("F1", "failing", OC, frozenset({OC}))]
    assert decide_paired(_two_metrics(table), plain, CFG).evidence["improvement"][
        "p_value"
    ] == pytest.approx(3 / 6)


def test_a_rescue_tied_on_the_outcome_is_promoted_when_completion_ranks_it_first():
    # Three cases, 2 against 2, outcome 1 1 against 1 0 in each: on the outcome alone
    # p = (1/2)³ = 1/8, never significant; every relabelling keeping both successes of a case
    # in treatment ties. Completion, higher on every treatment replay than on any control one,
    # puts the observed labelling alone at the top: p = 1/216.
    cases = [
        PairedCase(f"F{i}", "failing", OC, frozenset({OC, "task_completion"})) for i in (1, 2, 3)
    ]
    treated = [(1.0, 0.95, 0.5), (1.0, 0.9, 0.5)]
    control = [(1.0, 0.7, 0.5), (0.0, 0.2, 0.5)]
    table = {f"F{i}": (treated, control) for i in (1, 2, 3)}
    verdict = decide_paired(_two_metrics(table), cases, replace(CFG, batch=8))
    assert verdict.evidence["improvement"]["p_value"] == pytest.approx(1 / 216)
    assert verdict.outcome == "promote"
    outcome_only = {c: ([o for o, _, _ in t], [o for o, _, _ in k]) for c, (t, k) in table.items()}
    assert p_by_hand(outcome_only) == pytest.approx(1 / 8)


# --- the futility stop (non-binding) ------------------------------------------------------------

# Batches of 4, looks at 4 and at 8 repeats, the sign boundary: the defaults before the grid.
DEFAULTS = PairedConfig(max_repeats=8, futility_beta=None)
WORSE = {f"F{i}": ([0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.0]) for i in (1, 2, 3)}


def test_an_early_look_worse_under_treatment_retires_for_futility():
    verdict = decide_paired(samples_of(WORSE), FAILING, DEFAULTS)
    assert verdict.outcome == "retire" and verdict.evidence["look"] == 1
    assert verdict.evidence["improvement"]["effect"] == pytest.approx(-0.25)
    assert verdict.reason.startswith(f"no improvement on {OC}: effect −0.25 [")
    assert verdict.reason.endswith("; worse under treatment at look 1 of 2 (a futility stop)")


def test_without_the_futility_stop_the_same_look_waits_for_more_samples():
    verdict = decide_paired(samples_of(WORSE), FAILING, replace(DEFAULTS, futility=False))
    assert verdict.outcome == "pending"
    assert verdict.reason.endswith("needs more samples: 4 of 8 repeats per case")


@pytest.mark.parametrize(
    ("treatment", "control"),
    [
        ([1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]),  # no difference: effect 0
        ([1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]),  # better, not yet significant
    ],
)
def test_an_early_look_that_is_not_worse_is_not_stopped(treatment, control):
    table = {f"F{i}": (treatment, control) for i in (1, 2, 3)}
    assert decide_paired(samples_of(table), FAILING, DEFAULTS).outcome == "pending"


def test_the_last_look_decides_by_its_interval_not_by_futility():
    # Slightly worse after every repeat: the last look's own rule (§17.4) decides, the same
    # with or without the stop, which only ever ends a look before the last.
    table = {"F1": ([1.0, 0.0] * 4, [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0])}
    table |= {f"F{i}": ([1.0, 0.0] * 4, [0.0, 1.0] * 4) for i in (2, 3)}
    with_stop = decide_paired(samples_of(table), FAILING, DEFAULTS)
    without = decide_paired(samples_of(table), FAILING, replace(DEFAULTS, futility=False))
    assert with_stop.evidence["look"] == 2
    assert with_stop.evidence["improvement"]["effect"] < 0
    assert (with_stop.outcome, with_stop.reason) == (without.outcome, without.reason)
    assert "futility" not in with_stop.reason


LAST_AT_8 = PairedConfig(max_repeats=8)


def test_a_harm_still_visible_at_the_last_look_leaves_the_rule_pending_not_promoted():
    """docs/semantics.md#s17-4: the failing cases are rescued, but one win lost 3 of 8 outcomes
    (p 0.1, not significant) — visible, neither shown nor ruled out: pending, not promoted."""
    failing = {f"F{i}": ([1.0] * 8, [0.0] * 8) for i in (1, 2, 3)}
    # 8 repeats in looks of 4: these samples are the last look.
    wins = {"W1": ([1.0] * 5 + [0.0] * 3, [1.0] * 8), "W2": ([1.0] * 8, [1.0] * 8)}
    verdict = decide_paired(
        samples_of(failing) + samples_of(wins, kind="win"), FAILING + WINS, LAST_AT_8
    )
    assert verdict.evidence["improvement"]["significant"]
    assert not any(r["rejected"] for r in verdict.evidence["regressions"])
    assert verdict.outcome == "pending" and verdict.pending_reason == "replay_inconclusive"
    assert verdict.evidence["held_back_by"] == {"case": "W1", "metric": OC}
    assert verdict.reason.endswith("not shown significant after the last look, nor ruled out")
    # One lost outcome in eight is within two standard errors: promoted.
    wins["W1"] = ([1.0] * 7 + [0.0], [1.0] * 8)
    verdict = decide_paired(
        samples_of(failing) + samples_of(wins, kind="win"), FAILING + WINS, LAST_AT_8
    )
    assert verdict.outcome == "promote"


def test_before_the_last_look_a_harm_of_one_standard_error_holds_a_promotion():
    """docs/semantics.md#s17-4: at the first look a clear rescue waits while a win lost 2 of
    its 4 outcomes (−0.25 pooled, 1.7 standard errors; 2 would have let it through)."""
    failing = {f"F{i}": ([1.0] * 4, [0.0, 1.0, 0.0, 0.0]) for i in (1, 2, 3)}
    wins = {"W1": ([1.0, 0.0, 0.0, 1.0], [1.0] * 4), "W2": ([1.0] * 4, [1.0] * 4)}
    samples = samples_of(failing) + samples_of(wins, kind="win")
    verdict = decide_paired(samples, FAILING + WINS, PairedConfig())
    assert verdict.evidence["improvement"]["significant"]
    row = next(r for r in verdict.evidence["regressions"] if r["kind"] == "win")
    assert row["effect"] == pytest.approx(-0.25) and 1 < -row["effect"] / row["se"] < 2
    assert verdict.outcome == "pending"
    assert verdict.evidence["held_back_by"] == {"case": "W1", "metric": OC}
    # The wins untouched, the same rescue is promoted at that look.
    wins["W1"] = ([1.0] * 4, [1.0] * 4)
    samples = samples_of(failing) + samples_of(wins, kind="win")
    assert decide_paired(samples, FAILING + WINS, PairedConfig()).outcome == "promote"
