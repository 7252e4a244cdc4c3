"""The host while a server was measured: how much of the machine other processes took, and the hypervisor.

A speed measured while something else ran (a build, another benchmark, a noisy neighbour stealing CPU) is not
the configuration's speed. The sweep samples the machine's CPU counters (`/proc/stat`) around each probe and
subtracts what it and the server's process group used, so the server's own load never counts against it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sweep.launch import processes
from sweep.launch.processes import PROC  # where the counters are read (tests read a recorded tree instead)
from sweep.records import HostLoad

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class HostSample:
    total_s: float  # every CPU's time, all states
    busy_s: float  # running here: not idle, not waiting for I/O, not stolen
    steal_s: float  # taken by the hypervisor for other guests
    ours_s: float  # this process (and its reaped children) and the server's process group
    loadavg: float
    cpus: int  # the CPUs /proc/stat counts


def _cpu_lines(proc: Path) -> tuple[list[float], int]:
    """The machine's CPU times in seconds by state (the aggregate line of /proc/stat), and how many CPUs."""
    lines = (proc / "stat").read_text(encoding="ascii").splitlines()
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return [int(f) / CLOCK_TICKS for f in lines[0].split()[1:]], max(1, cpus)


def cpu_name() -> str:
    """The CPU's model name as /proc/cpuinfo gives it ("unknown" where it gives none)."""
    try:
        with open(PROC / "cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                name, _, value = line.partition(":")
                if name.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return "unknown"


def group_cpu_s(pgid: int, proc: Path = PROC) -> float:
    """CPU seconds used by the live members of a process group (with their reaped children)."""
    return sum(p.cpu_ticks for p in processes.table(proc) if p.pgid == pgid) / CLOCK_TICKS


def own_cpu_s() -> float:
    """CPU seconds this process and its reaped children used."""
    own = os.times()
    return own.user + own.system + own.children_user + own.children_system


def sample(server_pgid: int | None, proc: Path = PROC, own: Callable[[], float] = own_cpu_s) -> HostSample:
    """The machine's counters now (`proc`: the /proc tree to read; `own`: this process's CPU seconds)."""
    cpu, cpus = _cpu_lines(proc)
    _user, _nice, _system, idle, iowait = cpu[:5]
    steal = cpu[7] if len(cpu) > 7 else 0.0
    total = sum(cpu[:8])
    ours = own()
    if server_pgid is not None:
        ours += group_cpu_s(server_pgid, proc)
    loadavg = float((proc / "loadavg").read_text(encoding="ascii").split()[0])
    return HostSample(total, total - idle - iowait - steal, steal, ours, loadavg, cpus)


def load_between(start: HostSample, end: HostSample) -> HostLoad | None:
    """What the rest of the machine did between two samples (None if the window is too short to say)."""
    total = end.total_s - start.total_s
    if total <= 0:
        return None
    others = max(0.0, (end.busy_s - start.busy_s) - (end.ours_s - start.ours_s))
    return HostLoad(
        other_cpu=round(min(1.0, others / total), 4),
        steal=round(max(0.0, end.steal_s - start.steal_s) / total, 4),
        loadavg=round(max(start.loadavg, end.loadavg), 2),
        cpus=end.cpus,
        seconds=round(total / end.cpus, 2),
    )


def watcher(server_pgid: int | None) -> Callable[[], Callable[[], HostLoad | None]]:
    """For the probes: each call starts a window on the host; the function it returns closes it."""

    def start() -> Callable[[], HostLoad | None]:
        before = sample(server_pgid)
        return lambda: load_between(before, sample(server_pgid))

    return start


def combine(loads: list[HostLoad]) -> HostLoad | None:
    """Several probing windows (a server restarted per workload) as one, weighted by duration."""
    if not loads:
        return None
    seconds = sum(load.seconds for load in loads) or 1.0
    return HostLoad(
        other_cpu=round(sum(load.other_cpu * load.seconds for load in loads) / seconds, 4),
        steal=round(sum(load.steal * load.seconds for load in loads) / seconds, 4),
        loadavg=max(load.loadavg for load in loads),
        cpus=loads[0].cpus,
        seconds=round(seconds, 2),
    )
