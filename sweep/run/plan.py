"""A sweep before it runs: the configurations the engine's rules leave, the launches the search and the
confirmation will make, and the wall time they take (measured in an existing study, else assumed and said so)."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from sweep.engines import Engine
from sweep.launch.gpu import ReadFailed, open_source
from sweep.model.files import weights_on_disk
from sweep.records import TrialRecord
from sweep.search import Candidates, ModelSearch, candidates
from sweep.search.costs import CostProfile
from sweep.space import Space
from sweep.storage import RECORD_ATTR, launched

# Speeds to plan with where neither a study nor the hardware says: a mid-size model on one GPU (or a small one
# on a CPU).
ASSUMED_DECODE_TPS = 30.0
ASSUMED_PREFILL_TPS = 1000.0
PROMPT_TOKENS = 300  # a built-in prompt without a context length, about


@dataclass(frozen=True)
class GpuSpeed:
    """A GPU's datasheet: memory bandwidth (GB/s) and dense bf16 compute (TFLOP/s)."""

    name: str
    bandwidth_gbs: float
    bf16_tflops: float


# Matched by substring of NVML's name, most specific first.
GPU_SPEEDS = (
    GpuSpeed("B200", 8000, 2250),
    GpuSpeed("H200", 4800, 989),
    GpuSpeed("H100 PCIe", 2000, 756),
    GpuSpeed("H100", 3350, 989),
    GpuSpeed("A100-SXM4-80GB", 2039, 312),
    GpuSpeed("A100", 1555, 312),
    GpuSpeed("L40S", 864, 362),
    GpuSpeed("L40", 864, 181),
    GpuSpeed("RTX 6000 Ada", 960, 364),
    GpuSpeed("A6000", 768, 155),
    GpuSpeed("RTX 5090", 1792, 210),
    GpuSpeed("RTX 4090", 1008, 165),
    GpuSpeed("RTX 3090", 936, 71),
    GpuSpeed("A10", 600, 125),
    GpuSpeed("L4", 300, 121),
)
# Shares of the datasheet a server reaches: decode streams the weights once a step, prefill is compute-bound.
BANDWIDTH_SHARE, COMPUTE_SHARE = 0.6, 0.4
# What a decode step costs besides reading the weights (scheduling, kernel launches): SGLang 0.5.17 on the H200
# decoded a 4-layer model (0.13 GB) at 450-2150 t/s, 0.5-2 ms a step where its weights take 0.05 ms.
STEP_OVERHEAD_S = 0.001
BF16_BYTES = 2  # a parameter's bytes where the files do not say (quantized weights make prefill look faster)


@dataclass(frozen=True)
class Hardware:
    """What the machine and the model files say before anything runs: GPU names (NVML) and weight bytes."""

    gpus: tuple[str, ...] = ()
    weight_bytes: int | None = None

    def gpu(self) -> GpuSpeed | None:
        return next((g for name in self.gpus[:1] for g in GPU_SPEEDS if g.name in name), None)


def machine_hardware(engine: Engine) -> Hardware:
    """This machine's GPUs (the servers run here) and the model's weights, for a plan with nothing measured."""
    source = open_source()
    names: tuple[str, ...] = ()
    if not isinstance(source, str):
        try:
            names = source.read().names
        except ReadFailed:
            names = ()
    return Hardware(names, weights_on_disk(engine.setup.model))


def estimated_speeds(hardware: Hardware) -> tuple[float, float, str] | None:
    """Decode and prefill t/s of one request from the weights and the GPU's datasheet, and how; None where
    either is unknown."""
    gpu, weights = hardware.gpu(), hardware.weight_bytes
    if gpu is None or not weights:
        return None
    decode = 1 / (weights / (gpu.bandwidth_gbs * 1e9 * BANDWIDTH_SHARE) + STEP_OVERHEAD_S)
    prefill = gpu.bf16_tflops * 1e12 * COMPUTE_SHARE / (2 * weights / BF16_BYTES)
    how = (
        f"estimated: {weights / 1e9:.2f} GB of weights on the {gpu.name} ({gpu.bandwidth_gbs:.0f} GB/s, "
        f"{gpu.bf16_tflops:.0f} TFLOP/s)"
    )
    return decode, prefill, how


@dataclass(frozen=True)
class LaunchTime:
    """What one launch of the space costs: start-up plus probing every workload."""

    startup_s: float
    probe_s: float
    source: str  # where the numbers come from, for the reader

    @property
    def seconds(self) -> float:
        return self.startup_s + self.probe_s


