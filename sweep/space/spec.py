"""What a space file says, as values: the swept parameters (`ParamSpec`), the server, the confirmation's
settings and the whole `Space` with the grid and the trials it implies (`parse.py` reads the file into them)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import optuna

from sweep.core.stats import MIN_GAIN
from sweep.probes.settings import ProbeSettings
from sweep.probes.workloads import (
    Workload,
)

GRID_FLOAT_POINTS = 5  # values of a float range without a step, in the grid the model search ranks
MAX_COVER_METHODS = (
    16  # method combinations covered at most (a product of many choices is sampled by TPE instead)
)


class SearchKind(StrEnum):
    """How the sweep picks the next launch after the start-up trials."""

    MODEL = (
        "model"  # the surface model's expected improvement (sweep/search/guided.py); the benchmark's winner
    )
    TPE = "tpe"  # Optuna's TPE over the raw parameters


@dataclass(frozen=True)
class ParamSpec:
    """One swept parameter: choices, or an int/float range; suggested only when its condition holds."""

    name: str
    choices: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    integer: bool = False
    when: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    when_not: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)

    def applies(self, params: Mapping[str, Any]) -> bool:
        return all(params.get(k) in v for k, v in self.when.items()) and not any(
            params.get(k) in v for k, v in self.when_not.items()
        )

    def suggest(self, trial: optuna.Trial) -> Any:
        if self.choices:
            return trial.suggest_categorical(self.name, list(self.choices))
        assert self.low is not None and self.high is not None
        if self.integer:
            return trial.suggest_int(
                self.name, int(self.low), int(self.high), step=int(self.step or 1), log=self.log
            )
        return trial.suggest_float(self.name, self.low, self.high, step=self.step, log=self.log)

    def contains(self, value: Any) -> bool:
        if self.choices:
            return value in self.choices
        assert self.low is not None and self.high is not None
        return isinstance(value, int | float) and self.low <= value <= self.high

    def end(self, high: bool) -> Any:
        """The first or last choice, or the low or high end of the range (on its step grid)."""
        if self.choices:
            return self.choices[-1] if high else self.choices[0]
        assert self.low is not None and self.high is not None
        value = self.low
        if high:
            value = (
                self.high
                if not self.step
                else self.low + math.floor((self.high - self.low) / self.step) * self.step
            )
        return int(value) if self.integer else float(value)

    def grid(self, points: int = GRID_FLOAT_POINTS) -> list[Any]:
        """Every value the search may launch: the choices, every step of an int range (or of a range with a
        step), else `points` values spread over the range (geometrically for a log range)."""
        if self.choices:
            return list(self.choices)
        assert self.low is not None and self.high is not None
        if self.step or self.integer:
            step = self.step or 1
            count = math.floor((self.high - self.low) / step + 1e-9) + 1
            values = [self.low + i * step for i in range(count)]
        elif self.log:
            ratio = (self.high / self.low) ** (1 / (points - 1))
            values = [self.low * ratio**i for i in range(points)]
        else:
            values = [self.low + (self.high - self.low) * i / (points - 1) for i in range(points)]
        return [round(v) if self.integer else float(v) for v in values]

    def values(self) -> list[Any]:
        """The values to check against the engine: every choice, or the two ends of a range."""
        if self.choices:
            return list(self.choices)
        assert self.low is not None and self.high is not None
        if self.integer:
            return [int(self.low), int(self.high)]
        return [self.low, self.high]


@dataclass(frozen=True)
class ServerSpec:
    binary: str = "embedded"
    launcher: tuple[str, ...] = ()
    model: str = "embedded"
    port: int = 0
    host: str = "127.0.0.1"
    startup_timeout: float = 300.0
    # Seconds a server has to exit after SIGTERM before its processes get SIGKILL (a Ctrl-C meanwhile kills at once).
    stop_timeout: float = 10.0
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConfirmSettings:
    """The confirmation after the search: the `top` configurations per workload (and the one-for-all pick)
    launched `launches` times each, interleaved with as many baseline launches, then one more round at a time
    (up to `max_launches`) for those whose verdict is still open; `min_gain` is the smallest gain worth a
    configuration (a verdict says "faster" only beyond it and beyond the noise)."""

    top: int = 2
    launches: int = 3
    max_launches: int = 40
    min_gain: float = MIN_GAIN


@dataclass(frozen=True)
class Space:
    engine: str
    server: ServerSpec
    fixed: Mapping[str, Any]
    params: tuple[ParamSpec, ...]
    enqueue: tuple[Mapping[str, Any], ...]
    workloads: tuple[Workload, ...]
    probe: ProbeSettings
    objective_workload: str | None
    trials: int
    seed: int | None
    source: Path | None = None
    confirm: ConfirmSettings = field(default_factory=ConfirmSettings)
    text: str = ""  # the file as written: kept with the study, so `specsweep confirm` needs only the study
    # Decode t/s subject to these (`ttft_p90_s: 2.0`): Optuna constraints on every trial, and no configuration
    # that exceeds one on a workload is confirmed or recommended for it.
    latency_limits: Mapping[str, float] = field(default_factory=dict)
    search: SearchKind = SearchKind.MODEL

    @property
    def workload_keys(self) -> list[str]:
        return [w.key for w in self.workloads]

    @property
    def objective_names(self) -> list[str]:
        """One objective per workload (decode t/s), unless the space names one workload; with `objective:
        capacity`, one per capacity workload (the highest request rate within the latency limits)."""
        if self.objective_workload:
            return [self.objective_workload]
        capacity = [w.key for w in self.workloads if w.capacity is not None]
        return capacity or self.workload_keys

    def confirm_configurations(self, predicted: bool = False, most: bool = False) -> int:
        """The configurations the confirmation launches: `top` candidates per workload (it ranks every workload
        the baseline measured, not only the objective's), the one-for-all pick and the baseline; with `most`,
        every one the model's doubt may add too (`doubts`), else the one a cost profile's picks usually hold
        (another width where the step times cannot rank it: `predicted`). Doubt is the exception (0.2 to 1.6
        configurations a study in `benchmarks/search_vs_grid.py`), so the first rounds' count leaves it out and
        the most holds it."""
        extra = self.doubts(predicted) if most else int(predicted)
        return (self.confirm.top + extra) * len(self.workloads) + 2

    def doubts(self, predicted: bool = False) -> int:
        """The most configurations per workload the model's doubt adds to the confirmation (`search.in_doubt`:
        a width and a depth), with a model search or a cost profile's predictions (`predicted`); none else."""
        return 2 if predicted or self.search is SearchKind.MODEL else 0

    def confirm_launches(
        self, most: bool = False, configurations: int | None = None, predicted: bool = False
    ) -> int:
        """The confirmation's first rounds in launches (with `most`: every round it may add); 0 without one.
        `configurations`: how many the search has measured (the baseline included), where that bounds the plan
        (without a cost profile the confirmation launches what the search measured and what the model's doubt
        adds); `predicted`: the confirmation of a cost profile's predictions."""
        if not self.confirm.launches:
            return 0
        count = self.confirm_configurations(predicted, most)
        if configurations is not None and not predicted:
            count = min(count, configurations + (self.doubts() * len(self.workloads) if most else 0))
        return count * (self.confirm.max_launches if most else self.confirm.launches)

    def launches_in_budget(
        self,
        seconds: float,
        launch_s: float,
        measured: int,
        limit: int | None,
        confirm: bool,
        predicted: bool = False,
    ) -> int:
        """Search launches that `seconds` hold at `launch_s` each after `measured` configurations, one by one as
        the search starts them (each with the confirmation's first rounds still to fit after it, where `confirm`),
        up to `limit` configurations in all (None: as many as the time holds)."""
        if launch_s <= 0:
            return 0

        def first_rounds(configurations: int) -> int:
            return self.confirm_launches(configurations=configurations, predicted=predicted) if confirm else 0

        count = 0
        while (limit is None or measured + count < limit) and seconds - count * launch_s >= launch_s * (
            1 + first_rounds(measured + count + 1)
        ):
            count += 1
        return count

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        """The swept parameters for this trial, in file order; conditions see what was suggested before."""
        chosen: dict[str, Any] = {}
        for spec in self.params:
            if spec.applies(chosen):
                chosen[spec.name] = spec.suggest(trial)
        return chosen

    def launch_params(self, swept: Mapping[str, Any]) -> dict[str, Any]:
        """The fixed and swept values a trial launches with; a choice of null leaves its flag out (the server's
        own default: e.g. static steps beside adaptive candidates)."""
        return {name: value for name, value in {**self.fixed, **swept}.items() if value is not None}

    def grid(self, limit: int) -> list[dict[str, Any]]:
        """Every combination of the swept parameters' grid values that their conditions allow, in file order,
        up to `limit` (the first `limit`: past it the space is too large to rank exhaustively)."""
        found: list[dict[str, Any]] = [{}]
        for spec in self.params:
            grown = []
            for chosen in found:
                grown += [{**chosen, spec.name: v} for v in spec.grid()] if spec.applies(chosen) else [chosen]
                if len(grown) > limit:
                    break
            found = grown[: limit + 1]
        return found[:limit]

    def covering(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Up to `limit` (all by default) configurations that cover the space's shape: every combination of the
        parameters other parameters are conditioned on (the methods), first with every other parameter at its
        low end (shallow), then at its high end (deep)."""
        if limit is not None and limit <= 0:
            return []
        conditioned = {name for spec in self.params for name in (*spec.when, *spec.when_not)}
        methods = [spec for spec in self.params if spec.choices and spec.name in conditioned]
        combos = [
            dict(zip([m.name for m in methods], values, strict=True))
            for values in itertools.product(*(m.choices for m in methods))
        ]
        found: list[dict[str, Any]] = []
        for deep in (False, True):
            for combo in combos[:MAX_COVER_METHODS]:
                chosen: dict[str, Any] = {}
                for spec in self.params:
                    if spec.applies(chosen):
                        chosen[spec.name] = combo[spec.name] if spec.name in combo else spec.end(deep)
                if chosen not in found:
                    found.append(chosen)
        return found[:limit]
