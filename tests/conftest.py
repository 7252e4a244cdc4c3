"""Shared fixtures. The engine in these tests is the real llama-server with the real Gemma 3 270M."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweep.embedded import gemma_model, llama_server_binary
from sweep.server import free_port

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def llama_server() -> Path:
    return llama_server_binary()


@pytest.fixture(scope="session")
def gemma() -> Path:
    return gemma_model()


def specsweep_argv(*args: str) -> list[str]:
    """`specsweep ARGS` as a child process of this interpreter (its own process, as a user runs it)."""
    return [sys.executable, "-m", "sweep", *args]


def server_processes(marker: str) -> list[int]:
    """Pids of live processes whose command line contains `marker` (used to prove none is left behind)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and "llama-server" in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real, throwaway PostgreSQL cluster on loopback (Debian's postgresql; `make test` installs it)."""
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    assert bins, (
        "PostgreSQL's server is needed for the shared-study test: `make test` installs it (apt-get install postgresql)"
    )
    bindir = bins[-1].parent
    # Not under pytest's tmp folder: its parents are private to root, and the server runs as postgres.
    data = Path(tempfile.mkdtemp(prefix="specsweep-pg-")) / "data"
    as_owner: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(data.parent, "postgres")
        as_owner = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    subprocess.run(
        [*as_owner, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "specsweep"],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -h 127.0.0.1 -k {data}"
    subprocess.run(
        [
            *as_owner,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-w",
            "-l",
            str(data / "log"),
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://specsweep@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_owner, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
        )
