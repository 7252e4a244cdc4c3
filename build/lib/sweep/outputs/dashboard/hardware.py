"""The machine: the cost profile's step times, memory per trial with "free but unused" flagged, and the GPUs'
memory per launch."""

from __future__ import annotations

import dataclasses
import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sweep.outputs.dashboard.frame import (
    FREE_BUT_UNUSED_GB,
    HTML,
    Panel,
    message_panel,
    sizing_number,
    view_name,
)
from sweep.search.costs import CostProfile
from sweep.storage import TrialView


def profile_panel(costs: CostProfile | None) -> Panel:
    """The cost profile the search read: per method, a step's time in baseline tokens over the depth, each forced
    launch a point and the profile's reading of chains a line, one colour per stream count and context; what it
    was measured on beside it. The acceptance it was combined with is the surface panel's."""
    title = "Step cost from the cost profile (forced acceptance): time per step over depth and batch"
    if costs is None:
        return message_panel(
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


def memory_panel(views: list[TrialView]) -> Panel:
    title = "Memory per trial"
    rows = [v for v in views if v.record is not None and v.record.facts.free_after_pool_gb is not None]
    if not rows:
        return message_panel(
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
    unused_graphs = [sizing_number(f, "unused_graph_gb", sum) for f in facts]
    if any(unused_graphs):
        fig.add_trace(go.Bar(x=labels, y=unused_graphs, name="graph memory for sizes never run (GB)"))
    fig.add_trace(
        go.Scatter(x=labels, y=[f.kv_pool_tokens for f in facts], name="KV pool (tokens)", mode="markers"),
        secondary_y=True,
    )
    predicted = [sizing_number(f, "predicted_pool_tokens", max) for f in facts]
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


def gpu_panel(views: list[TrialView]) -> Panel:
    """The server's GPU memory per trial as NVML read it (at ready and at its peak while probed), beside the
    engine's own buffers on the GPUs (model, KV, compute): what speculation costs in memory."""
    title = "GPU memory per trial"
    read = [v.record.gpu for v in views if v.record is not None and v.record.gpu is not None]
    rows = [v for v in views if v.record is not None and v.record.gpu is not None and v.record.gpu.present]
    if not rows:
        why = next((g.reason for g in read if g.reason), "the records hold no GPU reading")
        return message_panel(title, f"No GPU was read: {why}.")
    labels = [view_name(v) for v in rows]
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
