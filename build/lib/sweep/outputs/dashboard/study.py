"""The study itself: the engine's controller against the best static configuration, failed trials and silent
overrides, parameter importance, and the trial timeline."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import optuna
import plotly.graph_objects as go

from sweep.analysis.controllers import ControllerAnswer
from sweep.outputs.dashboard.frame import HTML, Panel, message_panel, table, view_name
from sweep.records import Stage
from sweep.storage import TrialView


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


def failures_panel(views: list[TrialView], confirm: list[TrialView]) -> Panel:
    failed = [v for v in (*views, *confirm) if v.state == "FAIL"]
    overridden = [v for v in views if v.record and v.record.facts.overrides]
    rows = [
        [
            view_name(v),
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
        # Ties in the order of their names: Optuna returns them in the order of a set, which differs from one
        # process to the next, and a page drawn twice from one study should be the same page.
        ranked = sorted(importances.items(), key=lambda item: (-item[1], item[0]))
        if ranked:
            fig.add_trace(go.Bar(x=[k for k, _ in ranked], y=[v for _, v in ranked], name=name))
    if not fig.data:
        return message_panel(
            title, "Too few completed trials over a common set of parameters to rank them yet."
        )
    fig.update_layout(
        barmode="group", yaxis_title="importance (share of decode t/s variance)", xaxis_title="parameter"
    )
    return Panel(title, fig)


def _objective(index: int) -> Callable[[optuna.trial.FrozenTrial], float]:
    return lambda trial: float(trial.values[index])


def timeline_panel(study: optuna.Study) -> Panel:
    if not study.trials:
        return message_panel("Trial timeline", "No trial has run yet.")
    fig = optuna.visualization.plot_timeline(study)
    fig.update_layout(title=None, xaxis_title="wall-clock time", yaxis_title="trial")
    return Panel("Trial timeline", fig)
