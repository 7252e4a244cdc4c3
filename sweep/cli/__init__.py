"""`specsweep`: one module per command; each is thin (parse, call the library, print)."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable, Sequence

import sqlalchemy.exc

from sweep.cli import (
    ab,
    compare,
    confirm,
    dashboard,
    demo,
    doctor,
    export,
    inspect_log,
    plan,
    profile,
    replay,
    report,
    run,
    sim,
    spaces,
)
from sweep.core.errors import SIGNALS, UserError, interrupted_how, mask_secrets
from sweep.core.files import write_error

DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EFBIG}
COMMANDS = (
    run,
    profile,
    plan,
    spaces,
    confirm,
    report,
    replay,
    dashboard,
    export,
    compare,
    ab,
    demo,
    inspect_log,
    doctor,
    sim,
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage in one line (problem, then where help is) and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="specsweep", description="Overnight sweeps of LLM servers' speculative-decoding settings."
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in COMMANDS:
        module.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        # The simulator parses SGLang's command line itself, --help included, as `sglang serve` would.
        return _errors_as_lines(lambda: sim.run(argv[1:]))
    # Engine flags after `--` (`specsweep doctor MODEL -- --mem-fraction-static 0.92`) are the engine's, not
    # ours: they stay out of our parser, for the commands that take them (`engine_flags` in their defaults).
    tail = argv.index("--") if "--" in argv else len(argv)
    args = build_parser().parse_args(argv[:tail])
    if tail < len(argv) and not hasattr(args, "engine_flags"):
        return _errors_as_lines(lambda: _no_engine_flags(args.command))
    if hasattr(args, "engine_flags"):
        args.engine_flags = argv[tail + 1 :]
    # SIGTERM (a service manager, `kill`) and SIGHUP (a closed terminal) stop a sweep as Ctrl-C does. Ctrl-C
    # itself raises at once too: asyncio.run would otherwise turn it into a cancellation of the probe, which a
    # closing HTTP stream can answer with a transport error (a lost server, not an interrupt): seen in CI.
    SIGNALS.install()
    return _errors_as_lines(lambda: int(args.handler(args)))


def _no_engine_flags(command: str) -> int:
    raise UserError(
        f"`specsweep {command}` takes no engine flags after --", "leave out the -- and what follows"
    )


def _errors_as_lines(command: Callable[[], int]) -> int:
    try:
        return command()
    except UserError as exc:
        _say_error(exc.problem, exc.fix)
        return 2
    except KeyboardInterrupt as exc:
        print(
            f"specsweep: interrupted {interrupted_how(exc)}; the study keeps its finished trials, run the same "
            "command to resume",
            file=sys.stderr,
        )
        return 130
    except BrokenPipeError:
        # `specsweep report | head`: the reader left; say nothing more (and nothing at exit either).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        # A failed write often arrives wrapped: Optuna raises its StorageInternalError over the database's error
        # (a commit on a full disk), and its own "Should not reach." assertion over that in turn.
        cause = storage_or_disk_cause(exc)
        if cause is None:
            raise
        if isinstance(cause, OSError):
            error = write_error(cause.filename or "a file", cause.strerror or str(cause))
            _say_error(error.problem, error.fix)
        else:
            _say_error(
                f"the study's storage failed ({cause.__class__.__name__}: {str(cause).splitlines()[0]})",
                "check the disk (free space) and the database server, then run the same command again to resume:"
                " a trial it interrupted is marked and run again",
            )
        return 2


def storage_or_disk_cause(exc: BaseException) -> BaseException | None:
    """The storage error, or the write a full or read-only disk refused, that `exc` was raised over (itself
    included, through its causes and contexts), or None."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        if isinstance(found, sqlalchemy.exc.SQLAlchemyError):
            return found
        if isinstance(found, OSError) and found.errno in DISK_ERRORS:
            return found
        found = found.__cause__ or found.__context__
    return None


def _say_error(problem: str, fix: str) -> None:
    print(mask_secrets(f"specsweep: error: {problem}; fix: {fix}"), file=sys.stderr)
