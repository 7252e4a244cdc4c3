"""The example spaces shipped with the package (`examples/*.yaml`), found by name wherever the package is
installed: a clone, an editable install or a wheel."""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "examples"


def example_paths() -> list[Path]:
    """Every shipped example space, by name."""
    return sorted(FOLDER.glob("*.yaml"))


def example_path(name: str) -> Path | None:
    """The shipped example called `name` (with or without `.yaml`), or None."""
    path = FOLDER / (name if name.endswith(".yaml") else f"{name}.yaml")
    return path if Path(name).name == name and path.is_file() else None


def summary(path: Path) -> str:
    """An example's first comment line: what it sweeps."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return ""
