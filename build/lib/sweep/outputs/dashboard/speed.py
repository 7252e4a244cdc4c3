"""Speed and acceptance: decode t/s against the speculative depth with the baseline, the surface model's predicted
t/s and acceptance per method with every measured launch over it, and context against acceptance and t/s."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sweep.outputs.dashboard.frame import Panel, message_panel, method_axis, method_groups, view_flags
from sweep.search.surface import ContextCurve, SurfacePoint
from sweep.storage import TrialView, complete_views


def speed_panel(frame: pd.DataFrame, views: dict[int, TrialView]) -> Panel:
    """Decode speed against each method's own depth setting, one plot per method, so that every measured
    speculative trial is on the page (a method without a numeric setting shows its trials side by side)."""
    title = "Decode speed against the speculative depth, per method"
    ok = frame[(frame["status"] == "ok") & (frame["role"] != "baseline")] if not frame.empty else frame
    if ok.empty:
        return message_panel(title, "No speculative trial was measured yet.")
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
                    hovertext=[view_flags(views[t]) for t in points["trial"].tolist()],
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
        return message_panel(title, "No speculative configuration was measured or predicted yet.")
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
    hover = [f"trial {v.number}<br>{view_flags(v)}" for v, _ in points]
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
        return message_panel(
            title,
            "No workload was measured at several context lengths; add context variants (context: [null, 8192, 32768]).",
        )
    fig = make_subplots(rows=1, cols=2, subplot_titles=["decode tokens/s", "accept length (tokens/step)"])
    series = set(zip(ok["trial"].tolist(), ok["cls"].tolist(), strict=True)) if not ok.empty else set()
    for trial, cls in sorted(series):
        rows = ok[(ok["trial"] == trial) & (ok["cls"] == cls)].sort_values("prompt_tokens")
        name = f"{cls}, trial {trial}" + (" (no speculation)" if rows["role"].iloc[0] == "baseline" else "")
        hover = view_flags(views[trial])
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
