"""All of the dashboard's words and colours, from data the selectors read: one vocabulary
for counts and reasons (docs/dashboard.md), attribution decisions in words, deltas coloured
against the margins, and the rule page's paired evidence (semantics §17.5) — the case × arm
matrix of replays, its flips and the noise floor the control arm measures. Pure functions over
rows already read: no database."""

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from lifecycle.selectors.rules import NOT_ATTEMPTED, CaseRow

ARMS = ("treatment", "control")
SORTS = ("cases", "regression")
# Replay metrics are scores in [0, 1]: a sample "passes" on a metric at or past the middle.
PASS_AT = 0.5
KINDS = {"failure": "failing", "success": "win"}
SHORT_OUTCOMES = {
    "candidate_not_exercised": "not read",
    "inconclusive": "inconclusive",
    "env_wait_timeout": "env wait",
}


# --- One vocabulary (docs/dashboard.md) --------------------------------------------------------

VALIDATOR_WORDS = {"replay": "replay", "forward_trial": "forward trial"}
# Semantics §10's pending reasons as the dashboard says them. "Replay inconclusive" covers both
# designs: under §17 it means "no decision yet from the paired evidence", under §7 that the
# backend scored nothing usable; a rule's page says which.
PENDING_WORDS = {
    NOT_ATTEMPTED: "not yet attempted",
    "": "no verdict yet",
    "trial_in_progress": "forward trial in progress: waiting for sessions",
    "no_matching_replayable_case": "no replayable failing case matches its signature",
    "replay_inconclusive": "replay inconclusive: its replays neither promote nor retire it yet",
    "candidate_not_exercised": "not exercised: the replayed agent never read the candidate",
    "env_wait_timeout": "the replay environment never signalled that execution started",
    "round_budget_exhausted": "the round's time budget ran out before it; the trial cannot "
    "decide yet",
}
ARM_WORDS = {"treatment": "treatment (candidate in force)", "control": "control (candidate hidden)"}


def validator_words(validator: str) -> str:
    """`forward_trial` as people write it; "—" for none yet."""
    return VALIDATOR_WORDS.get(validator, validator.replace("_", " ")) if validator else "—"


def waiting_words(rule) -> str:
    """A candidate's pending reason in words; "not yet attempted" and "no verdict yet" apart
    (semantics §10)."""
    if rule.pending_reason:
        return PENDING_WORDS.get(rule.pending_reason, rule.pending_reason)
    return PENDING_WORDS[NOT_ATTEMPTED if rule.first_attempted_at is None else ""]


def pending_rows(counts: list[tuple[str, int]]) -> list[tuple[str, str, int]]:
    """(reason, words, count) for the overview's table of pending candidates."""
    return [(reason, PENDING_WORDS.get(reason, reason), n) for reason, n in counts]


def signed(value, digits: int = 2) -> str:
    """A delta as people read it: explicit sign, typographic minus; "—" for no number."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "—"
    return f"{value:+.{digits}f}".replace("-", "\u2212")


def interval(low, high) -> str:
    """[−0.16, +0.43]; an open end (null in the evidence) is "open", never ±∞."""
    ends = ["open" if x is None else signed(x) for x in (low, high)]
    return f"[{ends[0]}, {ends[1]}]"


# --- Replay cases in words and colours (semantics §7.6–§7.8) ----------------------------------

_DECISION_WORDS = {
    "attributable": "attributable regression",
    "not_attributable": "not attributable",
    "improved": "improved",
    "within_margin": "within margin",
}


def attribution_words(entry: dict) -> str:
    """One attribution decision in words, e.g. "coherence −0.09: not attributable — not in
    retire_on" (semantics §7.7)."""
    decision = entry.get("decision", "")
    words = _DECISION_WORDS.get(decision, decision.replace("_", " "))
    why = entry.get("why") or ("not in retire_on" if decision == "not_attributable" else "")
    if why.lower().startswith(words):
        # The engine's reason often restates the decision ("improved past the promote margin").
        why = why[len(words) :].strip()
    delta = entry.get("delta")
    metric = entry.get("metric", "?")
    head = f"{metric} {signed(delta)}" if isinstance(delta, int | float) else metric
    return f"{head}: {words}" + (f" — {why}" if why else "")


def attribution_lines(entries: list[dict]) -> list[str]:
    """Each decision that mattered in words; the metrics that stayed within the margins are
    named together on one line, so the decisive ones stand out."""
    lines = [attribution_words(e) for e in entries if e.get("decision") != "within_margin"]
    quiet = [e.get("metric", "?") for e in entries if e.get("decision") == "within_margin"]
    if quiet:
        lines.append(f"within margin: {', '.join(quiet)}")
    return lines


