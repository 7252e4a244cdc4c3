"""Serving engines: one base class, one file per engine. An engine joins the registry by subclassing `Engine`
with a `name`; its module is imported here, and nothing else changes when one is added."""

from __future__ import annotations

from typing import Any

from sweep.core.errors import UserError
from sweep.engines import llamacpp, sglang, vllm
from sweep.engines.base import REGISTRY, Engine
from sweep.engines.llamacpp import LlamaCppEngine
from sweep.engines.schedules import no_counterpart_notes, tensorrt_llm_form
from sweep.engines.sglang import SGLangEngine
from sweep.engines.values import DraftCounters, RunningLimit, ServerReport, ServerSetup
from sweep.records import SpecShape

ENGINES = REGISTRY
MODULES = (llamacpp, sglang, vllm)  # imported for their registration

__all__ = [
    "ENGINES",
    "DraftCounters",
    "Engine",
    "LlamaCppEngine",
    "RunningLimit",
    "SGLangEngine",
    "ServerReport",
    "ServerSetup",
    "SpecShape",
    "engine_class",
    "engine_of_argvs",
    "schedule_forms",
]


def engine_class(name: str) -> type[Engine]:
    try:
        return ENGINES[name]
    except KeyError:
        raise UserError(f"unknown engine '{name}'", f"use one of: {', '.join(sorted(ENGINES))}") from None


def engine_of_argvs(argvs: list[list[str]]) -> str:
    """The engine whose command line recorded trials ran (the embedded default where none says)."""
    for name, engine in ENGINES.items():
        if any(engine.ran(argv) for argv in argvs):
            return name
    return LlamaCppEngine.name


def schedule_forms(
    method: str, depths: list[tuple[int, int]], max_batch: int
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """A depth schedule measured on any engine, in the form of every engine that offers one (and TensorRT-LLM's),
    with notes on the methods that have no counterpart there."""
    forms = {
        name: form
        for name, engine in ENGINES.items()
        if (form := engine.schedule_form(method, depths, max_batch)) is not None
    }
    return forms | {"tensorrt_llm": tensorrt_llm_form(method, depths)}, no_counterpart_notes(method)
