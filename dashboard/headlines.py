"""A verdict's headline built from the structured evidence on the page, never by re-reading
the engine's sentence: it names the case, the metric and the effect a reviewer can find in the
same page's tables, so it stays true whatever words the engine uses (docs/dashboard.md).

Pure: the evidence of a decision or of the latest verdict in, a `Headline` out. Which fact is
named is fixed here (the harm a reviewer would want to see first), not by the engine's choice
of the most significant test:

- retired on an attributable regression (semantics §7.7, §17.4): among the significant
  regression tests, the case the rule harmed most, on the rule's own metric if that is one of
  the metrics it harmed there, else on `outcome_correct`, else on its worst metric;
- promoted: the deciding metric pooled over the failing cases, and the case it helped most;
- retired for no improvement, or pending: the deciding metric's effect, and any protected win
  that visibly did worse although it was not (yet) tested significant.
"""

from dataclasses import dataclass, field, replace

from .presenters import interval, paired_figures, signed

KIND_WORDS = {"failing": "failing case", "win": "protected win"}
# The trust order of semantics §6 after the rule's own metric.
OUTCOME_METRIC = "outcome_correct"


@dataclass(frozen=True)
class Fact:
    """One measured effect a page can show: a case (or several, pooled), a metric, the effect
    and where it comes from."""

    kind: str
    metric: str
    effect: float | None
    case: str | None = None
    cases: tuple[str, ...] = ()
    treatment: float | None = None
    control: float | None = None
    original: float | None = None
    replayed: float | None = None
    ci: tuple[float | None, float | None] | None = None
    p_value: float | None = None
    p_words: str = ""

    @property
    def where(self) -> str:
        if self.case:
            return f"{KIND_WORDS.get(self.kind, self.kind)} {self.case}"
        noun = KIND_WORDS.get(self.kind, self.kind)
        return f"{noun}s {', '.join(self.cases)}" if self.cases else f"{noun}s"

    @property
    def words(self) -> str:
        """ "task_completion −0.74 on protected win S-024 (treatment 0.15, control 0.89)"."""
        text = f"{self.metric} {signed(self.effect)} on {self.where}"
        if self.treatment is not None and self.control is not None:
            text += f" (treatment {self.treatment:.2f}, control {self.control:.2f})"
        elif self.original is not None and self.replayed is not None:
            text += f" (original {self.original:.2f}, replayed {self.replayed:.2f})"
        if self.ci is not None:
            text += f", interval {interval(*self.ci)}"
        if self.p_value is not None:
            text += f", {self.p_words or 'p'} {self.p_value:.2g}"
        return text


@dataclass
class Headline:
    tone: str  # good | bad | pending | neutral: the colour of the verdict, nothing else
    lead: str
    facts: list[Fact] = field(default_factory=list)
    also: list[str] = field(default_factory=list)

    @property
    def metric(self) -> str | None:
        """The metric the page's matrix should show first: the one the headline names."""
        return self.facts[0].metric if self.facts else None

    @property
    def case(self) -> str | None:
        return self.facts[0].case if self.facts else None


@dataclass(frozen=True)
class Thresholds:
    """The settings a headline compares with (semantics §16)."""

    promote: float
    regress: float
    max_repeats: int
    trial_sessions: int


# --- paired evidence (semantics §17) ------------------------------------------------------------


def _arm_mean(figures: dict, case: str, arm: str, metric: str) -> float | None:
    arms = ((figures.get("cases") or {}).get(case) or {}).get("arms") or {}
    value = ((arms.get(arm) or {}).get("metrics") or {}).get(metric) or {}
    return value.get("mean")


def _case_fact(figures: dict, row: dict, case: str, **extra) -> Fact:
    return Fact(
        kind=row["kind"],
        metric=row["metric"],
        effect=row["by_case"][case],
        case=case,
        treatment=_arm_mean(figures, case, "treatment", row["metric"]),
        control=_arm_mean(figures, case, "control", row["metric"]),
        **extra,
    )


def _pooled_fact(row: dict, kind: str, *, p_words: str) -> Fact:
    ci = row.get("ci") or [None, None]
    tested = ci != [None, None]
    return Fact(
        kind=kind,
        metric=row["metric"],
        effect=row["effect"],
        cases=tuple(row.get("cases") or ()),
        ci=tuple(ci) if tested else None,
        p_value=row.get("p_holm", row.get("p_value")) if tested else None,
        p_words=p_words,
    )


