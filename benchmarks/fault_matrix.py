"""The fault matrix as a table: every case of `tests/test_faults.py` and the fault cases of
`tests/test_server_process.py`, whether the study held what it should (the test's assertions on states, reasons
and values), how long the case took from launch to a whole study again (for a killed driver: the kill, the next
run's reaping and its re-run), and the processes carrying a launch marker (`SPECSWEEP_SERVER`) left on the
machine after the whole matrix (expect 0).

    .venv/bin/python benchmarks/fault_matrix.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from sweep.launch import processes

REPO = Path(__file__).resolve().parents[1]
FILES = ("tests/test_faults.py", "tests/test_server_process.py")


def marked_processes() -> list[int]:
    """Live processes whose environment holds a launch marker: servers specsweep started and did not stop."""
    found = []
    for proc in processes.table():
        try:
            environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
        except OSError:
            continue
        if proc.alive and f"{processes.MARKER_ENV}=".encode() in environ:
            found.append(proc.pid)
    return found


def main() -> int:
    before = set(marked_processes())
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *FILES],
            cwd=REPO,
            capture_output=True,
        )
        cases = ET.parse(report).getroot().iter("testcase")
        rows = []
        for case in cases:
            outcome = "held"
            skipped = case.find("skipped")
            if case.find("failure") is not None or case.find("error") is not None:
                outcome = "FAILED"
            elif skipped is not None:
                outcome = "skipped: " + (skipped.get("message") or "")
            rows.append((case.get("name", "?"), outcome, float(case.get("time", "0"))))
    left = [pid for pid in marked_processes() if pid not in before]
    width = max(len(name) for name, _, _ in rows)
    print(f"{'case':<{width}}  {'study afterwards':<16}  {'time':>7}")
    for name, outcome, seconds in rows:
        print(f"{name:<{width}}  {outcome:<16}  {seconds:>6.1f}s")
    held = sum(outcome == "held" for _, outcome, _ in rows)
    print(f"\n{len(rows)} cases, {held} held; processes with a launch marker left afterwards: {len(left)}")
    return 0 if not left and all(o == "held" for _, o, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
