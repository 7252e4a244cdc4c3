"""The report as a plain-text table for the terminal."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sweep.analysis import ABRow, Recommendation, Verdicts
from sweep.analysis.controllers import ControllerAnswer, controller_answers
from sweep.core.stats import Comparison, Verdict
from sweep.records import Spread, Stage, WorkloadSummary
from sweep.storage import Study


def _spread(s: Spread | None, fmt: str = "{:.1f}") -> str:
    if s is None:
        return "-"
    return f"{fmt.format(s.median)} ({fmt.format(s.low)}-{fmt.format(s.high)})"


PCT_SHOWN = 9.99  # an interval's end past +999% says only that the noise is huge (the verdict says so)


def pct(x: float | None) -> str:
    if x is not None and x > PCT_SHOWN:
        return f">{PCT_SHOWN:+.0%}"
    return "-" if x is None else f"{x * 100:+.0f}%"


def params_text(params: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def columns(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def gain_text(r: Recommendation) -> str:
    if r.gain is None:
        return "-"
    interval = f" [{pct(r.gain_low)}..{pct(r.gain_high)}]" if r.gain_low is not None else ""
    return pct(r.gain) + interval


def speed_text(r: Recommendation) -> tuple[str, str]:
    """The candidate's and the baseline's t/s the verdict rests on (confirmation means, else the search); a
    capacity workload's requests per second within the latency limits, said so."""
    digits, unit = ("{:.1f}", "") if r.summary.unit == "t/s" else ("{:.2f}", f" {r.summary.unit}")
    if r.confirmed and r.confirmed_value is not None:
        launches = r.comparison.launches if r.comparison else (0, 0)
        base = r.confirmed_baseline_value
        return (
            f"{digits.format(r.confirmed_value)}{unit} x{launches[0]}",
            f"{digits.format(base)}{unit} x{launches[1]}" if base else "-",
        )
    return _spread(r.value, digits) + unit, _spread(r.baseline_value, digits) + (
        unit if r.baseline_value else ""
    )


def text_health(r: Recommendation) -> str:
    """The prompts' form and whether the baseline's answers read as text: what the verdict stands on."""
    sent = f"sent in the {r.form}; " if r.form else ""
    if r.health is None:
        return f"{sent}answers without speculation: not checked"
    flag = "" if r.representative else "NOT REPRESENTATIVE: "
    return f"{flag}{sent}answers without speculation: {r.health.describe()}"


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


# The evidence's reason for what to run, and what its answers did that no veto covers: the console says both on
# and under the "run for" line, beside the flags to copy.
WHY_THIS, ITS_ANSWERS = "why this", "its answers"
ON_RUN_LINE = (WHY_THIS, ITS_ANSWERS)


def headline(r: Recommendation) -> Headline:
    tps, base = speed_text(r)
    acc = r.summary.acceptance_length
    ttft = r.summary.latency.get("ttft_s", {})
    measured = (
        f"{r.trial_label}: {tps} against {base} without speculation; the search said {pct(r.search_gain)}"
        + (f"; acceptance length {acc.median:.2f}" if acc else "")
        + (f"; TTFT p50 / p90 {ttft['p50']:.2f} / {ttft['p90']:.2f} s" if ttft else "")
    )
    # Unconfirmed verdicts give the noise as their reason ("launch-to-launch noise not measured ..."): once.
    described = r.noise.describe()
    noise = "" if described in r.why_verdict else f"; noise measured in this study: {described}"
    evidence = [
        ("measured", measured),
        ("verdict", f"{r.verdict_text}: {r.why_verdict}{noise}"),
        ("prompts and answers (no speculation)", text_health(r)),
    ]
    if r.output is not None:
        evidence.append(
            (
                f"output of {r.trial_label} vs baseline",
                ("CHANGES THE MODEL'S OUTPUT: " if r.output.changed else "") + r.output.describe(),
            )
        )
    if r.doubt:
        evidence.append(("the model's doubt", r.doubt))
    evidence.append((WHY_THIS, r.why))  # a veto's reason is in it ("withheld trial N (...): ...")
    if r.output_note:
        evidence.append((ITS_ANSWERS, r.output_note))
    if r.withheld is not None:  # the flags of what the veto holds back, so a reader can judge the veto
        evidence.append((f"{r.withheld.label}'s flags", params_text(r.withheld.params)))
    gain = gain_text(r)
    if r.recommended_label != r.trial_label and r.gain is not None:
        gain = f"{r.trial_label}: {gain}"  # what the best candidate measured, where something else is to run
    return Headline(r.workload, r.recommended_label, r.recommended_params, gain, r.verdict_text, evidence)


