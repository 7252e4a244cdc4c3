"""Model-guided search: the next launch is the feasible, untried configuration with the highest expected
improvement under the surface model (`sweep/search/surface.py`), for whichever workload it promises most.

The candidates are the space's grid after the engine's rules (`candidates.py`). The search is confident (`--until-confident`) when no untried candidate's upper bound
(prediction + 2 sd) reaches past the best measured speed by more than the study's own noise on any workload.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import scipy.stats

from sweep.engines import Engine
from sweep.probes.workloads import Workload
from sweep.records import SpecShape, TrialRecord, series_label
from sweep.search.candidates import Candidate, Candidates, candidates, launch_key
from sweep.search.costs import CostProfile
from sweep.search.surface import (
    Axis,
    ContextCurve,
    PredictedSurface,
    Prediction,
    StartChance,
    SurfaceAt,
    SurfacePoint,
    WorkloadSurface,
    encode,
    observations,
    request_noise,
)
from sweep.space import Space

MIN_START_CHANCE = 0.02
GEOMETRIC = 4.0  # numeric choices spanning this factor are compared by ratio (log scale)
TIE_SHARE = 0.8  # expected improvements within this share of the highest are a tie to the model
# With a cost profile: an expected improvement below this share of the best is not worth a launch.
NEGLIGIBLE_GAIN = 0.01
# The confirmation adds a configuration of a width none of its picks has where the model's doubt leaves it at
# least this chance of being faster than the best of them (`in_doubt`); one of a depth DEPTH_APART or more from
# theirs at even odds or near them (the profiled search's misses were 2-wide trees of depth 6 against 8, 0.3%
# apart as predicted; at 0.25 a third of profiled studies would add one, at 0.4 those few).
WIDTH_DOUBT_CHANCE = 0.25
DEPTH_DOUBT_CHANCE = 0.4
DEPTH_APART = 2


def acceptance_launches(
    pool: Sequence[Candidate], chance: Callable[[Candidate], float] = lambda _c: 1.0
) -> list[Candidate]:
    """What a workload's acceptance is learnt from where the step times are known (a cost profile): per method
    and variant, its deepest chain (the narrowest tree where it has no chain) of those likely to start (`chance`,
    at least MIN_START_CHANCE): a chain of depth D gives the acceptance of every shallower one. How much a
    tree's width catches is left to the confirmation, which launches the best tree the model predicts beside
    the best chain (`ModelSearch.picks`)."""
    chosen: dict[tuple[str, str], tuple[tuple[int, int, int], Candidate]] = {}
    for c in pool:
        if c.shape is None or chance(c) < MIN_START_CHANCE:
            continue
        s = c.shape
        rank = (-s.width, s.depth, -(s.budget or s.depth))
        key = (s.method, s.variant)
        if key not in chosen or rank > chosen[key][0]:
            chosen[key] = (rank, c)
    return [c for _, c in chosen.values()]


def family(shape: SpecShape) -> tuple[str, str, bool]:
    """Configurations the model predicts from the same evidence: a method's variant, as chains or as trees."""
    return (shape.method, shape.variant, shape.width > 1)


def diverse(ranked: Sequence[Candidate], top: int) -> list[Candidate]:
    """The first `top` of `ranked` (best first), each next one from a family not chosen yet while one is left:
    the runner-up of the same family is nearly the best's twin, while the best of another family is what the
    prediction is least sure of (a tree's width, which no chain's launch measures)."""
    chosen: list[Candidate] = []
    for _ in range(min(top, len(ranked))):
        seen = {family(c.shape) for c in chosen if c.shape}
        left = [c for c in ranked if c not in chosen]
        chosen.append(next((c for c in left if c.shape and family(c.shape) not in seen), left[0]))
    return chosen


@dataclass(frozen=True)
class Doubt:
    """A configuration the confirmation launches because the model cannot rank it below its `rival` (the
    best-rated of the picks): the `chance` it is truly faster, by the model's doubt about both."""

    candidate: Candidate
    rival: Candidate
    chance: float


