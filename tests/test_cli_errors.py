"""Bad input at the command line: one line naming the problem and the fix, exit code 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
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
            "workloads[0].context: -5 is out of range; fix: give a value from 1 to 16777216",
        ),
        (
            SPACE.replace("{class: tool}", "{class: tool, streams: [1, two]}"),
            "workloads[0].streams: 'two' is not a whole number; fix: e.g. `streams: [1, 2, 4]`",
        ),
        (SPACE + "trials: 0\n", "trials: 0 is out of range; fix: give a value from 1 to 100000"),
        (SPACE + "probe: {repeats: 0}\n", "probe.repeats: 0 is out of range"),
        (SPACE + "probe: {max_tokens: -1}\n", "probe.max_tokens: -1 is out of range"),
        (SPACE + "probe: {max_tokens: 100000000}\n", "probe.max_tokens: 100000000 is out of range"),
        (SPACE + "probe: {stall_timeout_s: soon}\n", "probe.stall_timeout_s: 'soon' is not a number"),
        (
            SPACE.replace("spec-type: {choices: [ngram-mod]}", "spec-ngram-size-n: {int: [1, 8], step: 0}"),
            "params.spec-ngram-size-n.step: 0 is out of range",
        ),
        (
            SPACE.replace("spec-type: {choices: [ngram-mod]}", "spec-ngram-size-n: {int: [1, 8], step: x}"),
            "params.spec-ngram-size-n.step: 'x' is not a whole number",
        ),
        (
            SPACE.replace("spec-type: {choices: [ngram-mod]}", "spec-draft-n-max: {int: [-4, 99999999999]}"),
            "spec-draft-n-max",
        ),
        (
            SPACE + "server: {host: no-such-host.invalid}\n",
            "server.host: 'no-such-host.invalid' does not resolve",
        ),
        (SPACE + "server: {port: 70000}\n", "server.port: 70000 is out of range"),
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
            SPACE.replace("2048}", "2048, parallel: 2}").replace(
                "{class: tool}", "{class: tool, streams: 4}"
            ),
            "workload tool/4streams sends 4 requests at once, but -np 2 (one request per slot) decodes at most 2: "
            "the rest would queue; fix: set `parallel: 4` under fixed:",
        ),
        (
            SPACE.replace("{class: tool}", "{class: tool, streams: [1, 8]}"),
            "but llama-server's default -np (auto: 4 slots) decodes at most 4",
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
        == f"specsweep: error: space file {tmp_path / 'nope.yaml'} does not exist; fix: pass --space with a space file, or the name of an example (`specsweep spaces` lists them)\n"
    )


def test_unknown_flag_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--space", "x.yaml", "--trails", "3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["specsweep: error: unrecognized arguments: --trails 3; see `specsweep --help`"]


def test_engine_flags_only_where_a_command_takes_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--study", "x", "--", "--mem-fraction-static", "0.9"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "specsweep: error: `specsweep report` takes no engine flags after --; fix: leave out the -- and what follows"
    )


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


def test_non_utf8_and_binary_space_files_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, data, message in (
        ("latin1.yaml", SPACE.encode() + b"# caf\xe9\n", "is not UTF-8 text"),
        ("binary.yaml", b"\x7fELF\x02\x01\x00\x00", "is a binary file, not text"),
    ):
        path = tmp_path / name
        path.write_bytes(data)
        assert main(["run", "--space", str(path), "--runs", str(tmp_path / "runs")]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_non_utf8_prompt_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "prompts.jsonl").write_bytes(b'{"prompt": "caf\xe9"}\n')
    space = SPACE.replace("[{class: tool}]", "[{name: mine, file: prompts.jsonl}]")
    line = run_error(tmp_path, capsys, space)
    assert "workload file" in line and "is not UTF-8 text" in line


@pytest.mark.parametrize("name", ["../escape", "a/b", "/abs", "..", ".hidden"])
def test_study_names_are_plain_names(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    line = run_error(tmp_path, capsys, SPACE, "--study", name)
    assert "is not a plain name" in line
    assert not (tmp_path / "escape").exists()


def test_runs_pointing_at_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "runs-file").write_text("")
    path = tmp_path / "space.yaml"
    path.write_text(SPACE)
    assert main(["run", "--space", str(path), "--runs", str(tmp_path / "runs-file")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_storage_password_is_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql://specsweep:hunter2@127.0.0.1:1/nowhere"
    assert main(["report", "--study", "x", "--storage", url]) == 2
    err = capsys.readouterr().err
    assert "hunter2" not in err and "specsweep:***@127.0.0.1" in err


@pytest.mark.server
def test_report_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    """`specsweep report | head -1`: the reader leaves early; no traceback, no BrokenPipeError message."""
    script = (
        "import sys\n"
        "from sweep.cli import _errors_as_lines\n"
        "def report():\n"
        "    for i in range(100000): print('line', i)\n"
        "    return 0\n"
        "sys.exit(_errors_as_lines(report))\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert writer.stdout is not None
    head = subprocess.run(["head", "-1"], stdin=writer.stdout, capture_output=True, text=True, timeout=60)
    writer.stdout.close()  # head was the only other reader: the writer's next write breaks the pipe
    _, err = writer.communicate(timeout=60)
    assert head.stdout == "line 0\n"
    assert err == b""
    assert writer.returncode == 0
