"""Tie probes: where another configuration's answer parts from the baseline's, the baseline's server is asked for
its likeliest next tokens there (after the launch's measured requests, outside their clock)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

import httpx

from sweep.answers.fidelity import TIE_CHOICES, TIE_CONTEXT, TIE_PROBES, TIE_STEPS, TieProbe, part_at
from sweep.engines.base import Engine
from sweep.engines.endpoints import Turn
from sweep.probes.settings import Sending
from sweep.records import (
    RequestMeasurement,
)


async def tie_probes(
    client: httpx.AsyncClient,
    engine: Engine,
    sending: Sending,
    rows: list[RequestMeasurement],
    contents: list[str],
    histories: list[tuple[Turn, ...]],
) -> tuple[TieProbe, ...]:
    """For each answer here that another configuration's answer to the same prompt parts from, the server's
    likeliest next tokens at the point where they part (after the batch's clock; `sweep/answers/fidelity.py`), at most
    TIE_PROBES a batch: a configuration that changes every answer needs no more evidence, and a CPU server
    prefills each probe's prompt again."""
    probes: list[TieProbe] = []
    for row, content, history in zip(rows, contents, histories, strict=True):
        if row.status != "ok":
            continue
        for other in dict.fromkeys(sending.others.get(row.prompt_id, ())):
            if len(probes) < TIE_PROBES and (at := part_at(row.text, other)) is not None:
                ask = functools.partial(engine.top_tokens, client, content, sending.form, history=history)
                probes.append(await _walk(ask, row.prompt_id, at, row.text, other))
    return tuple(probes)


async def _walk(
    ask: Callable[..., Awaitable[tuple[tuple[str, float], ...]]], prompt: str, at: int, text: str, other: str
) -> TieProbe:
    """The probe at `at`, walked on past each token both answers share (the server's first choice), up to
    TIE_STEPS: the choices where the two answers' tokens part."""
    shared = ""
    for step in range(TIE_STEPS):
        choices = await ask(text[: at + len(shared)], choices=TIE_CHOICES)
        top = choices[0][0] if choices else ""
        mine, theirs = text[at + len(shared) :], other[at + len(shared) :]
        if step == TIE_STEPS - 1 or not (top and mine.startswith(top) and theirs.startswith(top)):
            break
        shared += top
    return TieProbe(prompt, at, shared, mine[:TIE_CONTEXT], theirs[:TIE_CONTEXT], choices)
