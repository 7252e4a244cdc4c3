"""The page docs/python-api.md shows what a Python user calls; its example runs here as written, against the
simulator, and its names are the package's public face."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import sweep

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "python-api.md"


def test_the_public_names_resolve_and_are_the_ones_the_page_lists() -> None:
    listed = set(re.findall(r"^\| `(\w+)\(", PAGE.read_text(encoding="utf-8"), re.M))
    assert listed and listed <= set(sweep.__all__)
    for name in sweep.__all__:
        assert getattr(sweep, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = sweep.nothing


@pytest.mark.server
def test_the_page_s_example_runs_as_written(tmp_path: Path) -> None:
    example = re.search(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert example is not None
    script = tmp_path / "example.py"
    script.write_text(example.group(1), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "study in runs/from-python"
    rows = [line.split(" ", 2) for line in lines[1:]]
    # One line a workload of the shipped example, each with a verdict.
    assert [row[0] for row in rows] == ["code", "tool", "prose", "code-long@32k"]
    verdicts = ("faster", "slower", "within noise", "unreliable", "unconfirmed")
    assert all(any(line.split(" ", 1)[1].startswith(v) for v in verdicts) for line in lines[1:]), lines
    assert (tmp_path / "runs" / "from-python" / "study.db").is_file()
