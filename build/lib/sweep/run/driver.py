"""The driver: create or resume a study, enqueue the baseline, and run trials (launch, probe, record, stop).
Checks before any launch live in `preflight.py`, recovery after a dead driver in `recovery.py`."""

from __future__ import annotations

import fcntl
import hashlib
import logging
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import TrialState

from sweep.core.errors import (
    UserError,
    interrupted_how,
)
from sweep.core.files import write_error
from sweep.engines import Engine
from sweep.probes.settings import Progress
from sweep.records import Stage, TrialRecord
from sweep.run.recovery import driver_identity, recover
from sweep.run.trial import TrialRunner
from sweep.search import ModelSearch, acceptance_launches, candidates
from sweep.search.costs import CostProfile, profile_mismatches
from sweep.space import SearchKind, Space
from sweep.storage import (
    COST_PROFILE_ATTR,
    DRIVER_ATTR,
    LIMITS_ATTR,
    MIN_GAIN_ATTR,
    PREDICTED_ATTR,
    RECORD_ATTR,
    ROLE_ATTR,
    SPACE_ID_ATTR,
    SPACE_PATH_ATTR,
    SPACE_TEXT_ATTR,
    StudyPaths,
    finished_trials,
    make_storage,
    search_records,
)

# Suggestions in a row that were not launches (already measured, or infeasible for the engine): the space has
# no untried feasible configuration left, and the sweep stops short of its target.
IDLE_LIMIT = 40


# Heartbeats and metric names are marked experimental; they are what resuming and per-workload objectives use.
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


class TrialFailed(Exception):
    """A trial that produced a result: the failure and its reason (stored on the trial)."""


def open_study(
    space: Space,
    paths: StudyPaths,
    recover_with: Callable[[optuna.Study], None] | None = None,
    trials: int | None = None,
    start: Sequence[Mapping[str, Any]] | None = None,
) -> optuna.Study:
    """Create or load the study, recover what a stopped sweep left, and make sure it has a baseline. Workers of
    this machine take turns (a lock file in the study's folder), so two starting at once enqueue one baseline.
    `start`: the start-up trials of a new study (by default, ones that cover the space)."""
    try:
        paths.run_dir.mkdir(parents=True, exist_ok=True)
        lock = (paths.run_dir / ".open.lock").open("a")
    except OSError as exc:
        raise write_error(paths.run_dir, exc.strerror or str(exc)) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _open_study(space, paths, recover_with, trials or space.trials, start)


