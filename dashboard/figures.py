"""Plotly figures as plain data. Pure functions: they take rows already read and
return `{"data": [...], "layout": {...}}`, which a page puts in a `data-plotly` attribute and
static/js/charts.js renders. No Plotly Python objects, so no figure depends on the database."""

from collections import defaultdict
from datetime import datetime, timedelta

GOOD = "#176b37"
BAD = "#a3241b"
NEUTRAL = "#5b6475"
PENDING = "#b07d00"
ACCENT = "#1f5fbf"
OUTCOME_COLOURS = {"promote": GOOD, "retire": BAD, "pending": PENDING}
VERDICT_COLOURS = {"match": GOOD, "partial": PENDING, "miss": BAD, "uncertain": ACCENT}

_BASE_LAYOUT = {
    "margin": {"l": 56, "r": 16, "t": 48, "b": 48},
    "font": {"family": "system-ui, sans-serif", "size": 13},
    "legend": {"orientation": "h", "y": -0.2},
    "paper_bgcolor": "#ffffff",
    "plot_bgcolor": "#ffffff",
}


def _layout(title: str, **extra) -> dict:
    return {**_BASE_LAYOUT, "title": {"text": title}, **extra}


SINGLE_LABEL = "one replay vs its recorded original (replayed − original)"
PAIRED_LABEL = "paired replays, per case (treatment − control)"


def _deltas(cases: list[dict]) -> list[tuple[str, float, str]]:
    """(metric, delta, label) of every scored replay compared with its original (§7.6)."""
    out = []
    for case in cases:
        if case.get("outcome") != "scored":
            continue
        for metric, values in sorted((case.get("metrics") or {}).items()):
            delta = values.get("delta") if isinstance(values, dict) else None
            if isinstance(delta, int | float):
                label = f"{case.get('case', '?')} ({case.get('kind', '?')})"
                out.append((metric, round(delta, 4), label))
    return out


def _box(name: str, points: list[tuple[str, float, str]], colour: str) -> dict:
    return {
        "type": "box",
        "name": name,
        "x": [metric for metric, _, _ in points],
        "y": [value for _, value, _ in points],
        "text": [label for _, _, label in points],
        "boxpoints": "all",
        "jitter": 0.4,
        "pointpos": 0,
        "marker": {"color": colour, "size": 6},
        "line": {"color": colour},
        "hovertemplate": "%{text}<br>%{x} %{y:+.3f}<extra></extra>",
    }


def delta_distributions(
    cases: list[dict],
    *,
    promote_margin: float,
    regress_margin: float,
    paired: list[dict] = (),
) -> dict:
    """Per metric, what the replays measured: each §7 replay's delta from its recorded
    original (semantics §7.6), and each paired case's treatment − control effect
    (semantics §17.5) — two kinds of comparison, told apart by colour and legend. The band
    between the regression and promotion margins is shaded: points outside it can decide."""
    single = _deltas(cases)
    effects = [
        (p["metric"], p["effect"], f"{p['rule']} on {p['case']} ({p['kind']})") for p in paired
    ]
    data = []
    if single:
        data.append(_box(SINGLE_LABEL, sorted(single), NEUTRAL))
    if effects:
        data.append(_box(PAIRED_LABEL, sorted(effects), ACCENT))
    return {
        "data": data,
        "layout": _layout(
            "",
            boxmode="group",
            showlegend=True,
            margin={"l": 64, "r": 16, "t": 16, "b": 56},
            legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
            xaxis={"type": "category", "automargin": True},
            yaxis={"title": {"text": "effect (positive: better)"}, "zeroline": True},
            shapes=[
                {
                    "type": "rect",
                    "xref": "paper",
                    "x0": 0,
                    "x1": 1,
                    "y0": -regress_margin,
                    "y1": promote_margin,
                    "fillcolor": "#eef1f6",
                    "opacity": 0.7,
                    "line": {"width": 0},
                    "layer": "below",
                }
            ],
        ),
    }


# Where a point's label goes (pixels from the point, drawn with a leader line), turn by turn,
# when other points crowd it: above and below first, then further out on a slant.
_LABEL_OFFSETS = ((0, -16), (0, 18), (26, -30), (-26, 32), (-26, -30), (26, 32), (0, -44), (0, 46))
_CROWD = 0.1
# Past this many points, labels would only cover each other: the rule is in the hover text.
MAX_LABELLED_POINTS = 30


