"""Exec shim: start the server as the leader of a new session and say its pid.

subprocess-tee starts children through asyncio and gives no pid and no session option, so the server is
started through this module: it calls setsid, writes its pid, then execs the server (same pid). The whole
process group can then be stopped with one killpg.
Usage: python -m sweep._session_exec PIDFILE -- ARGV...
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1


def _terminate_with_parent() -> None:
    """Ask Linux to send SIGTERM if specsweep dies (even by SIGKILL), so no server outlives its sweep."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: the sweep's own stop() is the only guard


def main(args: list[str]) -> int:
    pidfile, separator, *argv = args
    if separator != "--" or not argv:
        print("usage: python -m sweep._session_exec PIDFILE -- ARGV...", file=sys.stderr)
        return 2
    os.setsid()
    _terminate_with_parent()
    Path(pidfile).write_text(str(os.getpid()))
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"cannot start {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
