"""Confirmation: launch configurations again, interleaved (A B C A B C ...), before any verdict is given.

The launches live in a companion Optuna study in the same storage (`<study>:confirm`), so that they never feed
the search's sampler, workers sharing a PostgreSQL study share them too (each WAITING launch is taken once),
and a confirmation cut short resumes where it stopped. `specsweep ab` runs the same machinery on two
configurations of its own.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import TrialState

from sweep.analysis import (
    Relaunch,
    baseline_view,
    confirmation_plan,
    headline_median,
    launches,
    ok_summary,
    on_busy_host,
    plan_id,
    quiet_views,
    study_noise,
)
from sweep.answers import fidelity
from sweep.answers.fidelity import TIE_CONTEXT
from sweep.core import stats
from sweep.probes.settings import Others, Progress
from sweep.records import TrialRecord
from sweep.run.driver import TrialFailed
from sweep.run.recovery import driver_identity, recover
from sweep.run.trial import TrialRunner
from sweep.search import Candidate, Doubt, ModelSearch, Picks, launch_key
from sweep.search.costs import CostProfile
from sweep.space import ConfirmSettings, SearchKind
from sweep.storage import (
    BASELINE,
    DOUBT_ATTR,
    DRIVER_ATTR,
    LABEL_ATTR,
    LOOKS_ATTR,
    ROLE_ATTR,
    ROUND_ATTR,
    SET_ATTR,
    Phase,
    StudyPaths,
    TrialView,
    complete_views,
    is_result,
    make_storage,
    search_records,
    trial_views,
)

SUFFIX = ":confirm"
PREDICTED = "predicted {}"  # a configuration only the confirmation launches, as the model predicted it
METRIC = "workloads measured"


def confirm_study_name(study: str) -> str:
    return study + SUFFIX


def open_confirm_study(paths: StudyPaths, name: str | None = None) -> optuna.Study:
    study = optuna.create_study(
        study_name=name or confirm_study_name(paths.name),
        storage=make_storage(paths.storage_url),
        directions=["maximize"],
        load_if_exists=True,
    )
    if study.metric_names is None:
        study.set_metric_names([METRIC])
    return study


def load_confirm_study(storage: optuna.storages.BaseStorage, study: str) -> optuna.Study | None:
    """The confirmation launches of a study, if it has any."""
    names = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    if confirm_study_name(study) not in names:
        return None
    return optuna.load_study(study_name=confirm_study_name(study), storage=storage)


class PlanNames:
    """A configuration's label in a plan: its search trial's where the search launched it, else "predicted K",
    K in the order they first appear (the same records give the same plan on every worker)."""

    def __init__(self, views: list[TrialView]) -> None:
        self._launched = {launch_key(v.record.params): v.label for v in complete_views(views) if v.record}
        self._named: dict[str, str] = {}

    def __call__(self, params: Mapping[str, Any]) -> str:
        key = launch_key(params)
        return self._launched.get(key) or self._named.setdefault(key, PREDICTED.format(len(self._named) + 1))


def doubt_text(doubt: Doubt, name: PlanNames) -> str:
    """Why the model's doubt put a configuration in the plan, as the report says it."""

    def described(c: Candidate) -> str:
        s = c.shape
        return "" if s is None else f" ({f'{s.width} wide' if s.width > 1 else 'a chain'}, depth {s.depth})"

    return (
        f"the model could not rank {name(doubt.candidate.params)}{described(doubt.candidate)} below "
        f"{name(doubt.rival.params)}{described(doubt.rival)}: a {doubt.chance:.0%} chance it is faster by the "
        "model's doubt, so the confirmation measured both"
    )