def delta_class(delta, *, promote_margin: float, regress_margin: float) -> str:
    """Red at or past the regression margin, green at or past the promotion margin
    (semantics §7.7–8)."""
    if not isinstance(delta, int | float):
        return "delta-flat"
    if delta <= -regress_margin:
        return "delta-bad"
    if delta >= promote_margin:
        return "delta-good"
    return "delta-flat"


def case_view(row: CaseRow, *, promote_margin: float, regress_margin: float) -> dict:
    """A replayed case as the per-replay table shows it: each metric as measured, with its
    delta from the recorded original where there is one (semantics §7.6; a paired replay is
    compared with the other arm, not with the original), and the attribution in words."""
    margins = {"promote_margin": promote_margin, "regress_margin": regress_margin}
    metrics = [
        {
            **m,
            "delta_text": signed(m["delta"]) if isinstance(m["delta"], int | float) else "",
            "css": delta_class(m["delta"], **margins),
        }
        for m in row.metrics
    ]
    return {
        "row": row,
        "metrics": metrics,
        "has_original": any(m["original"] is not None for m in row.metrics),
        "attribution": attribution_lines(row.attribution),
        "kind": "protected win" if row.kind == "win" else row.kind,
    }


# --- The corpus gate and the extraction diff (semantics §11, §12) -------------------------------

_GATE_LISTS = (
    ("prevented", "Fired on failures (prevented)"),
    ("broken", "Fired on successes (broken)"),
    ("near_misses", "Fired on near misses"),
)


def gate_columns(gate: dict) -> list[dict]:
    """The lexical and signature gates side by side (semantics §11), each with the trajectories
    it fired on, so a success the lexical matcher breaks is visible next to the signature
    result."""
    columns = []
    for matcher in ("lexical", "signature"):
        report = gate.get(matcher) or {}
        fired = report.get("fired") or {}
        lists = [(label, fired.get(key, [])) for key, label in _GATE_LISTS]
        columns.append({**report, "matcher": matcher, "fired_lists": lists})
    return columns


def extraction_rows(parts: list[dict]) -> list[tuple[dict, str]]:
    """The extraction diff's rows with their labels (Trigger, Directive)."""
    return [(part, part["part"].capitalize()) for part in parts]


EXTRACTION_VERDICT_WORDS = {
    "match": "the same rule as expected",
    "partial": "partly the expected rule",
    "miss": "a different rule from the one expected",
    "uncertain": "uncertain — a reviewer decides (the comparator is not sure either way)",
}


def extraction_words(extraction: dict) -> str:
    """The comparator's verdict in words, from its fields — never its free text, where "p"
    is a probability, not a p-value (semantics §12)."""
    words = EXTRACTION_VERDICT_WORDS.get(extraction.get("verdict") or "", "not scored")
    conflicts = [str(c) for c in extraction.get("conflicts") or []]
    return words + (f" — {'; '.join(conflicts)}" if conflicts else "")


@dataclass
class Chip:
    repeat: int
    round_id: int | None
    outcome: str  # the replay's outcome (semantics §7.5); only "scored" has a value
    value: float | None
    passed: bool | None
    flip: bool = False


@dataclass
class Cell:
    arm: str
    chips: list[Chip]
    n: int
    mean: float | None
    sd: float | None
    majority: bool | None  # pass / fail for most scored samples; None on a tie or none

    @property
    def flips(self) -> int:
        return sum(c.flip for c in self.chips)


@dataclass
class MatrixRow:
    case: str
    kind: str
    counted: bool  # selected for the latest verdict; older cases keep rows but stop counting
    treatment: Cell
    control: Cell
    effect: float | None  # treatment − control mean, oriented so that positive is better
    disagree: bool = field(default=False)  # the arms' majorities differ

    @property
    def cells(self) -> tuple[Cell, Cell]:
        return self.treatment, self.control


def paired_figures(verdict: dict | None) -> dict | None:
    """The paired figures inside a `validation_verdict`'s evidence, if it has any."""
    replay = ((verdict or {}).get("details") or {}).get("replay") or {}
    return replay.get("paired")


def default_metric(metrics: list[str], *, preferred: list[str | None]) -> str | None:
    """The metric the matrix shows first: the first of `preferred` the replays measured (the
    metric the headline names, then the rule's own), else the first measured."""
    return next((m for m in preferred if m in metrics), metrics[0] if metrics else None)


