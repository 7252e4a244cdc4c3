"""After a driver died (SIGKILL, a power loss): which trials it left RUNNING, found by the driver each trial
names (host, boot, pid and its start time), failed as interrupted so they are run again, and the servers it
left stopped."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from sweep.launch import processes
from sweep.launch.server import reap
from sweep.probes.settings import Progress
from sweep.records import Stage
from sweep.storage import DRIVER_ATTR, RECORD_ATTR


def driver_identity() -> dict[str, Any]:
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "boot": processes.boot_id(),
        "pid": pid,
        "start_ticks": processes.start_ticks(pid),
    }


def driver_alive(driver: dict[str, Any]) -> bool:
    """True if the driver a trial names still runs (on this host: checked; elsewhere: assumed, the heartbeat
    decides)."""
    if driver.get("host") != socket.gethostname():
        return True
    if driver.get("boot", processes.boot_id()) != processes.boot_id():
        return False  # the machine restarted since (a power loss)
    return processes.same_process(int(driver.get("pid", 0)), int(driver.get("start_ticks", 0)))


def recover(study: optuna.Study, registry: Path, progress: Progress) -> None:
    """Start-up after a driver died: stop the servers it left, and fail its trials that still say RUNNING (on
    this host, at once; other hosts' trials are left to Optuna's heartbeat) so they are run again."""
    for line in reap(registry):
        progress(f"stopped what a stopped sweep left running: {line}")
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        driver = trial.user_attrs.get(DRIVER_ATTR) or {}
        if not driver or driver_alive(driver):
            continue
        record = trial.user_attrs.get(RECORD_ATTR) or {"number": trial.number, "params": {}}
        reason = f"interrupted: the sweep running it (pid {driver['pid']}) stopped"
        storage = study._storage
        storage.set_trial_user_attr(
            trial._trial_id, RECORD_ATTR, {**record, "failure": reason, "stage": Stage.INTERRUPTED.value}
        )
        storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
        progress(f"trial {trial.number} was left running by a stopped sweep: marked interrupted, run again")
