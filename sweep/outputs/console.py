"""The report as a plain-text table for the terminal."""

from __future__ import annotations

from sweep.analysis import OverallRecommendation, Recommendation, TrialView
from sweep.results import Spread


def _spread(s: Spread | None, fmt: str = "{:.1f}") -> str:
    if s is None:
        return "-"
    return f"{fmt.format(s.median)} ({fmt.format(s.low)}-{fmt.format(s.high)})"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.0f}%"


def _params(params: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def report_text(
    study_name: str,
    views: list[TrialView],
    recs: list[Recommendation],
    overall: OverallRecommendation | None = None,
) -> str:
    done = sum(v.state == "COMPLETE" for v in views)
    failed = [v for v in views if v.state == "FAIL"]
    baseline = next((v.number for v in views if v.role == "baseline" and v.state == "COMPLETE"), None)
    queued = sum(v.state == "WAITING" for v in views)
    infeasible = sum(v.record is not None and v.record.stage == "infeasible" for v in views)
    lines = [
        f"study {study_name}: {len(views) - queued} trials, {done - infeasible} complete, {len(failed)} failed"
        + (f", {infeasible} infeasible (not launched)" if infeasible else "")
        + (f", {queued} queued" if queued else "")
        + "; "
        + (
            f"baseline (speculation off) = trial {baseline}"
            if baseline is not None
            else "no completed baseline"
        ),
        "",
    ]
    header = (
        "workload",
        "trial",
        "decode t/s med (range)",
        "baseline t/s",
        "gain (interval)",
        "accept rate",
        "accept len",
        "verdict",
    )
    rows = [header]
    for r in recs:
        rate, length = r.summary.acceptance_rate, r.summary.acceptance_length
        rows.append((
            r.workload, str(r.trial), _spread(r.decode_tps), _spread(r.baseline_tps),
            f"{_pct(r.gain)} ({_pct(r.gain_low)}..{_pct(r.gain_high)})" if r.gain is not None else "-",
            _spread(rate, "{:.2f}"), _spread(length, "{:.2f}"), r.verdict,
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.append("")
    for r in recs:
        lines.append(
            f"run for {r.workload}: trial {r.recommended_trial}: {_params(r.recommended_params)}  ({r.why})"
        )
    if overall is not None:
        gains = ", ".join(f"{k} {_pct(v)}" for k, v in overall.gains.items())
        lines += ["", f"one server for all workloads: trial {overall.trial}: {_params(overall.params)}",
                  f"  ({overall.why}; gains: {gains})"]  # fmt: skip
    if failed:
        lines += ["", "failed trials:"]
        lines += [f"  trial {v.number}: {v.failure}" for v in failed]
    return "\n".join(lines)
