"""Print the demo's wall time and each trial's duration and best figures (a fresh study in a temporary folder).

Usage: .venv/bin/python benchmarks/demo_time.py [--trials N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from sweep.cli import main


def run(trials: int | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        argv = ["demo", "--runs", str(runs), *(["--trials", str(trials)] if trials else [])]
        started = time.monotonic()
        code = main(argv)
        wall = time.monotonic() - started
        print(f"\ndemo exit code {code}, wall time {wall:.0f} s ({wall / 60:.1f} min)")
        for record_file in sorted(
            (runs / "demo" / "trials").glob("*/record.json"), key=lambda p: int(p.parent.name)
        ):
            record = json.loads(record_file.read_text())
            tps = {
                k: round(w["decode_tps"]["median"], 1)
                for k, w in record["workloads"].items()
                if w["decode_tps"]
            }
            print(f"trial {record['number']}: {record['params'].get('spec-type')} {tps} {record['failure']}")
            for key, w in record["workloads"].items():
                health = w.get("output_health") or {}
                print(
                    f"  {key}: {w.get('form')} form, {health.get('degenerate')}/{health.get('answers')} degenerate"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int)
    run(parser.parse_args().trials)
