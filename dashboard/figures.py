"""Plotly figures as plain data. Pure functions: they take rows already read and
return `{"data": [...], "layout": {...}}`, which a page puts in a `data-plotly` attribute and
static/js/charts.js renders. No Plotly Python objects, so no figure depends on the database."""

from collections import defaultdict
from datetime import datetime, timedelta

GOOD = "#176b37"
BAD = "#a3241b"
NEUTRAL = "#5b6475"
PENDING = "#b07d00"
OUTCOME_COLOURS = {"promote": GOOD, "retire": BAD, "pending": PENDING}
VERDICT_COLOURS = {"match": GOOD, "partial": PENDING, "miss": BAD}

_BASE_LAYOUT = {
    "margin": {"l": 56, "r": 16, "t": 48, "b": 48},
    "font": {"family": "system-ui, sans-serif", "size": 13},
    "legend": {"orientation": "h", "y": -0.2},
    "paper_bgcolor": "#ffffff",
    "plot_bgcolor": "#ffffff",
}


def _layout(title: str, **extra) -> dict:
    return {**_BASE_LAYOUT, "title": {"text": title}, **extra}


def delta_distributions(cases: list[dict], *, promote_margin: float, regress_margin: float) -> dict:
    """Per-metric distribution of replay deltas (semantics §7.6) over scored cases, with the band
    between the regression and promotion margins shaded: points outside it decided something."""
    deltas: dict[str, list[float]] = defaultdict(list)
    labels: dict[str, list[str]] = defaultdict(list)
    for case in cases:
        if case.get("outcome") != "scored":
            continue
        for metric, values in (case.get("metrics") or {}).items():
            delta = values.get("delta") if isinstance(values, dict) else None
            if isinstance(delta, int | float):
                deltas[metric].append(round(delta, 4))
                labels[metric].append(f"{case.get('case', '?')} ({case.get('kind', '?')})")
    data = [
        {
            "type": "box",
            "name": metric,
            "y": deltas[metric],
            "text": labels[metric],
            "boxpoints": "all",
            "jitter": 0.4,
            "pointpos": 0,
            "marker": {"color": NEUTRAL, "size": 6},
            "hovertemplate": "%{text}<br>delta %{y:+.3f}<extra>" + metric + "</extra>",
        }
        for metric in sorted(deltas)
    ]
    return {
        "data": data,
        "layout": _layout(
            "Replay deltas per metric (band: within margin)",
            showlegend=False,
            yaxis={"title": {"text": "replayed − original"}, "zeroline": True},
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
            "mode": "markers+text",
            "name": verdict,
            "x": [r.get("token_f1") for r in group],
            "y": [r.get("score") for r in group],
            "text": [r.get("rule", "") for r in group],
            "textposition": "top center",
            "marker": {"size": 10, "color": VERDICT_COLOURS.get(verdict, NEUTRAL)},
            "hovertemplate": "%{text}<br>token-F1 %{x:.2f}<br>score %{y:.2f}<extra>"
            + verdict
            + "</extra>",
        }
        for verdict, group in sorted(by_verdict.items())
    ]
    return {
        "data": data,
        "layout": _layout(
            "Extraction accuracy: score vs token-F1",
            xaxis={"title": {"text": "token-F1"}, "range": [-0.05, 1.05]},
            yaxis={"title": {"text": "score (probability of same rule)"}, "range": [-0.05, 1.05]},
            shapes=[
                {
                    "type": "line",
                    "x0": 0,
                    "y0": 0,
                    "x1": 1,
                    "y1": 1,
                    "line": {"dash": "dot", "color": NEUTRAL, "width": 1},
                }
            ],
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
            "Verdicts per round",
            barmode="stack",
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
            "Lifecycle over time", xaxis={"type": "date"}, yaxis={"title": {"text": "rules"}}
        ),
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


def _effect_trace(r: dict, lo_edge: float, hi_edge: float) -> dict:
    """One effect with its interval; an unbounded side (null in the evidence) is drawn to the
    axis edge and said so in the hover text."""
    high = r["high"] if r["high"] is not None else hi_edge
    low = r["low"] if r["low"] is not None else lo_edge
    return {
        "type": "scatter",
        "mode": "markers",
        "name": r["label"],
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
                "−∞" if r["low"] is None else f"{r['low']:+.3f}".replace("-", "−"),
                "+∞" if r["high"] is None else f"{r['high']:+.3f}".replace("-", "−"),
                "—" if r["p"] is None else f"{r['p']:.3g}",
            ]
        ],
        "hovertemplate": "effect %{x:+.3f} [%{customdata[0]}, %{customdata[1]}]"
        "<br>p %{customdata[2]}<extra>%{y}</extra>",
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


def _note(x: float, text: str, colour: str) -> dict:
    return {
        "x": x,
        "y": 1,
        "xref": "x",
        "yref": "paper",
        "yanchor": "bottom",
        "text": text,
        "showarrow": False,
        "font": {"color": colour, "size": 11},
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
    past the margin; a retirement for no improvement, the upper bound short of the margin."""
    rows = effect_rows(figures, promote_margin=promote_margin)
    bounds = [x for r in rows for x in (r["low"], r["high"], r["effect"]) if x is not None]
    bounds += [promote_margin, -regress_margin, 0.0]
    pad = 0.1 * (max(bounds) - min(bounds) or 1)
    lo_edge, hi_edge = round(min(bounds) - pad, 6), round(max(bounds) + pad, 6)
    return {
        "data": [_effect_trace(r, lo_edge, hi_edge) for r in rows],
        "layout": _layout(
            "Effect of the rule: treatment − control, with its interval",
            showlegend=False,
            height=140 + 44 * len(rows),
            margin={"l": 220, "r": 24, "t": 64, "b": 48},
            xaxis={"title": {"text": "treatment − control"}, "range": [lo_edge, hi_edge]},
            yaxis={"type": "category", "autorange": "reversed"},
            shapes=[
                _vline(0.0, NEUTRAL, "dot"),
                _vline(promote_margin, GOOD, "dash"),
                _vline(-regress_margin, BAD, "dot"),
            ],
            annotations=[
                _note(promote_margin, f"promote margin +{promote_margin:g}", GOOD),
                _note(-regress_margin, f"−{regress_margin:g}", BAD),
            ],
        ),
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
