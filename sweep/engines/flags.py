"""Flags and parameters: a space's parameters as argv and back, the flags a server's `--help` lists, and how a
Python server's argparse refuses a command line."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from sweep.core.errors import UserError
from sweep.engines.values import Params
from sweep.launch.server import ExitPatterns

HELP_FLAG = re.compile(r"(?<![\w-])--([a-z0-9][a-z0-9-]*)")


OPTION_ROW = re.compile(r"^ {0,6}-")  # an option's own row; descriptions are indented further (argparse: 24)


def flags_from_help(text: str) -> set[str]:
    """The long flags a server's `--help` lists, without their dashes: read from the options' own rows, not
    from descriptions, which name other programs' flags (vLLM 0.34.0's `numactl --cpunodebind`) and break
    flags across lines (`--data-` at a line's end)."""
    rows = (line for line in text.splitlines() if OPTION_ROW.match(line))
    return {flag for row in rows for flag in HELP_FLAG.findall(row) if not flag.endswith("-")} - {"help"}


def help_flags(argv: list[str], env: Mapping[str, str], expected: str) -> set[str]:
    """Run a server's help (`argv`) once and read its flags; a help that does not list `expected` is not this
    engine's (a wrong launcher)."""
    shown = " ".join(argv)
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"cannot run `{shown}` ({exc})", "fix server.launcher in the space") from None
    flags = flags_from_help(done.stdout)
    if done.returncode != 0 or expected not in flags:
        raise UserError(
            f"`{shown}` did not list the server's flags (exit {done.returncode}, no --{expected})",
            "set server.launcher to the command that starts the server",
        )
    return flags


def flags_argv(params: Params, negate: str = "") -> list[str]:
    """Parameters as `--name value` (a list: several values; True: the bare flag; False: `--{negate}name`
    where the server has negations, else nothing)."""
    argv: list[str] = []
    for name, value in params.items():
        if isinstance(value, bool):
            argv += [f"--{name}"] if value else ([f"--{negate}{name}"] if negate else [])
        elif isinstance(value, list | tuple):
            argv += [f"--{name}", *(str(v) for v in value)]
        else:
            argv += [f"--{name}", str(value)]
    return argv


def params_from_flags(argv: Sequence[str]) -> Params:
    """Flags as a user types them (`--mem-fraction-static 0.92 --enable-x --tp=2`) as parameters: numbers as
    numbers, a flag followed by another flag (or nothing) as True, several values as a list."""
    params: dict[str, Any] = {}
    name: str | None = None
    for word in argv:
        if word.startswith("--"):
            name, _, value = word[2:].partition("=")
            params[name] = _number(value) if value else True
        elif name is not None:
            held = params[name]
            params[name] = (
                _number(word)
                if held is True
                else [*(held if isinstance(held, list) else [held]), _number(word)]
            )
        else:
            raise UserError(f"'{word}' is not a flag", "give engine flags as --name value")
    return params


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def argparse_reasons(server: str) -> ExitPatterns:
    """How a Python server's argparse refuses its command line (SGLang's and vLLM's alike), in `server`'s name."""
    return (
        (re.compile(r"error: (unrecognized arguments: [^\n]*)"), server + " rejected the arguments: {0}"),
        (re.compile(r"error: (ambiguous option: [^\n]*)"), server + " rejected the arguments: {0}"),
        (re.compile(r"error: (argument [^\n]*)"), server + " rejected an argument: {0}"),
    )
