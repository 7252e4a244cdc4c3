"""Errors a user can fix. The CLI prints each as one line (problem, then fix) and exits with code 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input: a flag, a value, a file or a port the user can correct."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}; {fix}")
        self.problem = problem
        self.fix = fix


class LaunchError(Exception):
    """The server did not come up. The message is the reason a trial records."""


class SpeculationInactive(LaunchError):
    """The trial asked for speculation and the server came up without it."""


class ProbeError(Exception):
    """Measuring could not be done as specified (the trial fails with this reason)."""
