"""Shared fixtures. The engine in these tests is the real llama-server with the real Gemma 3 270M."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.embedded import gemma_model, llama_server_binary

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def llama_server() -> Path:
    return llama_server_binary()


@pytest.fixture(scope="session")
def gemma() -> Path:
    return gemma_model()


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
