"""A cost profile on the real llama-server: its predicted step costs against those measured with real acceptance,
and the launches a new workload needs with it.

    .venv/bin/python benchmarks/profile_llamacpp.py [--shapes 4] [--out DIR] [--binary B --model M --gpu]

Gemma 3 270M drafting for itself (`draft-simple`, the same GGUF as its own draft: every draft is accepted
unforced, so the step cost is all there is to learn), `spec-draft-n-max` 1-8, on the CPU (with `--gpu`, every
layer offloaded: a CUDA build's `--binary` and the GGUF's path where the embedded copy is not at hand). Four steps, each a
real `specsweep` command: `profile` on the code workload (forced acceptance, `--spec-synth-len`); `run
--profile` on the tool workload (a new one: how many launches, and its verdict); and every depth launched
unforced on code (the profile's own workload: what forcing changes) and on tool (what carries to another
workload's prompts). A step's measured cost is its accept length over its decode t/s, in baseline tokens: the
baseline's speed is the geometric mean of every baseline launch on that workload in this run (a single launch
on this VM strays by several percent). Run again with the same `--out`, it measures nothing twice: the profile
keeps its launches and each study resumes.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import optuna

from sweep.engines.llamacpp_bundle import gemma_model
from sweep.records import TrialRecord
from sweep.run.confirm import load_confirm_study
from sweep.search.costs import CostProfile
from sweep.storage import Phase, make_storage, search_records, trial_views

warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

SPACE = """engine: llamacpp
server: {{binary: "{binary}", model: "{gemma}", startup_timeout: 120}}
fixed: {{ctx-size: 2048, parallel: 1, {placement}, spec-type: draft-simple, spec-draft-model: "{gemma}", spec-draft-p-min: 0.0}}
params:
  spec-draft-n-max: {{int: [1, 8]}}
workloads: [{{class: {workload}}}]
probe: {{repeats: 2, max_tokens: 64}}
confirm: {{top: 1, launches: 2, max_launches: 3}}
trials: 9
seed: 7
"""


def specsweep(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "sweep", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"specsweep {' '.join(args)} failed:\n{done.stderr[-3000:]}")


def records(runs: Path, study: str) -> tuple[list[TrialRecord], list[TrialRecord]]:
    """A study's search launches and its confirmation's."""
    storage = make_storage(f"sqlite:///{runs / study / 'study.db'}")
    search = search_records(optuna.load_study(study_name=study, storage=storage))
    confirm = load_confirm_study(storage, study)
    views = trial_views(confirm, Phase.CONFIRM) if confirm is not None else []
    return search, [v.record for v in views if v.record is not None]


def tps(record: TrialRecord, key: str) -> float | None:
    summary = record.workloads.get(key)
    ok = (
        summary is not None
        and summary.status == "ok"
        and summary.decode_tps is not None
        and not record.failed
    )
    return summary.decode_tps.median if ok and summary and summary.decode_tps else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shapes", type=int, default=4)
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temporary folder)")
    parser.add_argument(
        "--binary", default="embedded", help="a llama-server binary (default: specsweep's own)"
    )
    parser.add_argument("--model", help="the Gemma 3 270M GGUF (default: specsweep's embedded copy)")
    parser.add_argument(
        "--gpu", action="store_true", help="offload every layer (gpu-layers all), threads left to the server"
    )
    args = parser.parse_args()
    gemma = args.model or str(gemma_model())
    placement = "gpu-layers: all" if args.gpu else "threads: 2"
    held = tempfile.TemporaryDirectory()
    root = args.out or Path(held.name)
    runs = root / "runs"
    root.mkdir(parents=True, exist_ok=True)
    for workload in ("code", "tool"):
        text = SPACE.format(binary=args.binary, gemma=gemma, placement=placement, workload=workload)
        (root / f"{workload}.yaml").write_text(text)
    profile_path = root / "cost-profile.json"
    specsweep("profile", "--space", str(root / "code.yaml"), "--runs", str(runs), "--study", "prof",
              "--shapes", str(args.shapes), "--out", str(profile_path))  # fmt: skip
    specsweep("run", "--space", str(root / "tool.yaml"), "--runs", str(runs), "--study", "new",
              "--profile", str(profile_path))  # fmt: skip
    for workload in ("code", "tool"):
        specsweep("run", "--space", str(root / f"{workload}.yaml"), "--runs", str(runs), "--study",
                  f"grid-{workload}", "--no-confirm")  # fmt: skip
    profile = CostProfile.load(profile_path)
    print(
        f"profile: {profile.launches} launches, {len(profile.steps)} step times, launch-to-launch noise "
        f"{profile.launch_noise:.1%} ({profile.key.engine} {profile.key.engine_version}, {profile.key.hardware})"
    )
    searched, confirmed = records(runs, "new")
    profiled = [
        TrialRecord.from_dict(json.loads(path.read_text()))
        for path in (runs / "prof" / "profile").glob("*/record.json")
    ]
    print(
        f"new workload (tool) with the profile: {len(searched)} search launches, then {len(confirmed)} "
        "confirmation launches"
    )
    for workload in ("code", "tool"):
        grid = records(runs, f"grid-{workload}")[0]
        every = grid + (searched + confirmed if workload == "tool" else profiled)
        baselines = [v for r in every if r.shape is None and (v := tps(r, workload))]
        base = statistics.geometric_mean(baselines)
        base_record = next(r for r in grid if r.shape is None)
        prompt = base_record.workloads[workload].prompt_tokens
        table = profile.tables(1, prompt.median if prompt else None)["draft-simple"]
        print(f"\n{workload}: baseline {base:.1f} t/s (geometric mean of {len(baselines)} launches)\n")
        print(
            "| depth | accept length | decode t/s | measured step (baseline tokens) | predicted | predicted / measured |"
        )
        print("|---|---|---|---|---|---|")
        ratios = []
        for r in sorted(
            (r for r in grid if r.shape is not None), key=lambda r: r.shape.depth if r.shape else 0
        ):
            summary, speed = r.workloads[workload], tps(r, workload)
            if r.shape is None or speed is None or summary.acceptance_length is None:
                continue
            length = summary.acceptance_length.median
            measured, predicted = length / speed * base, table.tokens(r.shape)
            ratios.append(predicted / measured)
            print(
                f"| {r.shape.depth} | {length:.2f} | {speed:.1f} | {measured:.2f} | {predicted:.2f} "
                f"± {table.relative_sd(r.shape):.0%} | {predicted / measured:.2f} |"
            )
        print(
            f"\npredicted / measured: median {statistics.median(ratios):.2f}, range {min(ratios):.2f}-"
            f"{max(ratios):.2f}, geometric spread {math.exp(statistics.pstdev(math.log(x) for x in ratios)) - 1:.1%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
