"""The morning dashboard: one self-contained HTML file (plotly.js inside) per study.

Panels: recommendations; decode t/s against the speculative depth with the baseline; the surface model's
predicted t/s and acceptance per method with every measured launch over it; context against acceptance and
t/s; acceptance per draft position; speed against usable context (Pareto front, when the study has more than one context size);
memory per trial with "free but unused" flagged; failed trials and silent overrides; parameter importance;
the trial timeline. A panel without data says so in words instead of drawing an empty plot.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jinja2
import optuna
import pandas as pd
import plotly.graph_objects as go
import plotly.io
from markupsafe import Markup
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from sweep.analysis import (
    OverallRecommendation,
    Recommendation,
    StudyWarnings,
    Verdicts,
)
from sweep.analysis.controllers import ControllerAnswer, controller_answers
from sweep.outputs.compare import usable_context
from sweep.outputs.console import gain_text, params_text, pct, speed_text, text_health
from sweep.records import LaunchFacts, Spread, Stage, WorkloadSummary
from sweep.search.costs import CostProfile
from sweep.search.surface import ContextCurve, PredictedSurface, SurfacePoint
from sweep.storage import Phase, Study, TrialView, complete_views

# The page's HTML: macros of one autoescaped template (every value is text unless it is Markup).
HTML: Any = (
    jinja2.Environment(loader=jinja2.PackageLoader("sweep.outputs", "templates"), autoescape=True)
    .get_template("dashboard.html")
    .module
)
FREE_BUT_UNUSED_GB = 1.0


def study_frame(views: list[TrialView]) -> pd.DataFrame:
    """One row per (trial, workload) measured in the search, with the trial's parameters as columns."""
    rows = []
    for view in views:
        if view.record is None or view.phase != Phase.SEARCH:
            continue
        for key, summary in view.record.workloads.items():
            row: dict[str, Any] = {
                "trial": view.number,
                "state": view.state,
                "role": view.role,
                "workload": key,
                # A workload's variants at several contexts share its name and stream count.
                "series": summary.series,
                "context_tokens": summary.context_tokens,
            }
            row.update({f"param:{k}": v for k, v in view.record.params.items()})
            row["status"] = summary.status
            for metric in (
                "prompt_tokens",
                "decode_tps",
                "aggregate_tps",
                "ttft_s",
                "prefill_tps",
                "acceptance_rate",
                "acceptance_length",
            ):
                spread: Spread | None = getattr(summary, metric)
                row[metric] = spread.median if spread else None
                row[f"{metric}_low"] = spread.low if spread else None
                row[f"{metric}_high"] = spread.high if spread else None
            rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Panel:
    title: str
    figure: go.Figure | None = None
    html: str = ""  # a table, or the plain message that replaces an empty plot


def _flags(view: TrialView) -> str:
    assert view.record is not None
    return "<br>".join(f"{k}={v}" for k, v in view.record.params.items())


def numeric_params(frame: pd.DataFrame, shape_params: Sequence[str] = ()) -> list[str]:
    """Swept numeric parameters (more than one value): the one measured on most trials first, among equals the
    ones the engine named depth, budget and width (`shape_params`, in that order). llama.cpp's n-gram sizes are
    conditional on the type, so coverage decides first."""
    names, coverage = [], {}
    for column in frame.columns:
        if not column.startswith("param:"):
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        if values.notna().any() and values.dropna().nunique() > 1:
            names.append(column)
            coverage[column] = int(values.notna().sum())
    order = list(shape_params)

    def rank(name: str) -> int:
        bare = name.removeprefix("param:")
        return order.index(bare) if bare in order else len(order)

    return sorted(names, key=lambda n: (-coverage[n], rank(n)))


def _message(title: str, text: str) -> Panel:
    return Panel(title, html=str(HTML.message(text)))


