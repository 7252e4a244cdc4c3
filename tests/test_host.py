"""The host monitor: load from other processes is seen, the server's own load is not. The readings are a
recorded /proc tree (this machine's format, counters advanced by hand), so nothing here depends on how busy the
machine running the tests is; one test reads the live /proc for its shape alone."""

from __future__ import annotations

import os
from pathlib import Path

from sweep.launch import host

TICKS = host.CLOCK_TICKS
# /proc/stat and /proc/loadavg as a 2-CPU VM writes them (user nice system idle iowait irq softirq steal ...).
STAT = "cpu  {user} 356 {system} {idle} 2306 0 277 {steal} 0 0\n{each}intr 1181577 0 9 0\nctxt 2217355\n"
CPU_LINE = "cpu{n} 2352 178 292 1849588 1153 0 138 0 0 0\n"  # one per CPU (the monitor counts them)
# A process's /proc/PID/stat: pid (comm) state ppid pgrp session ... utime (field 14) stime cutime cstime ...
PID_STAT = "{pid} (python3) R 1 {pgrp} {pgrp} 0 -1 4194560 2190 0 0 0 {utime} {stime} 0 0 20 0 1 0 7 1 2 3\n"


class RecordedProc:
    """A /proc tree whose counters a test advances: the machine's CPU states and the server group's members."""

    def __init__(self, root: Path, cpus: int = 2) -> None:
        self.root, self.cpus = root, cpus
        self.user = self.system = self.idle = self.steal = 0
        self.members: dict[int, tuple[int, int]] = {}  # pid: (pgrp, CPU ticks used)
        root.mkdir(exist_ok=True)
        self.write()

    def write(self) -> None:
        fields = {"user": 4705 + self.user, "system": 584 + self.system, "idle": 3699176 + self.idle}
        each = "".join(CPU_LINE.format(n=n) for n in range(self.cpus))
        (self.root / "stat").write_text(STAT.format(**fields, steal=self.steal, each=each))
        (self.root / "loadavg").write_text("1.50 0.90 0.60 3/245 31337\n")
        for pid, (pgrp, ticks) in self.members.items():
            (self.root / str(pid)).mkdir(exist_ok=True)
            (self.root / str(pid) / "stat").write_text(
                PID_STAT.format(pid=pid, pgrp=pgrp, utime=ticks, stime=0)
            )

    def run(self, seconds: float, others: float = 0.0, server: float = 0.0, steal: float = 0.0) -> None:
        """`seconds` of wall time on every CPU: `others` CPU-seconds used by other processes, `server` by the
        server's group (pid 4242, group 4242), `steal` taken by the hypervisor; the rest idle."""
        total = round(seconds * self.cpus * TICKS)
        used = [round(x * TICKS) for x in (others, server, steal)]
        self.user, self.steal = self.user + used[0] + used[1], self.steal + used[2]
        self.idle += total - sum(used)
        pgrp, ticks = self.members.get(4242, (4242, 0))
        self.members[4242] = (pgrp, ticks + used[1])
        self.members.setdefault(777, (777, 0))  # another process's group: never counted as ours
        self.write()


def window(proc: RecordedProc, server_pgid: int | None, **use: float) -> host.HostLoad:
    start = host.sample(server_pgid, proc.root, own=lambda: 0.0)
    proc.run(1.2, **use)
    load = host.load_between(start, host.sample(server_pgid, proc.root, own=lambda: 0.0))
    assert load is not None
    return load


def test_another_process_burning_a_cpu_makes_the_host_busy(tmp_path: Path) -> None:
    proc = RecordedProc(tmp_path / "proc")
    load = window(proc, server_pgid=4242, others=1.2)
    assert load.other_cpu == 0.5 and load.cpus == 2 and load.seconds == 1.2
    assert load.busy and "other processes used 50% of 2 CPUs" in load.describe()


def test_the_servers_own_group_does_not_count_against_the_host(tmp_path: Path) -> None:
    proc = RecordedProc(tmp_path / "proc")
    load = window(proc, server_pgid=4242, server=1.2)
    assert load.other_cpu == 0.0 and not load.busy
    # Without the server's group named, the same seconds are someone else's.
    assert window(proc, server_pgid=None, server=1.2).busy


def test_the_hypervisors_steal_makes_the_host_busy(tmp_path: Path) -> None:
    proc = RecordedProc(tmp_path / "proc", cpus=4)
    load = window(proc, server_pgid=4242, server=2.0, steal=0.6)
    assert load.steal == 0.125 and load.other_cpu == 0.0 and load.busy


def test_the_live_host_reads_as_this_machine() -> None:
    """The live /proc has the recorded tree's shape: the CPUs os.cpu_count counts, counters that advance."""
    start = host.sample(os.getpgid(0))
    load = host.load_between(start, host.sample(os.getpgid(0)))
    assert start.cpus == os.cpu_count() and start.total_s > 0 and start.ours_s > 0
    assert load is None or 0.0 <= load.other_cpu <= 1.0


def test_combined_windows_weigh_by_duration() -> None:

    quiet = host.HostLoad(other_cpu=0.0, steal=0.0, loadavg=1.0, cpus=2, seconds=9.0)
    busy = host.HostLoad(other_cpu=0.5, steal=0.1, loadavg=3.0, cpus=2, seconds=1.0)
    both = host.combine([quiet, busy])
    assert both is not None and both.other_cpu == 0.05 and both.steal == 0.01 and both.loadavg == 3.0
    assert busy.busy and not both.busy


def test_a_window_too_short_to_judge_is_not_busy() -> None:
    blip = host.HostLoad(other_cpu=0.33, steal=0.0, loadavg=0.7, cpus=2, seconds=0.1)
    assert not blip.busy
