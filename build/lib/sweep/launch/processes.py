"""The process table, read from /proc: which processes a launch left, who holds a port, who is still alive.

A server may fork, daemonise (double fork + setsid) or leave its process group; all of them keep the
environment they were started with. Every launch puts its own marker in that environment, so its processes are
found by the marker wherever they went, even after the driver that started them was killed. A pid is only
trusted together with its start time (pids are reused).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
MARKER_ENV = "SPECSWEEP_SERVER"  # every process of one launch carries SPECSWEEP_SERVER=<launch id>
TCP_LISTEN = "0A"
EMPTY_SCANS = 3  # scans that must all find no process of a launch before it is called gone (`launched`)


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    state: str
    start_ticks: int  # clock ticks after boot: with the pid, identifies one process for its whole life
    cpu_ticks: int = 0  # CPU time in clock ticks (user and system, its reaped children's with it)

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


def read(pid: int, root: Path = PROC) -> Proc | None:
    """The process from `root`/PID/stat (`root`: the /proc tree; tests read a recorded one), None if gone."""
    try:
        stat = (root / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ")" (state, ppid, pgrp,
    # ..., utime at 11, stime, cutime, cstime, ..., starttime at 19).
    fields = stat.rsplit(")", 1)[1].split()
    cpu = sum(int(v) for v in fields[11:15])
    return Proc(pid, int(fields[1]), int(fields[2]), fields[0], int(fields[19]), cpu)


def table(root: Path = PROC) -> Iterator[Proc]:
    for entry in root.iterdir():
        if entry.name.isdigit() and (proc := read(int(entry.name), root)) is not None:
            yield proc


def same_process(pid: int, start_ticks: int) -> bool:
    """True if `pid` still names the process that started at `start_ticks` and it has not exited."""
    proc = read(pid)
    return proc is not None and proc.start_ticks == start_ticks and proc.alive


def start_ticks(pid: int) -> int:
    proc = read(pid)
    return proc.start_ticks if proc else 0


def boot_id() -> str:
    """This boot of the machine: a pid of an earlier boot (before a power loss) names nothing now."""
    try:
        return (PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return ""


def has_marker(pid: int, marker: str) -> bool:
    try:
        environ = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER_ENV}={marker}".encode() in environ.split(b"\0")


def launched(marker: str, pgid: int | None = None) -> list[Proc]:
    """Live processes of one launch: its marker in their environment, or a member of its process group.

    "None" is only said after `EMPTY_SCANS` scans in a row agree. One scan lists /proc first and reads each
    process after: a process that forks its heir after the listing and exits before it is read is seen gone
    while the heir lives; the heir is in the next listing. A double fork (daemonising) relays twice, so a
    launch whose first process is alive may hide from two scans, never from three.
    """
    for _ in range(EMPTY_SCANS):
        if found := _scan(marker, pgid):
            return found
    return []


def _scan(marker: str, pgid: int | None) -> list[Proc]:
    return [
        p
        for p in table()
        if p.alive and p.pid != os.getpid() and (p.pgid == pgid or has_marker(p.pid, marker))
    ]


def kill(procs: Iterable[Proc], sig: signal.Signals) -> None:
    for proc in procs:
        if same_process(proc.pid, proc.start_ticks):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, sig)


def terminate(
    find: Callable[[], list[Proc]],
    grace_s: float,
    kill_wait_s: float,
    group: int | None = None,
    hurried: Callable[[], bool] = lambda: False,
) -> list[Proc]:
    """SIGTERM what `find` returns (and the process group `group`), SIGKILL what is left after `grace_s` (at once
    when `hurried()`), and wait up to `kill_wait_s` for it to go. Returns the processes found at first."""
    found = left = find()
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, kill_wait_s)):
        if not left:
            break
        if group is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)
        kill([p for p in left if p.pgid != group], sig)  # the group had it once: a second TERM is not sent
        deadline = time.monotonic() + wait_s
        while (left := find()) and time.monotonic() < deadline and not hurried():
            reap_children(p.pid for p in left if p.ppid == os.getpid())
            time.sleep(0.05)
    reap_children(p.pid for p in found)
    return found


def reap_children(pids: Iterable[int]) -> None:
    """Collect the exit status of killed processes that became our children (we are their subreaper)."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on TCP `port` on this machine (IPv4 and IPv6)."""
    inodes = set()
    for table_path in (PROC / "net" / "tcp", PROC / "net" / "tcp6"):
        try:
            lines = table_path.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def socket_holders(inodes: set[str]) -> list[int]:
    """Pids holding any of these socket inodes open."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    holders = []
    for proc in table():
        with contextlib.suppress(OSError):
            fds = PROC / str(proc.pid) / "fd"
            if any(os.readlink(fd) in wanted for fd in fds.iterdir()):
                holders.append(proc.pid)
    return holders


def command(pid: int) -> str:
    try:
        return (
            (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        )
    except OSError:
        return "?"