def method_groups(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Rows split by speculative method: the swept settings that are names, not numbers (llama.cpp's
    `spec-type`, SGLang's algorithm), as "name=value" labels. Every row is in exactly one group."""
    names = []
    for column in (c for c in frame.columns if c.startswith("param:")):
        values = frame[column].dropna()
        if values.nunique() > 1 and pd.to_numeric(values, errors="coerce").isna().any():
            names.append(column)
    if not names:
        return [("", frame)]
    labels = frame[names].apply(
        lambda row: ", ".join(f"{n.removeprefix('param:')}={v}" for n, v in row.items() if pd.notna(v)),
        axis=1,
    )
    return [(str(label), rows) for label, rows in frame.groupby(labels, sort=False)]


def method_axis(rows: pd.DataFrame, frame: pd.DataFrame, shape_params: Sequence[str] = ()) -> str | None:
    """The numeric setting to plot one method's trials against: one that varies among them, else one that
    belongs to this method (set on all its trials, absent on other methods' trials)."""
    varying = numeric_params(rows, shape_params)
    if varying:
        return varying[0]
    for column in (c for c in rows.columns if c.startswith("param:")):
        mine = pd.to_numeric(rows[column], errors="coerce")
        if mine.notna().all() and frame[column].isna().any():
            return column
    return None


def speed_panel(frame: pd.DataFrame, views: dict[int, TrialView]) -> Panel:
    """Decode speed against each method's own depth setting, one plot per method, so that every measured
    speculative trial is on the page (a method without a numeric setting shows its trials side by side)."""
    title = "Decode speed against the speculative depth, per method"
    ok = frame[(frame["status"] == "ok") & (frame["role"] != "baseline")] if not frame.empty else frame
    if ok.empty:
        return _message(title, "No speculative trial was measured yet.")
    groups = method_groups(ok)
    fig = make_subplots(
        rows=1, cols=len(groups), subplot_titles=[label or "all trials" for label, _ in groups]
    )
    colors = {w: f"hsl({i * 67 % 360},60%,45%)" for i, w in enumerate(dict.fromkeys(ok["workload"]))}
    base = frame[frame["role"] == "baseline"]
    # The depth, budget and width parameters as the engine named them in the records.
    shape_params = list(
        dict.fromkeys(p for v in views.values() if v.record and v.record.shape for p in v.record.shape.params)
    )
    for col, (_, rows) in enumerate(groups, start=1):
        x = method_axis(rows, ok, shape_params)
        for workload, points in rows.groupby("workload", sort=False):
            if x is not None:
                points = points.assign(depth=pd.to_numeric(points[x], errors="coerce")).dropna(
                    subset=["depth"]
                )
                points = points.loc[points.groupby("depth")["decode_tps"].idxmax()].sort_values("depth")
            else:
                points = points.assign(depth=[f"trial {t}" for t in points["trial"]])
            fig.add_trace(
                go.Scatter(
                    x=points["depth"],
                    y=points["decode_tps"],
                    mode="lines+markers" if x is not None else "markers",
                    name=str(workload),
                    legendgroup=str(workload),
                    showlegend=col == 1,
                    line={"color": colors[workload]},
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": points["decode_tps_high"] - points["decode_tps"],
                        "arrayminus": points["decode_tps"] - points["decode_tps_low"],
                    },
                    hovertext=[_flags(views[t]) for t in points["trial"].tolist()],
                    hoverinfo="text+y",
                ),
                row=1,
                col=col,
            )
            baseline_tps = base.loc[base["workload"] == workload, "decode_tps"]
            if not baseline_tps.empty and not math.isnan(float(baseline_tps.iloc[0])):
                fig.add_hline(
                    y=float(baseline_tps.iloc[0]),
                    line_dash="dot",
                    line_color=colors[workload],
                    annotation_text=f"{workload}: no speculation" if col == 1 else "",
                    annotation_position="top left",
                    row=1,
                    col=col,
                )
        fig.update_xaxes(title_text=x.removeprefix("param:") if x else "trial", row=1, col=col)
    fig.update_yaxes(title_text="decode tokens/s (median, range of repeats)", row=1, col=1)
    return Panel(title, fig)


def _best_per_depth(points: list[SurfacePoint]) -> list[SurfacePoint]:
    """At each depth, the configuration the model rates fastest (over tree widths and draft budgets)."""
    best: dict[int, SurfacePoint] = {}
    for point in points:
        if point.shape.depth not in best or point.tps > best[point.shape.depth].tps:
            best[point.shape.depth] = point
    return [best[d] for d in sorted(best)]


def _point_text(point: SurfacePoint) -> str:
    shape = point.shape
    return (
        f"predicted {point.tps:.1f} t/s (x/ {math.exp(point.sd):.2f})<br>depth {shape.depth}, width {shape.width}, "
        f"draft budget {shape.budget}<br>" + "<br>".join(f"{k}={v}" for k, v in point.params.items())
    )


def surface_panel(surface: list[SurfacePoint], views: list[TrialView]) -> Panel:
    """Per speculative method: the model's predicted decode t/s and acceptance over the depth (the best width
    and budget at each depth, with a one-sd band) and every measured launch of that method over it, then the
    predicted t/s over depth x draft budget for the first workload."""
    title = "The model's surface, per speculative method: predicted (lines) and measured (points)"
    measured = [v for v in complete_views(views) if v.record and v.record.shape]
    methods = list(
        dict.fromkeys(
            [p.shape.method for p in surface]
            + [v.record.shape.method for v in measured if v.record and v.record.shape]
        )
    )
    if not methods:
        return _message(title, "No speculative configuration was measured or predicted yet.")
    workloads = list(dict.fromkeys(p.workload for p in surface)) or list(
        dict.fromkeys(k for v in measured if v.record for k in v.record.workloads)
    )
    colors = {w: f"hsl({i * 67 % 360},60%,45%)" for i, w in enumerate(workloads)}
    fig = make_subplots(
        rows=3,
        cols=len(methods),
        vertical_spacing=0.09,
        subplot_titles=[f"{m}: decode t/s" for m in methods]
        + [f"{m}: accept length" for m in methods]
        + [f"{m}: predicted t/s, {workloads[0]}" for m in methods],
    )
    for col, method in enumerate(methods, start=1):
        for workload in workloads:
            line = _best_per_depth(
                [p for p in surface if p.shape.method == method and p.workload == workload]
            )
            _predicted_traces(fig, line, workload, colors[workload], col)
            _measured_traces(fig, measured, method, workload, colors[workload], col)
        _budget_heatmap(
            fig, [p for p in surface if p.shape.method == method and p.workload == workloads[0]], col
        )
        fig.update_xaxes(title_text="depth (draft positions per step)", row=2, col=col)
        fig.update_xaxes(title_text="depth", row=3, col=col)
        fig.update_yaxes(title_text="draft budget (tokens verified)", row=3, col=col)
    fig.update_yaxes(title_text="decode tokens/s", row=1, col=1)
    fig.update_yaxes(title_text="tokens per step", row=2, col=1)
    fig.update_layout(
        height=1050, coloraxis={"colorscale": "Viridis", "colorbar": {"title": "t/s", "y": 0.15, "len": 0.3}}
    )
    return Panel(title, fig)


def _predicted_traces(fig: go.Figure, line: list[SurfacePoint], workload: str, color: str, col: int) -> None:
    if not line:
        return
    depths = [p.shape.depth for p in line]
    upper = [p.tps * math.exp(p.sd) for p in line]
    lower = [p.tps * math.exp(-p.sd) for p in line]
    fig.add_trace(
        go.Scatter(
            x=depths + depths[::-1],
            y=upper + lower[::-1],
            mode="lines",
            fill="toself",
            line={"width": 0},
            fillcolor=color.replace("hsl", "hsla").replace(")", ",0.15)"),
            hoverinfo="skip",
            showlegend=False,
            legendgroup=workload,
        ),
        row=1,
        col=col,
    )
    fig.add_trace(
        go.Scatter(
            x=depths,
            y=[p.tps for p in line],
            mode="lines",
            line={"color": color, "dash": "dash"},
            name=f"{workload} (model)",
            legendgroup=workload,
            showlegend=col == 1,
            hovertext=[_point_text(p) for p in line],
            hoverinfo="text",
        ),
        row=1,
        col=col,
    )
    lengths = [(p.shape.depth, p.accept_length) for p in line if p.accept_length is not None]
    if lengths:
        fig.add_trace(
            go.Scatter(
                x=[d for d, _ in lengths],
                y=[a for _, a in lengths],
                mode="lines",
                line={"color": color, "dash": "dash"},
                showlegend=False,
                legendgroup=workload,
            ),
            row=2,
            col=col,
        )


def _measured_traces(
    fig: go.Figure, measured: list[TrialView], method: str, workload: str, color: str, col: int
) -> None:
    mine = [v for v in measured if v.record and v.record.shape and v.record.shape.method == method]
    points = [(v, s) for v in mine if v.record and (s := v.record.workloads.get(workload)) and s.decode_tps]
    if not points:
        return
    hover = [f"trial {v.number}<br>{_flags(v)}" for v, _ in points]
    depths = [v.record.shape.depth for v, _ in points if v.record and v.record.shape]
    fig.add_trace(
        go.Scatter(
            x=depths,
            y=[s.decode_tps.median for _, s in points if s.decode_tps],
            mode="markers",
            marker={"color": color, "size": 9},
            name=f"{workload} (measured)",
            legendgroup=workload,
            showlegend=col == 1,
            hovertext=hover,
            hoverinfo="text+y",
        ),
        row=1,
        col=col,
    )
    lengths = [
        (d, s.acceptance_length.median, h)
        for (_, s), d, h in zip(points, depths, hover, strict=True)
        if s.acceptance_length
    ]
    if lengths:
        fig.add_trace(
            go.Scatter(
                x=[d for d, _, _ in lengths],
                y=[a for _, a, _ in lengths],
                mode="markers",
                marker={"color": color, "size": 9},
                showlegend=False,
                legendgroup=workload,
                hovertext=[h for _, _, h in lengths],
                hoverinfo="text+y",
            ),
            row=2,
            col=col,
        )


def _budget_heatmap(fig: go.Figure, points: list[SurfacePoint], col: int) -> None:
    if not points:
        return
    best: dict[tuple[int, int], SurfacePoint] = {}
    for p in points:
        key = (p.shape.depth, p.shape.budget)
        if key not in best or p.tps > best[key].tps:
            best[key] = p
    depths = sorted({d for d, _ in best})
    budgets = sorted({b for _, b in best})
    z = [[best[(d, b)].tps if (d, b) in best else None for d in depths] for b in budgets]
    text = [[_point_text(best[(d, b)]) if (d, b) in best else "" for d in depths] for b in budgets]
    fig.add_trace(
        go.Heatmap(z=z, x=depths, y=budgets, coloraxis="coloraxis", hovertext=text, hoverinfo="text"),
        row=3,
        col=col,
    )
    launched = [p for p in points if p.measured]
    fig.add_trace(
        go.Scatter(
            x=[p.shape.depth for p in launched],
            y=[p.shape.budget for p in launched],
            mode="markers",
            marker={"symbol": "x", "color": "white", "size": 8},
            name="launched",
            showlegend=col == 1,
            hoverinfo="skip",
        ),
        row=3,
        col=col,
    )


def context_panel(
    frame: pd.DataFrame, views: dict[int, TrialView], curves: Sequence[ContextCurve] = ()
) -> Panel:
    """Measured speed and acceptance over context length per trial, and the model's prediction over context for
    each method's best configuration (dashed, with a one-sd band)."""
    title = "Context length against speed and acceptance: measured (points) and predicted (dashed)"
    ok = frame[frame["status"] == "ok"] if not frame.empty else frame
    if not ok.empty:
        # Only workloads measured at several context lengths: a line joins one workload's variants (its name
        # and stream count, as the probe recorded them), never two workloads.
        ok = ok.assign(cls=ok["series"])
        ok = ok[ok.groupby("cls")["workload"].transform("nunique") > 1]
    if ok.empty and not curves:
        return _message(
            title,
            "No workload was measured at several context lengths; add context variants (context: [null, 8192, 32768]).",
        )
    fig = make_subplots(rows=1, cols=2, subplot_titles=["decode tokens/s", "accept length (tokens/step)"])
    series = set(zip(ok["trial"].tolist(), ok["cls"].tolist(), strict=True)) if not ok.empty else set()
    for trial, cls in sorted(series):
        rows = ok[(ok["trial"] == trial) & (ok["cls"] == cls)].sort_values("prompt_tokens")
        name = f"{cls}, trial {trial}" + (" (no speculation)" if rows["role"].iloc[0] == "baseline" else "")
        hover = _flags(views[trial])
        for col, metric in enumerate(("decode_tps", "acceptance_length"), start=1):
            trace = go.Scatter(
                x=rows["prompt_tokens"],
                y=rows[metric],
                mode="markers+lines",
                name=name,
                legendgroup=name,
                showlegend=col == 1,  # one legend entry for the pair
                hovertext=hover,
                text=rows["workload"],
            )
            fig.add_trace(trace, row=1, col=col)
    for curve in curves:
        _context_curve_traces(fig, curve)
    fig.update_xaxes(title_text="prompt tokens (median)", type="log")
    return Panel(title, fig)


def _context_curve_traces(fig: go.Figure, curve: ContextCurve) -> None:
    name = f"{curve.workload}, {curve.shape.method} predicted"
    hover = "<br>".join(html.escape(f"{k}={v}") for k, v in curve.params.items())
    contexts = list(curve.contexts)
    upper = [t * math.exp(sd) for t, sd in zip(curve.tps, curve.sd, strict=True)]
    lower = [t * math.exp(-sd) for t, sd in zip(curve.tps, curve.sd, strict=True)]
    fig.add_trace(
        go.Scatter(
            x=contexts + contexts[::-1],
            y=upper + lower[::-1],
            fill="toself",
            opacity=0.15,
            line={"width": 0},
            legendgroup=name,
            showlegend=False,
            hoverinfo="skip",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=contexts,
            y=list(curve.tps),
            mode="lines",
            line={"dash": "dash"},
            name=name,
            legendgroup=name,
            hovertext=hover,
        ),
        row=1,
        col=1,
    )
    if any(a is not None for a in curve.accept_length):
        fig.add_trace(
            go.Scatter(
                x=contexts,
                y=list(curve.accept_length),
                mode="lines",
                line={"dash": "dash"},
                name=name,
                legendgroup=name,
                showlegend=False,
                hovertext=hover,
            ),
            row=1,
            col=2,
        )


def pareto_panel(views: list[TrialView]) -> Panel:
    title = "Speed against usable context (Pareto front)"
    points = []
    for view in complete_views(views):
        assert view.record is not None
        speeds = [
            s.decode_tps.median for s in view.record.workloads.values() if s.status == "ok" and s.decode_tps
        ]
        context = usable_context(view.record)
        if speeds and context:
            points.append((context, sum(speeds) / len(speeds), view))
    if not points:
        return _message(title, "No completed trial reported both its usable context and a speed.")
    if len({p[0] for p in points}) == 1:
        return _message(
            title,
            f"Every trial had the same usable context ({points[0][0]} tokens), so there is no trade-off between "
            "speed and context to draw; sweep the context length or memory flags to see one.",
        )
    points.sort(key=lambda p: (-p[0], -p[1]))
    front, best = [], -1.0
    for context, speed, _view in points:  # widest context first: on the front if faster than every wider one
        if speed > best:
            front.append((context, speed))
            best = speed
    fig = go.Figure(
        [
            go.Scatter(
                x=[p[0] for p in points],
                y=[p[1] for p in points],
                mode="markers",
                name="trials",
                hovertext=[f"trial {p[2].number}<br>{_flags(p[2])}" for p in points],
                hoverinfo="text+x+y",
            ),
            go.Scatter(
                x=[f[0] for f in front], y=[f[1] for f in front], mode="lines+markers", name="Pareto front"
            ),
        ]
    )
    fig.update_layout(
        xaxis_title="usable context: min(context length, KV pool) (tokens)",
        yaxis_title="mean decode tokens/s over workloads",
    )
    return Panel(title, fig)


def profile_panel(costs: CostProfile | None) -> Panel:
    """The cost profile the search read: per method, a step's time in baseline tokens over the depth, each forced
    launch a point and the profile's reading of chains a line, one colour per stream count and context; what it
    was measured on beside it. The acceptance it was combined with is the surface panel's."""
    title = "Step cost from the cost profile (forced acceptance): time per step over depth and batch"
    if costs is None:
        return _message(
            title,
            "No cost profile: this study learnt step times from its own launches (`specsweep profile --space "
            "FILE`, then `specsweep run --profile FILE`, learns only acceptance per workload).",
        )
    methods = list(dict.fromkeys(s.shape.method for s in costs.steps))
    groups = sorted({(s.streams, s.context) for s in costs.steps})
    fig = make_subplots(rows=1, cols=len(methods), subplot_titles=methods)
    for col, method in enumerate(methods, start=1):
        for i, (streams, context) in enumerate(groups):
            mine = [
                s
                for s in costs.steps
                if s.shape.method == method and (s.streams, s.context) == (streams, context)
            ]
            table = costs.tables(streams, context).get(method)
            if not mine or table is None:
                continue
            name = f"{streams} stream{'s' if streams > 1 else ''}, {context:.0f} tokens"
            color = f"hsl({i * 67 % 360},60%,45%)"
            fig.add_trace(
                go.Scatter(
                    x=[s.shape.depth for s in mine],
                    y=[s.tokens for s in mine],
                    mode="markers",
                    name=f"{name}: forced launches",
                    legendgroup=name,
                    marker={"color": color},
                    hovertext=[
                        f"width {s.shape.width}, budget {s.shape.budget}, forced {s.forced_length:g}, "
                        f"counted {s.measured_length:.2f}"
                        for s in mine
                    ],
                    hoverinfo="text+y",
                ),
                row=1,
                col=col,
            )
            base = mine[0].shape
            depths = list(range(1, max(s.shape.depth for s in mine) + 1))
            chains = [dataclasses.replace(base, depth=d, width=1, budget=d) for d in depths]
            fig.add_trace(
                go.Scatter(
                    x=depths,
                    y=[table.tokens(c) for c in chains],
                    mode="lines",
                    name=f"{name}: chains, as the profile reads them",
                    legendgroup=name,
                    line={"color": color},
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text="depth", row=1, col=col)
    fig.update_yaxes(title_text="step time (baseline tokens)", row=1, col=1)
    key = costs.key
    rows = [
        ["engine", f"{key.engine} {key.engine_version}"],
        ["model", key.model],
        ["hardware", key.hardware],
        ["launches", f"{costs.launches} (launch-to-launch noise {costs.launch_noise:.1%})"],
    ]
    return Panel(title, fig, str(HTML.table(["measured on", ""], rows)))


def position_panel(views: list[TrialView]) -> Panel:
    """Per trial and workload, the share of verify steps that accepted each draft position (SGLang's histogram of
    correct drafts, vLLM's per-position counters), with the server's own acceptance-length gauge beside the
    length measured per request."""
    title = "Acceptance per draft position"
    lines = [
        (v, workload, s)
        for v in views
        if v.record is not None
        for workload, s in v.record.workloads.items()
        if s.position_acceptance
    ]
    if not lines:
        return _message(
            title,
            "No trial's server reported acceptance per draft position (SGLang 0.5.23's "
            "`spec_correct_drafts_histogram`, vLLM's per-position counters; llama.cpp reports none).",
        )
    workloads = sorted({w for _, w, _ in lines})
    fig = go.Figure()
    for v, workload, s in lines:
        shares = list(s.position_acceptance)
        fig.add_trace(
            go.Scatter(
                x=list(range(1, len(shares) + 1)),
                y=shares,
                mode="lines+markers",
                name=f"trial {v.number} · {workload}",
                legendgroup=workload,
                line={"color": f"hsl({workloads.index(workload) * 67 % 360},60%,45%)"},
                hovertext=f"trial {v.number}<br>{_flags(v)}",
                hoverinfo="text+y",
            )
        )
    fig.update_layout(xaxis_title="draft position", yaxis_title="share of verify steps accepting it")
    fig.update_yaxes(range=[0, 1])
    rows = [
        [str(v.number), workload, f"{s.acceptance_length.median:.2f}", f"{s.acceptance_gauge.median:.2f}"]
        for v, workload, s in lines
        if s.acceptance_length and s.acceptance_gauge
    ]
    note = (
        "<p>A chain's positions fall geometrically (each needs every one before it); a position that stays near "
        "its predecessor is one the draft rarely gets wrong. Below: tokens per verify step measured per request, "
        "and the server's gauge read after each batch (medians). The gauge is not the batch's length: it covers "
        "the server's last logged decode step only (a loop's last steps accept every draft: NGRAM 12 read 12.0 "
        "where its requests averaged 6.30), so it is shown, never compared.</p>"
    )
    columns = ["trial", "workload", "acceptance length (requests)", "server gauge (last logged step)"]
    gauge = table(columns, rows) if rows else ""
    return Panel(title, fig, note + gauge)


LOAD_ROWS = (  # (what, the summary's latency part or None for goodput, unit scale, axis title)
    ("time to first token p90", "ttft_s", 1.0, "s"),
    ("time per output token p90", "tpot_s", 1000.0, "ms"),
    ("goodput", None, 1.0, "req/s"),
)


def load_panel(views: list[TrialView], recommended: set[int]) -> Panel:
    """Open-loop workloads: latency percentiles and goodput against the arrival rate, one line per configuration
    (the baseline and each workload's best), one column per workload."""
    title = "Latency and goodput against the arrival rate (open loop)"
    shown = [
        v
        for v in complete_views(views)
        if (v.role == "baseline" or v.number in recommended)
        and v.record
        and any(s.rate is not None and s.status == "ok" for s in v.record.workloads.values())
    ]

    def across_rates(s: WorkloadSummary) -> str:  # a workload's variants at several rates share a column
        return (s.name or s.workload.split("/")[0]) + (
            f" at {s.context_tokens} tokens" if s.context_tokens else ""
        )

    series = sorted(
        {across_rates(s) for v in shown if v.record for s in v.record.workloads.values() if s.rate}
    )
    capacities = [
        [
            str(v.number),
            key,
            f"{s.capacity_rps.median:.3g}",
            ", ".join(step.label for step in s.capacity_steps),
        ]
        for v in complete_views(views)
        if v.record
        for key, s in v.record.workloads.items()
        if s.capacity_rps is not None
    ]
    if not series and capacities:
        return Panel(
            "Capacity within the latency limits (open loop)",
            html=table(["trial", "workload", "capacity (req/s)", "runs of the search (req/s)"], capacities),
        )
    if not series:
        return _message(
            title, "No workload was measured open loop; give one `rate: [0.5, 1, 2]` (requests/s)."
        )
    fig = make_subplots(
        rows=len(LOAD_ROWS),
        cols=len(series),
        shared_xaxes=True,
        column_titles=series,
        row_titles=[f"{what} ({unit})" for what, _, _, unit in LOAD_ROWS],
        vertical_spacing=0.06,
    )
    for v in shown:
        assert v.record is not None
        name = "baseline" if v.role == "baseline" else f"trial {v.number}"
        for col, label in enumerate(series, start=1):
            points = sorted(
                (s.rate, s)
                for s in v.record.workloads.values()
                if s.rate and s.status == "ok" and across_rates(s) == label
            )
            for row, (_, part, scale, _) in enumerate(LOAD_ROWS, start=1):
                ys = [
                    (s.goodput_rps.median if s.goodput_rps else None)
                    if part is None
                    else s.latency.get(part, {}).get("p90", math.nan) * scale
                    for _, s in points
                ]
                fig.add_trace(
                    go.Scatter(
                        x=[rate for rate, _ in points],
                        y=ys,
                        mode="lines+markers",
                        name=name,
                        legendgroup=name,
                        showlegend=row == 1 and col == 1,
                        line={"dash": "dot" if v.role == "baseline" else "solid"},
                        hovertext=f"{name}<br>{_flags(v)}",
                        hoverinfo="text+x+y",
                    ),
                    row=row,
                    col=col,
                )
    fig.update_xaxes(type="log")  # every row: axes that match must share their type
    fig.update_xaxes(title_text="requests per second", row=len(LOAD_ROWS))
    fig.update_layout(height=260 * len(LOAD_ROWS))
    note = (
        "<p>Requests arrive on their own clock (Poisson unless the workload says constant). Where the lines of a "
        "configuration and the baseline cross, speculation stops paying: verification competes with the other "
        "requests for the batch.</p>"
    )
    return Panel(title, fig, note)


def memory_panel(views: list[TrialView]) -> Panel:
    title = "Memory per trial"
    rows = [v for v in views if v.record is not None and v.record.facts.free_after_pool_gb is not None]
    if not rows:
        return _message(
            title,
            "The engine's logs gave no free-memory figures (llama.cpp logs its buffers instead: see the GPU "
            "panel); the KV pool per trial is in each record.",
        )
    labels = [f"trial {v.number}" for v in rows]
    facts = [v.record.facts for v in rows if v.record]
    unused = [
        f.free_after_pool_gb is not None
        and f.free_after_pool_gb > max(FREE_BUT_UNUSED_GB, f.kv_cache_gb or 0.0)
        for f in facts
    ]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=labels, y=[f.kv_cache_gb for f in facts], name="KV pool (GB)"))
    fig.add_trace(go.Bar(x=labels, y=[f.graph_capture_gb for f in facts], name="CUDA-graph capture (GB)"))
    fig.add_trace(
        go.Bar(
            x=labels,
            y=[f.free_after_pool_gb for f in facts],
            name="free after the pool (GB)",
            marker_color=["crimson" if u else "lightgreen" for u in unused],
        )
    )
    unused_graphs = [_sizing_number(f, "unused_graph_gb", sum) for f in facts]
    if any(unused_graphs):
        fig.add_trace(go.Bar(x=labels, y=unused_graphs, name="graph memory for sizes never run (GB)"))
    fig.add_trace(
        go.Scatter(x=labels, y=[f.kv_pool_tokens for f in facts], name="KV pool (tokens)", mode="markers"),
        secondary_y=True,
    )
    predicted = [_sizing_number(f, "predicted_pool_tokens", max) for f in facts]
    if any(predicted):
        fig.add_trace(
            go.Scatter(
                x=labels,
                y=predicted,
                name="KV pool the files predict (tokens)",
                mode="markers",
                marker={"symbol": "x", "size": 10},
            ),
            secondary_y=True,
        )
    for label, flag in zip(labels, unused, strict=True):
        if flag:
            fig.add_annotation(
                x=label, y=0, text="free but unused?", showarrow=False, yshift=-28, font={"color": "crimson"}
            )
    fig.update_layout(barmode="group", yaxis_title="GB")
    fig.update_yaxes(title_text="KV pool tokens", secondary_y=True)
    note = (
        "<p>Red: more memory free after the KV pool than the pool itself got. Free memory next to a small pool "
        "points at a sizing miscalculation (see the field reports' x5 case), not a shortage. Crosses: the pool "
        "the model's own files predict (`specsweep doctor`), where the space names a local model.</p>"
    )
    return Panel(title, fig, note)


