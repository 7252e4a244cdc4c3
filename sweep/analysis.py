"""A study read back: trials with their records, as a pandas frame, and the best configuration per workload."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import optuna
import pandas as pd
from optuna.trial import TrialState

from sweep.results import Spread, TrialRecord, WorkloadSummary
from sweep.study import INTERRUPTED, RECORD_ATTR, ROLE_ATTR


@dataclass(frozen=True)
class TrialView:
    number: int
    state: str
    role: str
    record: TrialRecord | None

    @property
    def failure(self) -> str:
        if self.state == "FAIL":
            return (self.record.failure if self.record else "") or INTERRUPTED
        return ""


NOISE = 0.05  # a median gain smaller than this is not a gain worth a configuration


@dataclass(frozen=True)
class Recommendation:
    """The best measured configuration for one workload, against the baseline."""

    workload: str
    trial: int
    params: dict[str, Any]
    decode_tps: Spread
    baseline_tps: Spread | None
    gain: float | None
    gain_low: float | None
    gain_high: float | None
    verdict: str
    summary: WorkloadSummary
    # What to run: the best trial, or a cheaper one where the best's gain is not worth its cost.
    recommended_trial: int = -1
    recommended_params: dict[str, Any] = dataclasses.field(default_factory=dict)
    why: str = ""

    @property
    def within_noise(self) -> bool:
        return self.verdict.startswith("within noise")

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "trial": self.trial,
            "params": self.params,
            "decode_tps": dataclasses.asdict(self.decode_tps),
            "baseline_tps": dataclasses.asdict(self.baseline_tps) if self.baseline_tps else None,
            "gain": self.gain,
            "gain_interval": [self.gain_low, self.gain_high],
            "verdict": self.verdict,
            "within_noise": self.within_noise,
            "recommended_trial": self.recommended_trial,
            "recommended_params": self.recommended_params,
            "why": self.why,
            "acceptance_rate": dataclasses.asdict(self.summary.acceptance_rate)
            if self.summary.acceptance_rate
            else None,
            "acceptance_length": dataclasses.asdict(self.summary.acceptance_length)
            if self.summary.acceptance_length
            else None,
            "draft_tokens": self.summary.draft_tokens,
            "accepted_tokens": self.summary.accepted_tokens,
        }


def study_engine(study: optuna.Study, views: list[TrialView]) -> str:
    """The engine a study swept (studies made before it was stored: told apart by their argv)."""
    if "engine" in study.user_attrs:
        return str(study.user_attrs["engine"])
    argvs = [v.record.argv for v in views if v.record and v.record.argv]
    return "sglang" if any("--model-path" in argv for argv in argvs) else "llamacpp"


def trial_views(study: optuna.Study) -> list[TrialView]:
    views = []
    for t in study.get_trials(deepcopy=False):
        data = t.user_attrs.get(RECORD_ATTR)
        views.append(
            TrialView(t.number, t.state.name, t.user_attrs.get(ROLE_ATTR, "search"),
                      TrialRecord.from_dict(data) if data else None)
        )  # fmt: skip
    return views


def study_frame(views: list[TrialView]) -> pd.DataFrame:
    """One row per (trial, workload) measured, with the trial's parameters as columns."""
    rows = []
    for view in views:
        if view.record is None:
            continue
        for key, summary in view.record.workloads.items():
            row: dict[str, Any] = {
                "trial": view.number,
                "state": view.state,
                "role": view.role,
                "workload": key,
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


def baseline_view(views: list[TrialView]) -> TrialView | None:
    return next((v for v in views if v.role == "baseline" and v.state == TrialState.COMPLETE.name), None)


def complete_views(views: list[TrialView]) -> list[TrialView]:
    return [
        v
        for v in views
        if v.state == TrialState.COMPLETE.name and v.record is not None and v.record.workloads
    ]


def decode_median(view: TrialView, workload: str) -> float | None:
    summary = view.record.workloads.get(workload) if view.record else None
    if summary is None or summary.status != "ok" or summary.decode_tps is None:
        return None
    return summary.decode_tps.median


def cost(view: TrialView) -> tuple[bool, float, float]:
    """Cheaper first: speculation off, then fewer/shorter drafts (numeric speculative settings), then less KV."""
    assert view.record is not None
    params = view.record.params
    spec = view.record.facts.speculation_requested
    depth = sum(
        float(v)
        for k, v in params.items()
        if "spec" in k and isinstance(v, int | float) and not isinstance(v, bool)
    )
    return (spec, depth, float(view.record.facts.kv_pool_tokens or 0))


def recommendations(views: list[TrialView]) -> list[Recommendation]:
    complete = complete_views(views)
    baseline = baseline_view(views)
    keys = list(dict.fromkeys(k for v in complete if v.record for k in v.record.workloads))
    out = []
    for key in keys:
        measured = [v for v in complete if decode_median(v, key) is not None]
        if not measured:
            continue
        best = max(measured, key=lambda v: decode_median(v, key) or 0.0)
        assert best.record is not None
        summary = best.record.workloads[key]
        base = baseline.record.workloads.get(key) if baseline and baseline.record else None
        base_tps = base.decode_tps if base and base.status == "ok" else None
        rec = _recommend(key, best.number, best.record.params, summary, base_tps)
        out.append(_cheapest_equivalent(rec, measured, baseline))
    return out


def _cheapest_equivalent(
    rec: Recommendation, measured: list[TrialView], baseline: TrialView | None
) -> Recommendation:
    """Within noise of no speculation: run without it. Otherwise the cheapest trial within noise of the best."""
    if rec.within_noise and baseline is not None and baseline.record is not None:
        why = "the best gain is within noise: no speculation costs less (memory, draft work)"
        return dataclasses.replace(
            rec, recommended_trial=baseline.number, recommended_params=baseline.record.params, why=why
        )
    best = rec.decode_tps.median
    close = [v for v in measured if (decode_median(v, rec.workload) or 0.0) >= best * (1 - NOISE)]
    cheapest = min(close, key=cost)
    assert cheapest.record is not None
    why = (
        "the best measured"
        if cheapest.number == rec.trial
        else (f"within {NOISE:.0%} of trial {rec.trial}'s speed and cheaper (less speculation or memory)")
    )
    return dataclasses.replace(
        rec, recommended_trial=cheapest.number, recommended_params=cheapest.record.params, why=why
    )


@dataclass(frozen=True)
class OverallRecommendation:
    """One configuration for all workloads: the best worst-case gain over the baseline (most users run one server)."""

    trial: int
    params: dict[str, Any]
    worst_gain: float
    gains: dict[str, float]
    why: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def overall_recommendation(views: list[TrialView]) -> OverallRecommendation | None:
    baseline = baseline_view(views)
    if baseline is None or baseline.record is None:
        return None
    keys = [k for k in baseline.record.workloads if decode_median(baseline, k)]
    scored = []
    for view in complete_views(views):
        medians = {k: decode_median(view, k) for k in keys}
        if keys and all(medians.values()):
            gains = {k: (medians[k] or 0.0) / (decode_median(baseline, k) or 1.0) - 1 for k in keys}
            scored.append((min(gains.values()), view, gains))
    if not scored:
        return None
    worst, view, gains = max(scored, key=lambda item: (item[0], [-c for c in cost(item[1])]))
    if worst < NOISE:
        base_gains = dict.fromkeys(keys, 0.0)
        return OverallRecommendation(baseline.number, baseline.record.params, 0.0, base_gains,
                                     "no configuration gains on every workload beyond noise: run without speculation")  # fmt: skip
    assert view.record is not None
    return OverallRecommendation(
        view.number, view.record.params, worst, gains, "best worst-case gain across workloads"
    )


def paired_gains(tps: Spread, base: Spread) -> list[float]:
    """Per-prompt gains: repeat i used the same prompt in both trials. Unpaired, the extremes are compared."""
    if len(tps.values) == len(base.values) and tps.values:
        return [a / b - 1 for a, b in zip(tps.values, base.values, strict=True) if b > 0]
    return [tps.low / base.high - 1, tps.high / max(base.low, 1e-9) - 1]


def verdict(gain: float, gains: list[float]) -> str:
    if abs(gain) < NOISE or (min(gains) <= 0 <= max(gains) and gain < 2 * NOISE):
        return "within noise: keep the cheaper config"
    if min(gains) > 0:
        return "faster"
    if max(gains) < 0:
        return "slower"
    return f"mixed: faster on {sum(g > 0 for g in gains)} of {len(gains)} prompts"


def _recommend(
    key: str, trial: int, params: dict[str, Any], summary: WorkloadSummary, base: Spread | None
) -> Recommendation:
    assert summary.decode_tps is not None
    tps = summary.decode_tps
    if base is None or base.median <= 0:
        return Recommendation(
            key, trial, params, tps, base, None, None, None, "no baseline to compare with", summary
        )
    gain = tps.median / base.median - 1
    gains = paired_gains(tps, base)
    return Recommendation(
        key, trial, params, tps, base, gain, min(gains), max(gains), verdict(gain, gains), summary
    )