def harm_facts(rows: list[dict], figures: dict, *, rule_metric: str) -> list[Fact]:
    """Per (case, metric) the effects the regression `rows` measured that went the wrong way,
    the case harmed most first, and within it the rule's own metric, then `outcome_correct`,
    then the worst."""
    pairs = [
        (row, case, effect)
        for row in rows
        for case, effect in (row.get("by_case") or {}).items()
        if effect < 0
    ]
    if not pairs:
        return []
    worst_effect = {}
    for _, case, effect in pairs:
        worst_effect[case] = min(effect, worst_effect.get(case, 0.0))

    def rank(pair):
        row, case, effect = pair
        metric = row["metric"]
        preferred = 0 if metric == rule_metric else 1 if metric == OUTCOME_METRIC else 2
        return (worst_effect[case], case, preferred, effect, metric)

    return [_case_fact(figures, row, case) for row, case, _ in sorted(pairs, key=rank)]


def _others_on(facts: list[Fact], case: str | None) -> str:
    rest = [f"{f.metric} {signed(f.effect)}" for f in facts[1:] if f.case == case]
    return f"on {case} it also lowered {', '.join(rest)}" if rest else ""


def _other_tests(rows: list[dict], named: Fact) -> list[str]:
    """The significant regression tests that do not cover the named case."""
    return [
        f"also significant: {row['metric']} on {_pooled_fact(row, row['kind'], p_words='').where}"
        f" (effect {signed(row['effect'])}, Holm-adjusted p {row.get('p_holm', 1):.2g})"
        for row in rows
        if named.case not in (row.get("cases") or ())
    ]


def _retired_on_harm(figures: dict, rejected: list[dict], rule_metric: str) -> Headline:
    facts = harm_facts(rejected, figures, rule_metric=rule_metric)
    if not facts:
        row = rejected[0]
        pooled = _pooled_fact(row, row["kind"], p_words="Holm-adjusted p")
        return Headline("bad", f"Retired: worse under treatment on {pooled.where}", [pooled])
    named = facts[0]
    lead = (
        f"Retired: {named.metric} worse under treatment than under control on {named.where} "
        f"({signed(named.effect)})"
    )
    also = [_others_on(facts, named.case), *_other_tests(rejected, named)]
    return Headline("bad", lead, facts[:1], [line for line in also if line])


def _best_case(figures: dict, improvement: dict, *, worst: bool = False) -> Fact | None:
    """The failing case the deciding metric improved most (`worst`: least), from the arms'
    means."""
    metric = improvement["metric"]
    if "+" in metric:  # cases decided on different metrics: no one case effect to name
        return None
    effects = {}
    for case in improvement.get("cases") or ():
        t, c = (_arm_mean(figures, case, arm, metric) for arm in ("treatment", "control"))
        if t is not None and c is not None:
            effects[case] = (t - c, t, c)
    if not effects:
        return None
    pick = min if worst else max
    case = pick(effects, key=lambda k: (effects[k][0], k))
    effect, t, c = effects[case]
    return Fact("failing", metric, round(effect, 6), case=case, treatment=t, control=c)


def _untested_harm(figures: dict, margins: Thresholds, rule_metric: str) -> list[str]:
    """Protected wins that visibly did worse although no test (yet) says so."""
    rows = [
        r
        for r in figures.get("regressions") or []
        if r.get("kind") == "win" and not r.get("rejected")
    ]
    facts = [f for f in harm_facts(rows, figures, rule_metric=rule_metric)]
    facts = [f for f in facts if f.effect is not None and f.effect <= -margins.regress]
    if not facts:
        return []
    worst = facts[0]
    tested = any((r.get("ci") or [None, None]) != [None, None] for r in rows)
    why = "not significant" if tested else "not tested at this look"
    return [f"{worst.where} did worse too: {worst.words} — {why}"]


def _improvement_fact(improvement: dict) -> Fact:
    return _pooled_fact(improvement, "failing", p_words="one-sided p")


def _promoted(figures: dict, margins: Thresholds, rule_metric: str) -> Headline:
    improvement = figures["improvement"]
    pooled = _improvement_fact(improvement)
    lead = (
        f"Promoted: {pooled.metric} better under treatment than under control on "
        f"{pooled.where} ({signed(pooled.effect)}, past the promote margin "
        f"{signed(margins.promote)})"
    )
    best = _best_case(figures, improvement)
    also = [f"most on {best.case}: {best.words}"] if best else []
    also += _untested_harm(figures, margins, rule_metric)
    return Headline("good", lead, [pooled], also)


