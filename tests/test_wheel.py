"""The built wheel works on its own: installed (not editable) into a fresh virtual environment outside the
checkout, its command runs, its simulator demo sweeps, and `plan` reads a shipped example by name: everything it
reads comes from the installed package, none of it from the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(argv: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.server
def test_the_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    # Built from a copy of the checkout's files: a build writes build/ and *.egg-info/ beside its source.
    source = tmp_path / "source"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            ".dev",
            "runs",
            "dashboards",
            "site",
            "build",
            "*.egg-info",
            "__pycache__",
            ".*_cache",
        ),
    )
    built = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
        tmp_path,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("specsweep-*.whl")
    venv = tmp_path / "venv"
    assert run([sys.executable, "-m", "venv", str(venv)], tmp_path).returncode == 0
    python, specsweep = venv / "bin" / "python", venv / "bin" / "specsweep"
    installed = run([str(python), "-m", "pip", "install", "-q", str(wheel)], tmp_path)
    assert installed.returncode == 0, installed.stderr[-2000:]
    work = tmp_path / "work"  # a folder that is not the checkout, as a user's would be
    work.mkdir()

    where = run([str(python), "-c", "import sweep.cli; print(sweep.cli.__file__)"], work)
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr

    helped = run([str(specsweep), "--help"], work)
    assert helped.returncode == 0 and "spaces" in helped.stdout and "demo" in helped.stdout

    listed = run([str(specsweep), "spaces"], work)
    assert listed.returncode == 0 and "vllm-sim-mtp" in listed.stdout and "demo-llamacpp" in listed.stdout

    demo = run([str(specsweep), "demo", "--engine", "sim", "--trials", "3"], work)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "workload" in demo.stdout and "verdict" in demo.stdout  # the morning's table
    assert (work / "runs" / "demo-sim" / "study.db").is_file()
    assert (work / "dashboards" / "demo-sim.html").is_file()

    planned = run([str(specsweep), "plan", "--space", "vllm-sim-mtp"], work)
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "launchable after the engine's rules" in planned.stdout and "wall time: search" in planned.stdout
