"""Load and position: speed against usable context (the Pareto front), acceptance per draft position, and latency
and goodput against the load a workload was offered."""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sweep.outputs.dashboard.frame import Panel, message_panel, table, view_flags
from sweep.records import WorkloadSummary
from sweep.storage import TrialView, complete_views


def pareto_panel(views: list[TrialView]) -> Panel:
    title = "Speed against usable context (Pareto front)"
    points = []
    for view in complete_views(views):
        assert view.record is not None
        speeds = [
            s.decode_tps.median for s in view.record.workloads.values() if s.status == "ok" and s.decode_tps
        ]
        context = view.record.facts.usable_context
        if speeds and context:
            points.append((context, sum(speeds) / len(speeds), view))
    if not points:
        return message_panel(title, "No completed trial reported both its usable context and a speed.")
    if len({p[0] for p in points}) == 1:
        return message_panel(
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
                hovertext=[f"trial {p[2].number}<br>{view_flags(p[2])}" for p in points],
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
        return message_panel(
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
                hovertext=f"trial {v.number}<br>{view_flags(v)}",
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
        return message_panel(
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
                        hovertext=f"{name}<br>{view_flags(v)}",
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
