"""Every specsweep command a tutorial shows runs here, in the order the page gives it, against the simulator
(SGLang, vLLM) or the embedded llama-server: the page cannot drift from the tool. What a CPU in CI cannot do is
changed in the open, per page: the space the page copies gets the simulator as its launcher (or, for
llama-server, no GPU layers), and a shorter night (`--budget 8h` runs as `--trials 3`, the confirmation capped);
the CPU demo's morning commands read a simulator demo stored under the name `make demo` gives its study."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TUTORIALS = REPO / "docs" / "tutorials"
SGLANG_SIM = '["{python}", -m, sweep.sim, --sim-time-scale, "0.02"]'
VLLM_SIM = (
    '["{python}", -m, sweep.sim, vllm]\n  extra_args: [--sim-time-scale, "1", --sim-startup-scale, "0.02"]'
)


@dataclass(frozen=True)
class Page:
    """A tutorial, and what its night becomes here."""

    name: str
    space_edits: dict[str, str]  # text in the copied space -> what it is here
    argv_edits: dict[str, str] = field(default_factory=lambda: {"--budget 8h": "--trials 3"})
    before: tuple[str, ...] = ()  # what the page runs outside specsweep (`make demo`), as it runs here


PAGES = [
    Page(
        "demo.md",
        {},
        # The simulator's demo has no edit workload: the export asks for its code's flags instead.
        {"--workload edit": "--workload code", "demo --engine sim": "demo --engine sim --trials 3"},
        ("specsweep demo --engine sim --trials 3 --study demo",),
    ),
    Page(
        "sglang.md",
        {
            "launcher: [python3, -m, sglang.launch_server]": f"launcher: {SGLANG_SIM}",
            "confirm: {top: 1, launches: 2}": "confirm: {top: 1, launches: 2, max_launches: 2}",
        },
        {
            "--budget 8h": "--trials 3",
            "/models/Your-Model": str(REPO / "tests/models/meta-llama--Llama-3.1-8B-Instruct"),
        },
    ),
    Page(
        "vllm.md",
        {
            "launcher: [python3, -m, vllm.entrypoints.cli.main]": f"launcher: {VLLM_SIM}",
            "confirm: {top: 1, launches: 2, max_launches: 6}": "confirm: {top: 1, launches: 2, max_launches: 2}",
            "probe: {repeats: 2, max_tokens: 256}": "probe: {repeats: 1, max_tokens: 32}",
            "{class: code, max_tokens: 128}": "{class: code, max_tokens: 32}",
            "{class: prose, max_tokens: 128}": "{class: prose, max_tokens: 32}",
        },
    ),
    Page(
        "llamacpp.md",
        {
            "  gpu-layers: all\n": "",
            "  repeats: 4\n  max_tokens: 256": "  repeats: 1\n  max_tokens: 32",
            "confirm: {top: 2, launches: 3, max_launches: 8}": "confirm: {top: 1, launches: 2, max_launches: 2}",
            "  - {class: code, max_tokens: 64}\n  - {class: prose, max_tokens: 64}\n": "",
        },
        {"--budget 8h": "--trials 2"},
    ),
]


def commands(page: Path) -> list[str]:
    """The page's specsweep commands, in order, from its bash blocks (comments cut)."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        for line in block.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line.startswith(("specsweep ", ".venv/bin/specsweep ")):
                found.append(line.removeprefix(".venv/bin/"))
    return found


@pytest.mark.server
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name.replace("llamacpp", "llama-server"))
def test_a_tutorial_runs_as_written(page: Page, tmp_path: Path) -> None:
    lines = commands(TUTORIALS / page.name)
    assert len(lines) >= 5, lines
    for line in [*page.before, *lines]:
        for written, here in page.argv_edits.items():
            line = line.replace(written, here)
        target = None
        if " > " in line:  # `specsweep spaces NAME > FILE`: the example copied, then made to run here
            line, target = (part.strip() for part in line.split(" > "))
        argv = [sys.executable, "-m", "sweep", *shlex.split(line)[1:]]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
        assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
        if target is not None:
            text = done.stdout
            for written, here in page.space_edits.items():
                assert written in text, f"{page.name}: the example no longer holds {written!r}"
                text = text.replace(written, here)
            (tmp_path / target).write_text(text, encoding="utf-8")
        if line.startswith("specsweep report"):
            assert "verdict" in done.stdout, done.stdout
        if line.startswith("specsweep export"):
            assert "--port" in done.stdout, done.stdout  # a command line to paste
    assert list((tmp_path / "runs").glob("*/study.db")), "the night left no study"