def _no_improvement(figures: dict, margins: Thresholds, rule_metric: str) -> Headline:
    improvement = figures["improvement"]
    # A one-sided p of "treatment better" near 1 says nothing a reader needs here: the interval
    # (or the estimate's sign, at a futility stop) decided.
    pooled = replace(_improvement_fact(improvement), p_value=None)
    also = []
    if figures.get("look") == figures.get("looks"):
        lead = (
            f"Retired: no improvement on {pooled.metric} after {margins.max_repeats} repeats "
            f"per case and arm — the interval stays below the promote margin "
            f"{signed(margins.promote)}"
        )
    else:
        lead = (
            f"Retired at look {figures.get('look')} of {figures.get('looks')} (a futility "
            f"stop): {pooled.metric} was worse under treatment on {pooled.where} "
            f"({signed(pooled.effect)})"
        )
        worst = _best_case(figures, improvement, worst=True)
        also = [f"worst on {worst.case}: {worst.words}"] if worst else []
    return Headline("bad", lead, [pooled], also + _untested_harm(figures, margins, rule_metric))


def treatment_unread_count(figures: dict) -> tuple[int, bool]:
    """(treatment replays, whether none of them scored)."""
    arms = [(c.get("arms") or {}).get("treatment") or {} for c in figures["cases"].values()]
    replays = sum(a.get("replays", 0) for a in arms)
    scored = any((m or {}).get("n") for a in arms for m in (a.get("metrics") or {}).values())
    return replays, not scored


def treatment_unread(figures: dict) -> bool:
    """Whether the rule's treatment replays ran and none of them read the candidate."""
    if not figures.get("cases"):
        return False
    replays, unread = treatment_unread_count(figures)
    return bool(replays) and unread


def _fewest_repeats(figures: dict) -> int:
    arms = [
        a for c in (figures.get("cases") or {}).values() for a in (c.get("arms") or {}).values()
    ]
    return min((a.get("replays", 0) for a in arms), default=0)


def _pending(figures: dict, margins: Thresholds, rule_metric: str) -> Headline:
    improvement = figures.get("improvement")
    if improvement is None:
        replays, unread = treatment_unread_count(figures) if figures.get("cases") else (0, True)
        if replays and unread:
            lead = (
                f"Replay could not decide: none of its {replays} treatment replays read the "
                "candidate, so there is nothing to compare"
            )
        else:
            lead = "Replay could not decide yet: no comparison on the deciding metric"
        return Headline("pending", lead)
    pooled = _improvement_fact(improvement)
    held = figures.get("held_back_by")
    if figures.get("look") == figures.get("looks"):
        need = "after the last look its interval still holds the promote margin"
    else:
        need = f"needs more replays: {_fewest_repeats(figures)} of {margins.max_repeats} repeats"
        need += " per case and arm so far"
    lead = f"Pending: {pooled.metric} {signed(pooled.effect)} on {pooled.where}; {need}"
    also = []
    if held:
        also.append(f"promotion held back: {held['metric']} looks worse on {held['case']}")
    best = _best_case(figures, improvement)
    if best:
        also.append(f"most on {best.case}: {best.words}")
    return Headline("pending", lead, [pooled], also + _untested_harm(figures, margins, rule_metric))


def paired_headline(
    figures: dict, *, outcome: str, rule_metric: str, margins: Thresholds
) -> Headline:
    """The headline of a paired verdict (semantics §17.4) from its figures."""
    rejected = [r for r in figures.get("regressions") or [] if r.get("rejected")]
    if outcome == "retire" and rejected:
        return _retired_on_harm(figures, rejected, rule_metric)
    if outcome == "promote" and figures.get("improvement"):
        return _promoted(figures, margins, rule_metric)
    if outcome == "retire" and figures.get("improvement"):
        return _no_improvement(figures, margins, rule_metric)
    return _pending(figures, margins, rule_metric)


# --- one replay per case (semantics §7) ----------------------------------------------------------


def _single_fact(case: dict, metric: str) -> Fact | None:
    values = (case.get("metrics") or {}).get(metric)
    if not isinstance(values, dict) or not isinstance(values.get("delta"), int | float):
        return None
    return Fact(
        kind=case.get("kind", ""),
        metric=metric,
        effect=values["delta"],
        case=case.get("case"),
        original=values.get("original"),
        replayed=values.get("replayed"),
    )


def _attributable(case: dict) -> list[str]:
    entries = case.get("attribution") or []
    picked = [e for e in entries if e.get("decision") == "attributable"]
    picked.sort(key=lambda e: e.get("delta") if isinstance(e.get("delta"), int | float) else 0)
    return [e.get("metric", "") for e in picked] or [case.get("deciding_metric") or ""]


