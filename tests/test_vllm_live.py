"""What the real vLLM 0.34.0 printed on an H100 (7 Dec 2026, torch 2.11.0+cu130, driver 580.159.04), read by the
adapter: its `serve --help=all`, and the logs of launches that died at start because a package the engine core
imports was not installed (the release installed with `--no-deps` over the host's torch), or the model folder was
not there. Each log once gave a reason that was no reason ("Engine core initialization failed. See root cause
above") or only the exception's class; the adapter now names the cause."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sweep.engines import ServerSetup
from sweep.engines.flags import flags_from_help
from sweep.engines.vllm import VLLMEngine
from sweep.run.study import plan_night
from sweep.space import load_space

RECORDED = Path(__file__).parent / "recordings" / "vllm-0.34.0-h100"
TABLE = Path(__file__).parents[1] / "sweep" / "releases" / "tables" / "vllm-0.34.0.json"
HELP = RECORDED / "serve-help-all.txt"
LIVE_SPACE = Path(__file__).parents[1] / "benchmarks" / "data" / "vllm-0.34.0-h100-smollm2-space.yaml"


def engine(launcher: list[str] | None = None) -> VLLMEngine:
    return VLLMEngine(ServerSetup(launcher=launcher or ["vllm"], model="/models/smollm2-135m-instruct"))


def test_the_help_reader_reads_the_options_rows_only() -> None:
    flags = flags_from_help(HELP.read_text())
    assert {
        "speculative-config",
        "per-request-spec-decode-metrics",
        "enforce-eager",
        "max-model-len",
    } <= flags
    # Descriptions break flags across lines ("`--data-" at a line's end) and name numactl's own flags.
    assert not [flag for flag in flags if flag.endswith("-")]
    assert not {"cpunodebind", "physcpubind", "membind"} & flags


def test_the_release_table_matches_the_live_help() -> None:
    """Every flag the table read from 0.34.0's source is one the live server lists, but one: the table's
    `headless-client-handshake-address` is not in the help the release printed."""
    table = set(json.loads(TABLE.read_text())["flags"])
    listed = flags_from_help(HELP.read_text())
    assert table - listed == {"headless-client-handshake-address"}


@pytest.mark.server
def test_prepare_reads_the_flags_from_the_installed_help() -> None:
    printed = engine([sys.executable, "-c", f"import sys; sys.stdout.write(open({str(HELP)!r}).read())"])
    printed.prepare()
    assert printed.flags == flags_from_help(HELP.read_text())


@pytest.mark.parametrize(
    ("log", "reason"),
    [
        (
            "start-no-loguru",
            "ModuleNotFoundError: No module named 'loguru' (in vLLM's engine core, at start)",
        ),
        (
            "start-no-flashinfer",
            "ModuleNotFoundError: No module named 'flashinfer' (in vLLM's engine core, at start)",
        ),
        (
            "start-no-cutlass",
            "ModuleNotFoundError: No module named 'cutlass' (in vLLM's engine core, at start)",
        ),
        ("start-no-llguidance", "ModuleNotFoundError: No module named 'llguidance'"),
        (
            "start-no-model",
            "vLLM rejected its ModelConfig: Invalid repository ID or local directory specified: "
            "'/models/smollm2-135m-instruct'.",
        ),
    ],
)
def test_a_launch_that_died_at_start_says_why(log: str, reason: str) -> None:
    said = engine().exit_reason((RECORDED / f"{log}.server.log").read_text(), 1)
    assert reason in said, said
    assert "See root cause above" not in said


@pytest.mark.server
def test_the_live_study_s_space_plans_against_the_release_s_flags(tmp_path: Path) -> None:
    """The space the live study runs: every arm it sweeps is one vLLM 0.34.0 accepts (the flags read from the
    recorded help), so the night's launches are the release's, prompt lookup and suffix both."""
    (tmp_path / "real" / "smollm2-135m-instruct").mkdir(parents=True)
    text = LIVE_SPACE.read_text().replace("@W@", str(tmp_path))
    launcher = f'[{sys.executable}, -c, "import sys; sys.stdout.write(open({str(HELP)!r}).read())"]'
    text = text.replace("launcher: [python3, -m, vllm.entrypoints.cli.main]", f"launcher: {launcher}")
    assert str(HELP) in text
    (tmp_path / "live.yaml").write_text(text)
    plan = plan_night(load_space(tmp_path / "live.yaml"), "live", runs=tmp_path / "runs")
    assert set(plan.methods) == {"ngram", "suffix"}
    assert plan.methods["ngram"] > 1 and plan.search_launches == 4  # the baseline and the three enqueued arms