def assumed_launch_time(space: Space, engine: Engine, hardware: Hardware | None = None) -> LaunchTime:
    estimate = estimated_speeds(hardware) if hardware is not None else None
    decode_tps, prefill_tps, how = estimate or (
        ASSUMED_DECODE_TPS,
        ASSUMED_PREFILL_TPS,
        f"assumed: decodes {ASSUMED_DECODE_TPS:.0f} t/s and prefills {ASSUMED_PREFILL_TPS:.0f} t/s",
    )
    probe_s = 0.0
    for workload in space.workloads:
        prompt = workload.context_tokens or PROMPT_TOKENS
        tokens = min(workload.max_tokens or space.probe.request.max_tokens, space.probe.request.max_tokens)
        request_s = prompt / prefill_tps + tokens / decode_tps
        probe_s += request_s if space.probe.warmup else 0.0
        if workload.capacity is not None:  # its runs, at most as long as one at the range's lowest rate
            probe_s += workload.capacity_probes * ((workload.requests - 1) / workload.capacity[0] + request_s)
        elif workload.rate is not None:  # the arrivals' span, then the last request
            probe_s += space.probe.repeats * ((workload.requests - 1) / workload.rate + request_s)
        else:
            probe_s += space.probe.repeats * request_s
    return LaunchTime(
        engine.typical_startup_s,
        probe_s,
        f"{engine.name} starts in ~{engine.typical_startup_s:.0f} s; {how}; a study measures them",
    )


def measured_launch_time(study: optuna.Study) -> LaunchTime | None:
    """Median start-up and whole-trial time of this study's launches so far."""
    durations, startups = [], []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if not launched(trial) or trial.datetime_start is None or trial.datetime_complete is None:
            continue
        durations.append((trial.datetime_complete - trial.datetime_start).total_seconds())
        record = (
            TrialRecord.from_dict(trial.user_attrs[RECORD_ATTR]) if RECORD_ATTR in trial.user_attrs else None
        )
        if record and record.facts.startup_s is not None:
            startups.append(record.facts.startup_s)
    if not durations:
        return None
    whole = statistics.median(durations)
    startup = statistics.median(startups) if startups else 0.0
    return LaunchTime(
        startup,
        max(0.0, whole - startup),
        f"measured: median of {len(durations)} launches in study '{study.study_name}'",
    )


@dataclass(frozen=True)
class StudyPlan:
    pool: Candidates
    methods: dict[str, int]  # launchable configurations per speculative method
    trials: int  # the search's target, baseline included
    search_launches: int
    cover: int  # start-up trials that cover the space
    confirm_min: int
    confirm_max: int
    launch: LaunchTime
    budget_s: float | None = None
    # With a cost profile: the acceptance launches, and the configurations it gives no step times for.
    acceptance: int | None = None
    unprofiled: int = 0

    @property
    def search_s(self) -> float:
        return self.search_launches * self.launch.seconds

    @property
    def confirm_most(self) -> int:
        """The confirmation's launches at most: its extra rounds stop where the budget (if any) ends."""
        if self.budget_s is None or self.launch.seconds <= 0:
            return self.confirm_max
        room = int((self.budget_s - self.search_s) // self.launch.seconds)
        return max(self.confirm_min, min(self.confirm_max, room))

    def confirm_s(self, most: bool) -> float:
        return (self.confirm_most if most else self.confirm_min) * self.launch.seconds

    def trials_in_budget(self) -> int | None:
        """Search launches that fit the budget with the confirmation's first rounds after them."""
        if self.budget_s is None or self.launch.seconds <= 0:
            return None
        return max(0, int((self.budget_s - self.confirm_s(most=False)) // self.launch.seconds))


def plan_study(
    space: Space,
    engine: Engine,
    trials: int | None = None,
    study: optuna.Study | None = None,
    budget_s: float | None = None,
    costs: CostProfile | None = None,
    hardware: Hardware | None = None,
) -> StudyPlan:
    pool = candidates(space, engine)
    methods = Counter(c.shape.method if c.shape else "none" for c in pool.items)
    target = trials or space.trials
    launch = (measured_launch_time(study) if study else None) or assumed_launch_time(space, engine, hardware)
    predicted = costs is not None
    # With a budget and no trial count the clock ends the search: as many launches as it holds, counted as the run
    # counts them.
    if budget_s is not None and trials is None:
        target = space.launches_in_budget(budget_s, launch.seconds, 0, None, True, predicted)
    search_launches = min(target, len(pool.items) + 1)  # the baseline, then each configuration at most once
    cover = len(space.covering(max(0, (target - 1 - len(space.enqueue)) // 2)))
    acceptance, unprofiled = ModelSearch(space, pool, costs).profiled_plan()
    if costs is not None:  # the baseline and each method's acceptance, then what the profile does not give
        search_launches = min(target, 1 + len(acceptance) + len(unprofiled))
    return StudyPlan(
        pool=pool,
        methods=dict(methods),
        trials=target,
        search_launches=search_launches,
        cover=cover,
        # the confirmation launches no more configurations than the search measured (a profile's predictions aside)
        confirm_min=space.confirm_launches(configurations=search_launches, predicted=predicted),
        confirm_max=space.confirm_launches(most=True, configurations=search_launches, predicted=predicted),
        launch=launch,
        budget_s=budget_s,
        acceptance=len(acceptance) if costs is not None else None,
        unprofiled=len(unprofiled),
    )