def metrics_measured(samples: list[dict]) -> list[str]:
    return sorted({m for s in samples for m in s["metrics"]})


def _passed(value: float, lower_is_better: bool) -> bool:
    return value <= PASS_AT if lower_is_better else value >= PASS_AT


def _cell(arm: str, rows: list[dict], metric: str, lower: bool) -> Cell:
    chips = []
    for s in rows:
        value = s["metrics"].get(metric) if s["outcome"] == "scored" else None
        value = float(value) if isinstance(value, int | float) else None
        passed = None if value is None else _passed(value, lower)
        chips.append(Chip(s["repeat"], s["round_id"], s["outcome"], value, passed))
    values = [c.value for c in chips if c.value is not None]
    passes = sum(bool(c.passed) for c in chips if c.passed is not None)
    fails = len(values) - passes
    majority = None if passes == fails else passes > fails
    for chip in chips:
        chip.flip = majority is not None and chip.passed is not None and chip.passed != majority
    return Cell(
        arm=arm,
        chips=chips,
        n=len(values),
        mean=statistics.fmean(values) if values else None,
        sd=statistics.stdev(values) if len(values) > 1 else None,
        majority=majority,
    )


def _case_order(samples: list[dict], figures: dict | None) -> list[tuple[str, str, bool]]:
    """(case, kind, counted): the verdict's cases in its order (failing first, then wins), then
    any case no longer selected, failing first."""
    by_case = (figures or {}).get("cases") or {}
    # The verdict's order (newest first per kind) is its `case_order`: JSON objects stored in
    # PostgreSQL's jsonb come back with their keys reordered.
    ids = (figures or {}).get("case_order") or list(by_case)
    counted = [(case, by_case[case]) for case in ids if case in by_case]
    order = [(case, body.get("kind", ""), True) for case, body in counted]
    seen = {case for case, _, _ in order}
    rest = {s["case_id"]: KINDS.get(s["case__kind"], s["case__kind"]) for s in samples}
    extra = sorted((kind != "failing", case) for case, kind in rest.items() if case not in seen)
    order += [(case, rest[case], False) for _, case in extra]
    return sorted(order, key=lambda o: (not o[2], o[1] != "failing"))


def sample_matrix(
    samples: list[dict],
    *,
    figures: dict | None,
    metric: str,
    lower_is_better: frozenset[str] = frozenset(),
    sort: str = "cases",
) -> list[MatrixRow]:
    """One row per case, a cell per arm with the repeats' values of `metric`. A chip is a flip
    when it passes where most of its arm fails (or the reverse); a row is flagged when the two
    arms' majorities disagree. `sort="regression"` puts the case the rule harms most first."""
    by_cell: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for s in samples:
        by_cell[(s["case_id"], s["arm"])].append(s)
    lower = metric in lower_is_better
    rows = []
    for case, kind, counted in _case_order(samples, figures):
        treatment, control = (_cell(arm, by_cell[(case, arm)], metric, lower) for arm in ARMS)
        effect = None
        if treatment.mean is not None and control.mean is not None:
            effect = (treatment.mean - control.mean) * (-1 if lower else 1)
        disagree = None not in (treatment.majority, control.majority) and (
            treatment.majority != control.majority
        )
        rows.append(MatrixRow(case, kind, counted, treatment, control, effect, disagree))
    if sort == "regression":
        rows.sort(key=lambda r: (r.effect is None, r.effect if r.effect is not None else 0))
    return rows


@dataclass
class NoiseFloor:
    metric: str
    sd: float
    samples: int
    cases: int


def noise_floor(samples: list[dict]) -> list[NoiseFloor]:
    """Per metric, the spread of the control arm's scored samples around their own case's mean
    (pooled within case): how far a metric moves between runs with no rule at all."""
    by_case: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        if s["arm"] == "control" and s["outcome"] == "scored":
            for name, value in s["metrics"].items():
                by_case[name][s["case_id"]].append(float(value))
    out = []
    for name in sorted(by_case):
        groups = [xs for xs in by_case[name].values() if len(xs) > 1]
        dof = sum(len(xs) - 1 for xs in groups)
        if not dof:
            continue
        pooled = sum(statistics.variance(xs) * (len(xs) - 1) for xs in groups) / dof
        total = sum(len(xs) for xs in by_case[name].values())
        out.append(NoiseFloor(name, pooled**0.5, total, len(by_case[name])))
    return out


