"""`specsweep sim [SGLang flags | vllm serve MODEL ...]`: the engine simulator, SGLang's front end or vLLM's
(`specsweep sim --help` lists SGLang's flags)."""

from __future__ import annotations

import argparse

from sweep.sim.front import main as sim_main


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Listed among the commands; its arguments never reach this parser (sweep.cli.main hands them over).
    parser = commands.add_parser(
        "sim",
        help="run the engine simulator (SGLang, or vLLM after `vllm serve`)",
        description=__doc__,
        add_help=False,
    )
    parser.add_argument(
        "args", nargs=argparse.REMAINDER, help="SGLang flags, and --sim-profile/-time-scale/-seed"
    )
    parser.set_defaults(handler=lambda args: run(args.args))


def run(argv: list[str]) -> int:
    """The simulator parses SGLang's command line itself, --help included, as `sglang serve` would."""
    return sim_main(argv)
