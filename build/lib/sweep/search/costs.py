"""Cost profiles: what a speculative step costs on one machine, engine release, model and set of fixed flags,
measured once with the engine's forced acceptance, so that a new workload needs only its acceptance measured.

The design. A verify step's time depends on the draft's shape (depth, tree width, draft budget), on how many
requests decode together and on the context they read, not on the text: what the text decides is how many
tokens a step emits. An engine told to accept a mean length L (`Engine.synthetic_acceptance`) emits L tokens a
step whatever it drafts, so a launch's decode t/s gives the step's time, L / t/s, and the baseline launched
beside it the time of one plain token at the same streams and context. The profile keeps each step's time in
those baseline tokens (what the surface model's step line is in), per workload of the profile's space (its
streams and context), at a few forced lengths (a step's time hardly moves with L; measured, not assumed).

A run reads a profile for the same engine, release, model, hardware and fixed flags (`ProfileKey`; anything
else is refused or dropped with its reason) and the surface model takes the profile's step times instead of
fitting them from the workload's own launches: at a measured shape its measurement, elsewhere the method's
least-squares step line plus the measured shapes' residuals, weighted by their nearness, with a doubt that grows
with the distance (`StepTable`). What is left to learn per workload is acceptance.

Forced launches are marked (`TrialRecord.synthetic_length`) and live only in the profile's own folder: never in
a study, a verdict or a recommendation; their answers are not text and are never checked.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from sweep.core.errors import UserError
from sweep.core.files import write_atomic
from sweep.engines import Engine
from sweep.launch import host
from sweep.model.files import model_identity
from sweep.records import SpecShape, TrialRecord
from sweep.search.surface import NOISE_FLOOR, StepFit, fit_step, step_prior
from sweep.space import Space
from sweep.storage import COST_PROFILE_ATTR

FORMAT = 1
# The forced lengths a shape is launched at, as the share of its draft accepted: L = 1 + share x depth.
DEFAULT_SHARES = (0.25, 0.75)
# A workload of a run takes the profile's step times measured at the same streams and at the context nearest its
# own within this factor; further off, the step times of another context are not this one's.
CONTEXT_REACH = 2.0
# The residual weights' reach, in the shape's coordinates (depth, budget, log width) scaled to [0, 1].
NEARNESS = 0.35


@dataclass(frozen=True)
class ProfileKey:
    """What a profile's step times hold for: a run with another engine release, model, hardware or fixed flags
    measures other costs."""

    engine: str
    engine_version: str
    model: str  # `modelfiles.model_identity`
    hardware: str
    fixed: Mapping[str, Any] = field(default_factory=dict)  # the space's fixed parameters
    extra_args: str = ""  # the digest of the flags passed through verbatim (they may hold a key)

    def differences(self, other: ProfileKey, fields: Iterable[str] | None = None) -> list[str]:
        """What differs from `other`, as `what: ours vs theirs` (over `fields`, all by default)."""
        names = list(fields or ("engine", "engine_version", "model", "hardware", "fixed", "extra_args"))
        return [
            f"{name.replace('_', ' ')}: {getattr(self, name)!r} vs {getattr(other, name)!r}"
            for name in names
            if getattr(self, name) != getattr(other, name)
        ]

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "fixed": dict(self.fixed)}


# Known before any launch: what a run can be refused on at once. The rest is read from its first launch.
STATIC_FIELDS = ("engine", "model", "fixed", "extra_args")
LAUNCH_FIELDS = ("engine_version", "hardware")


def hardware(record: TrialRecord) -> str:
    """What ran a launch: its GPUs by name, else the CPU (a profile measured on one holds on no other)."""
    if record.gpu is not None and record.gpu.present:
        names = Counter(record.gpu.devices)
        return ", ".join(f"{n} x{c}" if c > 1 else n for n, c in names.items())
    return f"CPU: {host.cpu_name()} x{os.cpu_count() or 1}"


def space_key(space: Space, engine: Engine) -> ProfileKey:
    """The key as a space file gives it, before any launch (the release and the hardware are left empty)."""
    extra = list(space.server.extra_args)
    digest = hashlib.sha256(json.dumps(extra).encode()).hexdigest()[:16] if extra else ""
    return ProfileKey(space.engine, "", model_identity(engine.setup.model), "", dict(space.fixed), digest)


def check_space(profile: CostProfile, path: Path, space: Space, engine: Engine) -> None:
    """Refuse a profile measured for another engine, model or fixed flags than this space's, in one line."""
    differences = profile.key.differences(space_key(space, engine), STATIC_FIELDS)
    if differences:
        raise UserError(
            f"cost profile {path} was measured for another set-up ({'; '.join(differences)})",
            "measure one for this space: specsweep profile --space FILE",
        )


