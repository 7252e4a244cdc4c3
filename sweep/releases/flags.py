"""A release's command-line flags as one table both engines' releases write and read: the flag record
(`ReleaseFlag`), a committed table's rows read back (`flag_of`), the rows written (`flags_data`), and an argparse
parser built from them (`add_flags`), each release adding only its own type functions."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

# switch: store_true; toggle: --x and --no-x; value: one value; optional: a value or none; list: nargs "+"
Kind = Literal["switch", "toggle", "value", "optional", "list"]


@dataclass(frozen=True)
class ReleaseFlag:
    """One command-line flag as the release's argparse has it."""

    dest: str
    names: tuple[str, ...]  # the flag first, then its aliases
    kind: Kind
    type: str = "str"  # what argparse converts the value with: int, float, str (json for vLLM's)
    choices: tuple[Any, ...] | None = None  # None: any value (or choices computed at run time)
    default: Any = None  # None also where the default is computed (a factory, a call)
    parser: str | None = None  # the release's own type function (`human_readable_int`), where it has one
    required: bool = False


def flag_of(row: Mapping[str, Any]) -> ReleaseFlag:
    """A committed table's row as the flag it records."""
    return ReleaseFlag(
        row["dest"],
        tuple(row["names"]),
        row["kind"],
        row["type"],
        None if row["choices"] is None else tuple(row["choices"]),
        row["default"],
        row.get("parser"),
        bool(row.get("required")),
    )


def flags_data(flags: Mapping[str, ReleaseFlag]) -> dict[str, dict[str, Any]]:
    """The flags as a table's rows, by key."""
    return {key: asdict(flags[key]) for key in sorted(flags)}


def add_flags(
    parser: argparse.ArgumentParser,
    flags: Iterable[ReleaseFlag],
    converters: Mapping[str, Callable[[str], Any]],
    switch_default: Callable[[Any], Any] = lambda default: default,
) -> None:
    """Register every flag as the release's own parser does: `converters` by the flag's type function (its
    `parser`, else its `type`; str where the release computes it), `switch_default` what an unset switch reads."""
    for flag in flags:
        if flag.kind == "switch":
            parser.add_argument(
                *flag.names, dest=flag.dest, action="store_true", default=switch_default(flag.default)
            )
        elif flag.kind == "toggle":
            parser.add_argument(
                *flag.names, dest=flag.dest, action=argparse.BooleanOptionalAction, default=flag.default
            )
        else:
            parser.add_argument(
                *flag.names,
                dest=flag.dest,
                type=converters.get(flag.parser or flag.type, str),
                choices=flag.choices,
                default=flag.default,
                required=flag.required,
                nargs="+" if flag.kind == "list" else "?" if flag.kind == "optional" else None,
            )
