"""`specsweep spaces [NAME]`: the example spaces shipped with specsweep, one a line with what each sweeps; with a
NAME, that space's file, to copy and edit (`specsweep spaces vllm-ngram > my-space.yaml`). `--space NAME` takes an
example by its name wherever no file of that name is."""

from __future__ import annotations

import argparse

from sweep.core.errors import UserError
from sweep.space.shipped import example_path, example_paths, summary


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("spaces", help="the example spaces, or one of them", description=__doc__)
    parser.add_argument("name", nargs="?", help="an example's name: print its file")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    if args.name is None:
        paths = example_paths()
        width = max(len(p.stem) for p in paths)
        for path in paths:
            print(f"{path.stem:<{width}}  {summary(path)}")
        return 0
    found = example_path(args.name)
    if found is None:
        names = ", ".join(p.stem for p in example_paths())
        raise UserError(f"no example space called '{args.name}'", f"name one of: {names}")
    print(found.read_text(encoding="utf-8"), end="")
    return 0
