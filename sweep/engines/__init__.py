"""Serving engines: one base class, one file per engine."""

from __future__ import annotations

from collections.abc import Callable

from sweep.engines import llamacpp, sglang
from sweep.engines.base import DraftCounters, Engine, RunningLimit, ServerReport, ServerSetup
from sweep.engines.llamacpp import LlamaCppEngine
from sweep.engines.sglang import SGLangEngine
from sweep.errors import UserError
from sweep.results import LaunchFacts, SpecShape

ENGINES: dict[str, type[Engine]] = {LlamaCppEngine.name: LlamaCppEngine, SGLangEngine.name: SGLangEngine}
# What each engine's log says about a launch, for any log file (`specsweep inspect-log`).
LOG_READERS: dict[str, Callable[[str], LaunchFacts]] = {
    "llamacpp": llamacpp.facts_from_log,
    "sglang": sglang.facts_from_log,
}

__all__ = [
    "ENGINES",
    "LOG_READERS",
    "DraftCounters",
    "Engine",
    "LlamaCppEngine",
    "RunningLimit",
    "SGLangEngine",
    "ServerReport",
    "ServerSetup",
    "SpecShape",
    "engine_class",
]


def engine_class(name: str) -> type[Engine]:
    try:
        return ENGINES[name]
    except KeyError:
        raise UserError(f"unknown engine '{name}'", f"use one of: {', '.join(sorted(ENGINES))}") from None
