"""The host monitor on this machine: load from other processes is seen, the server's own load is not."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sweep import host

BURN = "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass"


def window(server_pgid: int | None, during: float = 1.2) -> host.HostLoad:
    start = host.sample(server_pgid)
    time.sleep(during)
    load = host.load_between(start, host.sample(server_pgid))
    assert load is not None
    return load


@pytest.mark.server
def test_another_process_burning_a_cpu_makes_the_host_busy() -> None:
    burner = subprocess.Popen([sys.executable, "-c", BURN], start_new_session=True)
    try:
        time.sleep(0.1)
        load = window(server_pgid=None)
    finally:
        burner.wait()
    # One of the machine's CPUs was busy with something that is neither the sweep nor the server.
    assert load.other_cpu > 0.8 / (os.cpu_count() or 1) * 0.8
    assert load.busy and "other processes used" in load.describe()


@pytest.mark.server
def test_the_servers_own_group_does_not_count_against_the_host() -> None:
    server = subprocess.Popen([sys.executable, "-c", BURN], start_new_session=True)
    try:
        time.sleep(0.1)
        load = window(server_pgid=server.pid)
    finally:
        server.wait()
    assert load.other_cpu < 0.1 and not load.busy


def test_combined_windows_weigh_by_duration() -> None:
    quiet = host.HostLoad(other_cpu=0.0, steal=0.0, loadavg=1.0, cpus=2, seconds=9.0)
    busy = host.HostLoad(other_cpu=0.5, steal=0.1, loadavg=3.0, cpus=2, seconds=1.0)
    both = host.combine([quiet, busy])
    assert both is not None and both.other_cpu == 0.05 and both.steal == 0.01 and both.loadavg == 3.0
    assert busy.busy and not both.busy


def test_a_window_too_short_to_judge_is_not_busy() -> None:
    blip = host.HostLoad(other_cpu=0.33, steal=0.0, loadavg=0.7, cpus=2, seconds=0.1)
    assert not blip.busy