def in_doubt(
    surface: SurfaceAt, ranked: Sequence[tuple[Prediction, Candidate]], chosen: Sequence[Candidate]
) -> list[Doubt]:
    """What the confirmation adds to `chosen` where the model cannot rank it below them (`ranked`: the
    configurations it predicts, best first): the best of a width none of them has, at WIDTH_DOUBT_CHANCE or
    more of being faster than the best-rated of them; then the best whose depth is DEPTH_APART or more from
    every pick's, at DEPTH_DOUBT_CHANCE or more (a flat ridge: the depths between share their acceptance, and
    the step times' doubt alone ranks the ends)."""
    widths = _in_doubt(
        surface, ranked, chosen, lambda shape, picks: shape.width not in {p.width for p in picks}
    )
    picks = [*chosen, *(d.candidate for d in widths)]
    return widths + _in_doubt(
        surface,
        ranked,
        picks,
        lambda shape, picks: all(abs(shape.depth - p.depth) >= DEPTH_APART for p in picks),
        DEPTH_DOUBT_CHANCE,
        same_family=True,
    )


def _in_doubt(
    surface: SurfaceAt,
    ranked: Sequence[tuple[Prediction, Candidate]],
    chosen: Sequence[Candidate],
    unlike: Callable[[SpecShape, list[SpecShape]], bool],
    threshold: float = WIDTH_DOUBT_CHANCE,
    same_family: bool = False,
) -> list[Doubt]:
    """The best of `ranked` that is `unlike` every pick, of the best-rated pick's method and variant (its
    `family` with `same_family`), where the doubt leaves it `threshold` or more of being faster than that
    pick. Another method's prediction rests on its own launches, which the search chose or did not: the doubt
    here is about a shape of what was measured. With a cost profile the doubt is the two step times' (their
    acceptance is predicted from the same chain launch, so its error moves both alike); without one, each
    prediction's own doubt about the true speed (less a launch's noise): no launch measured the other near the
    picks, so its neighbours' launches are all the model has."""
    ours = next(((p, c) for p, c in ranked if c in chosen and c.shape), None)
    if ours is None:
        return []
    first, best = ours
    assert best.shape is not None
    shapes = [c.shape for c in chosen if c.shape]
    length = 3 if same_family else 2  # family(): method, variant, tree or chain
    kin = family(best.shape)[:length]

    def akin(shape: SpecShape) -> bool:
        return family(shape)[:length] == kin

    other = next(
        (
            (p, c)
            for p, c in ranked
            if c.shape and c not in chosen and akin(c.shape) and unlike(c.shape, shapes)
        ),
        None,
    )
    if other is None:
        return []
    runner, candidate = other
    assert candidate.shape is not None
    steps = [surface.step_doubt(best.shape), surface.step_doubt(candidate.shape)]
    doubts = (
        [d for d in steps if d is not None]
        if None not in steps
        else [first.truth(surface.noise).sd, runner.truth(surface.noise).sd]
    )
    if not any(doubts):
        return []
    gap = math.log(first.tps / runner.tps)
    chance = float(scipy.stats.norm.sf(gap / math.hypot(*doubts)))
    return [Doubt(candidate, best, chance)] if chance >= threshold else []


def axes(space: Space) -> list[Axis]:
    """The model's coordinates: ranges scaled to [0, 1]; choices that are all numbers too (`{choices: [3, 6,
    12]}` is a coarse range, and 6 lies between 3 and 12; on a log scale where they span a factor of
    GEOMETRIC or more, as sizes do: 6 is as far from 3 as from 12); other choices one dimension each."""
    out = []
    for spec in space.params:
        numbers = [c for c in spec.choices if isinstance(c, int | float) and not isinstance(c, bool)]
        if spec.choices and len(numbers) == len(spec.choices) and len(set(numbers)) > 1:
            low, high = float(min(numbers)), float(max(numbers))
            out.append(Axis(spec.name, low, high, log=low > 0 and high / low >= GEOMETRIC))
        elif spec.choices:
            out.append(Axis(spec.name, choices=spec.choices))
        else:
            assert spec.low is not None and spec.high is not None
            out.append(Axis(spec.name, spec.low, spec.high, spec.log))
    return out