def shared_flags(rows: list[Headline]) -> tuple[dict[str, Any], list[str]]:
    """The flags every row runs (the space's fixed ones, mostly), said once under the table, and each row's
    others."""
    first, others = (rows[0].params, rows[1:]) if len(rows) > 1 else ({}, [])
    shared = {k: v for k, v in first.items() if all(k in r.params and r.params[k] == v for r in others)}
    return shared, [params_text({k: v for k, v in row.params.items() if k not in shared}) for row in rows]


def report_text(study_name: str, study: Study, verdicts: Verdicts) -> str:
    recs, overall, warnings = verdicts.recommendations, verdicts.overall, verdicts.warnings
    views = study.search
    done = sum(v.state == "COMPLETE" for v in views)
    failed = [v for v in views if v.state == "FAIL"]
    baseline = next((v.number for v in views if v.role == "baseline" and v.state == "COMPLETE"), None)
    queued = sum(v.state == "WAITING" for v in views)
    infeasible = sum(v.record is not None and v.record.stage == Stage.INFEASIBLE for v in views)
    confirmed = [v for v in study.confirm if v.state == "COMPLETE"]
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
        f"confirmation: {len(confirmed)} launches"
        if confirmed
        else "confirmation: none yet (verdicts are unconfirmed; `specsweep confirm --study NAME`)",
        "",
    ]
    heads = [headline(r) for r in recs]
    shared, flags = shared_flags(heads)
    rows = [("workload", "run", "gain [98% interval]", "verdict")]
    rows += [
        (h.workload, f"{h.run}: {f}" if f else h.run, h.gain, h.verdict)
        for h, f in zip(heads, flags, strict=True)
    ]
    lines += columns(rows)
    if shared:
        lines.append(f"  (every row also runs {params_text(shared)})")
    # The evidence beneath each workload, each piece once: a piece every workload shares is said once for all.
    common = (
        {
            label: text
            for label, text in heads[0].evidence
            if len(heads) > 1 and all((label, text) in h.evidence for h in heads[1:])
        }
        if heads
        else {}
    )
    for h in heads:  # why this one is said on its "run for" line below, with the flags to copy
        lines.append(f"{h.workload}:")
        lines += [
            f"  {label}: {text}"
            for label, text in h.evidence
            if common.get(label) != text and label != WHY_THIS
        ]
    lines += [f"every workload: {label}: {text}" for label, text in common.items() if label != WHY_THIS]
    lines.append("")
    for r in recs:
        lines.append(
            f"run for {r.workload}: {r.recommended_label}: {params_text(r.recommended_params)}  ({r.why})"
        )
        if r.output_note:
            lines.append(f"  {ITS_ANSWERS}: {r.output_note}")
    if overall is not None:
        gains = ", ".join(f"{k} {pct(v)}" for k, v in overall.gains.items())
        lines += [
            "",
            f"one server for all workloads: {overall.trial_label}: {params_text(overall.params)}",
            f"  ({overall.why}{'; gains: ' + gains if gains else ''})",
        ]
        if overall.withheld is not None:
            lines.append(f"  withheld {overall.withheld.label}: {params_text(overall.withheld.params)}")
    lines += controller_lines(controller_answers(study, verdicts))
    lines += load_lines(study, recs)
    lines += gpu_lines(study, recs)
    if warnings.messages:
        lines += ["", "warnings (a verdict one of them makes unreliable or not representative says so):"]
        lines += [f"  {m}" for m in warnings.messages]
    if failed:
        lines += ["", "failed trials:"]
        lines += [f"  trial {v.number}: {v.failure}" for v in failed]
    if failed_confirm := [v for v in study.confirm if v.state == "FAIL"]:
        lines += ["", "failed confirmation launches:"]
        lines += [
            f"  launch {v.number} ({v.label}, round {v.round + 1}): {v.failure}" for v in failed_confirm
        ]
    return "\n".join(lines)


