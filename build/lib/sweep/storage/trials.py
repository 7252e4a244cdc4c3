"""How a trial lives in Optuna: the study's storage and folders, the attributes a trial carries (its record,
its role, the model's prediction), and which trials are results, launches and records to learn from."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import optuna
import sqlalchemy.exc
from optuna.trial import TrialState

from sweep.core.errors import UserError, mask_secrets
from sweep.records import Stage, TrialRecord

HEARTBEAT_S = 20
STORAGE_ATTEMPTS = 4
GRACE_S = 60
RECORD_ATTR = "record"
ROLE_ATTR = "role"
SPACE_TEXT_ATTR = "space_text"
SPACE_PATH_ATTR = "space_path"
MIN_GAIN_ATTR = "min_gain"
LOOKS_ATTR = "looks"  # the confirmation study's: its rounds' looks, [first, most] (`stats.Looks`)
LIMITS_ATTR = "latency_limits"
DRIVER_ATTR = "driver"  # host, pid and pid start time of the process running the trial
SPACE_ID_ATTR = "space_id"  # the space file's hash when the trial ran
COST_PROFILE_ATTR = "cost_profile"  # the study's: the cost profile its search read (`costs.CostProfile`)
PREDICTED_ATTR = "predicted"  # the model's prediction per workload when it chose the trial: {key: {tps, sd}}
LABEL_ATTR = "label"  # confirmation launches: which configuration ("baseline", "trial 5", "A")
ROUND_ATTR = "round"
SET_ATTR = "set"  # the confirmation plan a launch belongs to
DOUBT_ATTR = "doubts"  # confirmation launches: per workload, why the model's doubt put it in the plan
INTERRUPTED = "interrupted: the sweep stopped during this trial"

STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class StudyPaths:
    name: str
    run_dir: Path
    storage_url: str

    @classmethod
    def for_study(cls, name: str, runs_dir: Path, storage_url: str | None) -> StudyPaths:
        if not STUDY_NAME.fullmatch(name) or ".." in name:
            raise UserError(
                f"study name {name!r} is not a plain name",
                "use letters, digits, '.', '_' and '-' (no '/', no '..'), e.g. --study tool-night",
            )
        if runs_dir.exists() and not runs_dir.is_dir():
            raise UserError(f"--runs {runs_dir} is a file, not a folder", "pass a folder, e.g. --runs runs")
        run_dir = runs_dir / name
        return cls(name, run_dir, storage_url or f"sqlite:///{(run_dir / 'study.db').resolve()}")

    def trial_dir(self, number: int) -> Path:
        return self.run_dir / "trials" / str(number)

    @property
    def registry(self) -> Path:
        """Where the servers that may be alive are written down (reaped by the next run if the driver died)."""
        return self.run_dir / "servers"

    @property
    def shown_url(self) -> str:
        return mask_secrets(self.storage_url)


def make_storage(url: str) -> optuna.storages.BaseStorage:
    """An RDB storage with heartbeats, so a trial whose process died is found and marked failed later."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]  # the driver specsweep installs (psycopg 3)
    for attempt in range(STORAGE_ATTEMPTS):
        try:
            return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
        except sqlalchemy.exc.IntegrityError:
            # Workers starting together on an empty database race to create Optuna's tables; the loser retries.
            time.sleep(1.0 + attempt)
        except Exception as exc:  # SQLAlchemy raises many kinds; all mean the URL cannot be used
            raise UserError(
                f"cannot open storage {mask_secrets(url)} ({exc.__class__.__name__}: {exc})".split("\n")[0],
                "check the URL (e.g. sqlite:///runs/x/study.db or postgresql://user@host/db), that the database "
                "server runs and that its disk has space",
            ) from None
    raise UserError(
        f"cannot create Optuna's tables in {mask_secrets(url)}",
        "run again: another worker may be creating them",
    )


def finished_trials(study: optuna.Study, space_id: str | None = None) -> list[optuna.trial.FrozenTrial]:
    """Trials that are results: completed, or failed for a recorded reason. An interrupted trial (Ctrl-C, or a
    process that died: Optuna's heartbeat marks it failed, with no record) is not, and is run again.

    With `space_id`, the trials that count towards `--trials`, which are launches: a trial that reused a result
    (same parameters after the engine's derivation) or was infeasible for the engine was not launched, and
    start-ups that failed on flags of another version of the space file, or on the baseline's (flags common to
    every trial), do not eat the budget."""
    return [t for t in study.get_trials(deepcopy=False) if is_result(t) and counts(t, space_id)]


def counts(trial: optuna.trial.FrozenTrial, space_id: str | None) -> bool:
    if space_id is None:
        return True
    if not launched(trial):
        return False
    if trial.state != TrialState.FAIL:
        return True
    if Stage.read(trial.user_attrs.get(RECORD_ATTR, {}).get("stage")) not in (Stage.LAUNCH, Stage.PARAMS):
        return True
    return trial.user_attrs.get(ROLE_ATTR) != "baseline" and trial.user_attrs.get(SPACE_ID_ATTR) == space_id


def launched(trial: optuna.trial.FrozenTrial) -> bool:
    """False for a trial that copied another's result or that the engine's rules kept from launching."""
    record = trial.user_attrs.get(RECORD_ATTR) or {}
    return "duplicate_of" not in trial.user_attrs and Stage.read(record.get("stage")) != Stage.INFEASIBLE


def search_records(study: optuna.Study) -> list[TrialRecord]:
    """The records the surface model learns from: every result of its own (a reused result is not another
    launch), infeasible points and failed starts included."""
    return [
        TrialRecord.from_dict(t.user_attrs[RECORD_ATTR])
        for t in study.get_trials(deepcopy=False)
        if is_result(t) and RECORD_ATTR in t.user_attrs and "duplicate_of" not in t.user_attrs
    ]


def is_result(trial: optuna.trial.FrozenTrial) -> bool:
    if trial.state == TrialState.COMPLETE:
        return True
    record = trial.user_attrs.get(RECORD_ATTR)
    return (
        trial.state == TrialState.FAIL
        and record is not None
        and Stage.read(record.get("stage")) != Stage.INTERRUPTED
    )