@dataclass(frozen=True)
class Proposal:
    candidate: Candidate
    workload: str  # the workload it promises most for
    improvement: float  # expected relative improvement there
    predicted: dict[str, Prediction] = field(default_factory=dict)


@dataclass(frozen=True)
class Picks:
    """The model's picks for the confirmation (`ModelSearch.picks`)."""

    per_workload: dict[str, list[Candidate]]
    overall: tuple[float, Candidate] | None  # the one-for-all pick, with its worst predicted gain
    doubts: dict[str, list[Doubt]] = field(default_factory=dict)  # those of `per_workload` picked for doubt


@dataclass
class ModelSearch:
    """Ranks untried candidates against the launches so far (records of complete and failed trials). One per
    command: the search, the confirmation's favourites and the dashboard's surface share its pool and its fit."""

    space: Space
    pool: Candidates
    # Step times measured on this machine (a cost profile): the launches then teach acceptance alone.
    costs: CostProfile | None = None
    # The last fit and the records it was fitted to: the stop rule, the next pick, the confirmation and the
    # page read the same records.
    _fitted: tuple[tuple[Any, ...], dict[str, SurfaceAt]] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, space: Space, engine: Engine, costs: CostProfile | None = None) -> ModelSearch:
        """Over the space's launchable configurations, by the engine's rules (with a study's cost profile)."""
        return cls(space, candidates(space, engine), costs)

    def surfaces(
        self, records: Sequence[TrialRecord], keys: Sequence[str] | None = None
    ) -> dict[str, SurfaceAt]:
        """One model per workload (the objective's by default: what the search optimises). Workloads that differ
        only in context length share one model over context where the prompts' sizes are known."""
        wanted = tuple(keys or self.space.objective_names)
        seen = (wanted, *(json.dumps(r.to_dict(), sort_keys=True, default=str) for r in records))
        if self._fitted is None or self._fitted[0] != seen:
            self._fitted = (seen, self._fit(records, wanted))
        return self._fitted[1]

    def _fit(self, records: Sequence[TrialRecord], keys: Sequence[str]) -> dict[str, SurfaceAt]:
        wanted = set(keys)
        shape_axes = axes(self.space)
        families: dict[tuple[str, int, float | None], list[Workload]] = {}
        for w in self.space.workloads:
            families.setdefault((w.name, w.streams, w.rate), []).append(w)
        out: dict[str, SurfaceAt] = {}
        for members in families.values():
            if not wanted & {w.key for w in members}:
                continue
            seen = {w.key: observations(records, w.key, w.context_tokens) for w in members}
            noise = {w.key: request_noise(records, w.key) for w in members}
            profiled = self.costs.for_streams(members[0].streams) if self.costs else None
            if self.costs is not None:  # a launch strays by what the profile's repeated launches strayed by
                noise = {k: max(v, self.costs.launch_noise) for k, v in noise.items()}
            shared = WorkloadSurface(
                shape_axes, [o for obs in seen.values() for o in obs], max(noise.values()), profiled
            )
            for w in members:
                if w.key not in wanted:
                    continue
                if shared.contexts.modelled:
                    context = (
                        statistics.median(o.context or 0.0 for o in seen[w.key]) if seen[w.key] else None
                    )
                    out[w.key] = SurfaceAt(shared, context or w.context_tokens, noise[w.key])
                else:  # contexts unknown: each workload on its own
                    out[w.key] = SurfaceAt(
                        WorkloadSurface(shape_axes, seen[w.key], noise[w.key], profiled), None, noise[w.key]
                    )
        return {key: out[key] for key in keys if key in out}

    def untried(self, records: Sequence[TrialRecord]) -> list[Candidate]:
        tried = {launch_key(r.params) for r in records}
        return [c for c in self.pool.items if launch_key(c.params) not in tried]

    def start_chance(self, records: Sequence[TrialRecord]) -> StartChance:
        """Launches that came up, and those that did not (out of memory, a rejected combination), the cost
        profile's forced launches first (the same model, fixed flags and hardware: the same memory)."""
        known = [(s.params, s.shape, s.started) for s in self.costs.starts] if self.costs else []
        launched = [(r.params, r.shape, up) for r in records if (up := r.started) is not None]
        return StartChance(axes(self.space), [*known, *launched])

    def acceptance_next(self, records: Sequence[TrialRecord]) -> Candidate | None:
        """With a cost profile: the next launch a method's acceptance still needs (its deepest chain likely to
        start, a shallower one where that did not start); None once every method has measured one."""
        if self.costs is None:
            return None
        measured = {(r.shape.method, r.shape.variant) for r in records if r.shape and not r.failed}
        starts = self.start_chance(records)
        left = [
            c
            for c in self.untried(records)
            if c.shape is not None and (c.shape.method, c.shape.variant) not in measured
        ]
        found = acceptance_launches(left, lambda c: starts(c.params, c.shape))
        return found[0] if found else None

    def profiled_plan(self) -> tuple[list[Candidate], list[Candidate]]:
        """With a cost profile, before any launch: the launches each method's acceptance takes (its deepest chain
        likely to start), and the configurations the profile gives no step times for on some workload (a
        lookup's, another batch's), which the search may launch after them until confident."""
        if self.costs is None:
            return [], []
        starts = self.start_chance([])
        speculative = [c for c in self.pool.items if c.shape is not None]
        first = acceptance_launches(speculative, lambda c: starts(c.params, c.shape))
        steps = [(self.costs.for_streams(w.streams), w.context_tokens) for w in self.space.workloads]
        searched = [
            c
            for c in speculative
            if c not in first and any(table(c.shape.method, at) is None for table, at in steps if c.shape)
        ]
        return first, searched

    def _searched(self, surface: SurfaceAt, candidate: Candidate) -> bool:
        """Whether the search launches it to learn its speed: with a cost profile, only configurations whose
        step times the profile does not give (a lookup's, another batch's); the rest are predicted, and the
        confirmation launches those it predicts fastest."""
        return self.costs is None or candidate.shape is None or not surface.profiled(candidate.shape.method)

    def propose(self, records: Sequence[TrialRecord]) -> Proposal | None:
        """The untried candidate with the highest expected improvement (times its chance to start) on any
        workload. Where several are within TIE_SHARE of the highest, the model cannot tell them apart, and the
        one nearest the best measured configuration goes first: one step from what works (a trust region),
        not the corner farthest from every measurement."""
        if (first := self.acceptance_next(records)) is not None:
            return Proposal(first, self.space.objective_names[0], math.inf)
        surfaces = self.surfaces(records)
        starts = self.start_chance(records)
        left = self.untried(records)
        ranked = {k: s.predict_many([(c.params, c.shape) for c in left]) for k, s in surfaces.items()}
        proposals: list[Proposal] = []
        for i, candidate in enumerate(left):
            predicted = {k: ranked[k][i] for k in surfaces if self._searched(surfaces[k], candidate)}
            chance = starts(candidate.params, candidate.shape)
            if chance < MIN_START_CHANCE or not predicted:
                continue  # a smaller draft of the same method already failed to start, or it is predicted
            gains = {k: chance * p.expected_improvement(surfaces[k].best) for k, p in predicted.items()}
            key = max(gains, key=lambda k: gains[k])
            proposals.append(Proposal(candidate, key, gains[key], predicted))
        if not proposals:
            return None
        top = max(p.improvement for p in proposals)
        near = [p for p in proposals if p.improvement >= TIE_SHARE * top]
        shape_axes = axes(self.space)
        incumbents = {key: _fastest(records, key) for key in surfaces}

        def distance(p: Proposal) -> float:
            incumbent = incumbents.get(p.workload)
            if incumbent is None:
                return 0.0
            here, there = encode(shape_axes, p.candidate.params), encode(shape_axes, incumbent.params)
            return math.dist(here, there)

        return min(near, key=lambda p: (distance(p), -p.improvement))

    def unconfident(self, records: Sequence[TrialRecord]) -> list[str]:
        """Workloads on which some untried candidate could still beat the best by more than the noise
        (empty: the search has nothing left worth a launch): where a candidate's upper bound (prediction + 2 sd)
        passes the best measured by more than two of the noise. With a cost profile, every workload until each
        method's acceptance is measured; then only configurations whose step times the profile does not give
        count, by their expected improvement in true speed (their doubt without a launch's noise) over the best
        the model rates among those launched (a lucky launch pulled down), times their chance to start, where
        it is NEGLIGIBLE_GAIN or more. The rest the confirmation tells apart (`picks`)."""
        surfaces = self.surfaces(records)
        if self.acceptance_next(records) is not None:
            return list(surfaces)
        left = self.untried(records)
        starts = self.start_chance(records)
        chances = [starts(c.params, c.shape) for c in left]
        open_ = []
        for key, surface in surfaces.items():
            if surface.best <= 0:
                open_.append(key)  # nothing measured on it yet
                continue
            searched = [
                (c, chance) for c, chance in zip(left, chances, strict=True) if self._searched(surface, c)
            ]
            predicted = surface.predict_many([(c.params, c.shape) for c, _ in searched])
            if self.costs is None:
                ceiling = math.log(surface.best) + 2 * surface.noise
                unsure = any(math.log(p.tps) + 2 * p.sd > ceiling for p in predicted)
            else:
                rated = self._rated_best(records, key, surface)
                unsure = any(
                    chance * p.truth(surface.noise).expected_improvement(rated) >= NEGLIGIBLE_GAIN
                    for p, (_, chance) in zip(predicted, searched, strict=True)
                )
            if unsure:
                open_.append(key)
        return open_

    def picks(self, records: Sequence[TrialRecord], top: int) -> Picks:
        """What the confirmation launches where a cost profile leaves the prediction to tell configurations
        apart, of the speculative configurations likely to start, launched or not: per workload the `top` the
        model predicts fastest, chosen across families (`diverse`), and those the model cannot rank below them
        (`in_doubt`: another width, a far depth); and the one for one server for every workload
        (the highest worst-case predicted gain over the baseline as the model rates it)."""
        pool = self._startable(records)
        baseline = next((r for r in records if r.shape is None and not r.failed), None)
        per_workload: dict[str, list[Candidate]] = {}
        doubts: dict[str, list[Doubt]] = {}
        worst = [math.inf] * len(pool)
        for key, surface in self.surfaces(records).items():
            predicted = surface.predict_many([(c.params, c.shape) for c in pool])
            ranked = _best_first(predicted, pool)
            chosen = diverse([c for _, c in ranked], top)
            doubts[key] = in_doubt(surface, ranked, chosen)
            per_workload[key] = chosen + [d.candidate for d in doubts[key]]
            if baseline is not None:
                plain = surface.predict(baseline.params, None).tps
                worst = [min(w, p.tps / plain - 1) for w, p in zip(worst, predicted, strict=True)]
        if not pool or not per_workload or baseline is None:
            return Picks(per_workload, None, doubts)
        best = max(range(len(pool)), key=lambda i: worst[i])
        return Picks(per_workload, (worst[best], pool[best]), doubts)

    def doubts(
        self, records: Sequence[TrialRecord], chosen: Mapping[str, Sequence[Mapping[str, Any]]]
    ) -> dict[str, list[Doubt]]:
        """Per workload, what the confirmation adds to the configurations `chosen` for it (the search's
        measured best and the model's favourite): those the model cannot rank below them (`in_doubt`: another
        width, a far depth), launched by the search or not. A search measures the width it found first most; a
        narrow lead there over a width it hardly launched is the model's guess."""
        pool = self._startable(records)
        by_key = {launch_key(c.params): c for c in self.pool.items}
        out: dict[str, list[Doubt]] = {}
        for key, surface in self.surfaces(records).items():
            ours = [c for p in chosen.get(key, ()) if (c := by_key.get(launch_key(p))) and c.shape]
            if not ours:
                continue
            considered = pool + [c for c in ours if c not in pool]
            predicted = surface.predict_many([(c.params, c.shape) for c in considered])
            if found := in_doubt(surface, _best_first(predicted, considered), ours):
                out[key] = found
        return out

    def _startable(self, records: Sequence[TrialRecord]) -> list[Candidate]:
        """The speculative configurations likely to start (MIN_START_CHANCE), launched or not."""
        starts = self.start_chance(records)
        return [
            c
            for c in self.pool.items
            if c.shape is not None and starts(c.params, c.shape) >= MIN_START_CHANCE
        ]

    @staticmethod
    def _rated_best(records: Sequence[TrialRecord], key: str, surface: SurfaceAt) -> float:
        """The highest speed the model rates a launched configuration (the baseline included) at."""
        launched = [r for r in records if observations([r], key)]
        rated = surface.predict_many([(r.params, r.shape) for r in launched])
        return max((p.tps for p in rated), default=surface.best)

    def favourites(self, records: Sequence[TrialRecord]) -> dict[str, int]:
        """Per workload, the launched configuration (its trial number) the model rates fastest: its prediction
        there weighs the launch's own number against its neighbours', so a lucky launch is pulled down and an
        unlucky one up. The confirmation launches it beside the fastest measured (the winner's curse)."""
        out = {}
        for key, surface in self.surfaces(records).items():
            launched = [r for r in records if r.shape is not None and observations([r], key)]
            if launched:
                rated = surface.predict_many([(r.params, r.shape) for r in launched])
                out[key] = launched[max(range(len(launched)), key=lambda i: rated[i].tps)].number
        return out

    def predicted(self, records: Sequence[TrialRecord]) -> PredictedSurface:
        """The model's prediction for every launchable speculative configuration on every workload, and, for
        workloads measured at several context lengths, each method's best configuration over context."""
        surfaces = self.surfaces(records, self.space.workload_keys)
        tried = {launch_key(r.params) for r in records}
        speculative = [c for c in self.pool.items if c.shape is not None]
        points = [
            SurfacePoint(key, c.params, c.shape, p.tps, p.sd, p.accept_length, launch_key(c.params) in tried)
            for key, surface in surfaces.items()
            for c, p in zip(
                speculative, surface.predict_many([(c.params, c.shape) for c in speculative]), strict=True
            )
            if c.shape is not None
        ]
        return PredictedSurface(tuple(points), tuple(_context_curves(self.space, surfaces, speculative)))


