"""The search space: what a space file says (`spec.py`) and how it is read and checked (`parse.py`)."""

from __future__ import annotations

from sweep.space.parse import load_space, parse_space
from sweep.space.spec import ConfirmSettings, ParamSpec, SearchKind, ServerSpec, Space

__all__ = ["ConfirmSettings", "ParamSpec", "SearchKind", "ServerSpec", "Space", "load_space", "parse_space"]