def label_offsets(points: list[tuple[float, float]]) -> list[tuple[int, int]]:
    """A label offset per point so that labels of points close together do not sit on one
    another: each point crowded by earlier ones takes the next offset in turn."""
    offsets = []
    for i, (x, y) in enumerate(points):
        crowd = sum(1 for (a, b) in points[:i] if abs(a - x) <= _CROWD and abs(b - y) <= _CROWD)
        offsets.append(_LABEL_OFFSETS[crowd % len(_LABEL_OFFSETS)])
    return offsets


def _labels(rows: list[dict]) -> list[dict]:
    """The rules' names as annotations beside their points, none past MAX_LABELLED_POINTS."""
    if len(rows) > MAX_LABELLED_POINTS:
        return []
    points = [(r.get("token_f1") or 0, r.get("score") or 0) for r in rows]
    return [
        {
            "x": x,
            "y": y,
            "text": r.get("rule", ""),
            "ax": ax,
            "ay": ay,
            "showarrow": True,
            "arrowhead": 0,
            "arrowwidth": 1,
            "arrowcolor": "#aab2c0",
            "font": {"size": 11},
        }
        for r, (x, y), (ax, ay) in zip(rows, points, label_offsets(points), strict=True)
    ]


def extraction_scatter(rows: list[dict]) -> dict:
    """The comparator's score (the probability of "same rule") against token-F1 per rule
    (semantics §12). Rewordings sit high above the diagonal: the rule matches although the
    words do not; a wrong rule in the same words sits far below it."""
    by_verdict: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_verdict[row.get("verdict", "?")].append(row)
    data = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": f"verdict: {verdict}",
            "x": [r.get("token_f1") for r in group],
            "y": [r.get("score") for r in group],
            "text": [r.get("rule", "") for r in group],
            "marker": {"size": 10, "color": VERDICT_COLOURS.get(verdict, NEUTRAL)},
            "hovertemplate": "%{text}<br>token-F1 %{x:.2f}<br>score %{y:.2f}<extra>"
            + verdict
            + "</extra>",
        }
        for verdict, group in sorted(by_verdict.items())
    ]
    # The diagonal is a trace, not a shape, so that the legend says what it is.
    data.append(
        {
            "type": "scatter",
            "mode": "lines",
            "name": "score = token-F1",
            "x": [0, 1],
            "y": [0, 1],
            "line": {"dash": "dot", "color": NEUTRAL, "width": 1},
            "hoverinfo": "skip",
        }
    )
    return {
        "data": data,
        "layout": _layout(
            "",
            margin={"l": 64, "r": 24, "t": 16, "b": 56},
            legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
            xaxis={"title": {"text": "token-F1 (share of words in common)"}, "range": [-0.08, 1.1]},
            yaxis={
                "title": {"text": "score (probability of the same rule)"},
                "range": [-0.12, 1.16],
            },
            # Labels are placed over every point, whatever its verdict: crowding knows no trace.
            annotations=_labels(rows),
        ),
    }


def verdicts_per_round(counts: list[tuple[int, str, int]]) -> dict:
    """Stacked bars of verdict outcomes per round (semantics §10 `validation_verdict`)."""
    rounds = sorted({round_id for round_id, _, _ in counts})
    table = {(round_id, outcome): n for round_id, outcome, n in counts}
    outcomes = [o for o in OUTCOME_COLOURS if any(o == out for _, out, _ in counts)]
    outcomes += sorted({out for _, out, _ in counts} - set(outcomes))
    data = [
        {
            "type": "bar",
            "name": outcome,
            "x": [f"round {r}" for r in rounds],
            "y": [table.get((r, outcome), 0) for r in rounds],
            "marker": {"color": OUTCOME_COLOURS.get(outcome, NEUTRAL)},
        }
        for outcome in outcomes
    ]
    return {
        "data": data,
        "layout": _layout(
            "",
            barmode="stack",
            margin={"l": 64, "r": 16, "t": 16, "b": 48},
            legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
            xaxis={"type": "category"},
            yaxis={"title": {"text": "candidates"}},
        ),
    }


