"""Configurations side by side, in the shape of the field reports' four-way table: rows are what a user
weighs (weights, t/s per workload, several streams, usable context, memory, acceptance), columns are trials."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sweep.analysis import study_verdicts
from sweep.core.errors import UserError
from sweep.core.files import write_atomic
from sweep.outputs.publish import DEFAULT_DIR
from sweep.records import TrialRecord
from sweep.run.study import DEFAULT_RUNS, open_study, read_study
from sweep.storage import Phase


@dataclass(frozen=True)
class Column:
    label: str
    record: TrialRecord


def _memory_gb(record: TrialRecord) -> float | None:
    f = record.facts
    kv = f.kv_cache_gb if f.kv_cache_gb is not None else (f.kv_cache_mib / 1024 if f.kv_cache_mib else None)
    parts = [
        p
        for p in (kv, f.weight_gb, f.draft_weight_gb, f.draft_kv_cache_gb, f.graph_capture_gb)
        if p is not None
    ]
    return sum(parts) if parts else None


def _gpu_memory(record: TrialRecord) -> str:
    use = record.gpu
    if use is None or not use.present:
        return "-"
    return f"{_fmt(use.ready_mib, '{:.0f}')} / {_fmt(use.peak_mib, '{:.0f}')}"


def _fmt(value: float | None, pattern: str = "{:.1f}") -> str:
    return "-" if value is None else pattern.format(value)


def rows(columns: list[Column]) -> list[tuple[str, list[str]]]:
    workloads = list(dict.fromkeys(k for c in columns for k in c.record.workloads))
    table: list[tuple[str, list[str]]] = [
        ("weights (GB)", [_fmt(c.record.facts.weight_gb, "{:.2f}") for c in columns])
    ]
    for key in workloads:
        cells = []
        for c in columns:
            s = c.record.workloads.get(key)
            multi = s is not None and s.aggregate_tps is not None  # measured only with several streams
            spread = (
                (s.aggregate_tps if multi else s.decode_tps) if s is not None and s.status == "ok" else None
            )
            cells.append(
                _fmt(spread.median if spread else None)
                if s is None or s.status == "ok"
                else s.status.replace("_", " ")
            )
        table.append((f"{key} ({'aggregate ' if '/' in key else ''}t/s)", cells))
    table.append(
        (
            "usable context (tokens x slots)",
            [
                f"{c.record.facts.usable_context or '-'} x {c.record.facts.max_running_requests or c.record.facts.n_slots or '-'}"
                for c in columns
            ],
        )
    )
    table.append(("KV pool (tokens)", [_fmt(c.record.facts.kv_pool_tokens, "{:.0f}") for c in columns]))
    table.append(
        ("memory: weights + KV + graphs (GB)", [_fmt(_memory_gb(c.record), "{:.2f}") for c in columns])
    )
    table.append(
        ("free after the KV pool (GB)", [_fmt(c.record.facts.free_after_pool_gb, "{:.2f}") for c in columns])
    )
    if any(c.record.gpu is not None and c.record.gpu.present for c in columns):
        table.append(("GPU memory at ready / peak (MiB)", [_gpu_memory(c.record) for c in columns]))
        table.append(
            (
                "buffers on the GPU: model + KV + compute (MiB)",
                [
                    " + ".join(
                        _fmt(c.record.facts.gpu_buffers.get(k), "{:.0f}") for k in ("model", "kv", "compute")
                    )
                    for c in columns
                ],
            )
        )
    for key in workloads:
        cells = []
        for c in columns:
            s = c.record.workloads.get(key)
            length = s.acceptance_length if s else None
            cells.append(_fmt(length.median if length else None, "{:.2f}"))
        table.append((f"{key} accept length", cells))
    return table


def markdown(columns: list[Column]) -> str:
    lines = ["| | " + " | ".join(c.label for c in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows(columns)]
    return "\n".join(lines)


def html_page(columns: list[Column], title: str) -> str:
    head = "".join(f"<th>{html.escape(c.label)}</th>" for c in columns)
    body = "".join(
        f"<tr><th>{html.escape(name)}</th>"
        + "".join(f"<td>{html.escape(cell)}</td>" for cell in cells)
        + "</tr>"
        for name, cells in rows(columns)
    )
    style = "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}th{text-align:left}"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{style}</style>"
        f"</head><body><h1>{html.escape(title)}</h1><table><tr><th></th>{head}</tr>{body}</table></body></html>"
    )


def study_column(spec: str, storage: str | None = None, runs: Path = DEFAULT_RUNS) -> Column:
    """`STUDY` (its one-server recommendation) or `STUDY:TRIAL` as a column."""
    name, _, trial_text = spec.partition(":")
    found = read_study(open_study(name, storage, runs))
    views = {v.number: v for v in found.search}
    if trial_text:
        if not trial_text.isdigit() or int(trial_text) not in views or views[int(trial_text)].record is None:
            raise UserError(
                f"study '{name}' has no measured trial '{trial_text}'",
                f"trials: {', '.join(map(str, views))}",
            )
        record = views[int(trial_text)].record
        assert record is not None
        return Column(f"{name}:{trial_text}", record)
    verdicts = study_verdicts(found)
    overall, recs = verdicts.overall, verdicts.recommendations
    if overall is None and not recs:
        raise UserError(f"study '{name}' has nothing measured to compare", "run it first")
    chosen = found.named(overall.trial_label if overall else recs[0].recommended_label)
    assert chosen is not None and chosen.record is not None
    where = chosen.number if chosen.phase is Phase.SEARCH else chosen.name.replace(" ", "-")
    return Column(f"{name}:{where}", chosen.record)


def compare_studies(
    specs: Sequence[str], storage: str | None = None, runs: Path = DEFAULT_RUNS, output: Path | None = None
) -> tuple[list[Column], Path]:
    """Two or more configurations side by side: their columns, and the HTML page written (by default
    `dashboards/compare-<A>-<B>.html`)."""
    if len(specs) < 2:
        raise UserError("compare needs two or more configurations", "e.g. specsweep compare demo demo:0")
    columns = [study_column(spec, storage, runs) for spec in specs]
    out = output or DEFAULT_DIR / (
        "compare-" + "-".join(c.label.replace(":", "_") for c in columns) + ".html"
    )
    write_atomic(out, html_page(columns, "specsweep compare: " + ", ".join(c.label for c in columns)))
    return columns, out
