"""The engine-neutral simulated server (`Simulator`): requests admitted, prefilled and decoded in steps, drafts
proposed and accepted, counters and the memory plan, from the performance model. Each engine's front end
(`sglang_server.py`, `vllm.py`) adds its routes, its log lines and its start-up on top (through `serving.py`);
nothing here speaks for one engine.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import functools
import math
import os
import random
import sys
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sweep.releases.sources import version_tuple
from sweep.sim.adaptive import AdaptiveSteps, DepthController
from sweep.sim.kind import classify
from sweep.sim.model import MemoryPlan, Resolved, StepModel
from sweep.sim.profile import Profile
from sweep.sim.text import GreedyText, StopWatch, tokenize
from sweep.sim.timing import ClockLag, PrefillBatch, step_cost


def launch_seed(args: argparse.Namespace) -> int:
    """--sim-seed, else the next seed from --sim-seed-file (advanced for the next launch), else a random one."""
    if args.sim_seed is not None:
        return int(args.sim_seed)
    if args.sim_seed_file:
        path = Path(args.sim_seed_file)
        with path.open("a+", encoding="ascii") as file:
            fcntl.flock(file, fcntl.LOCK_EX)  # launches may start together
            file.seek(0)
            seed = int(file.read().strip() or 0)
            file.truncate(0)
            file.write(str(seed + 1))
        return seed
    return int.from_bytes(os.urandom(4), "little")


SYNTHETIC_PIECE = " @"
# The release whose meta_info first says `first_token_latency` (0.5.20's req_time_stats.py has no such key).
FIRST_TOKEN_LATENCY_SINCE = (0, 5, 23)


def forced_drafts(length: float, depth: int, rng: random.Random) -> int:
    """Drafts a verify step accepts under a forced mean length: the length clamped to [1, depth + 1], rounded
    down or up at random so its mean is kept (SGLang's "match-expected", `sample_simulated_acc_len`), less the
    bonus token."""
    length = max(1.0, min(depth + 1.0, length))
    lower = int(length)
    return lower - 1 + (lower <= depth and rng.random() < length - lower)


class Simulator:
    """The state a running simulated server shares between its HTTP threads."""

    def __init__(
        self, args: argparse.Namespace, profile: Profile, resolved: Resolved, plan: MemoryPlan
    ) -> None:
        self.args, self.profile, self.resolved, self.plan = args, profile, resolved, plan
        self.ready = False
        # A new seed per launch unless one is given: launches of one configuration differ as real ones do.
        self.seed = launch_seed(args)
        self.rng = random.Random(self.seed)
        # This launch's pace (>1 is slower): its drift, over the true speed factor a test asked for.
        self.launch_pace = math.exp(self.rng.gauss(0, profile.launch_drift)) / args.sim_speed_factor
        # Wall seconds per modelled second (--sim-time-scale); 0: no waiting at all (benchmarks that only want
        # the numbers), and no wall clock to model queues by.
        self.time_scale = float(args.sim_time_scale)
        # The modelled clock the server stamps requests with (seconds since the epoch, as SGLang's realtime
        # stamps): modelled seconds since the launch, so a batch's stamps line up with its modelled latencies.
        self.epoch, self.started = time.time(), time.monotonic()
        self.lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(max(1, plan.effective_max_running))
        self.running = 0
        self.lag = ClockLag()
        self.lag_said = False
        # The GPU's last prefill batch: a prefill runs alone, as the engines' schedulers run a prefill batch
        # between decode steps, so arrivals stall the requests decoding.
        self.prefill_batch: PrefillBatch | None = None
        # The pace of the requests decoding now: a batch's requests step together, so they share one (drawn
        # when a request finds the server idle).
        self.batch_pace = self.launch_pace
        self.cache: list[list[int]] = []
        self.counters = {
            "prompt_tokens": 0,
            "generation_tokens": 0,
            "spec_verify_calls": 0,
            "cached_tokens": 0,
            "num_requests": 0,
        }
        # Acceptance forced to this mean length (tokens a verify step, the bonus included) by the engine's
        # benchmarking switch, as each front end reads it; None: drafts are accepted as the text allows.
        self.synthetic_length: float | None = None
        # Tokens the last verify step gave (accepted drafts and the bonus): SGLang's `spec_accept_length` gauge
        # covers the last log interval, and specsweep has it log every step.
        self.last_verify_tokens = 0
        self.accepted_at: list[int] = []  # verify steps that accepted the draft at each position (vLLM's)
        self.accept_window: list[
            tuple[int, int]
        ] = []  # (accepted+bonus tokens, verify steps) since the last flush
        self.adaptive: DepthController | None = (
            AdaptiveSteps(resolved.steps, resolved.adaptive_slots, plan.decode_buckets)
            if resolved.adaptive_slots is not None
            else None
        )

    def modelled_time(self, monotonic: float) -> float:
        """A wall instant (time.monotonic()) on the modelled clock."""
        elapsed = monotonic - self.started
        return self.epoch + (elapsed / self.time_scale if self.time_scale > 0 else elapsed)

    def sleep(self, seconds: float, since: float) -> float:
        """Wait until `seconds` (modelled) after the wall instant `since`, and return that instant. Steps are paced
        from when the last was due, not from when this thread woke: on a busy host the late wake-ups do not add
        up over an answer, as a GPU's clock does not slow down with its host's."""
        due = since + seconds * self.time_scale
        if self.time_scale > 0 and (left := due - time.monotonic()) > 0:
            time.sleep(left)
        return due

    def prefill(self, seconds: float, tokens: int) -> float:
        """Run a prefill of `seconds` (modelled) over `tokens`: in the batch being prefilled when it arrives
        (as a scheduler takes every waiting request into its next prefill batch, up to its chunk of tokens), else
        in a batch of its own after those queued. The modelled time to the first token: its batch's end."""
        if self.time_scale <= 0:
            return seconds
        arrived = time.monotonic()
        with self.lock:
            batch = self.prefill_batch
            if (
                batch is not None
                and arrived < batch.end
                and batch.tokens + tokens <= self.resolved.chunked_prefill_size
            ):
                batch.end += seconds * self.time_scale
                batch.tokens += tokens
            else:
                start = arrived if batch is None else max(arrived, batch.end)
                batch = self.prefill_batch = PrefillBatch(start + seconds * self.time_scale, tokens)
        while (left := batch.end - time.monotonic()) > 0:  # later arrivals may join the batch and lengthen it
            time.sleep(left)
        return (batch.end - arrived) / self.time_scale

    def prefills_waited(self) -> float:
        """Modelled seconds a decode step waits for the prefill running now (0 when none is)."""
        if self.time_scale <= 0:
            return 0.0
        with self.lock:
            end = self.prefill_batch.end if self.prefill_batch is not None else 0.0
        return max(0.0, end - time.monotonic()) / self.time_scale

    def cached_prefix(self, tokens: list[int]) -> int:
        if self.args.disable_radix_cache:
            return 0
        best = 0
        for entry in self.cache:
            n = 0
            for a, b in zip(entry, tokens, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        return min(best, len(tokens) - 1)  # at least one token is always computed

    def length_error(self, n: int, max_new: int) -> str | None:
        ctx = self.resolved.context_length
        if n >= ctx:
            return f"The input ({n} tokens) is longer than the model's context length ({ctx} tokens)."
        if n + max_new > ctx:
            return (
                f"Requested token count exceeds the model's maximum context length of {ctx} tokens. You requested a "
                f"total of {n + max_new} tokens: {n} tokens from the input messages and {max_new} tokens for the "
                "completion. Please reduce the number of tokens in the input messages or the completion to fit "
                "within the limit."
            )
        if n >= self.plan.max_req_input_len:
            return (
                f"Input length ({n} tokens) exceeds the maximum allowed length ({self.plan.max_req_input_len} "
                "tokens). Use a shorter input or enable --allow-auto-truncate."
            )
        return None

    def generate(
        self, prompt: str, max_new: int, instruction: bool = True, stop: Sequence[str] = ()
    ) -> Iterator[tuple[str, dict[str, Any] | None]]:
        """Yield (text piece, None) per emitted chunk, then ("", final meta_info). Durations in the meta are
        simulated time (what the modelled GPU would take), whatever --sim-time-scale makes the wall clock do.
        `instruction`: a chat prompt (else text sent as it is, to be continued); `stop`: stop sequences, the
        text ends before the first one it writes (finish reason "stop")."""
        tokens = tokenize(prompt)
        arrived = time.monotonic()
        with self.slots:
            queued = (time.monotonic() - arrived) / self.time_scale if self.time_scale > 0 else 0.0
            workload = classify(prompt, instruction)
            model = StepModel(self.profile, self.resolved, workload, len(tokens))
            with self.lock:
                cached = self.cached_prefix(tokens)
                rng = random.Random(self.rng.random())
                # A request alone goes at its own pace; one that joins requests decoding steps with them.
                if self.running == 0:
                    self.batch_pace = self.launch_pace * math.exp(rng.gauss(0, self.profile.request_noise))
                pace = self.batch_pace
                self.running += 1
            # Greedy decoding drafts and verifies the same tokens for the same prompt on every launch: which
            # drafts are accepted depends on the prompt, not on the launch.
            accept_rng = random.Random(zlib.crc32(prompt.encode()))
            text = GreedyText(prompt, workload, self._diverge_after())
            try:
                fresh = len(tokens) - cached
                ttft = self.prefill(model.prefill_seconds(fresh) * self.launch_pace, fresh)
                with self.lock:
                    self.cache.append(tokens)
                produced, verify, correct, proposed, decode = 1, 0, 0, 0, 0.0
                histogram: list[int] = []  # verify steps by accepted drafts (SGLang's per-request histogram)
                said = StopWatch(stop)
                yield said.cut(text.take(1)), None
                plain = model  # the launch's own depth: an adaptive step's costs are priced from it
                due = begun = time.monotonic()
                while produced < max_new and not said.matched:
                    with self.lock:
                        running = self.running
                    if self.adaptive is not None:  # the depth this step runs at (its batch's, or the best)
                        depth = self.adaptive.steps_for(running, functools.partial(step_cost, plain, running))
                        model = dataclasses.replace(model, steps_override=depth)
                    step = self.prefills_waited() + model.step_seconds(running, rng, pace)
                    due = self.sleep(step, due)
                    decode += step
                    accepted = (
                        model.accepted_drafts(accept_rng)
                        if self.synthetic_length is None
                        else forced_drafts(self.synthetic_length, model.depth, rng)
                    )
                    emit = min(accepted + 1, max_new - produced)
                    produced += emit
                    if self.adaptive is not None:
                        for line in self.adaptive.on_verify(accepted, running, model.depth):
                            self.notice(line)
                    if self.resolved.speculative and model.speculative:  # a step at depth 0 drafts nothing
                        self.last_verify_tokens = accepted + 1
                        verify, correct = verify + 1, correct + accepted
                        histogram += [0] * (accepted + 1 - len(histogram))
                        histogram[accepted] += 1
                        proposed += max(1, model.draft_budget)  # this step's depth (adaptive: its own)
                        self._count_positions(accepted)
                    # Forced acceptance emits a fixed token, as SGLang's "fixed" mode fills in id 100: not text.
                    yield (
                        said.cut(
                            text.take(emit) if self.synthetic_length is None else SYNTHETIC_PIECE * emit
                        ),
                        None,
                    )
                self._keep_time(due - begun, time.monotonic() - due)
            finally:
                with self.lock:
                    self.running -= 1
        received = self.modelled_time(arrived)
        times = {
            "request_received_ts": received,
            "forward_entry_time": received + queued,
            "queue_time": queued,
            "prefill_finished_time": received + queued + ttft,
            "first_token_latency": queued + ttft,
            "request_finished_ts": received + queued + ttft + decode,
            "e2e_latency": queued + ttft + decode,
            "decode_throughput": (produced - 1) / decode if decode else 0.0,
        }
        if version_tuple(self.profile.sglang_version) < FIRST_TOKEN_LATENCY_SINCE:
            del times["first_token_latency"]  # older releases stamp only when the prefill finished
        meta = self._meta(len(tokens), produced, cached, (verify, correct, proposed), times)
        if said.matched:
            meta["finish_reason"] = {"type": "stop", "matched": said.matched}
        if histogram:
            meta["spec_correct_drafts_histogram"] = histogram
        yield "", meta

    def _count_positions(self, accepted: int) -> None:
        with self.lock:
            self.accepted_at += [0] * max(0, accepted - len(self.accepted_at))
            for position in range(accepted):
                self.accepted_at[position] += 1

    def _diverge_after(self) -> int | None:
        """Where a configuration that breaks outputs departs from the greedy text (None: it does not)."""
        least = self.profile.broken_output_min_steps
        if least and self.resolved.speculative and self.resolved.steps >= least:
            return self.profile.broken_output_after
        return None

    def _meta(
        self, prompt: int, completion: int, cached: int, drafts: tuple[int, int, int], times: dict[str, float]
    ) -> dict[str, Any]:
        """The reply's meta_info; `drafts`: verify steps, accepted drafts and proposed drafts."""
        verify, correct, proposed = drafts
        with self.lock:
            for key, value in (
                ("prompt_tokens", prompt),
                ("generation_tokens", completion),
                ("spec_verify_calls", verify),
                ("cached_tokens", cached),
                ("num_requests", 1),
            ):
                self.counters[key] += value
            if verify:
                self.accept_window.append((completion - 1, verify))
        meta: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "cached_tokens": cached,
            "finish_reason": {"type": "length", "length": completion},
            "e2e_latency": times["e2e_latency"],
        }
        if self.args.enable_metrics:  # as in SGLang: request timing fields only with --enable-metrics
            meta |= {k: v for k, v in times.items() if k != "e2e_latency"}
        if self.resolved.speculative and verify:
            meta |= {
                "spec_verify_ct": verify,
                "spec_accept_length": completion / verify,
                "spec_accept_rate": correct / proposed,
                "spec_num_correct_drafts": correct,
                "spec_num_proposed_drafts": proposed,
            }
        return meta

    def accept_length(self) -> float | None:
        """Tokens per verify step (accepted drafts and the bonus token) since the last flush."""
        with self.lock:
            verifies = sum(v for _, v in self.accept_window)
            return sum(a for a, _ in self.accept_window) / verifies if verifies else None

    def flush(self) -> bool:
        with self.lock:
            if self.running:
                return False
            self.cache.clear()
            self.accept_window.clear()
            return True

    def _keep_time(self, modelled_s: float, late_s: float) -> None:
        """Count how far a request ended behind its clock, and say once in the log that the host cannot keep
        the time scale (what the client's clock measures from then on is the host's pace)."""
        if self.time_scale <= 0 or modelled_s <= 0:
            return  # no clock (time scale 0: every step at once), or nothing decoded
        with self.lock:
            late = self.lag.add(modelled_s, max(0.0, late_s))
            say, self.lag_said = late and not self.lag_said, self.lag_said or late
        if say:
            print(
                f"specsweep simulator: a request ended {late_s / modelled_s:.0%} of its modelled decode time "
                f"behind the clock at --sim-time-scale {self.time_scale:g}: this host does not keep that scale, "
                "and what the client's clock measures is its pace, not the model's; use a larger "
                "--sim-time-scale",
                file=sys.stderr,
                flush=True,
            )

    def notice(self, line: str) -> None:
        """A line the engine would log while serving (each front end logs it in its engine's form)."""
        print(line, file=sys.stderr, flush=True)
