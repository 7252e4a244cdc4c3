"""MkDocs hook: the command reference is each command's `--help`, generated at build time from the parser
itself, so the page cannot drift from the program."""

from __future__ import annotations

import argparse
import os
from typing import Any

MARKER = "<!-- specsweep --help -->"


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def reference() -> str:
    os.environ["COLUMNS"] = "110"  # argparse wraps at the terminal's width: one width for every build
    from sweep.cli import build_parser

    parser = build_parser()
    parts = ["## specsweep", "", "```text", parser.format_help().rstrip(), "```", ""]
    for name, command in _commands(parser).items():
        parts += [f"## specsweep {name}", "", "```text", command.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return markdown.replace(MARKER, reference()) if MARKER in markdown else markdown
