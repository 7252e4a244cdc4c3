"""Errors a user can fix. The CLI prints each as one line (problem, then fix) and exits with code 2."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


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


class Signals:
    """What the process has been told. The first Ctrl-C, SIGTERM or SIGHUP raises where the sweep is (inside the
    probe's event loop too); the next only counts, and hurries the server's stop (`server.stop`): raised while the
    first unwinds (the event loop cancelling its connections) it would land inside a library's cleanup and end as
    a traceback there instead of a stop. A third raises again, in case the first was swallowed somewhere."""

    def __init__(self) -> None:
        self.first: signal.Signals | None = None
        self.later = 0

    def install(self) -> None:
        self.first, self.later = None, 0
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self.handler)

    def handler(self, signum: int, _frame: object) -> None:
        if self.first is None or self.later >= 1:
            self.first = signal.Signals(signum)
            raise Interrupted(self.first)
        self.later += 1

    def pending(self) -> bool:
        """A signal came after the one raised: the stop under way should not wait."""
        return self.later > 0


SIGNALS = Signals()


def run_interruptible(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run`, but an interrupt leaves no tracebacks behind it. Raised inside the event loop, it stops the
    loop at once; the loop's shutdown then cancels what was still running, and a connection cancelled inside a
    library's task group (anyio's, under httpx) ends with the interrupt or a group of it, which asyncio would
    print whole. The interrupt itself goes on up to the CLI's one line; any other failure is printed as before."""
    with asyncio.Runner() as runner:
        runner.get_loop().set_exception_handler(_unless_interrupt)
        return runner.run(main)


def _unless_interrupt(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    if not _interrupt_only(context.get("exception")):
        loop.default_exception_handler(context)


def _interrupt_only(exc: BaseException | None) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_interrupt_only(e) for e in exc.exceptions)
    return isinstance(exc, KeyboardInterrupt | asyncio.CancelledError)


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
