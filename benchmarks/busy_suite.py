"""The whole suite on a machine that is not quiet: the README's test command (`make test`) run `--runs` times in
a row, each beside one busy process per CPU core (a user's laptop or a CI runner is rarely idle). Prints each
run's result (the pytest summary line, the exit status) and its wall time; each run's whole output goes to
`--logs`. The busy processes are started in their own process groups and killed by group after each run.

    .venv/bin/python benchmarks/busy_suite.py [--runs 3] [--busy N] [--logs /tmp/busy-suite]
    make test-busy
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

SUMMARY = re.compile(r"^=*\s*(?:\d+ \w+(?:, )?)+ in [\d.]+s", re.M)
BURN = "while True:\n    pass\n"


def burners(count: int) -> list[subprocess.Popen[bytes]]:
    """`count` processes that each keep one core busy, each its own process group."""
    return [subprocess.Popen([sys.executable, "-c", BURN], start_new_session=True) for _ in range(count)]


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_once(command: list[str], busy: int, log: Path) -> tuple[int, str, float]:
    """The command's exit status, its pytest summary line and its wall time, with `busy` cores kept busy."""
    load = burners(busy)
    started = time.monotonic()
    with log.open("w") as out:
        suite = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        status = suite.wait()
    finally:  # stopped early too (SIGTERM, Ctrl-C): the suite's group first asked to clean up its servers
        if suite.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(suite.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                suite.wait(timeout=30)
        stop([suite, *load])
    wall = time.monotonic() - started
    found = SUMMARY.findall(log.read_text(errors="replace"))
    return status, (found[-1].strip("= ") if found else "no pytest summary"), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--busy", type=int, default=os.cpu_count() or 1, help="busy processes (default: cores)"
    )
    parser.add_argument("--logs", type=Path, default=Path("/tmp/busy-suite"))
    parser.add_argument("command", nargs="*", default=["make", "test"], help="default: make test")
    args = parser.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds through run_once's cleanup
    print(
        f"{' '.join(args.command)} beside {args.busy} busy processes ({os.cpu_count()} cores), {args.runs} runs"
    )
    failed = 0
    for run in range(1, args.runs + 1):
        log = args.logs / f"run-{run}.log"
        status, summary, wall = run_once(args.command, args.busy, log)
        failed += status != 0
        print(f"run {run}: exit {status}, {summary}, {wall / 60:.1f} min (log: {log})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