def predicted_plan(views: list[TrialView], picks: Picks, min_gain: float) -> list[Relaunch]:
    """With a cost profile: per workload the configurations the model predicts fastest (`ModelSearch.picks`),
    launched by the search or not, and its one-for-all pick where it predicts a gain on every workload, with the
    baseline (labels by `PlanNames`)."""
    baseline = baseline_view(views)
    if baseline is None or baseline.record is None:
        return []
    keys = [k for k in baseline.record.workloads if headline_median(baseline, k) and k in picks.per_workload]
    label = PlanNames(views)
    chosen: dict[str, tuple[dict[str, Any], set[str]]] = {}
    for key in keys:
        for c in picks.per_workload[key]:
            chosen.setdefault(label(c.params), (dict(c.params), set()))[1].add(key)
    overall = picks.overall
    if overall is not None and keys and overall[0] >= min_gain:
        chosen.setdefault(label(overall[1].params), (dict(overall[1].params), set()))[1].update(keys)
    if not chosen:
        return []
    plan = [Relaunch(BASELINE, baseline.record.params, tuple(keys))]
    plan += [
        Relaunch(name, params, tuple(sorted(ws, key=keys.index))) for name, (params, ws) in chosen.items()
    ]
    return with_doubts(plan, {k: v for k, v in picks.doubts.items() if k in keys}, label)


def with_doubts(
    plan: list[Relaunch], doubts: Mapping[str, Sequence[Doubt]], label: PlanNames
) -> list[Relaunch]:
    """The plan with each doubt's configuration measuring its workload, and why (`Relaunch.doubts`)."""
    by_label = {c.label: c for c in plan}
    for key, found in doubts.items():
        for doubt in found:
            name = label(doubt.candidate.params)
            had = by_label.get(name, Relaunch(name, dict(doubt.candidate.params), ()))
            by_label[name] = dataclasses.replace(
                had,
                workloads=had.workloads + ((key,) if key not in had.workloads else ()),
                doubts={**had.doubts, key: doubt_text(doubt, label)},
            )
    return list(by_label.values())


def slots(plan: list[Relaunch], rounds: int) -> list[tuple[int, Relaunch]]:
    """Launch order: every round launches every configuration once, rotated so none is always first."""
    return [(r, plan[(i + r) % len(plan)]) for r in range(rounds) for i in range(len(plan))]


