"""`specsweep`: one module per command; each is thin (parse, call the library, print)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from sweep.cli import ab, compare, confirm, dashboard, demo, export, inspect_log, report, run, sim
from sweep.errors import UserError

COMMANDS = (run, confirm, report, dashboard, export, compare, ab, demo, inspect_log, sim)


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
    args = build_parser().parse_args(argv)
    return _errors_as_lines(lambda: int(args.handler(args)))


def _errors_as_lines(command: Callable[[], int]) -> int:
    try:
        return command()
    except UserError as exc:
        print(f"specsweep: error: {exc.problem}; fix: {exc.fix}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specsweep: interrupted; the study keeps its finished trials, run the same command to resume",
              file=sys.stderr)  # fmt: skip
        return 130