def versus(c: Comparison | None) -> str:
    return "-" if c is None else f"{c.gain:+.1%} [{c.interval}] {c.verdict}"


def controller_lines(answers: list[ControllerAnswer]) -> list[str]:
    """The engine's controller against the best tuned configuration and none, per workload and load."""
    if not answers:
        return []
    rows = [
        (
            "workload",
            "none t/s",
            "best static",
            "controller",
            "static vs none",
            "controller vs none",
            "controller vs static",
            "run",
        )
    ]
    for a in answers:
        none, static, adaptive = a.arms
        rows.append(
            (
                a.workload,
                f"{none.median:.1f}",
                f"{static.label}: {static.median:.1f}",
                f"{adaptive.label}: {adaptive.median:.1f}",
                versus(a.static_vs_none),
                versus(a.controller_vs_none),
                versus(a.controller_vs_static),
                a.run.value,
            )
        )
    lines = [
        "",
        f"the engine's own controller ({answers[0].controller}) against a tuned static configuration:",
    ]
    lines += columns(rows)
    lines += [f"  {a.workload}: run {a.run.value} ({a.run_label}): {a.why}" for a in answers]
    return lines


def ab_text(
    name: str, a: dict[str, object], b: dict[str, object], rows: list[ABRow], warnings: list[str]
) -> str:
    """Report 004's corrected table: metric, A, B, difference (with the 98% interval), verdict."""
    lines = [f"A/B {name}", f"A: {params_text(a)}", f"B: {params_text(b)}", ""]
    table = [("metric", "A", "B", "difference (B - A)", "verdict")]
    lines += columns(table + [(r.metric, r.a, r.b, r.difference, r.verdict) for r in rows])
    if warnings:
        lines += ["", "warnings (verdicts they touch say unreliable):", *(f"  {m}" for m in warnings)]
    return "\n".join(lines)


def load_lines(study: Study, recs: list[Recommendation]) -> list[str]:
    """Open-loop workloads: what each workload's best and the baseline served under arrivals at the rate (the
    rate requests came at, the goodput within the latency limits, latency percentiles, acceptance under load)."""
    baseline = next((v for v in study.search if v.role == "baseline" and v.complete and v.record), None)
    out = []
    for r in recs:
        base = baseline.record.workloads.get(r.workload) if baseline and baseline.record else None
        if r.summary.capacity_rps is not None:
            out.append(
                f"  {r.workload} ({r.summary.arrivals} arrivals): {r.trial_label} {_capacity_text(r.summary)}"
            )
            if base is not None and base.status == "ok":
                out.append(f"    baseline: {_capacity_text(base)}")
            continue
        if r.summary.rate is None:
            continue
        out.append(
            f"  {r.workload} ({r.summary.arrivals} arrivals at {r.summary.rate:g} req/s): {r.trial_label} "
            + _load_text(r.summary)
        )
        if base is not None and base.status == "ok":
            out.append(f"    baseline: {_load_text(base)}")
    out += _where_speculation_stops_paying(recs)
    if not out:
        return []
    limits = (
        ", ".join(f"{k} {v:g}" for k, v in study.latency_limits.items()) or "none set: every request counts"
    )
    return [
        "",
        f"under load (open loop; goodput: requests within the latency limits per second, {limits}):",
        *out,
    ]


def _where_speculation_stops_paying(recs: list[Recommendation]) -> list[str]:
    """Per workload measured at several rates: each rate's best against no speculation, and the rates between
    which it stops paying (a gain that is not faster beyond the noise where confirmed, not positive where not)."""
    families: dict[str, list[Recommendation]] = {}
    for r in recs:
        if r.summary.rate is not None and r.gain is not None:
            families.setdefault(r.workload.rsplit("/", 1)[0], []).append(r)
    out = []
    for family, rated in families.items():
        if len(rated) < 2:
            continue
        rated.sort(key=lambda r: r.summary.rate or 0.0)
        gains = ", ".join(f"{pct(r.gain)} at {r.summary.rate:g} req/s ({r.verdict_text})" for r in rated)
        out.append(f"  {family}: its best against no speculation: {gains}: {_turn(rated)}")
    return out