def funnel_series(
    *,
    recorded: list[tuple[datetime, int]],
    decided: list[tuple[datetime, str, int]],
    start: datetime,
    now: datetime,
    size: timedelta,
) -> dict[str, list]:
    """Cumulative counts over time — recorded, promoted, retired and still pending — from
    per-bucket counts: `recorded` as (bucket start, n), `decided` as (bucket start, state, n),
    with `start` the first bucket. Each point is the total at the end of its bucket."""
    steps = max(0, int((now - start) / size)) + 1
    added = {
        "recorded": [0] * (steps + 1),
        "promoted": [0] * (steps + 1),
        "retired": [0] * (steps + 1),
    }

    def slot(at: datetime) -> int:
        # Clocks drift between workers: anything stamped after `now` lands in the last bucket.
        return min(max(int((at - start) / size), 0) + 1, steps)

    for at, n in recorded:
        added["recorded"][slot(at)] += n
    for at, state, n in decided:
        if state in ("active", "retired"):
            added["promoted" if state == "active" else "retired"][slot(at)] += n
    series: dict[str, list] = {
        "at": [],
        "recorded": [],
        "promoted": [],
        "retired": [],
        "pending": [],
    }
    totals = dict.fromkeys(added, 0)
    for i in range(steps + 1):
        series["at"].append((start + size * i).isoformat())
        for key in added:
            totals[key] += added[key][i]
            series[key].append(totals[key])
        series["pending"].append(totals["recorded"] - totals["promoted"] - totals["retired"])
    return series


EMPTY_FUNNEL = {"at": [], "recorded": [], "promoted": [], "retired": [], "pending": []}


def lifecycle_funnel(series: dict[str, list]) -> dict:
    """The lifecycle over time: recorded → promoted / retired / still pending."""
    colours = {"recorded": NEUTRAL, "promoted": GOOD, "retired": BAD, "pending": PENDING}
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": name,
            "x": series["at"],
            "y": series[name],
            "line": {"color": colour, "shape": "hv", "width": 2},
        }
        for name, colour in colours.items()
    ]
    return {
        "data": data,
        "layout": _layout(
            "",
            margin={"l": 64, "r": 16, "t": 16, "b": 56},
            legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
            xaxis={"type": "date", "automargin": True},
            yaxis={"title": {"text": "rules"}},
        ),
    }


# What a colour means on the effect figure: each is a legend entry.
EFFECT_STATUS = {
    GOOD: "improvement: significant, past the promote margin",
    PENDING: "improvement: not decisive",
    BAD: "regression: significant after Holm",
    NEUTRAL: "regression: not significant",
}


def _effect_row(label: str, row: dict, colour: str) -> dict:
    low, high = row.get("ci") or [None, None]
    return {
        "label": label,
        "effect": row["effect"],
        "low": low,
        "high": high,
        "colour": colour,
        "p": row.get("p_holm", row.get("p_value")),
    }


def _effect_trace(r: dict, lo_edge: float, hi_edge: float, *, first: bool) -> dict:
    """One effect with its interval; an open side (null in the evidence) is drawn to the axis
    edge and said so in the hover text."""
    high = r["high"] if r["high"] is not None else hi_edge
    low = r["low"] if r["low"] is not None else lo_edge
    return {
        "type": "scatter",
        "mode": "markers",
        "name": EFFECT_STATUS[r["colour"]],
        "legendgroup": r["colour"],
        "showlegend": first,
        "x": [r["effect"]],
        "y": [r["label"]],
        "marker": {"color": r["colour"], "size": 11},
        "error_x": {
            "type": "data",
            "symmetric": False,
            "array": [round(high - r["effect"], 6)],
            "arrayminus": [round(r["effect"] - low, 6)],
            "color": r["colour"],
            "thickness": 2,
            "width": 6,
        },
        "customdata": [
            [
                "open" if r["low"] is None else f"{r['low']:+.3f}".replace("-", "−"),
                "open" if r["high"] is None else f"{r['high']:+.3f}".replace("-", "−"),
                "—" if r["p"] is None else f"{r['p']:.3g}",
            ]
        ],
        "hovertemplate": "effect %{x:+.3f} [%{customdata[0]}, %{customdata[1]}]"
        "<br>p-value %{customdata[2]}<extra>%{y}</extra>",
    }


def _vline(x: float, colour: str, dash: str) -> dict:
    return {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "line": {"color": colour, "dash": dash, "width": 1.5},
    }


def _line_key(name: str, colour: str, dash: str) -> dict:
    """A legend entry for a vertical line drawn as a shape (shapes have no legend)."""
    return {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": [None],
        "y": [None],
        "line": {"color": colour, "dash": dash, "width": 1.5},
        "hoverinfo": "skip",
    }


def effect_rows(figures: dict, *, promote_margin: float) -> list[dict]:
    """The deciding metric's effect first, then each regression test's (semantics §17.4)."""
    rows = []
    improvement = figures.get("improvement")
    if improvement:
        good = improvement.get("significant") and improvement["effect"] >= promote_margin
        label = f"{improvement['metric']} (failing cases)"
        rows.append(_effect_row(label, improvement, GOOD if good else PENDING))
    for r in figures.get("regressions") or []:
        if r.get("ci") in (None, [None, None]):
            # A look that spends no error rate on regressions tests none: no interval to draw.
            continue
        where = r["case"] if len(r.get("cases") or []) == 1 else f"{r['kind']} cases"
        rows.append(
            _effect_row(f"{r['metric']} on {where}", r, BAD if r.get("rejected") else NEUTRAL)
        )
    return rows