def profile_mismatches(key: ProfileKey, record: TrialRecord) -> list[str]:
    """How a run's launch differs from what the profile was measured on, in what only a launch tells."""
    seen = dataclasses.replace(key, engine_version=record.facts.engine_version, hardware=hardware(record))
    return key.differences(seen, LAUNCH_FIELDS)


@dataclass(frozen=True)
class StepTime:
    """One forced launch on one workload: the step's time in the baseline's tokens at the same streams and
    context."""

    workload: str
    streams: int
    context: float
    shape: SpecShape
    forced_length: float
    measured_length: float  # what the server counted (the forced one where it counted nothing)
    decode_tps: float
    baseline_tps: float

    @property
    def tokens(self) -> float:
        return self.measured_length / self.decode_tps * self.baseline_tps

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "shape": self.shape.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepTime:
        shape = SpecShape.from_dict(data["shape"])
        assert shape is not None
        return cls(**{**data, "shape": shape})


@dataclass(frozen=True)
class ShapeStart:
    """Whether a forced launch's server came up: memory is the set-up's (model, fixed flags, hardware), not the
    text's, so a shape that did not start for the profile does not start for any workload's study."""

    params: Mapping[str, Any]
    shape: SpecShape
    started: bool

    def to_dict(self) -> dict[str, Any]:
        return {"params": dict(self.params), "shape": self.shape.to_dict(), "started": self.started}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShapeStart:
        shape = SpecShape.from_dict(data["shape"])
        assert shape is not None
        return cls(dict(data["params"]), shape, bool(data["started"]))

    @classmethod
    def of(cls, record: TrialRecord) -> ShapeStart | None:
        """A forced launch's start (None: the baseline, or a launch that stopped before its server did)."""
        if record.shape is None or record.started is None:
            return None
        return cls(dict(record.params), record.shape, record.started)