def _open_study(
    space: Space,
    paths: StudyPaths,
    recover_with: Callable[[optuna.Study], None] | None,
    trials: int,
    start: Sequence[Mapping[str, Any]] | None,
) -> optuna.Study:
    storage = make_storage(paths.storage_url)
    # Failed trials are reported by the sweep in one line each; Optuna would add a traceback per failure.
    optuna.logging.set_verbosity(logging.ERROR)
    study = optuna.create_study(
        study_name=paths.name,
        storage=storage,
        sampler=optuna.samplers.TPESampler(seed=space.seed),
        directions=["maximize"] * len(space.objective_names),
        load_if_exists=True,
    )
    if "engine" not in study.user_attrs:
        study.set_user_attr("engine", space.engine)  # what export and compare launch or label
    # What `specsweep confirm` and the verdicts need later, with only the study at hand.
    if space.text and study.user_attrs.get(SPACE_TEXT_ATTR) != space.text:
        study.set_user_attr(SPACE_TEXT_ATTR, space.text)
        study.set_user_attr(SPACE_PATH_ATTR, str(space.source.resolve()) if space.source else "")
    if study.user_attrs.get(MIN_GAIN_ATTR) != space.confirm.min_gain:
        study.set_user_attr(MIN_GAIN_ATTR, space.confirm.min_gain)
    if study.user_attrs.get(LIMITS_ATTR, {}) != dict(space.latency_limits):
        study.set_user_attr(LIMITS_ATTR, dict(space.latency_limits))
    names = study.metric_names
    if names is None:
        study.set_metric_names(space.objective_names)
    elif list(names) != space.objective_names:
        raise UserError(
            f"study '{paths.name}' measures {', '.join(names)}, this space measures {', '.join(space.objective_names)}",
            "give this space another --study name",
        )
    if recover_with is not None:
        recover_with(study)  # before the baseline check: a baseline left RUNNING by a dead driver is not live
    new = not study.trials
    live = (TrialState.COMPLETE, TrialState.WAITING, TrialState.RUNNING)
    if not any(t.user_attrs.get(ROLE_ATTR) == "baseline" and t.state in live for t in study.trials):
        # First run, or the baseline failed before (e.g. a broken flag since fixed): every study needs one.
        # skip_if_exists on a new study: two workers opening a shared study at once enqueue one baseline, not two.
        study.enqueue_trial({}, user_attrs={ROLE_ATTR: "baseline"}, skip_if_exists=new)
    if new:
        for params in space.enqueue:
            study.enqueue_trial(dict(params), user_attrs={ROLE_ATTR: "enqueued"})
        # Start-up trials that cover the space (each method, shallow and deep) instead of random ones, up to half
        # of the search's own trials; those asked for (a cost profile's acceptance launches) all.
        limit = max(0, (trials - 1 - len(space.enqueue)) // 2)
        for params in space.covering(limit) if start is None else start:
            if params not in space.enqueue:
                study.enqueue_trial(dict(params), user_attrs={ROLE_ATTR: "cover"})
    return study


def space_id(space: Space) -> str:
    return hashlib.sha256(space.text.encode()).hexdigest()[:16]


class Sweep:
    """Runs the trials of one study. `run` resumes: finished trials count towards `trials` and are not repeated."""

    def __init__(
        self,
        space: Space,
        engine: Engine,
        paths: StudyPaths,
        progress: Progress,
        until_confident: bool = False,
        budget_s: float | None = None,
        confirm_after: bool = False,
        costs: CostProfile | None = None,
    ) -> None:
        self.space, self.engine, self.paths, self.progress = space, engine, paths, progress
        # Whether the confirmation follows the search in this run: its launches belong in the search's ETA.
        self.confirm_after = confirm_after
        # With a cost profile the model predicts what it has not launched: the search stops once it is sure.
        self.costs = costs
        self.until_confident = until_confident or costs is not None
        # The whole night in seconds (search and confirmation): the search stops while the confirmation fits.
        self.budget_s = budget_s
        self._started = time.monotonic()
        self.model: ModelSearch | None = None  # built once per run when the search or the stop rule needs it
        self.stopped_because = ""
        self._durations: list[float] = []
        self._target = space.trials
        self._finished_before = 0
        self.baseline_launch_failure = ""
        self.space_id = space_id(space)  # recorded on every trial: which version of the space file ran it
        self._idle = 0  # suggestions in a row that were not launched
        self.trials = TrialRunner(
            space, engine, paths
        )  # one trial's life, for the search and the confirmation

    def run(self, trials: int | None = None) -> optuna.Study:
        self._target = trials or self.space.trials
        start = None
        if self.space.search is SearchKind.MODEL or self.until_confident:
            self.model = ModelSearch(self.space, candidates(self.space, self.engine), self.costs)
            if self.costs is not None:
                # The step times are known: each method's acceptance is what the first launches must measure.
                starts = self.model.start_chance([])  # the profile's own launches: what starts here
                likely = acceptance_launches(self.model.pool.items, lambda c: starts(c.params, c.shape))
                start = [c.swept for c in likely]
        study = open_study(
            self.space,
            self.paths,
            lambda s: recover(s, self.paths.registry, self.progress),
            self._target,
            start,
        )
        if study.user_attrs.get(COST_PROFILE_ATTR) != (self.costs.to_dict() if self.costs else None):
            study.set_user_attr(COST_PROFILE_ATTR, self.costs.to_dict() if self.costs else None)
        self._finished_before = len(finished_trials(study, self.space_id))
        remaining = self._target - self._finished_before
        if self.model is not None:
            self.progress(
                f"search: {self.space.search.value}; {len(self.model.pool.items)} launchable configurations in "
                f"the space ({self.model.pool.infeasible} infeasible and {self.model.pool.duplicates} duplicates "
                "after the engine's rules left out)"
            )
        records = self._records(study)
        if remaining > 0 and not self._should_stop(study, records):
            self._enqueue_next(study, records)
            # Workers sharing the study stop when together they reach the target (each may finish one more).
            # No trial count: duplicates and infeasible suggestions are not launches, so the callback stops the
            # loop at the target (or when the space has nothing untried left).
            study.optimize(
                self.objective,
                n_trials=None,
                catch=(TrialFailed,),
                gc_after_trial=False,
                callbacks=[self._stop_at_target],
            )
        if self.trials.write_error:
            raise self.trials.write_error
        if self.baseline_launch_failure:
            raise UserError(
                f"the server exits at start even with speculation off: {self.baseline_launch_failure}",
                "fix the fixed flags, the model or server.extra_args in the space file",
            )
        return study

    def _stop_at_target(self, study: optuna.Study, _trial: optuna.trial.FrozenTrial) -> None:
        if self.baseline_launch_failure:
            return  # the sweep stops already: queue nothing more
        records = self._records(study)
        if self._should_stop(study, records):
            study.stop()
        else:
            self._enqueue_next(study, records)

    def _records(self, study: optuna.Study) -> list[TrialRecord]:
        """What the model learns from, read once per step for both the stop rule and the next pick."""
        records = search_records(study) if self.model is not None else []
        self._check_costs(study, records)
        return records

    def _check_costs(self, study: optuna.Study, records: list[TrialRecord]) -> None:
        """Drop the cost profile, once, where the first launch shows another release or other hardware."""
        first = next((r for r in records if not r.failed and r.facts.engine_version), None)
        if self.model is None or self.model.costs is None or first is None:
            return
        if differences := profile_mismatches(self.model.costs.key, first):
            self.progress(
                f"the cost profile does not hold for this server ({'; '.join(differences)}): the search goes on "
                "without it, learning step times from its own launches"
            )
            self.model = ModelSearch(self.space, self.model.pool)
            self.costs = None
            study.set_user_attr(COST_PROFILE_ATTR, None)  # the confirmation and the pages read none either

    def _should_stop(self, study: optuna.Study, records: list[TrialRecord]) -> bool:
        """The target reached, a file that cannot be written, nothing untried left, confidence, or the night's
        time spent (each said once, and kept in `stopped_because`)."""
        if len(finished_trials(study, self.space_id)) >= self._target or self.trials.write_error:
            return True
        reason = ""
        if self._idle >= IDLE_LIMIT:
            reason = (
                f"the space has no untried feasible configuration left ({IDLE_LIMIT} suggestions in a row were "
                "measured already or infeasible)"
            )
        elif (left := self.time_left()) is not None and left < self._reserve_s():
            reason = (
                f"{_minutes(max(0.0, left))} of the budget left, less than one more trial and the confirmation's "
                f"first rounds take ({_minutes(self._reserve_s())})"
            )
        elif self.model is not None and not self._waiting(study, "cover", "enqueued", "baseline"):
            if not self.model.untried(records):
                reason = "every launchable configuration of the space was measured"
            elif self.until_confident and not (unsure := self.model.unconfident(records)):
                reason = (
                    "confident: each method's acceptance is measured and the cost profile gives the step "
                    "times, so the rest is predicted; the confirmation launches what the model predicts fastest"
                    if self.model.costs is not None
                    else "confident: no untried configuration can beat the best measured on any workload by "
                    "more than this study's noise"
                )
            elif self.until_confident:
                self.progress(f"not yet confident on {', '.join(unsure)}")
        if reason:
            self.stopped_because = reason
            self.progress(f"the search stops here: {reason}")
        return bool(reason)

    def _waiting(self, study: optuna.Study, *roles: str) -> bool:
        waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
        return (
            any(t.user_attrs.get(ROLE_ATTR, "search") in roles for t in waiting) if roles else bool(waiting)
        )

    def _enqueue_next(self, study: optuna.Study, records: list[TrialRecord]) -> None:
        """The model's next launch, unless one is queued already (start-up trials, another worker's pick)."""
        if self.model is None or self.space.search is not SearchKind.MODEL or self._waiting(study):
            return
        proposal = self.model.propose(records)
        if proposal is None:
            return  # nothing left that could start: the next suggestion is idle and the sweep stops
        predicted = {k: {"tps": round(p.tps, 2), "sd": round(p.sd, 4)} for k, p in proposal.predicted.items()}
        study.enqueue_trial(
            proposal.candidate.swept,
            user_attrs={ROLE_ATTR: "model", PREDICTED_ATTR: predicted, "aimed_at": proposal.workload},
        )

    def time_left(self) -> float | None:
        """Seconds of `--budget` left (None: no budget); the confirmation reads it too."""
        if self.budget_s is None:
            return None
        return self.budget_s - (time.monotonic() - self._started)

    def _reserve_s(self) -> float:
        """What one more trial and the confirmation's first rounds take, at this run's measured trial time."""
        per_trial = sum(self._durations) / len(self._durations) if self._durations else 0.0
        return per_trial * (1 + self._confirm_first(self._measured() + 1))

    def _measured(self) -> int:
        """Configurations the search has measured: the baseline and each one launched."""
        return self._finished_before + len(self._durations)

    def _confirm_first(self, measured: int) -> int:
        """The confirmation's first rounds in launches after `measured` configurations: no more configurations
        than the search measured, unless it confirms a cost profile's predictions (0 with no confirmation)."""
        if not self.confirm_after:
            return 0
        return self.space.confirm_launches(configurations=measured, predicted=self.costs is not None)

    def objective(self, trial: optuna.Trial) -> list[float]:
        started = time.monotonic()
        role = trial.user_attrs.get(ROLE_ATTR, "search")
        if role == "model" and self.space.search is not SearchKind.MODEL:
            role = "search"  # queued by a model search before the space switched to TPE: still a fine point
        trial.set_user_attr(DRIVER_ATTR, driver_identity())
        trial.set_user_attr(SPACE_ID_ATTR, self.space_id)
        swept = self.engine.baseline_params() if role == "baseline" else self.space.suggest(trial)
        plan = self.engine.plan(self.space.launch_params(swept))
        params = plan.params
        record = TrialRecord(trial.number, params, shape=plan.shape)
        say = self._sayer(started)
        violations = plan.violations  # none where the engine refuses the parameters: that fails at launch
        for key, value in violations.items():
            trial.set_constraint(key, value)
        self._idle += 1  # until it is launched, below
        if any(value > 0 for value in violations.values()):
            # Infeasible for the engine: never launched. The sampler learns from the constraint value.
            record.stage = Stage.INFEASIBLE
            record.facts.constraint_violations = dict(violations)
            self.trials.save(trial, record)
            say(
                "infeasible combination, not launched: "
                + ", ".join(f"{k} over by {v:g}" for k, v in violations.items())
            )
            return [0.0] * len(self.space.objective_names)
        try:
            duplicate = self._same_params(trial, params)
            if duplicate is not None:
                say(f"same parameters as trial {duplicate.number}: its result is reused")
                trial.set_user_attr("duplicate_of", duplicate.number)
                trial.set_user_attr(
                    RECORD_ATTR, {**duplicate.user_attrs[RECORD_ATTR], "number": trial.number}
                )
                for key, value in duplicate.constraints.items():  # the same result, feasible or not
                    if key not in trial.constraints:  # the engine's own were set above
                        trial.set_constraint(key, value)
                return list(duplicate.values)
            say(f"{role}: " + " ".join(f"{k}={v}" for k, v in swept.items()))
            self._idle = 0
        except KeyboardInterrupt as exc:
            record.failure, record.stage = f"interrupted {interrupted_how(exc)}", Stage.INTERRUPTED
            self.trials.save(trial, record)
            raise
        record = self.trials.measure(trial, record, say, self.paths.trial_dir(record.number))
        self._durations.append(time.monotonic() - started)
        if len(self._durations) == 1 and not record.failed:
            say(self._measured_plan(record))
        if record.failed:
            say(f"failed: {record.failure}")
            if role == "baseline" and record.stage == Stage.LAUNCH:
                # Speculation is off here, so what broke is common to every trial: stop instead of failing them all.
                trial.study.stop()
                self.baseline_launch_failure = (
                    f"{record.failure} (log: {self.paths.trial_dir(record.number)}/server.log)"
                )
            raise TrialFailed(record.failure)
        for name, over in self._latency_over(record).items():
            trial.set_constraint(f"latency {name}", over)  # the sampler steers away from what breaks a limit
        values = [self._objective_value(record, name) for name in self.space.objective_names]
        say(
            "done: "
            + ", ".join(
                s.headline_text() for n in self.space.objective_names if (s := record.workloads.get(n))
            )
        )
        return values

    def _latency_over(self, record: TrialRecord) -> dict[str, float]:
        """Per latency limit, the worst excess over the objective's workloads (<= 0: met on all of them)."""
        limits = self.space.latency_limits
        summaries = [
            s for n in self.space.objective_names if (s := record.workloads.get(n)) and s.status == "ok"
        ]
        return {name: max((s.over_limits(limits)[name] for s in summaries), default=0.0) for name in limits}

    def _objective_value(self, record: TrialRecord, workload: str) -> float:
        summary = record.workloads.get(workload)
        # A workload that does not fit (or was not measured) is served at 0 t/s (or 0 req/s) by this configuration.
        if summary is None or summary.status != "ok" or summary.headline is None:
            return 0.0
        return summary.headline.median

    def _same_params(self, trial: optuna.Trial, params: dict[str, Any]) -> optuna.trial.FrozenTrial | None:
        for other in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if other.user_attrs.get(RECORD_ATTR, {}).get("params") == params:
                return other
        return None

    def _measured_plan(self, record: TrialRecord) -> str:
        """After this run's first launch: the wall time the rest takes at what that launch took (`specsweep plan`
        assumes speeds before anything is measured), and what it rests on."""
        took = self._durations[0]
        startup = record.facts.startup_s or 0.0
        measured = (
            f"plan, measured on this launch ({took:.0f} s: {startup:.0f} s start-up + {took - startup:.0f} s "
            "probing): "
        )
        if (budget_left := self.time_left()) is not None:
            return measured + self._budget_plan(max(0.0, budget_left), took)
        left = max(0, self._target - self._finished_before - 1)
        text = measured + f"{left} more search launches, about {_minutes(left * took)}"
        if self.confirm_after and self.space.confirm.launches:
            predicted = self.costs is not None
            least = self.space.confirm_launches(predicted=predicted)
            most = self.space.confirm_launches(most=True, predicted=predicted)
            text += f", then {least}-{most} confirmation launches, about {_minutes(least * took)}-{_minutes(most * took)}"
        return text

    def _budget_plan(self, left: float, took: float) -> str:
        """What the budget's `left` seconds hold at `took` a launch: the search launches, then the confirmation's
        first rounds (and the rounds it may add, as far as the time allows)."""
        count = self.space.launches_in_budget(
            left, took, self._measured(), self._target, self.confirm_after, self.costs is not None
        )
        search = (
            f"{count} more search launch{'es' if count > 1 else ''}, about {_minutes(count * took)}"
            if count
            else "no more search launch fits before the confirmation"
        )
        text = f"{_minutes(left)} of the budget left: {search}"
        measured = self._measured() + count
        if first := self._confirm_first(measured):
            most = self.space.confirm_launches(
                most=True, configurations=measured, predicted=self.costs is not None
            )
            most = max(first, min(most, int((left - count * took) // took)))
            launches, takes = (
                (f"{first}", _minutes(first * took))
                if most == first
                else (f"{first}-{most}", f"{_minutes(first * took)}-{_minutes(most * took)}")
            )
            text += f", then {launches} confirmation launches, about {takes}"
        return text

    def _sayer(self, started: float) -> Progress:
        index = self._finished_before + len(self._durations)  # trials finished before this one

        def say(message: str) -> None:
            left = self.time_left()
            if left is not None:  # a time budget: the clock, not a count, ends the search
                self.progress(
                    f"[trial {index + 1} · {_minutes(max(0.0, left))} of the budget left] {message}"
                )
                return
            eta = ""
            if self._durations:
                per_trial = sum(self._durations) / len(self._durations)
                left = max(0, self._target - index - 1) * per_trial
                left += max(0.0, per_trial - (time.monotonic() - started))
                eta = f" · ETA {_minutes(left)}"
                if self.confirm_after and self.space.confirm.launches:
                    # The confirmation's first rounds: the baseline and one configuration, up to every candidate.
                    least = 2 * self.space.confirm.launches * per_trial
                    most = self.space.confirm_launches(predicted=self.costs is not None) * per_trial
                    eta = f" · ETA {_minutes(left + least)}-{_minutes(left + most)} with the confirmation"
            self.progress(f"[trial {index + 1}/{self._target}{eta}] {message}")

        return say


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
