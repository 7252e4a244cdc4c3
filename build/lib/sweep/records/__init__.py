"""The records a sweep writes: one row per measured request, one summary per workload, one record per trial.

Each record has a plain-JSON form (`to_dict` / `from_dict`) so that a trial is complete both in
`runs/<study>/trials/<n>/record.json` and in the Optuna trial's user attributes. `facts` (what a launch was),
`requests` (what a probe measured) and `trial` (the trial's record) hold them; they are imported from here."""

from __future__ import annotations

from sweep.records.facts import (
    BUSY_MIN_S,
    BUSY_OTHER_CPU,
    BUSY_STEAL,
    CaptureOom,
    DraftAsk,
    DraftKind,
    Finding,
    GpuUse,
    GraphCapture,
    HostLoad,
    LaunchFacts,
    WindowPool,
    describe_loads,
)
from sweep.records.requests import (
    LATENCY_LIMIT,
    Capacity,
    CapacityStep,
    RequestMeasurement,
    RequestStatus,
    Spread,
    WorkloadSummary,
    series_label,
)
from sweep.records.trial import STARTUP_STAGES, SpecShape, Stage, TrialRecord

__all__ = [
    "BUSY_MIN_S",
    "BUSY_OTHER_CPU",
    "BUSY_STEAL",
    "LATENCY_LIMIT",
    "STARTUP_STAGES",
    "Capacity",
    "CapacityStep",
    "CaptureOom",
    "DraftAsk",
    "DraftKind",
    "Finding",
    "GpuUse",
    "GraphCapture",
    "HostLoad",
    "LaunchFacts",
    "RequestMeasurement",
    "RequestStatus",
    "SpecShape",
    "Spread",
    "Stage",
    "TrialRecord",
    "WindowPool",
    "WorkloadSummary",
    "describe_loads",
    "series_label",
]
