"""How a trial lives in Optuna: the study's storage and folders, the attributes a trial carries (its record,
its role, the model's prediction), which trials are results, launches and records to learn from, and trials
read back as views (`TrialView`, `trial_views`, `Study`) for the analysis and every output."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import optuna
import sqlalchemy.exc
from optuna.trial import TrialState

from sweep.core.errors import UserError, mask_secrets
from sweep.core.stats import MIN_GAIN
from sweep.engines import engine_of_argvs
from sweep.records import Stage, TrialRecord

HEARTBEAT_S = 20
STORAGE_ATTEMPTS = 4
GRACE_S = 60
RECORD_ATTR = "record"
ROLE_ATTR = "role"
SPACE_TEXT_ATTR = "space_text"
SPACE_PATH_ATTR = "space_path"
MIN_GAIN_ATTR = "min_gain"
LIMITS_ATTR = "latency_limits"
DRIVER_ATTR = "driver"  # host, pid and pid start time of the process running the trial
SPACE_ID_ATTR = "space_id"  # the space file's hash when the trial ran
COST_PROFILE_ATTR = "cost_profile"  # the study's: the cost profile its search read (`costs.CostProfile`)
PREDICTED_ATTR = "predicted"  # the model's prediction per workload when it chose the trial: {key: {tps, sd}}
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


# --- trials read back as views ---------------------------------------------------------------------------

LABEL_ATTR = "label"  # confirmation launches: which configuration ("baseline", "trial 5", "A")
ROUND_ATTR = "round"
SET_ATTR = "set"  # the confirmation plan a launch belongs to
BASELINE = "baseline"  # the label of the configuration without speculation


class Phase(StrEnum):
    SEARCH = "search"
    CONFIRM = "confirm"


@dataclass(frozen=True)
class TrialView:
    number: int
    state: str
    role: str
    record: TrialRecord | None
    phase: Phase = Phase.SEARCH
    label: str = ""  # the configuration: "baseline", "trial N" (search) or a confirmation launch's label
    round: int = 0
    plan: str = ""

    @property
    def failure(self) -> str:
        if self.state == "FAIL":
            return (self.record.failure if self.record else "") or INTERRUPTED
        return ""

    @property
    def complete(self) -> bool:
        return self.state == TrialState.COMPLETE.name and self.record is not None

    @property
    def name(self) -> str:
        """How outputs name the configuration: "trial N" for a search trial; for a confirmation launch its
        configuration's label ("trial N", or "predicted K" for one the model predicted and only the
        confirmation launched)."""
        return self.label if self.phase is Phase.CONFIRM else f"trial {self.number}"


def study_engine(study: optuna.Study, views: list[TrialView]) -> str:
    """The engine a study swept (studies made before it was stored: told apart by their argv)."""
    if "engine" in study.user_attrs:
        return str(study.user_attrs["engine"])
    written = {v.record.facts.engine for v in views if v.record and v.record.facts.engine}
    if written:
        return written.pop()
    # Studies from before the engine was stored anywhere: the engine whose command line the trials ran.
    argvs = [v.record.argv for v in views if v.record and v.record.argv]
    return engine_of_argvs(argvs)


def trial_views(study: optuna.Study, phase: Phase = Phase.SEARCH) -> list[TrialView]:
    views = []
    for t in study.get_trials(deepcopy=False):
        data = t.user_attrs.get(RECORD_ATTR)
        role = t.user_attrs.get(ROLE_ATTR, "search")
        default_label = (
            BASELINE if role == BASELINE else f"trial {t.user_attrs.get('duplicate_of', t.number)}"
        )
        views.append(
            TrialView(
                t.number,
                t.state.name,
                role,
                TrialRecord.from_dict(data) if data else None,
                phase,
                str(t.user_attrs.get(LABEL_ATTR, default_label)),
                int(t.user_attrs.get(ROUND_ATTR, 0)),
                str(t.user_attrs.get(SET_ATTR, "")),
            )
        )
    return views


def latest_plan(confirm: list[TrialView]) -> list[TrialView]:
    """Confirmation launches of the newest plan only (a longer search makes a new plan, launched afresh)."""
    if not confirm:
        return []
    newest = confirm[-1].plan
    return [v for v in confirm if v.plan == newest]


def complete_views(views: list[TrialView]) -> list[TrialView]:
    return [v for v in views if v.complete and v.record is not None and v.record.workloads]


@dataclass(frozen=True)
class Study:
    """Everything a morning output needs, read once: the search, its confirmation, noise and warnings."""

    search: list[TrialView]
    confirm: list[TrialView]
    min_gain: float = MIN_GAIN
    latency_limits: dict[str, float] = field(default_factory=dict)

    @property
    def views(self) -> list[TrialView]:
        return [*self.search, *self.confirm]

    @property
    def keys(self) -> list[str]:
        return list(
            dict.fromkeys(k for v in complete_views(self.search) if v.record for k in v.record.workloads)
        )

    def by_label(self) -> dict[str, TrialView]:
        """The launch behind each configuration label: its search trial, or, for a configuration only the
        confirmation launched (the model's prediction, with a cost profile), its first confirmation launch."""
        out: dict[str, TrialView] = {}
        for view in [*complete_views(self.search), *complete_views(latest_plan(self.confirm))]:
            out.setdefault(view.label, view)
        return out

    def named(self, name: str) -> TrialView | None:
        """The launch outputs name `name` ("trial N", "predicted K"): a search trial, else a confirmation's."""
        return next((v for v in self.views if v.name == name and v.record is not None), None)
