"""Bad input at the command line: one line naming the problem and the fix, exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.cli import main

SPACE = """
engine: llamacpp
fixed: {ctx-size: 2048}
params:
  spec-type: {choices: [ngram-mod]}
workloads: [{class: tool}]
"""


def run_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], space: str, *extra: str) -> str:
    path = tmp_path / "space.yaml"
    path.write_text(space)
    assert main(["run", "--space", str(path), "--runs", str(tmp_path / "runs"), *extra]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


@pytest.mark.parametrize(
    ("space", "message"),
    [
        (
            SPACE.replace("ngram-mod]", "ngram-mod, mtp]"),
            "unknown speculative type 'mtp'; fix: llama.cpp's are: none, draft-simple",
        ),
        (
            SPACE.replace("spec-type:", "draft-max:"),
            "llama.cpp has no parameter 'draft-max'; fix: use one of:",
        ),
        (
            SPACE.replace("{ctx-size: 2048}", "{ctx-size: 2048, threads: many}"),
            "threads must be a number, not 'many'",
        ),
        (
            SPACE + "server: {model: /nonexistent/model.gguf}\n",
            "model file /nonexistent/model.gguf does not exist; fix: fix server.model",
        ),
        (
            SPACE + "server: {binary: /nonexistent/llama-server}\n",
            "server binary /nonexistent/llama-server does not exist",
        ),
        (SPACE + "engine2: x\n", "space: unknown key 'engine2'"),
        (SPACE.replace("engine: llamacpp", "engine: tgi"), "unknown engine 'tgi'; fix: use one of: llamacpp"),
        ("engine: llamacpp\nworkloads: [{class: tool}\n", "is not valid YAML at line 3"),
        (
            SPACE.replace("{class: tool}", "{class: tool, context: [-5]}"),
            "context and streams must be positive",
        ),
        (
            SPACE + "confirm: {launches: 1}\n",
            "confirm: bad values {'launches': 1}; fix: top >= 0, launches 0",
        ),
        (SPACE + "confirm: {rounds: 3}\n", "confirm: unknown key 'rounds'; fix: allowed keys: launches,"),
        (
            SPACE + "latency_limits: {ttft_p95_s: 2}\n",
            "latency_limits.ttft_p95_s: 'ttft_p95_s: 2' is not a limit in seconds; fix: name one of ttft",
        ),
        (
            SPACE.replace("{class: tool}", "{class: tool, streams: 16}") + "probe: {repeats: 3}\n",
            "workloads[0] (tool/16streams): needs 48 different prompts (repeats x streams) but has 35",
        ),
    ],
)
def test_bad_space_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], space: str, message: str
) -> None:
    line = run_error(tmp_path, capsys, space)
    assert line.startswith("specsweep: error: ")
    assert message in line
    assert not (tmp_path / "runs").exists()  # nothing was created, let alone launched


def test_missing_space_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--space", str(tmp_path / "nope.yaml")]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"specsweep: error: space file {tmp_path / 'nope.yaml'} does not exist; fix: pass --space with a file from search_spaces/\n"
    )


def test_unknown_flag_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--space", "x.yaml", "--trails", "3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["specsweep: error: unrecognized arguments: --trails 3; see `specsweep --help`"]


def test_report_of_a_missing_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--study", "nothing", "--runs", str(tmp_path)]) == 2
    assert "no study 'nothing'" in capsys.readouterr().err


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("run", "report", "demo"):
        with pytest.raises(SystemExit) as exc:
            main([command, "--help"])
        assert exc.value.code == 0
        assert f"usage: specsweep {command}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["ab", "--a", "baseline", "--b", "baseline", "--rounds", "1"],
            "--rounds 1 gives no launch-to-launch noise",
        ),
        (
            ["ab", "--a", "baseline", "--b", "spec-type"],
            "configuration 'spec-type' is not baseline, STUDY:TRIAL",
        ),
        (["ab", "--a", "baseline", "--b", "nostudy:3"], "no study 'nostudy' in"),
        (["confirm", "--study", "nostudy"], "no study 'nostudy' in"),
    ],
)
def test_bad_ab_and_confirm_arguments_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    extra = ["--space", str(space)] if argv[0] == "ab" else []
    assert main([*argv, *extra, "--runs", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
