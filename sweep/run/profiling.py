"""`specsweep profile`'s launches: a space's speculative shapes at forced acceptance lengths, with the baseline
launched before and after them, written into a cost profile (`search/costs.py` says what it holds and why).

Which shapes: per method, the space's distinct shapes (depth, draft budget, tree width) chosen one by one as
the farthest from those chosen so far (the smallest first), so that a few launches span the whole range and
the step line's residuals are measured where they differ most. Each at forced lengths 1 + share x depth (a
quarter and three quarters of the draft accepted, by default), on every workload of the space (its streams and
contexts). A launch already measured (the same parameters and length, in the profile's folder) is not repeated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sweep.core.errors import UserError
from sweep.engines import Engine
from sweep.probes.settings import Progress
from sweep.records import SpecShape, TrialRecord
from sweep.run.preflight import build_engine, validate
from sweep.run.trial import RECORD_FILE, TrialRunner
from sweep.search import Candidate, candidates
from sweep.search.costs import (
    DEFAULT_SHARES,
    CostProfile,
    ProfileKey,
    ShapeStart,
    hardware,
    space_key,
    step_times,
)
from sweep.space import Space
from sweep.storage import StudyPaths

DEFAULT_SHAPES = 6  # per method


@dataclass(frozen=True)
class ProfileLaunch:
    """One launch of the profile: a configuration at a forced length (None: the baseline)."""

    params: dict[str, object]
    shape: SpecShape | None
    length: float | None


def spread_shapes(pool: Sequence[Candidate], per_method: int) -> list[Candidate]:
    """Per method that drafts with a model, up to `per_method` configurations of distinct shapes, each the
    farthest from those chosen (in depth, budget and log width, each scaled to the method's range), the smallest
    first. Lookups (n-gram) are not profiled: they draft only where the text repeats, and the engines count
    their steps over the drafting ones, so what such a step costs holds the plain steps between drafts, which the
    text decides: their step times stay the workload's own to learn."""
    by_method: dict[str, dict[tuple[int, int, int], Candidate]] = {}
    for c in pool:
        if c.shape is not None and c.shape.draft_model:
            shapes = by_method.setdefault(c.shape.method, {})
            shapes.setdefault((c.shape.depth, c.shape.budget or c.shape.depth, c.shape.width), c)
    chosen: list[Candidate] = []
    for shapes in by_method.values():
        keys = sorted(shapes)
        scale = [max(1.0, float(max(k[i] for k in keys))) for i in range(2)]
        widest = max(1.0, math.log(max(k[2] for k in keys)))
        point = {k: (k[0] / scale[0], k[1] / scale[1], math.log(k[2]) / widest) for k in keys}
        picked = [keys[0]]
        while len(picked) < min(per_method, len(keys)):
            left = [k for k in keys if k not in picked]
            picked.append(max(left, key=lambda k: min(math.dist(point[k], point[p]) for p in picked)))
        chosen += [shapes[k] for k in picked]
    return chosen


def forced_lengths(shape: SpecShape, shares: Sequence[float]) -> list[float]:
    """1 + share x the positions a step can accept, for each share, rounded to a tenth, distinct."""
    return sorted({round(1 + share * shape.reach, 1) for share in shares})


def plan_launches(
    space: Space, engine: Engine, per_method: int, shares: Sequence[float]
) -> list[ProfileLaunch]:
    """The baseline, every chosen shape at every forced length, the baseline again."""
    pool = candidates(space, engine).items
    shapes = spread_shapes(pool, per_method)
    if not shapes:
        raise UserError(
            "the space has no launchable configuration drafted by a model to profile (an n-gram lookup's step "
            "time is its text's: not profiled)",
            "sweep a draft model, EAGLE or MTP method in params (`specsweep spaces` lists examples)",
        )
    for share in shares:
        if not 0 <= share <= 1:
            raise UserError(
                f"--shares {share:g} is not a share of a draft", "give shares between 0 and 1, e.g. 0.25,0.75"
            )
    baseline = ProfileLaunch(engine.derive(space.launch_params(engine.baseline_params())), None, None)
    forced = [
        ProfileLaunch(c.params, c.shape, length)
        for c in shapes
        for length in (forced_lengths(c.shape, shares) if c.shape else [])
    ]
    return [baseline, *forced, baseline]


class Profiler:
    """Runs a profile's launches through a `TrialRunner` into `folder/<n>/`, reusing those measured before."""

    def __init__(self, space: Space, engine: Engine, folder: Path, progress: Progress) -> None:
        self.space, self.engine, self.folder, self.progress = space, engine, folder, progress
        paths = StudyPaths(folder.name, folder, "")
        self.trials = TrialRunner(space, engine, paths)

    def run(self, launches: Sequence[ProfileLaunch]) -> list[TrialRecord]:
        records = []
        for number, launch in enumerate(launches):
            trial_dir = self.folder / str(number)
            label = (
                "baseline"
                if launch.length is None
                else f"{_shape_text(launch.shape)} forced to {launch.length:g}"
            )
            say = self._sayer(number, len(launches), label)
            record = self._measured(trial_dir, launch)
            if record is None:
                say("launching")
                record = TrialRecord(
                    number, dict(launch.params), shape=launch.shape, synthetic_length=launch.length
                )
                record = self.trials.run(record, say, trial_dir=trial_dir)
                self.trials.write_record(record, trial_dir)
                if self.trials.write_error:
                    raise self.trials.write_error
            else:
                say("measured before: kept")
            say(
                f"failed: {record.failure}"
                if record.failed
                else "done: " + ", ".join(s.headline_text() for s in record.workloads.values())
            )
            if record.failed and launch.length is None:
                raise UserError(
                    f"the server exits at start even with speculation off: {record.failure}",
                    "fix the fixed flags, the model or server.extra_args in the space file",
                )
            records.append(record)
        return records

    @staticmethod
    def _measured(trial_dir: Path, launch: ProfileLaunch) -> TrialRecord | None:
        try:
            record = TrialRecord.from_dict(json.loads((trial_dir / RECORD_FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError):
            return None
        same = record.params == launch.params and record.synthetic_length == launch.length
        return record if same and not record.failed else None

    def _sayer(self, number: int, total: int, label: str) -> Progress:
        def say(message: str) -> None:
            self.progress(f"[profile {number + 1}/{total} · {label}] {message}")

        return say

    def profile(self, records: Sequence[TrialRecord]) -> CostProfile:
        """The cost profile the launches measured, keyed by what the first baseline's server said of itself."""
        baselines = [r for r in records if r.synthetic_length is None]
        first = baselines[0]
        static = space_key(self.space, self.engine)
        key = ProfileKey(
            static.engine,
            first.facts.engine_version,
            static.model,
            hardware(first),
            static.fixed,
            static.extra_args,
        )
        streams = {w.key: w.streams for w in self.space.workloads}
        forced = [r for r in records if r.synthetic_length is not None]
        starts = tuple(start for r in forced if (start := ShapeStart.of(r)) is not None)
        return CostProfile(key, tuple(step_times(forced, baselines, streams)), len(records), starts)


def _shape_text(shape: SpecShape | None) -> str:
    if shape is None:
        return "baseline"
    width = f" x{shape.width}" if shape.width > 1 else ""
    return f"{shape.method} depth {shape.depth}{width} budget {shape.budget or shape.depth}"


def profile_space(
    space: Space,
    name: str,
    runs: Path,
    progress: Progress,
    shapes: int = DEFAULT_SHAPES,
    shares: Sequence[float] = DEFAULT_SHARES,
    out: Path | None = None,
) -> tuple[CostProfile, Path]:
    """Measure the space's step costs at forced acceptance (the baseline, `shapes` configurations a method at
    each forced share, the baseline again) and save them as a cost profile: where it went and what it holds."""
    if shapes < 1:
        raise UserError(
            f"--shapes {shapes} profiles nothing", f"give 1 or more ({DEFAULT_SHAPES} by default)"
        )
    engine = build_engine(space)
    validate(space, engine)
    paths = StudyPaths.for_study(name, runs, None)
    launches = plan_launches(space, engine, shapes, list(shares))
    where = out or paths.run_dir / "cost-profile.json"
    progress(
        f"profile {name}: {len(launches)} launches (the baseline, {len(launches) - 2} at forced acceptance, the "
        f"baseline again); logs in {paths.run_dir / 'profile'}/"
    )
    profiler = Profiler(space, engine, paths.run_dir / "profile", progress)
    profile = profiler.profile(profiler.run(launches))
    if not profile.steps:
        raise UserError(
            "no forced launch measured a step time (every one failed: see their records)",
            f"read {paths.run_dir / 'profile'}/*/record.json",
        )
    profile.save(where)
    return profile, where
