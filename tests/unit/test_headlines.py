"""A verdict's headline is built from the structured evidence (dashboard/headlines.py): it
names the case, the metric and the effect the page shows, whatever the engine's sentence says.
The evidence here is what the engine itself writes (`decide_paired` on fixed replays), not a
hand-made copy of it. No database."""

import pytest

from dashboard import headlines
from dashboard.headlines import Thresholds
from replay.engine import paired

LIMITS = Thresholds(promote=0.05, regress=0.05, max_repeats=8, trial_sessions=5)
FAILING = [f"F-{i}" for i in (1, 2, 3)]
WINS = ["S-1", "S-2"]


def evidence(values: dict, *, repeats: int = 4, retire_on=("task_completion",)) -> dict:
    """The paired figures `decide_paired` writes for three failing cases and two wins, from
    `values[(case, arm)] = {metric: value}` (cases missing from it: 0.3 failing, 0.9 won)."""
    cases = [
        paired.PairedCase(c, "failing", "task_completion", frozenset(retire_on)) for c in FAILING
    ] + [paired.PairedCase(c, "win", None) for c in WINS]
    samples = []
    for case in cases:
        base = 0.3 if case.case_kind == "failing" else 0.9
        for arm in paired.ARMS:
            metrics = values.get((case.case_id, arm), {"task_completion": base})
            for repeat in range(repeats):
                jitter = {m: v + 0.01 * (repeat % 2) for m, v in metrics.items()}
                samples.append(paired.Sample(case.case_id, case.case_kind, arm, repeat, jitter))
    verdict = paired.decide_paired(
        samples,
        cases,
        paired.PairedConfig(
            max_repeats=8, futility_beta=None, retire_spending="last", wins_lead=False
        ),
    )
    return {"outcome": verdict.outcome, "reason": verdict.reason, **verdict.evidence}


def headline_of(figures: dict, *, rule_metric: str = "task_completion") -> headlines.Headline:
    return headlines.paired_headline(
        figures, outcome=figures["outcome"], rule_metric=rule_metric, margins=LIMITS
    )


def harmful_win(repeats: int = 8) -> dict:
    """Failing cases helped a little; protected win S-2 broken on two metrics."""
    values = {(c, "treatment"): {"task_completion": 0.5} for c in FAILING}
    values[("S-2", "treatment")] = {"task_completion": 0.15, "outcome_correct": 0.0}
    values[("S-2", "control")] = {"task_completion": 0.89, "outcome_correct": 1.0}
    return evidence(values, repeats=repeats)


# --- retired on harm -------------------------------------------------------------------------------


def test_a_retirement_on_harm_names_the_win_the_rule_broke_on_its_own_metric():
    figures = harmful_win()
    assert figures["outcome"] == "retire"
    head = headline_of(figures)
    (fact,) = head.facts
    assert (fact.case, fact.kind, fact.metric) == ("S-2", "win", "task_completion")
    assert fact.effect == pytest.approx(-0.74)
    # The effect is the one the matrix shows: treatment mean − control mean of that case.
    assert fact.effect == pytest.approx(fact.treatment - fact.control)
    assert head.tone == "bad" and head.metric == "task_completion" and head.case == "S-2"
    assert head.lead == (
        "Retired: task_completion worse under treatment than under control on protected win "
        "S-2 (\u22120.74)"
    )
    assert "on S-2 it also lowered outcome_correct \u22121.00" in head.also


def test_the_worst_case_comes_first_and_outcome_correct_before_other_metrics():
    figures = harmful_win()
    rows = [r for r in figures["regressions"] if r["rejected"]]
    facts = headlines.harm_facts(rows, figures, rule_metric="coherence")
    # The rule's own metric did not move: outcome_correct, the first of the trust order, leads.
    assert [(f.case, f.metric) for f in facts[:2]] == [
        ("S-2", "outcome_correct"),
        ("S-2", "task_completion"),
    ]
    assert all(f.effect < 0 for f in facts)


def test_the_headline_ignores_the_engines_sentence():
    figures = harmful_win()
    figures["reason"] = "regressed something else entirely on F-9"
    assert "F-9" not in headline_of(figures).lead and "S-2" in headline_of(figures).lead