def _best_first(
    predicted: Sequence[Prediction], candidates: Sequence[Candidate]
) -> list[tuple[Prediction, Candidate]]:
    return sorted(zip(predicted, candidates, strict=True), key=lambda pc: -pc[0].tps)


def _fastest(records: Sequence[TrialRecord], key: str) -> TrialRecord | None:
    """The launch that measured the highest decode t/s on a workload."""
    measured = [(o.tps, r) for r in records for o in observations([r], key)]
    return max(measured, key=lambda m: m[0])[1] if measured else None


def _context_curves(
    space: Space, surfaces: Mapping[str, SurfaceAt], speculative: list[Candidate]
) -> list[ContextCurve]:
    """Per workload measured at several contexts and per method: the configuration the model rates fastest over
    those contexts (the mean of its log t/s), predicted across them."""
    curves = []
    done: set[int] = set()
    for w in space.workloads:
        view = surfaces.get(w.key)
        if view is None or not view.surface.contexts.modelled or id(view.surface) in done:
            continue
        done.add(id(view.surface))
        label = series_label(w.name, w.streams, w.rate)
        sizes = view.surface.contexts.sizes
        best: dict[str, tuple[float, Candidate]] = {}
        configurations = [(c.params, c.shape) for c in speculative]
        at_size = [view.surface.predict_many(configurations, size) for size in sizes]
        for i, c in enumerate(speculative):
            assert c.shape is not None
            score = sum(math.log(predicted[i].tps) for predicted in at_size)
            if c.shape.method not in best or score > best[c.shape.method][0]:
                best[c.shape.method] = (score, c)
        for _, c in best.values():
            assert c.shape is not None
            curves.append(view.curve(label, c.params, c.shape))
    return curves