def controller_panel(answers: list[ControllerAnswer]) -> Panel:
    """Per workload and load, no speculation, the best tuned static configuration and the engine's controller
    side by side (the loads of a workload in order along the axis: one stream, then more); shown where the
    study swept the engine's controller beside static configurations."""
    title = "The engine's controller against a tuned configuration"
    keys = [a.workload for a in answers]
    fig = go.Figure()
    for index, (name, color) in enumerate(
        (("none", "lightgray"), ("best static", "steelblue"), (answers[0].controller, "darkorange"))
    ):
        arms = [a.arms[index] for a in answers]
        fig.add_trace(
            go.Bar(
                x=keys,
                y=[arm.median for arm in arms],
                name=name,
                marker_color=color,
                text=[arm.label for arm in arms],
                hovertemplate="%{x}: %{y:.1f} (%{text})<extra></extra>",
            )
        )
    for answer in answers:
        fig.add_annotation(
            x=answer.workload, y=0, yshift=-30, showarrow=False, text=f"run {answer.run.value}"
        )
    fig.update_layout(barmode="group", yaxis_title="decode t/s (median)")
    rows = [[a.workload, a.run.value, a.why] for a in answers]  # the template escapes every cell
    return Panel(title, fig, table(["workload", "run", "why"], rows))


