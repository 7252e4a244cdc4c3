"""Probe a running server with every workload: repeats, concurrent streams or open-loop arrivals, context
filling, summaries (`probe`, with its settings and result).

A repeat sends its requests at their offsets from its start (`Workload.send_offsets`): all at once for closed-loop
streams, on the arrival clock for an open loop. Every request is prepared (context filled, nonce checked) before
the repeat's clock starts, so a late send is the event loop's, not the preparation's; each request records when
it was sent (`sent_s`), and the repeat's windows (decode window, batch overlap, goodput) line up through it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import httpx

from sweep.core.errors import ProbeError
from sweep.engines.base import Engine
from sweep.engines.values import PromptForm
from sweep.probes.capacity import capacity_search
from sweep.probes.client import (
    clock_lag,
    measure_request,
    new_nonce,
    probe_client,
    server_clock,
    unique_content,
)
from sweep.probes.sending import drafts_uncounted, measured_batch
from sweep.probes.settings import HostWatch, Others, ProbeResult, ProbeSettings, Progress, Sending, Served
from sweep.probes.summary import summarize
from sweep.probes.workloads import Workload


async def probe(
    base_url: str,
    engine: Engine,
    workloads: Sequence[Workload],
    settings: ProbeSettings,
    progress: Progress = lambda _: None,
    transport: httpx.AsyncBaseTransport | None = None,
    watch: HostWatch | None = None,
    deadline: float | None = None,
    served: Served | None = None,
    others: Others | None = None,
) -> ProbeResult:
    """Run every workload in order against the server at `base_url`, until the monotonic `deadline`, each in
    the form the server takes (`served`: the engine's reading of its chat template); where `others` holds
    other configurations' answers to a workload's prompts, ask where they part from these (`tie_probes`)."""
    result = ProbeResult({}, [])
    served = served or Served()
    async with probe_client(base_url, settings.timeouts(), transport) as client:
        if served.chat_template and any(served.form(w)[0] is PromptForm.CHAT for w in workloads):
            served = dataclasses.replace(served, template_tokens=await engine.template_tokens(client))
        if settings.warmup:
            # The first request after start pays one-off costs; its numbers are not kept.
            warm = dataclasses.replace(settings.request, max_tokens=8)
            warmed = await measure_request(
                client,
                engine,
                unique_content(new_nonce(), "Say hello."),
                warm,
                workload="warmup",
                repeat=0,
                stream=0,
                nonce="warmup",
                form=served.form(workloads[0])[0] if workloads else PromptForm.CHAT,
                template_tokens=served.template_tokens,
                deadline_s=settings.request_deadline_s,
            )
            if warmed.status == "stalled":
                raise ProbeError(f"warm-up request: {warmed.reason}")
        for workload in workloads:
            if deadline is not None and time.monotonic() > deadline:
                raise ProbeError(
                    f"the trial passed its deadline of {settings.trial_timeout_s:.0f} s before {workload.key} "
                    "(probe.trial_timeout_s)"
                )
            stop_watching = watch() if watch else None
            clock = await server_clock(client) if stop_watching else None  # read beside the host's load
            form, why = served.form(workload)
            sending = Sending(
                workload, form, settings, served.template_tokens, (others or {}).get(workload.key, {})
            )
            if workload.capacity is not None:
                batches, found = await capacity_search(client, engine, sending, progress)
            else:
                batches, found = [], None
                for repeat in range(settings.repeats):
                    progress(f"{workload.key} {repeat + 1}/{settings.repeats}")
                    batches.append(await measured_batch(client, engine, sending, repeat))
            if not served.drafts_counted:
                batches = [drafts_uncounted(b) for b in batches]
            # Every request goes to requests.jsonl, discarded attempts too (with their status and reason).
            result.requests += [row for batch in batches for row in (*batch.discarded, *batch.rows)]
            summary = dataclasses.replace(
                summarize(workload, batches, found),
                form=form.value,
                form_reason=why,
                template_tokens=sending.template_tokens,
            )
            load = stop_watching() if stop_watching else None
            if load is not None:  # a simulated server's clock behind its time scale: the host was too slow
                load = dataclasses.replace(load, server_lag=clock_lag(clock, await server_clock(client)))
            result.summaries[workload.key] = dataclasses.replace(summary, host=load) if load else summary
    return result