class Confirmation:
    """Launches the plan's configurations `rounds` times each, interleaved, into the companion study; then one
    more round at a time, up to `max_rounds`, for the configurations whose verdict against `reference` is
    still open (see `Comparison.settled`), with the reference launched beside them. Launches run through the
    study's `TrialRunner`; `time_left` is the budget's (None: no budget)."""

    def __init__(
        self,
        trials: TrialRunner,
        progress: Progress,
        study_name: str | None = None,
        reference: str = BASELINE,
        time_left: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.trials, self.progress, self.time_left = trials, progress, time_left
        self.study_name = study_name
        self.reference = reference
        self._plan: dict[str, Relaunch] = {}
        self._done = 0
        self._total = 0
        self._durations: list[float] = []
        self._looks = stats.Looks(0, 0)

    def run(self, plan: list[Relaunch], rounds: int, max_rounds: int | None = None) -> optuna.Study:
        study = open_confirm_study(self.trials.paths, self.study_name)
        recover(study, self.trials.paths.registry, self.progress)
        set_id = plan_id(plan, rounds)
        self._looks = stats.Looks(rounds, max(rounds, max_rounds or rounds))
        study.set_user_attr(LOOKS_ATTR, [self._looks.first, self._looks.most])
        self._plan = {c.label: c for c in plan}
        self._launch(study, set_id, slots(plan, rounds))
        for round_ in range(rounds, max_rounds or rounds):
            views = [v for v in trial_views(study, Phase.CONFIRM) if v.plan == set_id]
            open_ = [c for c in plan if c.label != self.reference and not self._settled(views, c)]
            if not open_:
                break
            extra = [(round_, c) for c in (self._plan[self.reference], *open_)]
            if not self._fits(len(extra)):
                self.progress(
                    f"confirmation: no round {round_ + 1}: the budget's time left is less than its "
                    f"{len(extra)} launches take; verdicts still open stay open"
                )
                break
            if self._missing(study, set_id, extra):
                labels = ", ".join(c.label for c in open_)
                self.progress(
                    f"confirmation: round {round_ + 1} for {labels} (their verdicts are still open)"
                )
            self._launch(study, set_id, extra)
        return study

    def _fits(self, launches: int) -> bool:
        """Whether `--budget` (if any) has room for `launches` more, at this confirmation's time per launch."""
        left = self.time_left()
        if left is None or not self._durations:
            return True
        return left >= launches * sum(self._durations) / len(self._durations)

    def _settled(self, views: list[TrialView], candidate: Relaunch) -> bool:
        min_gain = self.trials.space.confirm.min_gain
        for key in candidate.workloads:
            labels = (candidate.label, self.reference)
            used = quiet_views(views, labels, key)
            if any(on_busy_host(v, key) for v in used if v.label in labels):
                return False  # too few quiet launches yet: another round replaces the busy one
            found = stats.compare(
                launches(used, candidate.label, key),
                launches(used, self.reference, key),
                study_noise(views, key, reference=self.reference),
                min_gain,
                looks=self._looks,
            )
            if found is not None and not found.settled(min_gain):
                return False
        return True

    @staticmethod
    def _missing(
        study: optuna.Study, set_id: str, wanted: list[tuple[int, Relaunch]]
    ) -> list[tuple[int, Relaunch]]:
        """The launches not already done, queued or under way."""
        have = {
            (t.user_attrs.get(LABEL_ATTR), t.user_attrs.get(ROUND_ATTR))
            for t in study.get_trials(deepcopy=False)
            if t.user_attrs.get(SET_ATTR) == set_id
            and (t.state in (TrialState.WAITING, TrialState.RUNNING) or is_result(t))
        }
        return [(r, c) for r, c in wanted if (c.label, r) not in have]

    def _launch(self, study: optuna.Study, set_id: str, wanted: list[tuple[int, Relaunch]]) -> None:
        """Queue the launches not already done (or under way), then run what is queued."""
        for round_, candidate in self._missing(study, set_id, wanted):
            study.enqueue_trial(
                {},
                user_attrs={
                    ROLE_ATTR: "confirm",
                    LABEL_ATTR: candidate.label,
                    ROUND_ATTR: round_,
                    SET_ATTR: set_id,
                    DOUBT_ATTR: dict(candidate.doubts),
                },
            )
        waiting = [
            t
            for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
            if t.user_attrs.get(SET_ATTR) == set_id
        ]
        self._total, self._done = len(wanted), len(wanted) - len(waiting)
        self._durations = []
        if waiting:
            study.optimize(
                self.objective,
                n_trials=len(waiting),
                catch=(TrialFailed,),
                gc_after_trial=False,
                callbacks=[_stop_when_none_waiting, self._stop_on_write_error],
            )
        if self.trials.write_error:
            raise self.trials.write_error

    def _stop_on_write_error(self, study: optuna.Study, _trial: optuna.trial.FrozenTrial) -> None:
        if self.trials.write_error:
            study.stop()

    def objective(self, trial: optuna.Trial) -> float:
        label = trial.user_attrs.get(LABEL_ATTR)
        candidate = self._plan.get(str(label))
        if candidate is None:
            # Another worker took the last queued launch between our check and Optuna's: nothing left to do.
            raise optuna.TrialPruned("no confirmation launch left")
        started = time.monotonic()
        trial.set_user_attr(DRIVER_ATTR, driver_identity())
        say = self._sayer(candidate, int(trial.user_attrs.get(ROUND_ATTR, 0)), started)
        say(" ".join(f"{k}={v}" for k, v in candidate.params.items()))
        workloads = [w for w in self.trials.space.workloads if w.key in candidate.workloads]
        trial_dir = self.trials.paths.run_dir / "confirm" / str(trial.number)
        record = TrialRecord(trial.number, dict(candidate.params))  # its shape from the engine's plan
        others = self._others(trial.study) if candidate.label == self.reference else None
        record = self.trials.measure(trial, record, say, trial_dir, workloads, others)
        self._durations.append(time.monotonic() - started)
        self._done += 1
        if record.failed:
            say(f"failed: {record.failure}")
            raise TrialFailed(record.failure)
        measured = [s for s in record.workloads.values() if s.status == "ok" and s.headline]
        say("done: " + ", ".join(s.headline_text() for s in measured))
        return float(len(measured))

    def _others(self, study: optuna.Study) -> Others:
        """What the other configurations of this confirmation answered so far: the reference's launch asks
        where its own answers part from them (`others_to_ask`)."""
        views = [v for v in trial_views(study, Phase.CONFIRM) if v.complete and v.label in self._plan]
        return others_to_ask(views, self.reference)

    def _sayer(self, candidate: Relaunch, round_: int, started: float) -> Progress:
        index = self._done

        def say(message: str) -> None:
            eta = ""
            if self._durations:
                per = sum(self._durations) / len(self._durations)
                left = max(0, self._total - index - 1) * per + max(0.0, per - (time.monotonic() - started))
                eta = f" · ETA {int(left // 60)}m{int(left % 60):02d}s"
            self.progress(
                f"[confirm {index + 1}/{self._total}{eta}] {candidate.label} (round {round_ + 1}): {message}"
            )

        return say


def others_to_ask(views: list[TrialView], reference: str) -> Others:
    """The other configurations' answers, by workload and prompt, less the differences a launch of the
    reference already asked about (its records' `ties`): what the reference's next launch asks its server
    about, where they part from its own answers (`sweep/answers/fidelity.py`'s near-ties)."""
    found: dict[str, dict[str, tuple[str, ...]]] = {}
    for key in {k for v in views if v.record for k in v.record.workloads}:
        ours = [s for v in views if v.label == reference and (s := ok_summary(v, key))]
        asked = {(t.prompt_id, t.at, (t.shared + t.other)[:TIE_CONTEXT]) for s in ours for t in s.ties}
        said = {p: t for s in ours for p, t in zip(s.output_prompts, s.outputs, strict=False)}
        mine = found.setdefault(key, {})
        for summary in (ok_summary(v, key) for v in views if v.label != reference):
            for prompt, text in zip(summary.output_prompts, summary.outputs, strict=False) if summary else ():
                if prompt not in said or _new_difference(said[prompt], text, prompt, asked):
                    mine[prompt] = (*mine.get(prompt, ()), text)
    return found


def _new_difference(ours: str, text: str, prompt: str, asked: set[tuple[str, int, str]]) -> bool:
    """Whether `text` parts from the reference's answer `ours` where no probe has asked yet."""
    at = fidelity.part_at(ours, text)
    return at is not None and (prompt, at, text[at : at + TIE_CONTEXT]) not in asked


def _stop_when_none_waiting(study: optuna.Study, _trial: optuna.trial.FrozenTrial) -> None:
    if not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        study.stop()


def confirm_search(
    trials: TrialRunner,
    search: optuna.Study,
    settings: ConfirmSettings,
    progress: Progress,
    time_left: Callable[[], float | None] = lambda: None,
    model: ModelSearch | None = None,
) -> optuna.Study | None:
    """Confirm a search: its `settings.top` candidates per workload and its one-for-all pick, against the
    baseline, `settings.launches` times each (up to `settings.max_launches` where a verdict stays open). A
    model search's favourites join them (from `model`, the search's own where the command ran one)."""
    space = trials.space
    favoured = None
    costs = CostProfile.of_study(search)
    if space.search is SearchKind.MODEL or costs is not None:
        model = model or ModelSearch.of(space, trials.engine, costs)
    views = trial_views(search)
    if model is not None and model.costs is not None:
        plan = predicted_plan(views, model.picks(search_records(search), settings.top), settings.min_gain)
    else:
        records = search_records(search) if model is not None else []
        if model is not None:
            favoured = model.favourites(records)
        plan = confirmation_plan(views, settings.top, settings.min_gain, dict(space.latency_limits), favoured)
        if model is not None and plan:
            chosen = {k: [c.params for c in plan[1:] if k in c.workloads] for k in plan[0].workloads}
            plan = with_doubts(plan, model.doubts(records, chosen), PlanNames(views))
    rounds, most = settings.launches, max(settings.launches, settings.max_launches)
    if not plan or rounds < 2:
        progress("confirmation: nothing to confirm (no completed baseline and candidate)")
        return None
    progress(
        f"confirmation: {len(plan)} configurations ({', '.join(c.label for c in plan)}) x {rounds} launches, "
        f"interleaved (up to {most} where a verdict stays open)"
    )
    return Confirmation(trials, progress, time_left=time_left).run(plan, rounds, most)