def test_other_significant_regressions_are_listed_with_their_holm_p_value():
    values = {(c, "treatment"): {"task_completion": 0.0} for c in FAILING}
    values |= {(c, "control"): {"task_completion": 0.9} for c in FAILING}
    values[("S-2", "treatment")] = {"task_completion": 0.1}
    figures = evidence(values, repeats=8)
    head = headline_of(figures)
    assert (head.facts[0].case, head.facts[0].effect) == ("F-1", pytest.approx(-0.9))
    (win_row,) = [r for r in figures["regressions"] if r["kind"] == "win"]
    assert win_row["rejected"]
    assert head.also == [
        "also significant: task_completion on protected wins S-1, S-2 (effect \u22120.40, "
        f"Holm-adjusted p {win_row['p_holm']:.2g})"
    ]


# --- promoted, no improvement, pending -------------------------------------------------------------


def test_a_promotion_names_the_failing_cases_the_effect_and_the_case_helped_most():
    values = {(c, "treatment"): {"task_completion": 0.9} for c in FAILING}
    values[("F-2", "treatment")] = {"task_completion": 0.95}
    figures = evidence(values)
    assert figures["outcome"] == "promote"
    head = headline_of(figures)
    (fact,) = head.facts
    assert fact.cases == ("F-1", "F-2", "F-3") and fact.metric == "task_completion"
    assert fact.p_words == "one-sided p" and fact.p_value == figures["improvement"]["p_value"]
    assert head.lead.startswith("Promoted: task_completion better under treatment than under")
    assert head.also[0].startswith("most on F-2: task_completion +0.65")


def test_a_futility_stop_names_the_worst_case_and_a_win_that_did_worse_untested():
    values = {(c, "treatment"): {"task_completion": 0.15} for c in FAILING}
    values[("S-2", "treatment")] = {"task_completion": 0.15}
    figures = evidence(values, repeats=4)
    assert figures["outcome"] == "retire" and figures["look"] == 1
    head = headline_of(figures)
    assert head.lead.startswith("Retired at look 1 of 2 (a futility stop): task_completion was")
    # "p 1" for "treatment better" is no news to a reader: the sign decided.
    assert head.facts[0].p_value is None
    assert any(line.startswith("worst on F-") for line in head.also)
    (win,) = [line for line in head.also if line.startswith("protected win S-2 did worse too")]
    assert "not tested at this look" in win and "\u22120.75" in win


def test_no_improvement_after_every_repeat_says_the_interval_stays_below_the_margin():
    figures = evidence({}, repeats=8)
    assert figures["outcome"] == "retire" and figures["look"] == figures["looks"]
    head = headline_of(figures)
    assert head.lead == (
        "Retired: no improvement on task_completion after 8 repeats per case and arm — the "
        "interval stays below the promote margin +0.05"
    )
    assert head.facts[0].p_value is None


def test_a_pending_rule_says_what_it_needs_in_the_same_words_as_its_figures():
    values = {("F-1", "treatment"): {"task_completion": 0.7}}
    figures = evidence(values, repeats=4)
    assert figures["outcome"] == "pending"
    head = headline_of(figures)
    assert head.tone == "pending"
    assert "needs more replays: 4 of 8 repeats per case and arm so far" in head.lead
    assert head.also[0].startswith("most on F-1")


def test_a_candidate_no_treatment_replay_read_says_so():
    figures = evidence({}, repeats=4)
    for body in figures["cases"].values():
        body["arms"]["treatment"]["metrics"] = {}
    figures["improvement"], figures["regressions"] = None, []
    head = headline_of({**figures, "outcome": "pending"})
    assert head.lead == (
        "Replay could not decide: none of its 20 treatment replays read the candidate, so "
        "there is nothing to compare"
    )
    assert headlines.treatment_unread(figures)


# --- the single design, forward trials, reviewers --------------------------------------------------


def single_case(case, kind, original, replayed, **flags) -> dict:
    delta = round(replayed - original, 6)
    return {
        "case": case,
        "kind": kind,
        "deciding_metric": "task_completion" if kind == "failing" else None,
        "metrics": {
            "task_completion": {"original": original, "replayed": replayed, "delta": delta}
        },
        "attribution": [
            {"metric": "task_completion", "delta": delta, "decision": flags.pop("decision", "")}
        ],
        **flags,
    }