def gpu_panel(views: list[TrialView]) -> Panel:
    """The server's GPU memory per trial as NVML read it (at ready and at its peak while probed), beside the
    engine's own buffers on the GPUs (model, KV, compute): what speculation costs in memory."""
    title = "GPU memory per trial"
    read = [v.record.gpu for v in views if v.record is not None and v.record.gpu is not None]
    rows = [v for v in views if v.record is not None and v.record.gpu is not None and v.record.gpu.present]
    if not rows:
        why = next((g.reason for g in read if g.reason), "the records hold no GPU reading")
        return _message(title, f"No GPU was read: {why}.")
    labels = [_name(v) for v in rows]
    uses = [v.record.gpu for v in rows if v.record and v.record.gpu]
    facts = [v.record.facts for v in rows if v.record]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=[u.ready_mib for u in uses], name="server at ready (MiB, NVML)"))
    fig.add_trace(go.Bar(x=labels, y=[u.peak_mib for u in uses], name="server at its peak (MiB, NVML)"))
    for kind in ("model", "kv", "compute"):
        values = [f.gpu_buffers.get(kind) for f in facts]
        if any(values):
            fig.add_trace(
                go.Bar(x=labels, y=values, name=f"{kind} buffers on the GPU (MiB, the engine's log)")
            )
    fig.update_layout(barmode="group", yaxis_title="MiB")
    head = uses[0]
    note = (
        f"<p>{html.escape(dataclasses.replace(head, ready_mib=None).describe())}; the server's memory "
        f"{html.escape(head.how)}. What NVML reads beyond the engine's buffers is the CUDA context and its "
        "allocator.</p>"
    )
    return Panel(title, fig, note)


