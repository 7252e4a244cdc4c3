"""Exec shim: start the server as the leader of a new session, tied to the life of the thread that started it.

The shim calls setsid (so the whole process group can be stopped with one killpg), asks the kernel for SIGKILL
when its parent thread dies (a SIGKILLed specsweep leaves no server answering on the port; anything the server
forked is found by its launch marker and reaped by the next run), then execs the server (same pid).
Usage: python -m sweep.launch._session_exec -- ARGV...
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux: the sweep's own stop() and the registry are the guards
    if os.getppid() != parent:
        os._exit(1)  # the parent died before the request took effect


def main(args: list[str]) -> int:
    separator, *argv = args or [""]
    if separator != "--" or not argv:
        print("usage: python -m sweep.launch._session_exec -- ARGV...", file=sys.stderr)
        return 2
    parent = os.getppid()
    os.setsid()
    _die_with_parent(parent)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"cannot start {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