def single_headline(cases: list[dict], *, outcome: str, margins: Thresholds) -> Headline:
    """The headline of a §7 verdict: one replay per case against its recorded original."""
    regressed = [c for c in cases if c.get("regressed")]
    improved = [c for c in cases if c.get("improved")]
    if outcome == "retire" and regressed:
        fact = _single_fact(regressed[0], _attributable(regressed[0])[0])
        if fact:
            return Headline("bad", f"Retired: {fact.where} regressed on {fact.metric}", [fact])
    if outcome == "promote" and improved:
        fact = _single_fact(improved[0], improved[0].get("deciding_metric") or "")
        if fact:
            return Headline("good", f"Promoted: {fact.where} improved on {fact.metric}", [fact])
    failing = [
        f
        for c in cases
        if c.get("kind") == "failing" and (f := _single_fact(c, c.get("deciding_metric") or ""))
    ]
    if outcome == "retire" and failing:
        best = max(failing, key=lambda f: f.effect)
        lead = (
            f"Retired: no improvement — the best failing case, {best.case}, moved "
            f"{best.metric} by {signed(best.effect)} (promote margin {signed(margins.promote)})"
        )
        return Headline("bad", lead, [best])
    return Headline("pending", "Replay could not decide: no scored failing case")


# --- forward trials (semantics §8) -----------------------------------------------------------------


def trial_headline(trial: dict, *, outcome: str, reason: str, needed: int) -> Headline:
    """The headline of a forward-trial verdict from its figures. A trial design whose evidence
    has other fields is headed by the engine's own reason."""
    keys = {"trial_rate", "baseline_rate", "observed_sessions"}
    if not keys <= set(trial):
        tone = {"promote": "good", "retire": "bad"}.get(outcome, "pending")
        return Headline(tone, f"Forward trial: {reason}" if reason else "Forward trial")
    sessions, rate, base = trial["observed_sessions"], trial["trial_rate"], trial["baseline_rate"]
    if outcome == "pending" or rate is None:
        return Headline(
            "pending", f"Forward trial in progress: {sessions} of {needed} sessions observed"
        )
    breached = round(rate * sessions)
    figures = (
        f"{breached} of {sessions} sessions showed the target condition (rate {rate:.2f}) "
        f"against a baseline of {base:.2f}"
    )
    if outcome == "promote":
        return Headline("good", f"Promoted by forward trial: {figures}")
    return Headline("bad", f"Retired by forward trial: {figures}, no better than the baseline")


# --- any rule ---------------------------------------------------------------------------------------


def decision_headline(
    *, type_: str, actor: str, evidence: dict, rule_metric: str, margins: Thresholds
) -> Headline:
    """The headline of the event that decided a rule (semantics §10)."""
    if type_ == "rule_retired_by_reviewer":
        merged = evidence.get("merged_into")
        lead = f"Retired by reviewer {actor}: {evidence.get('reason', '')}"
        return Headline("bad", lead, also=[f"merged into {merged}"] if merged else [])
    outcome = "promote" if type_ == "rule_promoted" else "retire"
    return verdict_headline(evidence, outcome=outcome, rule_metric=rule_metric, margins=margins)


def verdict_headline(
    evidence: dict, *, outcome: str, rule_metric: str, margins: Thresholds
) -> Headline:
    """The headline of a decision's evidence (`rule_promoted`/`rule_retired`) or, with
    `details` inside, of a `validation_verdict`."""
    details = evidence.get("details")
    replay = (details or {}).get("replay") or {}
    paired = evidence.get("paired") or replay.get("paired")
    validator = evidence.get("validator")
    if validator == "forward_trial":
        trial = evidence.get("trial") or (details or {}).get("trial") or {}
        return trial_headline(
            trial, outcome=outcome, reason=evidence.get("reason", ""), needed=margins.trial_sessions
        )
    if paired:
        return paired_headline(paired, outcome=outcome, rule_metric=rule_metric, margins=margins)
    return single_headline(evidence.get("cases") or [], outcome=outcome, margins=margins)


def candidate_headline(
    *,
    latest: dict | None,
    paired: dict | None,
    waiting: str,
    rule_metric: str,
    margins: Thresholds,
) -> Headline:
    """A candidate's headline: its latest verdict (`validation_verdict` evidence), and when
    that came from the forward trial, what its paired replays showed before it. With no
    verdict to read, `waiting` (its pending reason in words) is all there is to say."""
    if latest is None:
        return Headline("neutral", waiting[:1].upper() + waiting[1:])
    outcome = latest.get("outcome") or "pending"
    head = verdict_headline(latest, outcome=outcome, rule_metric=rule_metric, margins=margins)
    replayed = ((latest.get("details") or {}).get("replay") or {}).get("paired")
    if paired and not replayed:
        figures = paired_figures(paired)
        if figures:
            before = paired_headline(
                figures, outcome="pending", rule_metric=rule_metric, margins=margins
            )
            head.also.insert(0, before.lead)
            head.facts += before.facts
    return head