def _sizing_number(facts: LaunchFacts, name: str, combine: Callable[[list[float]], float]) -> float | None:
    """One number of the sizing doctor's findings for a launch (`specsweep doctor`), combined over findings."""
    values = [float(f.numbers[name]) for f in facts.sizing if name in f.numbers]
    return combine(values) if values else None


def table(headers: list[str], rows: list[list[str]]) -> str:
    return str(HTML.table(headers, rows))


def _name(view: TrialView) -> str:
    return str(view.number) if view.phase == Phase.SEARCH else f"confirmation {view.number} ({view.label})"


def failures_panel(views: list[TrialView], confirm: list[TrialView]) -> Panel:
    failed = [v for v in (*views, *confirm) if v.state == "FAIL"]
    overridden = [v for v in views if v.record and v.record.facts.overrides]
    rows = [
        [
            _name(v),
            v.record.stage if v.record else Stage.INTERRUPTED,
            v.failure,
            " ".join(f"{k}={x}" for k, x in (v.record.params if v.record else {}).items()),
        ]
        for v in failed
    ]
    overrides = [[str(v.number), o] for v in overridden if v.record for o in v.record.facts.overrides]
    return Panel("Failed trials and silent overrides", html=str(HTML.failures(rows, overrides)))


def importance_panel(study: optuna.Study) -> Panel:
    title = "Parameter importance (Optuna)"
    names = study.metric_names or []
    fig = go.Figure()
    for i, name in enumerate(names):
        try:
            with (
                warnings.catch_warnings()
            ):  # "few trials per regime": the panel's title already says it ranks a sample
                warnings.simplefilter("ignore")
                importances = optuna.importance.get_param_importances(study, target=_objective(i))
        except (RuntimeError, ValueError):
            continue
        if importances:
            fig.add_trace(go.Bar(x=list(importances), y=list(importances.values()), name=name))
    if not fig.data:
        return _message(title, "Too few completed trials over a common set of parameters to rank them yet.")
    fig.update_layout(
        barmode="group", yaxis_title="importance (share of decode t/s variance)", xaxis_title="parameter"
    )
    return Panel(title, fig)