@dataclass(frozen=True)
class StepTable:
    """One method's step times at one streams and context, as the surface model reads a step (`tokens`,
    `relative_sd`): the method's step line, and the measured shapes' residuals from it interpolated by a Gaussian
    process over the shapes (depth, budget, log width), so that a measured shape keeps its measurement, a knee
    the line misses is kept near where it was measured, and the doubt grows away from every measurement."""

    line: StepFit
    points: tuple[tuple[SpecShape, float], ...]  # each measured shape's mean
    noise: float  # what a measured shape's mean may be off by: the launches' spread over their square root

    @classmethod
    def fit(cls, points: Sequence[tuple[SpecShape, float]], draft_model: bool) -> StepTable:
        by_shape: dict[tuple[int, int, int], list[float]] = {}
        first: dict[tuple[int, int, int], SpecShape] = {}
        for shape, tokens in points:
            key = (shape.depth, shape.width, shape.budget)
            by_shape.setdefault(key, []).append(tokens)
            first.setdefault(key, shape)
        means = tuple((first[k], statistics.mean(v)) for k, v in by_shape.items())
        repeats = len(points) / len(means)
        noise = max(pooled_spread(by_shape.values()) / math.sqrt(repeats), NOISE_FLOOR)
        return cls(fit_step(list(means), step_prior(draft_model), noise), means, noise)

    @functools.cached_property
    def _process(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """The measured shapes' coordinates, the weights and inverse of their kernel, and the residuals' size."""
        x = np.array([self._coordinates(s) for s, _ in self.points])
        residuals = np.array([math.log(t / self.line.tokens(s)) for s, t in self.points])
        signal = max(float(np.mean(residuals**2)), self.noise**2)
        inverse = np.linalg.inv(_kernel(x, x) + np.eye(len(x)) * self.noise**2 / signal)
        return x, inverse @ residuals, inverse, signal

    def _coordinates(self, shape: SpecShape) -> np.ndarray:
        shapes = [s for s, _ in self.points]
        depth = max(s.depth for s in shapes)
        budget = max(s.budget or s.depth for s in shapes)
        width = max(1.0, math.log(max(s.width for s in shapes)))
        return np.array(
            [
                shape.depth / depth,
                (shape.budget or shape.depth) / budget,
                math.log(max(1, shape.width)) / width,
            ]
        )

    def tokens(self, shape: SpecShape) -> float:
        x, weights, _, _ = self._process
        near = _kernel(self._coordinates(shape)[None, :], x)[0]
        return self.line.tokens(shape) * math.exp(float(near @ weights))

    def relative_sd(self, shape: SpecShape) -> float:
        """The process's doubt (the residuals' size where nothing was measured near), the measurements' own
        spread, and the line's doubt where the residuals cannot reach."""
        x, _, inverse, signal = self._process
        near = _kernel(self._coordinates(shape)[None, :], x)[0]
        unseen = max(0.0, 1.0 - float(near @ inverse @ near))
        return math.sqrt(signal * unseen + self.noise**2 + (self.line.relative_sd(shape) * unseen) ** 2)


def pooled_spread(groups: Iterable[Sequence[float]]) -> float:
    """The sample standard deviation of values about their own group's mean, pooled over groups, on the log
    scale (0 where no group has two values)."""
    logs = [[math.log(v) for v in group] for group in groups]
    squares = sum((v - statistics.mean(g)) ** 2 for g in logs for v in g)
    freedom = sum(len(g) - 1 for g in logs)
    return math.sqrt(squares / freedom) if freedom > 0 else 0.0


def _kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2)
    out: np.ndarray = np.exp(-0.5 * d2 / NEARNESS**2)
    return out