def matrix_export(rows: list[MatrixRow], *, rule_id: str, metric: str) -> dict:
    """The matrix as JSON: per case, per arm, every sample with its flip."""
    return {
        "rule": rule_id,
        "metric": metric,
        "cases": [
            {
                "case": r.case,
                "kind": r.kind,
                "counted": r.counted,
                "effect": r.effect,
                "arms_disagree": r.disagree,
                **{
                    cell.arm: {
                        "n": cell.n,
                        "mean": cell.mean,
                        "sd": cell.sd,
                        "replays": len(cell.chips),
                        "flips": cell.flips,
                        "samples": [
                            {
                                "repeat": c.repeat,
                                "round": c.round_id,
                                "outcome": c.outcome,
                                "value": c.value,
                                "flip": c.flip,
                            }
                            for c in cell.chips
                        ],
                    }
                    for cell in r.cells
                },
            }
            for r in rows
        ],
    }


CSV_HEADER = ["case", "kind", "counted", "metric", "effect", "arms_disagree"] + [
    f"{arm}_{col}" for arm in ARMS for col in ("n", "mean", "sd", "replays", "flips", "values")
]


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.6g}"


def matrix_csv_rows(rows: list[MatrixRow], *, metric: str) -> list[list[str]]:
    """One line per case; an arm's values in repeat order, `-` for a replay that scored nothing."""
    out = []
    for r in rows:
        line = [r.case, r.kind, str(r.counted).lower(), metric, _num(r.effect)]
        line.append(str(r.disagree).lower())
        for cell in r.cells:
            values = " ".join("-" if c.value is None else _num(c.value) for c in cell.chips)
            line += [str(cell.n), _num(cell.mean), _num(cell.sd), str(len(cell.chips))]
            line += [str(cell.flips), values]
        out.append(line)
    return out


def short_outcome(outcome: str) -> str:
    return SHORT_OUTCOMES.get(outcome, outcome)


def randomized_trial(trial: dict) -> dict:
    """A randomized trial's evidence (semantics §20.5) as the rule page words it: its arms in
    order and the effect with its bounds ("−0.29 [−0.62, +0.04]")."""

    def signed(x: float) -> str:
        return f"{x:+.2f}".replace("-", "−")

    effect, interval = trial.get("effect"), trial.get("interval")
    words = "not yet: both arms need a session with an outcome"
    if effect is not None and interval:
        words = f"{signed(effect)} [{signed(interval[0])}, {signed(interval[1])}]"

    def p(value: float) -> str:
        return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"

    return {
        "arms": [{"name": name, **trial["arms"][name]} for name in ("treatment", "control")],
        "effect_words": words,
        "p_words": f"harm {p(trial['p_harm'])} · an improvement of the margin "
        f"{p(trial['p_improvement'])} · no improvement {p(trial['p_no_improvement'])}",
    }


# --- The paired tests, each in words (semantics §17.4) ------------------------------------------


def _test_row(row: dict, *, what: str, where: str, p_words: str, decisive: bool) -> dict:
    ci = row.get("ci") or [None, None]
    tested = ci != [None, None]
    significant = row.get("rejected", row.get("significant"))
    if not tested:
        result = "not tested at this look"
    else:
        result = "significant" if significant else "not significant"
    return {
        "what": what,
        "where": where,
        "effect": row.get("effect"),
        "interval": interval(*ci) if tested else "",
        "level": row.get("ci_level") if tested else None,
        "p": row.get("p_holm", row.get("p_value")) if tested else None,
        "p_words": p_words,
        "result": result,
        "significant": bool(tested and significant),
        "decisive": decisive,
    }


def paired_tests(figures: dict) -> list[dict]:
    """Every test a paired verdict ran, each with its effect, interval, p-value (of what) and
    result: the improvement test on the deciding metric, then each regression test. A
    regression test at a look that spends no error rate on regressions is "not tested"."""
    decisive = figures.get("decisive") or {}
    rows = []
    improvement = figures.get("improvement")
    if improvement:
        rows.append(
            _test_row(
                improvement,
                what=f"{improvement['metric']} better under treatment",
                where="failing cases " + ", ".join(improvement.get("cases") or []),
                p_words="one-sided p",
                decisive=decisive.get("case") is None
                and decisive.get("metric") == improvement["metric"],
            )
        )
    for r in figures.get("regressions") or []:
        kind = "protected wins" if r.get("kind") == "win" else "failing cases"
        rows.append(
            _test_row(
                r,
                what=f"{r['metric']} worse under treatment",
                where=f"{kind} {', '.join(r.get('cases') or [])}",
                p_words="Holm-adjusted one-sided p",
                decisive=decisive.get("case") in (r.get("cases") or [])
                and decisive.get("metric") == r["metric"],
            )
        )
    return rows


