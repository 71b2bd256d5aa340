"""The rule page's paired evidence (semantics §17.5) as plain data: the case × arm matrix of
samples, its flips, the noise floor the control arm measures, and the words of the verdict.
Pure functions over rows already read (replay.selectors.rule_paired_evidence): no database."""

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

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


def deciding_metric(verdict: dict | None, samples: list[dict]) -> str | None:
    """The metric the matrix shows first: the verdict's deciding metric (semantics §6), else the
    first metric any sample measured."""
    figures = paired_figures(verdict) or {}
    measured = sorted({m for s in samples for m in s["metrics"]})
    named = ((figures.get("improvement") or {}).get("metric") or "").split("+")
    named += [((figures.get("decisive") or {}).get("metric") or "")]
    return next((m for m in named if m in measured), measured[0] if measured else None)


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