@dataclass(frozen=True)
class CostProfile:
    """A profile's key and its forced launches' step times (`specsweep profile` writes it)."""

    key: ProfileKey
    steps: tuple[StepTime, ...]
    launches: int = 0  # forced and baseline launches it rests on
    starts: tuple[ShapeStart, ...] = ()  # which forced launches' servers came up

    def tables(self, streams: int, context: float | None) -> dict[str, StepTable]:
        """Per method, the step times measured at these streams and the context nearest `context` within
        CONTEXT_REACH (none: the profile did not measure this batch or context)."""
        same = [s for s in self.steps if s.streams == streams]
        if not same:
            return {}
        nearest = min({s.context for s in same}, key=lambda c: abs(math.log(c / (context or c))))
        if context and abs(math.log(nearest / context)) > math.log(CONTEXT_REACH):
            return {}
        here = [s for s in same if s.context == nearest]
        methods = dict.fromkeys(s.shape.method for s in here)
        return {
            m: StepTable.fit(
                [(s.shape, s.tokens) for s in here if s.shape.method == m],
                all(s.shape.draft_model for s in here if s.shape.method == m),
            )
            for m in methods
        }

    @functools.cached_property
    def launch_noise(self) -> float:
        """How far one launch's step time strays from its shape's mean (NOISE_FLOOR at least): the
        launch-to-launch noise of this machine, measured before any study."""
        groups: dict[tuple[str, str, int, int, int], list[float]] = {}
        for s in self.steps:
            key = (s.workload, s.shape.method, s.shape.depth, s.shape.width, s.shape.budget)
            groups.setdefault(key, []).append(s.tokens)
        return max(pooled_spread(groups.values()), NOISE_FLOOR)

    def for_streams(self, streams: int) -> ProfiledSteps:
        """What a surface of a workload decoding `streams` at once reads its step times from."""
        return ProfiledSteps(self, streams)

    def covers(self) -> list[str]:
        """`1 stream at 310 tokens` ...: the batches and contexts it measured."""
        seen = sorted({(s.streams, round(s.context)) for s in self.steps})
        return [f"{n} stream{'s' if n > 1 else ''} at {c} tokens" for n, c in seen]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "key": self.key.to_dict(),
            "launches": self.launches,
            "steps": [s.to_dict() for s in self.steps],
            "starts": [s.to_dict() for s in self.starts],
        }

    def save(self, path: Path) -> None:
        write_atomic(path, json.dumps(self.to_dict(), indent=1))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostProfile:
        return cls(
            ProfileKey(**data["key"]),
            tuple(StepTime.from_dict(s) for s in data["steps"]),
            int(data.get("launches", 0)),
            tuple(ShapeStart.from_dict(s) for s in data.get("starts", ())),
        )

    @classmethod
    def of_study(cls, study: optuna.Study) -> CostProfile | None:
        """The profile a study's search read (kept in the study, so its confirmation and pages read it too)."""
        data = study.user_attrs.get(COST_PROFILE_ATTR)
        return cls.from_dict(data) if data else None

    @classmethod
    def load(cls, path: Path) -> CostProfile:
        fix = "give a file `specsweep profile` wrote"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UserError(f"cannot read cost profile {path}: {exc.strerror or exc}", fix) from None
        except json.JSONDecodeError as exc:
            raise UserError(f"cost profile {path} is not JSON ({exc.msg}, line {exc.lineno})", fix) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UserError(f"{path} is not a cost profile of format {FORMAT}", fix)
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"cost profile {path} is damaged ({exc})", fix) from None


class ProfiledSteps:
    """A profile's step tables for one stream count, by method and context (`WorkloadSurface`'s `profiled`),
    fitted once per context."""

    def __init__(self, profile: CostProfile, streams: int) -> None:
        self.profile, self.streams = profile, streams
        self._fitted: dict[float | None, dict[str, StepTable]] = {}

    def __call__(self, method: str, context: float | None) -> StepTable | None:
        if context not in self._fitted:
            self._fitted[context] = self.profile.tables(self.streams, context)
        return self._fitted[context].get(method)


def step_times(
    records: Sequence[TrialRecord], baselines: Sequence[TrialRecord], streams: Mapping[str, int]
) -> list[StepTime]:
    """The step times of forced launches (`records`) on each workload, against the baselines' geometric mean
    speed there (the baseline is launched before and after the forced ones: the night's drift is halved)."""
    out = []
    for record in records:
        if record.failed or record.shape is None or record.synthetic_length is None:
            continue
        for key, summary in record.workloads.items():
            reference = [
                math.log(tps.median)
                for b in baselines
                if not b.failed and key in b.workloads and (tps := b.workloads[key].decode_tps)
            ]
            if summary.status != "ok" or summary.decode_tps is None or not reference:
                continue
            length = summary.acceptance_length.median if summary.acceptance_length else None
            context = summary.prompt_tokens.median if summary.prompt_tokens else summary.context_tokens
            out.append(
                StepTime(
                    key,
                    streams.get(key, summary.streams),
                    float(context or 1.0),
                    record.shape,
                    record.synthetic_length,
                    float(length or record.synthetic_length),
                    summary.decode_tps.median,
                    math.exp(statistics.mean(reference)),
                )
            )
    return out