def _objective(index: int) -> Callable[[optuna.trial.FrozenTrial], float]:
    return lambda trial: float(trial.values[index])


def timeline_panel(study: optuna.Study) -> Panel:
    if not study.trials:
        return _message("Trial timeline", "No trial has run yet.")
    fig = optuna.visualization.plot_timeline(study)
    fig.update_layout(title=None, xaxis_title="wall-clock time", yaxis_title="trial")
    return Panel("Trial timeline", fig)


@dataclass(frozen=True)
class Headline:
    """One workload's answer in a row (what to run, its gain and interval, the verdict in a word), and the
    evidence folded beneath it, each piece said once."""

    workload: str
    run: str
    params: dict[str, Any]
    gain: str
    verdict: str
    evidence: list[tuple[str, str]]


def headline(r: Recommendation) -> Headline:
    tps, base = speed_text(r)
    acc = r.summary.acceptance_length
    ttft = r.summary.latency.get("ttft_s", {})
    measured = (
        f"{r.trial_label}: {tps} against {base} without speculation; the search said {pct(r.search_gain)}"
        + (f"; acceptance length {acc.median:.2f}" if acc else "")
        + (f"; TTFT p50 / p90 {ttft['p50']:.2f} / {ttft['p90']:.2f} s" if ttft else "")
    )
    evidence = [
        ("measured", measured),
        ("verdict", f"{r.verdict_text}: {r.why_verdict}; noise measured in this study: {r.noise.describe()}"),
        ("prompts and answers (no speculation)", text_health(r)),
    ]
    if r.output is not None:
        evidence.append(
            (
                f"output of {r.trial_label} vs baseline",
                ("CHANGED: " if r.output.changed else "") + r.output.describe(),
            )
        )
    evidence.append(("why this", r.why))  # a veto's reason is in it ("withheld trial N (...): ...")
    if r.output_note:
        evidence.append(("its answers", r.output_note))
    if r.withheld is not None:  # the flags of what the veto holds back, so a reader can judge the veto
        evidence.append((f"{r.withheld.label}'s flags", params_text(r.withheld.params)))
    gain = gain_text(r)
    if r.recommended_label != r.trial_label and r.gain is not None:
        gain = f"{r.trial_label}: {gain}"  # what the best candidate measured, where something else is to run
    return Headline(r.workload, r.recommended_label, r.recommended_params, gain, r.verdict_text, evidence)