# --- Notes, the timeline and messages --------------------------------------------------------------


def evidence_notes(
    rule, *, changes: list[dict], elsewhere: list[dict], controls: dict | None = None
) -> list[str]:
    """What a reader of the evidence should know that the verdict does not say."""
    notes = []
    if changes:
        moved = ", ".join(
            f"{c['rule']} {'promoted' if c['state'] == 'active' else c['state']} at "
            f"{c['at']:%Y-%m-%d %H:%M:%S}"
            for c in changes
        )
        notes.append(
            f"The active rules of scope {rule.scope} changed while this rule's replays were "
            f"taken ({moved}): control replays before and after measure different baselines, "
            "so the verdict compares each treatment replay only with the control replays of "
            "its own active rules, stratum by stratum (semantics §21.1); compare a "
            "case's chips round by round."
        )
    shared = {
        case: sources
        for case, sources in sorted((controls or {}).items())
        if set(sources) - {rule.id}
    }
    if shared:
        by = ", ".join(
            f"{case} ({', '.join(f'{n} for {owner}' for owner, n in sorted(sources.items()))})"
            for case, sources in shared.items()
        )
        notes.append(
            "Control replays are shared: a control replay hides the candidate, so one replay "
            "of a case under the same active rules serves every candidate replaying it "
            f"(semantics §21.2). This rule's control samples were replayed for: {by}."
        )
    if elsewhere:
        scopes = sorted({e["scope"] for e in elsewhere})
        rules = ", ".join(f"{e['rule']} ({e['scope']})" for e in elsewhere)
        notes.append(
            f"No treatment replay read this rule, filed in scope {rule.scope}. On the same "
            f"cases the replayed agent did read rules in scope {', '.join(scopes)}: {rules}. "
            "A rule acts only where the agent looks for rules: check its scope."
        )
    return notes


def timeline_groups(events: list) -> list[dict]:
    """Consecutive events of one type in one round folded into one line (a round's forty
    replays are one line, each event still a click away), newest first as given."""
    groups: list[dict] = []
    for event in events:
        last = groups[-1] if groups else None
        if last and (last["type"], last["round_id"]) == (event.type, event.round_id):
            last["events"].append(event)
            continue
        groups.append({"type": event.type, "round_id": event.round_id, "events": [event]})
    for group in groups:
        group["count"] = len(group["events"])
        group["newest"], group["oldest"] = group["events"][0], group["events"][-1]
        group["words"] = group["type"].replace("_", " ")
    return groups


def requeue_words(original: str, version, *, created: bool) -> str:
    """What a re-queue did, from the version's state after the request: with the embedded
    default a round runs before the response, and may already have decided the version."""
    if not created:
        return f"{original} was already re-queued as {version.id} ({version.state})."
    if version.state == "active":
        return (
            f"{original} re-queued as {version.id}; a round validated it at once and promoted "
            f"it on its own fresh evidence: {version.verdict_reason}"
        )
    if version.state == "retired":
        return (
            f"{original} re-queued as {version.id}; a round validated it at once and retired "
            f"it: {version.verdict_reason}"
        )
    if version.first_attempted_at is not None:
        return f"{original} re-queued as candidate {version.id}: {version.pending_text}."
    return f"{original} re-queued as candidate {version.id}; the next round validates it."


def journal_export_words(filters: dict) -> str:
    """Exactly what the journal's export holds: every event the filters select, in words."""
    parts = []
    if filters.get("type"):
        parts.append(f"of type {filters['type']}")
    if filters.get("rule"):
        parts.append(f"of rule {filters['rule']}")
    if filters.get("round_id") is not None:
        parts.append(f"of round {filters['round_id']}")
    if filters.get("actor"):
        parts.append(f"by {filters['actor']}")
    if filters.get("since_at"):
        parts.append(f"since {filters['since_at']:%Y-%m-%d %H:%M:%S} UTC")
    if filters.get("until_at"):
        parts.append(f"before {filters['until_at']:%Y-%m-%d %H:%M:%S} UTC")
    return "every event " + " ".join(parts) if parts else "all events"
