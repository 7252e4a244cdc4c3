"""Serving engines: one base class, one file per engine."""

from __future__ import annotations

from sweep.engines.base import DraftCounters, Engine, ServerReport, ServerSetup
from sweep.engines.llamacpp import LlamaCppEngine
from sweep.errors import UserError

ENGINES: dict[str, type[Engine]] = {LlamaCppEngine.name: LlamaCppEngine}

__all__ = [
    "ENGINES",
    "DraftCounters",
    "Engine",
    "LlamaCppEngine",
    "ServerReport",
    "ServerSetup",
    "engine_class",
]


def engine_class(name: str) -> type[Engine]:
    try:
        return ENGINES[name]
    except KeyError:
        raise UserError(f"unknown engine '{name}'", f"use one of: {', '.join(sorted(ENGINES))}") from None