def recommendations_html(
    recs: list[Recommendation], overall: OverallRecommendation | None, warnings: StudyWarnings
) -> str:
    rows = [headline(r) for r in recs]
    # Flags every row runs (the space's fixed ones, mostly) are said once, under the table.
    first, others = (rows[0].params, rows[1:]) if len(rows) > 1 else ({}, [])
    shared = {k: v for k, v in first.items() if all(k in r.params and r.params[k] == v for r in others)}
    flags = [params_text({k: v for k, v in row.params.items() if k not in shared}) for row in rows]
    one = None
    if overall is not None:
        gain = f"; worst-case gain {overall.worst_gain:+.0%}" if overall.gains else ""
        one = {
            "trial": overall.trial_label,
            "flags": params_text(overall.params),
            "why": overall.why,
            "gain": gain,
        }
    return str(HTML.recommendations(rows, flags, params_text(shared), one, warnings.messages))


STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}h2{margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}
.empty{color:#666;font-style:italic}code{background:#f4f4f4}
.warning{border:2px solid #c0392b;background:#fdecea;padding:.3em 1em;margin:.8em 0}
table.headlines{width:100%}tr.headline td{font-size:14px}tr.evidence td{border-top:none;background:#fafafa}
summary{cursor:pointer;color:#555}dl{margin:.3em 0}dt{font-weight:600}dd{margin:0 0 .4em 1em}"""


def script_json(text: str) -> str:
    """JSON text safe inside <script>: no character of it can close the tag or start markup."""
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e").replace("/", "\\/")


def figure_html(figure: go.Figure, div_id: str) -> str:
    """A plotly figure as a div and the script that draws it, its JSON escaped by `script_json`."""
    data = script_json(plotly.io.to_json(figure, validate=False))
    height = int(figure.layout.height or 450)  # a taller figure (rows of subplots) gets its own height
    return (
        f"<div id='{div_id}' class='plotly-graph-div' style='height:{height}px;width:100%'></div>"
        f"<script type='text/javascript'>(function(){{var f={data};"
        f"Plotly.newPlot('{div_id}',f.data,f.layout,{{responsive:true}});}})();</script>"
    )


def build(
    study: optuna.Study,
    study_name: str,
    found: Study,
    verdicts: Verdicts,
    surface: PredictedSurface | None = None,
    costs: CostProfile | None = None,
) -> str:
    surface = surface or PredictedSurface()
    views = found.search
    by_number = {v.number: v for v in views}
    frame = study_frame(views)
    panels = [
        Panel(
            "Recommendations",
            html=recommendations_html(verdicts.recommendations, verdicts.overall, verdicts.warnings),
        )
    ]
    builders: list[Callable[[], Panel]] = [
        lambda: speed_panel(frame, by_number),
        lambda: surface_panel(list(surface.points), views),
        lambda: context_panel(frame, by_number, surface.curves),
        lambda: position_panel(views),
        lambda: load_panel(views, {r.trial for r in verdicts.recommendations}),
        lambda: pareto_panel(views),
        lambda: memory_panel(views),
        lambda: gpu_panel(views),
        lambda: failures_panel(views, found.confirm),
        lambda: importance_panel(study),
        lambda: timeline_panel(study),
        lambda: profile_panel(costs),
    ]
    panels += [make() for make in builders]
    if answers := controller_answers(found, verdicts):  # a study that swept the engine's controller
        panels.insert(6, controller_panel(answers))
    shown = []
    for i, panel in enumerate(panels):
        figure = ""
        if panel.figure is not None:
            panel.figure.update_layout(template="plotly_white", margin={"t": 40})
            figure = figure_html(panel.figure, f"panel-{i}")
        # Markup: each panel's HTML was built escaped, and a figure's JSON by script_json.
        shown.append({"title": panel.title, "html": Markup(panel.html), "figure": Markup(figure)})
    done = sum(v.state == "COMPLETE" for v in views)
    confirmed = sum(v.state == "COMPLETE" for v in found.confirm)
    summary = f"{len(views)} trials, {done} complete, {sum(v.state == 'FAIL' for v in views)} failed; " + (
        f"{confirmed} confirmation launches" if confirmed else "no confirmation yet: verdicts are unconfirmed"
    )
    meta = Markup(script_json(json.dumps({"study": study_name, "trials": len(views)})))
    return str(HTML.page(study_name, summary, Markup(STYLE), Markup(get_plotlyjs()), meta, shown))
