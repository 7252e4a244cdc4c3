"""Errors a user can fix. The CLI prints each as one line (problem, then fix) and exits with code 2."""

from __future__ import annotations

import re
import signal


class UserError(Exception):
    """Bad input: a flag, a value, a file or a port the user can correct."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}; {fix}")
        self.problem = problem
        self.fix = fix


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: the sweep stops as it does on Ctrl-C (trial marked, server stopped, one line)."""

    def __init__(self, sig: signal.Signals = signal.SIGINT) -> None:
        super().__init__(sig.name)
        self.signal = sig

    @property
    def how(self) -> str:
        return "by the user (Ctrl-C)" if self.signal == signal.SIGINT else f"by {self.signal.name}"


def interrupted_how(exc: KeyboardInterrupt) -> str:
    return exc.how if isinstance(exc, Interrupted) else "by the user (Ctrl-C)"


def raise_interrupted(signum: int, _frame: object) -> None:
    """A signal handler: Ctrl-C, SIGTERM and SIGHUP raise where the sweep is (inside the probe's event loop too)."""
    raise Interrupted(signal.Signals(signum))


class LaunchError(Exception):
    """The server did not come up. The message is the reason a trial records."""


class SpeculationInactive(LaunchError):
    """The trial asked for speculation and the server came up without it."""


class SpeculationUnasked(LaunchError):
    """The trial asked for no speculation (a baseline) and the server speculates."""


class OffloadInactive(LaunchError):
    """The trial asked for the model on a GPU and the server came up on the CPU."""


class ProbeError(Exception):
    """Measuring could not be done as specified (the trial fails with this reason)."""


_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]*@", re.IGNORECASE)


def mask_secrets(text: str) -> str:
    """Passwords in URLs (`postgresql://user:secret@host/db`) replaced by `***`, wherever text is shown."""
    return _URL_PASSWORD.sub(r"\1***@", text)