def paired_effect(figures: dict, *, promote_margin: float, regress_margin: float) -> dict:
    """The effect of the rule (treatment − control on the deciding metric, semantics §17.4) with
    its confidence interval against the promote margin, and under it each regression test's
    effect against the regress margin. Promotion needs the interval past zero and the effect
    past the margin; a retirement for no improvement, the upper bound short of the margin.
    Every colour and line is in the legend; the row labels get the room they need."""
    rows = effect_rows(figures, promote_margin=promote_margin)
    if not rows:
        return {"data": [], "layout": {}}
    bounds = [x for r in rows for x in (r["low"], r["high"], r["effect"]) if x is not None]
    bounds += [promote_margin, -regress_margin, 0.0]
    pad = 0.1 * (max(bounds) - min(bounds) or 1)
    lo_edge, hi_edge = round(min(bounds) - pad, 6), round(max(bounds) + pad, 6)
    seen: set[str] = set()
    data = []
    for r in rows:
        data.append(_effect_trace(r, lo_edge, hi_edge, first=r["colour"] not in seen))
        seen.add(r["colour"])
    data += [
        _line_key(f"promote margin +{promote_margin:g}", GOOD, "dash"),
        _line_key(f"regress margin −{regress_margin:g}", BAD, "dot"),
    ]
    return {
        "data": data,
        "layout": {
            **_BASE_LAYOUT,
            "height": 190 + 40 * len(rows),
            "margin": {"l": 16, "r": 24, "t": 16, "b": 48},
            "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
            "xaxis": {
                "title": {"text": "treatment − control (positive: better with the rule)"},
                "range": [lo_edge, hi_edge],
                "zeroline": False,
            },
            "yaxis": {"type": "category", "autorange": "reversed", "automargin": True},
            "shapes": [
                _vline(0.0, NEUTRAL, "dot"),
                _vline(promote_margin, GOOD, "dash"),
                _vline(-regress_margin, BAD, "dot"),
            ],
        },
    }


def trial_interval(path: list[dict], *, promote_margin: float) -> dict:
    """A randomized trial's effect (treatment − control rate of the target condition, semantics
    §20.5) after each session, with its always-valid bounds narrowing around it: promotion when
    the band falls wholly below −margin, retirement when it rises above it (harm: above 0)."""
    sessions = [p["sessions"] for p in path]
    band = {"mode": "lines", "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False}
    return {
        "data": [
            {**band, "type": "scatter", "x": sessions, "y": [p["upper"] for p in path]},
            {
                **band,
                "type": "scatter",
                "x": sessions,
                "y": [p["lower"] for p in path],
                "fill": "tonexty",
                "fillcolor": "rgba(91, 100, 117, 0.2)",
                "name": "bounds",
                "showlegend": True,
            },
            {
                "type": "scatter",
                "mode": "lines",
                "x": sessions,
                "y": [p["effect"] for p in path],
                "name": "effect",
                "line": {"color": NEUTRAL, "width": 2},
                "hovertemplate": "after %{x} sessions: %{y:+.2f}<extra></extra>",
            },
        ],
        "layout": _layout(
            "Effect of the rule as sessions came in: treatment − control, with its bounds",
            height=320,
            xaxis={"title": {"text": "sessions in the trial"}},
            yaxis={"title": {"text": "treatment − control rate"}, "range": [-1, 1]},
            shapes=[
                _hline(0.0, BAD, "dot"),
                _hline(-promote_margin, GOOD, "dash"),
            ],
            annotations=[
                _hnote(0.0, "worse above 0", BAD, side="left"),
                _hnote(-promote_margin, f"promote below −{promote_margin:g}", GOOD),
            ],
        ),
    }


def _hline(y: float, colour: str, dash: str) -> dict:
    return {
        "type": "line",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "y0": y,
        "y1": y,
        "line": {"color": colour, "width": 1, "dash": dash},
    }


def _hnote(y: float, text: str, colour: str, side: str = "right") -> dict:
    return {
        "xref": "paper",
        "x": 1 if side == "right" else 0,
        "y": y,
        "xanchor": side,
        "yanchor": "top" if side == "right" else "bottom",
        "text": text,
        "showarrow": False,
        "font": {"color": colour, "size": 11},
    }
