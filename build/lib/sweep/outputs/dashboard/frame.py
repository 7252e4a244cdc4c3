"""What every panel is built on: the study as a table (`study_frame`), the `Panel` itself, the page's HTML macros,
and the helpers panels share (parameters, method groups, a message in place of an empty plot, a table)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jinja2
import pandas as pd
import plotly.graph_objects as go

from sweep.records import LaunchFacts, Spread
from sweep.storage import Phase, TrialView

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


def view_flags(view: TrialView) -> str:
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


def message_panel(title: str, text: str) -> Panel:
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


def sizing_number(facts: LaunchFacts, name: str, combine: Callable[[list[float]], float]) -> float | None:
    """One number of the sizing doctor's findings for a launch (`specsweep doctor`), combined over findings."""
    values = [float(f.numbers[name]) for f in facts.sizing if name in f.numbers]
    return combine(values) if values else None


def table(headers: list[str], rows: list[list[str]]) -> str:
    return str(HTML.table(headers, rows))


def view_name(view: TrialView) -> str:
    return str(view.number) if view.phase == Phase.SEARCH else f"confirmation {view.number} ({view.label})"
