"""The morning dashboard: one self-contained HTML file (plotly.js inside) per study.

Panels: recommendations; decode t/s against the speculative depth with the baseline; the surface model's
predicted t/s and acceptance per method with every measured launch over it; context against acceptance and
t/s; acceptance per draft position; speed against usable context (Pareto front, when the study has more than one context size);
memory per trial with "free but unused" flagged; failed trials and silent overrides; parameter importance;
the trial timeline. A panel without data says so in words instead of drawing an empty plot.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import optuna
import plotly.graph_objects as go
import plotly.io
from markupsafe import Markup
from plotly.offline import get_plotlyjs

from sweep.analysis import (
    OverallRecommendation,
    Recommendation,
    StudyWarnings,
    Verdicts,
)
from sweep.analysis.controllers import controller_answers
from sweep.outputs.console import headline, params_text, shared_flags
from sweep.outputs.dashboard.frame import HTML, Panel, study_frame
from sweep.outputs.dashboard.hardware import gpu_panel, memory_panel, profile_panel
from sweep.outputs.dashboard.load import load_panel, pareto_panel, position_panel
from sweep.outputs.dashboard.speed import context_panel, speed_panel, surface_panel
from sweep.outputs.dashboard.study import controller_panel, failures_panel, importance_panel, timeline_panel
from sweep.search.costs import CostProfile
from sweep.search.surface import PredictedSurface
from sweep.storage import Study


def recommendations_html(
    recs: list[Recommendation], overall: OverallRecommendation | None, warnings: StudyWarnings
) -> str:
    rows = [headline(r) for r in recs]
    shared, flags = shared_flags(rows)
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
