"""`specsweep demo`: the embedded default, a real sweep of llama-server + Gemma 3 270M on the CPU;
`--engine sim` (or `sglang-sim`): an SGLang sweep (NEXTN/MTP, the field reports' set-up) against the simulator, in
about a minute; `--engine vllm-sim`: the same model swept through vLLM's `--speculative-config` (MTP), against the
simulator's vLLM front end."""

from __future__ import annotations

import argparse
from pathlib import Path

from sweep.cli.shared import duration
from sweep.outputs.publish import publish
from sweep.run.study import DEFAULT_RUNS, run_study
from sweep.run.study import to_stderr as progress
from sweep.space import load_space
from sweep.space.shipped import FOLDER as EXAMPLES

# The embedded demo ends within 10 minutes on 2 cores: the search stops while its confirmation still fits.
LLAMACPP_BUDGET_S = 9 * 60
DEMO_SPACES = {
    "llamacpp": "demo-llamacpp.yaml",
    "sim": "sglang-sim-mtp.yaml",
    "sglang-sim": "sglang-sim-mtp.yaml",
    "vllm-sim": "vllm-sim-mtp.yaml",
}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "demo", help="sweep the embedded llama-server + Gemma 3 270M", description=__doc__
    )
    parser.add_argument(
        "--engine", choices=sorted(DEMO_SPACES), default="llamacpp", help="which demo (default: llamacpp)"
    )
    parser.add_argument("--study", help="study name (default: demo, or demo-sim)")
    parser.add_argument(
        "--runs", type=Path, default=DEFAULT_RUNS, help="folder of study folders (default: runs)"
    )
    parser.add_argument("--trials", type=int, help="total trials (default: the demo space's)")
    parser.add_argument(
        "--budget",
        type=duration,
        help=f"wall time for the search and its confirmation (default for llamacpp: {LLAMACPP_BUDGET_S // 60}m; "
        "the simulator demos take about a minute)",
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    study = args.study or ("demo" if args.engine == "llamacpp" else f"demo-{args.engine}")
    space = load_space(EXAMPLES / DEMO_SPACES[args.engine])
    budget = args.budget or (LLAMACPP_BUDGET_S if args.engine == "llamacpp" else None)
    ran = run_study(space, study, None, args.runs, args.trials or space.trials, budget_s=budget)
    publish(ran.study, study, args.runs, space, ran.model)
    paths = ran.paths
    progress(f"\nresults: {paths.run_dir} (study.db, trials/<n>/server.log, requests.jsonl, record.json)")
    progress(f"again: specsweep report --study {study}   (re-running the demo resumes the study)")
    return 0