def _turn(rated: list[Recommendation]) -> str:
    """Where speculation stops paying over rising rates: a gain faster beyond the noise where confirmed, a
    positive one where not."""
    pays = [r.verdict is Verdict.FASTER if r.confirmed else (r.gain or 0.0) > 0 for r in rated]
    if all(pays):
        return "speculation pays at every rate measured"
    if not any(pays):
        return "speculation pays at no rate measured"
    for before, after, paid, paying in zip(rated, rated[1:], pays, pays[1:], strict=False):
        if paid and not paying:
            return (
                f"speculation stops paying between {before.summary.rate:g} and {after.summary.rate:g} req/s"
            )
    return "speculation pays at some rates and not at others, in no order"


def _capacity_text(summary: WorkloadSummary) -> str:
    """`holds the limits up to 2.83 req/s (runs: 0.5 held on 6, 8 over on 12: ttft_p90_s +1.20 s, ...)`."""
    runs = ", ".join(
        step.label
        + ("" if step.held else ": " + ", ".join(f"{n} +{o:.2f} s" for n, o in step.over.items() if o > 0))
        for step in summary.capacity_steps
    )
    found = summary.capacity_rps.median if summary.capacity_rps else 0.0
    held = f"holds the limits up to {found:.3g} req/s" if found else "holds the limits at no rate tried"
    if found and all(step.held for step in summary.capacity_steps):
        held = f"holds the limits at every rate tried, the range's top {found:.3g} req/s included (raise it)"
    return f"{held} (runs: {runs})"


def _load_text(summary: WorkloadSummary) -> str:
    ttft, tpot = summary.latency.get("ttft_s", {}), summary.latency.get("tpot_s", {})
    parts = [
        f"came at {_spread(summary.offered_rps, '{:.2f}')} req/s",
        f"goodput {_spread(summary.goodput_rps, '{:.2f}')} req/s",
        f"ttft p50/p90 {ttft['p50']:.2f}/{ttft['p90']:.2f} s" if ttft else "",
        f"tpot p50/p90 {tpot['p50'] * 1000:.0f}/{tpot['p90'] * 1000:.0f} ms" if tpot else "",
        f"decoding {summary.batch.median:.1f} at once" if summary.batch else "",
        f"accept len {summary.acceptance_length.median:.2f}" if summary.acceptance_length else "",
    ]
    return "; ".join(p for p in parts if p)


def gpu_lines(study: Study, recs: list[Recommendation]) -> list[str]:
    """The GPUs and what the server held on them, for the baseline and each workload's best: NVML's reading at
    ready and at the peak, and the engine's buffers on the GPUs (none where records hold no GPU reading)."""
    views = [v for v in study.search if v.record is not None and v.record.gpu is not None]
    if not views:
        return []
    first = views[0].record.gpu if views[0].record else None
    present = [v for v in views if v.record and v.record.gpu and v.record.gpu.present]
    if not present or first is None:
        return ["", f"GPU: {first.describe() if first else 'none read'}"]
    shown = [v for v in present if v.role == "baseline"][:1]
    shown += [v for v in present if v.number in {r.trial for r in recs} and v not in shown]
    head = present[0].record.gpu if present[0].record else None
    assert head is not None
    out = [
        "",
        f"GPU: {dataclasses.replace(head, ready_mib=None).describe()}; the server's memory ({head.how}):",
    ]
    base = (
        shown[0].record.gpu.ready_mib
        if shown and shown[0].role == "baseline" and shown[0].record and shown[0].record.gpu
        else None
    )
    for view in shown:
        assert view.record is not None and view.record.gpu is not None
        use, facts = view.record.gpu, view.record.facts
        name = f"baseline (trial {view.number})" if view.role == "baseline" else f"trial {view.number}"
        more = (
            f" ({use.ready_mib - base:+.0f} MiB over the baseline)"
            if base is not None and use.ready_mib is not None and view.role != "baseline"
            else ""
        )
        buffers = ", ".join(f"{kind} {mib:.0f} MiB" for kind, mib in facts.gpu_buffers.items())
        out.append(
            f"  {name}: {_fmt(use.ready_mib)} MiB at ready, {_fmt(use.peak_mib)} MiB at its peak{more}"
            + (f"; its buffers on the GPU: {buffers}" if buffers else "")
        )
    return out


def _fmt(mib: float | None) -> str:
    return "-" if mib is None else f"{mib:.0f}"
