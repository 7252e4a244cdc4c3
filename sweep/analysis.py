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
            "acceptance_rate": dataclasses.asdict(self.summary.acceptance_rate)
            if self.summary.acceptance_rate
            else None,
            "acceptance_length": dataclasses.asdict(self.summary.acceptance_length)
            if self.summary.acceptance_length
            else None,
            "draft_tokens": self.summary.draft_tokens,
            "accepted_tokens": self.summary.accepted_tokens,
        }


def trial_views(study: optuna.Study) -> list[TrialView]:
    views = []
    for t in study.get_trials(deepcopy=False):
        data = t.user_attrs.get(RECORD_ATTR)
        views.append(
            TrialView(t.number, t.state.name, t.user_attrs.get(ROLE_ATTR, "search"),
                      TrialRecord.from_dict(data) if data else None)
        )  # fmt: skip
    return views


def study_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per (trial, workload) measured, with the trial's parameters as columns."""
    rows = []
    for view in trial_views(study):
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


def recommendations(study: optuna.Study) -> list[Recommendation]:
    views = trial_views(study)
    complete = [v for v in views if v.state == TrialState.COMPLETE.name and v.record is not None]
    baseline = baseline_view(views)
    keys = list(dict.fromkeys(k for v in complete if v.record for k in v.record.workloads))
    out = []
    for key in keys:
        measured = [
            (v, v.record.workloads[key]) for v in complete
            if v.record and key in v.record.workloads and v.record.workloads[key].status == "ok"
            and v.record.workloads[key].decode_tps is not None
        ]  # fmt: skip
        if not measured:
            continue
        best, summary = max(
            measured, key=lambda pair: pair[1].decode_tps.median if pair[1].decode_tps else 0.0
        )
        assert summary.decode_tps is not None and best.record is not None
        base = baseline.record.workloads.get(key) if baseline and baseline.record else None
        base_tps = base.decode_tps if base and base.status == "ok" else None
        out.append(_recommend(key, best.number, best.record.params, summary, base_tps))
    return out


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