@pytest.mark.parametrize(
    ("outcome", "cases", "lead"),
    [
        (
            "retire",
            [
                single_case("F-1", "failing", 0.2, 0.25),
                single_case("S-1", "win", 0.9, 0.6, regressed=True, decision="attributable"),
            ],
            "Retired: protected win S-1 regressed on task_completion",
        ),
        (
            "promote",
            [single_case("F-1", "failing", 0.2, 0.9, improved=True)],
            "Promoted: failing case F-1 improved on task_completion",
        ),
        (
            "retire",
            [single_case("F-1", "failing", 0.2, 0.22), single_case("F-2", "failing", 0.3, 0.31)],
            "Retired: no improvement — the best failing case, F-1, moved task_completion by "
            "+0.02 (promote margin +0.05)",
        ),
    ],
)
def test_a_single_design_verdict_names_its_case_from_the_deltas(outcome, cases, lead):
    head = headlines.single_headline(cases, outcome=outcome, margins=LIMITS)
    assert head.lead == lead
    assert head.facts[0].original is not None and head.facts[0].replayed is not None


@pytest.mark.parametrize(
    ("outcome", "trial", "lead"),
    [
        (
            "promote",
            {"trial_rate": 0.2, "baseline_rate": 0.8, "observed_sessions": 5},
            "Promoted by forward trial: 1 of 5 sessions showed the target condition (rate "
            "0.20) against a baseline of 0.80",
        ),
        (
            "retire",
            {"trial_rate": 0.4, "baseline_rate": 0.3, "observed_sessions": 5},
            "Retired by forward trial: 2 of 5 sessions showed the target condition (rate 0.40) "
            "against a baseline of 0.30, no better than the baseline",
        ),
        (
            "pending",
            {"trial_rate": None, "baseline_rate": 0.7, "observed_sessions": 2},
            "Forward trial in progress: 2 of 5 sessions observed",
        ),
        ("retire", {"arms": {}}, "Forward trial: made it worse"),
    ],
)
def test_a_forward_trial_verdict_reads_its_figures(outcome, trial, lead):
    evidence_ = {"validator": "forward_trial", "trial": trial, "reason": "made it worse"}
    head = headlines.verdict_headline(
        evidence_, outcome=outcome, rule_metric="task_completion", margins=LIMITS
    )
    assert head.lead == lead


def test_a_reviewers_retirement_is_headed_by_the_reviewer_and_the_reason():
    head = headlines.decision_headline(
        type_="rule_retired_by_reviewer",
        actor="rita",
        evidence={"reason": "duplicate of C-001", "merged_into": "C-001"},
        rule_metric="",
        margins=LIMITS,
    )
    assert head.lead == "Retired by reviewer rita: duplicate of C-001"
    assert head.also == ["merged into C-001"]


def test_a_candidate_without_a_verdict_says_what_it_waits_for():
    head = headlines.candidate_headline(
        latest=None,
        paired=None,
        waiting="not yet attempted",
        rule_metric="task_completion",
        margins=LIMITS,
    )
    assert (head.tone, head.lead) == ("neutral", "Not yet attempted")


def test_a_candidate_in_its_trial_also_says_what_its_replays_showed():
    figures = evidence({}, repeats=4)
    for body in figures["cases"].values():
        body["arms"]["treatment"]["metrics"] = {}
    figures["improvement"], figures["regressions"] = None, []
    replayed = {"details": {"replay": {"paired": figures}}}
    latest = {
        "outcome": "pending",
        "validator": "forward_trial",
        "details": {
            "trial": {"trial_rate": None, "baseline_rate": 0.7, "observed_sessions": 0},
            "replay": None,
        },
    }
    head = headlines.candidate_headline(
        latest=latest, paired=replayed, waiting="", rule_metric="task_completion", margins=LIMITS
    )
    assert head.lead == "Forward trial in progress: 0 of 5 sessions observed"
    assert head.also[0].startswith("Replay could not decide: none of its 20 treatment replays")
