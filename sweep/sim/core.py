"""The engine-neutral simulated server: text, tokens, timing and counters from the performance model, the HTTP
plumbing (replies, SSE, faults) and a front end's life (`serve`). Each engine's front end (`sglang_server.py`,
`vllm.py`) adds its routes, its log lines and its start-up on top; nothing here speaks for one engine.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import functools
import json
import math
import os
import random
import re
import signal
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sweep.releases.sglang import version_tuple
from sweep.sim.adaptive import AdaptiveSteps, DepthController
from sweep.sim.faults import Faults
from sweep.sim.model import MemoryPlan, Resolved, StartupFailure, StepModel
from sweep.sim.profile import DEFAULT_PROFILE, Profile

TOKEN = re.compile(r"[\u3000-\u9fff]|\w{1,6}|[^\w\s]|\s+")
CHAT_TEMPLATE = "<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n"
# What transformers raises (and SGLang and vLLM answer with 400) when a model without a chat template is asked
# to render chat messages.
NO_TEMPLATE = (
    "Cannot use chat template functions because tokenizer.chat_template is not set and no template argument was "
    "passed! For information about writing templates and setting the tokenizer.chat_template attribute, please "
    "see the documentation at https://huggingface.co/docs/transformers/main/en/chat_templating"
)
# Every piece tokenize() has seen, by id: /generate with input_ids reads the text back (ids are hashes).
PIECES: dict[int, str] = {}
WORDS = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "it",
    "that",
    "for",
    "on",
    "with",
    "as",
    "this",
    "was",
    "by",
    "be",
    "at",
    "from",
    "are",
    "or",
    "an",
    "which",
    "we",
    "can",
]
# What an extraction or a tool call asks for: its answer copies or restructures what the prompt holds.
TOOL_WORDS = re.compile(
    r"\b(copy|copying|extract|extraction|exactly|unchanged|same json|rewrite|parse|pull out|fill in|transcribe|"
    r"tool call|function call|arguments|entities|the fields)\b|\b(?:use|call) the \w+ tool\b"
    r"|\bcall (?:the )?\w+_\w+\b|\bfrom (?:the|this) (?:text|passage|message|email|document|article|invoice)\b",
    re.I,
)
# A structured answer format: extraction where nothing asks for code (a handler may return JSON too).
TOOL_FORMAT = re.compile(
    r"\b(?:as|to|into|in) (?:a |an )?(?:json|yaml|csv|xml|table|markdown table|structured format)\b"
    r"|\bjson (?:object|array)\b|\bstructured\b|\bkey: ?value\b|\bkey-value\b",
    re.I,
)
TAIL_BLOCKS = 2  # a continuation's kind shows in its last paragraphs (context filling puts other text first)
# A base model's extraction prompt ends in the opening of a structured copy of the document above it.
EXTRACTION = re.compile(r"\bas (?:a )?(?:json|yaml|csv|table)\b[^\n]*:\n", re.I)
# A line of code at the start of a line: what a base model's code prompt is made of.
CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |#include|package |use |func |fn |pub |function |const |export |"
    r"public |private |static |CREATE TABLE|SELECT |#!/|for |while |if [(\[]|return |[A-Z_]+=)",
    re.M,
)
CODE_WORDS = re.compile(
    r"\b(function|class|struct|schema|sql|handler|python|typescript|go|def|code|query|implement|implementation|"
    r"program|compile|bug|debug|refactor|algorithm|method|variable|loop|regex|unit tests?|api|endpoint|"
    r"component|snippet|library|recursion|array|rust|java|javascript|node\.js|c\+\+|c#|ruby|php|kotlin|swift|"
    r"bash|shell script|html|css|react|comprehension|dockerfile|makefile|flask|django|numpy|pandas|decorator|"
    r"linked list|github actions)(?!\w)|\bin C\b|```",
    re.I,
)
# A request to repeat a passage of the prompt word for word; the simulated model is a base model there: it
# quotes the prompt's longest paragraph, then never stops (it starts the request's pattern again).
QUOTE_REQUEST = re.compile(r"\b(?:quote|quoting|verbatim|word for word)\b", re.I)
QUOTE_MIN_WORDS = 8
TEXT_PIECE = re.compile(r"\s*\S+")


def tokenize(text: str) -> list[int]:
    """Token ids stable across processes (unlike hash(), which Python salts per process)."""
    ids = []
    for piece in TOKEN.findall(text):
        token = zlib.crc32(piece.encode()) & 0xFFFFFF
        PIECES[token] = piece
        ids.append(token)
    return ids


def detokenize(ids: list[int]) -> str:
    """The text of token ids this process tokenized before (others read as `<unk>`)."""
    return "".join(PIECES.get(int(i), "<unk>") for i in ids)


# What a request asking for log-probabilities is told: the simulated model is sure of its greedy text (the
# answer's first token at p 0.7) and spreads the rest over common tokens, halving each time.
LIKELY_TOKENS = ("the", "\n", ",", "a", ".", "and", "of", "to")


def top_logprobs(text: str, count: int) -> list[tuple[str, float]]:
    """The answer's first token and the next likeliest, with log-probabilities, likeliest first."""
    tokens = list(dict.fromkeys([*TOKEN.findall(text)[:1], *LIKELY_TOKENS]))[: max(1, count)]
    return [(t, math.log(0.7 if i == 0 else 0.3 / 2**i)) for i, t in enumerate(tokens)]


def chat_logprobs(text: str, count: int) -> dict[str, Any]:
    """An OpenAI chat answer's `logprobs` for its first token (`top_logprobs` of them), as SGLang and vLLM
    write it."""
    listed = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top_logprobs(text, count)]
    return {"content": [{**listed[0], "top_logprobs": listed}]}


def completion_logprobs(text: str, count: int) -> dict[str, Any]:
    """A legacy completions answer's `logprobs` for its first token (`count` alternatives)."""
    pairs = top_logprobs(text, count)
    return {
        "tokens": [pairs[0][0]],
        "token_logprobs": [pairs[0][1]],
        "top_logprobs": [dict(pairs)],
        "text_offset": [0],
    }


def asked_logprobs(body: dict[str, Any], text: str, chat: bool) -> dict[str, Any] | None:
    """The first token's log-probabilities where an OpenAI request asks for them (chat: `logprobs` true, and
    `top_logprobs` of them; completions: `logprobs` as the count), None where it does not."""
    if chat:
        return chat_logprobs(text, int(body.get("top_logprobs") or 0)) if body.get("logprobs") else None
    return completion_logprobs(text, int(body["logprobs"])) if body.get("logprobs") is not None else None


def usage(meta: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI answer's token counts from a generation's final meta."""
    return {
        "prompt_tokens": meta["prompt_tokens"],
        "completion_tokens": meta["completion_tokens"],
        "total_tokens": meta["prompt_tokens"] + meta["completion_tokens"],
    }


def chat_prompt(messages: list[dict[str, Any]]) -> str:
    """Chat messages as the simulated model's template renders them (ChatML, the assistant's turn opened)."""
    content = "".join(str(m.get("content", "")) for m in messages)
    return CHAT_TEMPLATE.format(content=content)


# What the simulated model's tool answers are made of: records a person would recognise (ids, names, cities,
# items, totals), their keys shared as real structured output shares them, their values drawn per prompt.
RECORD_KEYS = ("id", "customer", "city", "items", "total")
FIRST_NAMES = (
    "Lina",
    "Tomas",
    "Amara",
    "Kenji",
    "Olga",
    "Mei",
    "Sam",
    "Hana",
    "Ravi",
    "Ines",
    "Piotr",
    "Zara",
)
LAST_NAMES = (
    "Park",
    "Novak",
    "Obi",
    "Sato",
    "Berg",
    "Lin",
    "Okoro",
    "Silva",
    "Rao",
    "Moreau",
    "Kowal",
    "Haddad",
)
CITIES = (
    "Busan",
    "Brno",
    "Lagos",
    "Osaka",
    "Tromso",
    "Tainan",
    "Accra",
    "Porto",
    "Pune",
    "Lyon",
    "Gdansk",
    "Doha",
)
PRODUCTS = (
    "usb-c cable",
    "charger",
    "keyboard",
    "monitor",
    "hdmi cable",
    "mouse",
    "mouse pad",
    "webcam",
    "headset",
)


def record_pieces(rng: random.Random, first: bool) -> list[str]:
    """One JSON record, a key or a value per token: `{"id": "B-2041", "customer": "Mei Lin", ...}`."""
    values = (
        f'"B-{rng.randrange(1000, 9999)}"',
        f'"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"',
        f'"{rng.choice(CITIES)}"',
        json.dumps(rng.sample(PRODUCTS, rng.randint(1, 2))),
        f"{rng.randrange(500, 40000) / 100:.2f}",
    )
    out = []
    for i, (key, value) in enumerate(zip(RECORD_KEYS, values, strict=True)):
        opening = ("[" if first else ",\n ") + "{" if i == 0 else ", "
        out += [f'{opening}"{key}": ', value]
    out[-1] += "}"
    return out


def quote_of(prompt: str) -> list[str]:
    """What a base model writes for a quoting request, piece by piece (nothing for other prompts): the prompt's
    longest paragraph word for word, then a blank line and the request's instruction again, the prompt's pattern
    started over (a model that never stops)."""
    opening, closing = CHAT_TEMPLATE.split("{content}")
    content = prompt.removeprefix(opening).removesuffix(closing)  # a chat prompt's message (text: as it is)
    asked = next((line.strip() for line in content.splitlines() if QUOTE_REQUEST.search(line)), "")
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", content) if asked and asked not in p]
    passage = max(paragraphs, key=len, default="")
    if len(passage.split()) < QUOTE_MIN_WORDS:
        return []
    return [*TEXT_PIECE.findall(passage), "\n\n", *TEXT_PIECE.findall(asked)]


class GreedyText:
    """What the model says under greedy decoding: a function of the prompt alone, so every launch and every
    correct configuration produce the same text. Tool prompts get a JSON list of records (the answers that break
    first when speculation corrupts output); quoting prompts the passage, then a run-on (`quote_of`).
    `diverge_after`: a broken configuration's text departs there."""

    def __init__(self, prompt: str, workload: str, diverge_after: int | None) -> None:
        seed = zlib.crc32(prompt.encode())
        self._good, self._bad = random.Random(seed), random.Random(seed ^ 0x5EED)
        self.diverge_after, self.emitted = diverge_after, 0
        self._quote = quote_of(prompt)
        self.workload = "prose" if self._quote else workload  # after its quote, a base model runs on in prose
        self._pending: list[str] = []  # the rest of the record being written (tool)

    def take(self, n: int) -> str:
        out = []
        for _ in range(n):
            broken = self.diverge_after is not None and self.emitted >= self.diverge_after
            rng = self._bad if broken else self._good
            if self.emitted < len(self._quote) and not broken:
                out.append(self._quote[self.emitted])
            elif self.workload != "tool":
                out.append(" " + rng.choice(WORDS))
            else:
                if not self._pending:
                    self._pending = record_pieces(rng, first=self.emitted == 0)
                out.append(self._pending.pop(0))
            self.emitted += 1
        return "".join(out)


def classify(prompt: str, instruction: bool = True) -> str:
    """Which workload a prompt is, from its text: acceptance follows what the answer can copy or predict. An
    instruction (a chat prompt) names its task; text to continue (a base model's prompt, sent as it is) shows
    it in its end (context filling puts other text before it): the opening of a structured copy, or code."""
    if not instruction:
        end = "\n\n".join(prompt.rsplit("\n\n", TAIL_BLOCKS)[-TAIL_BLOCKS:])
        if EXTRACTION.search(end):
            return "tool"
        return "code" if CODE_LINE.search(end) else "prose"
    task = prompt.rsplit("Task:", 1)[-1]
    if TOOL_WORDS.search(task) or task.count("{") >= 3:
        return "tool"
    if CODE_WORDS.search(task) or CODE_LINE.search(task):
        return "code"
    return "tool" if TOOL_FORMAT.search(task) else "prose"


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


class StopWatch:
    """Watches the text a generation writes for its stop sequences: each piece is cut before the first one."""

    def __init__(self, stop: Sequence[str]) -> None:
        self.stop, self.text, self.matched = [s for s in stop if s], "", ""

    def cut(self, piece: str) -> str:
        if not self.stop:
            return piece  # nothing to watch for: the text need not be kept
        if self.matched:
            return ""
        before = len(self.text)
        self.text += piece
        hits = [(at, s) for s in self.stop if (at := self.text.find(s, max(0, before - len(s) + 1))) >= 0]
        if not hits:
            return piece
        at, self.matched = min(hits)
        self.text = self.text[:at]
        return self.text[before:]


@dataclasses.dataclass
class PrefillBatch:
    """A prefill batch on the GPU: when it ends (monotonic wall clock) and the tokens it prefills."""

    end: float
    tokens: int


def _step_cost(model: StepModel, running: int, depth: int) -> float:
    """A step's mean seconds at `depth` drafts for a batch of `running`: the cost curve an adaptive controller
    profiles at start-up."""
    return dataclasses.replace(model, steps_override=depth).mean_step_seconds(running)


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
                due = time.monotonic()
                while produced < max_new and not said.matched:
                    with self.lock:
                        running = self.running
                    if self.adaptive is not None:  # the depth this step runs at (its batch's, or the best)
                        depth = self.adaptive.steps_for(
                            running, functools.partial(_step_cost, plain, running)
                        )
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

    def notice(self, line: str) -> None:
        """A line the engine would log while serving (each front end logs it in its engine's form)."""
        print(line, file=sys.stderr, flush=True)


class Handler(BaseHTTPRequestHandler):
    sim: Simulator
    faults: Faults = Faults()
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: neither engine logs every request
        return

    def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any] | None:
        """The request's JSON body ({} where it has none); None, answered with a 400, where it is not JSON."""
        length = int(self.headers.get("Content-Length") or 0)
        try:
            return json.loads(self.rfile.read(length) or b"{}") if length else {}
        except json.JSONDecodeError:
            self._error(400, "invalid JSON body")
            return None

    def _error(self, code: int, message: str) -> None:
        """An error in the engine's own shape (SGLang's by default)."""
        self._send(code, {"error": {"message": message}})

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _sse(self, payload: Any) -> None:
        self.wfile.write(
            b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"
        )
        self.wfile.flush()

    def _fault_in_stream(self, fault: str) -> None:
        if fault == "crash":
            os._exit(1)
        if fault == "stall":
            while True:
                time.sleep(1)
        if fault == "malformed":
            self._sse(b'{"choices": [{"delta": {"content": "x"')

    def _generated(
        self,
        prompt: str,
        max_new: int,
        request: int,
        chunk: Callable[[str], Any] | None,
        instruction: bool = True,
        stop: Sequence[str] = (),
    ) -> tuple[str, dict[str, Any]] | None:
        """The text and the final meta of a generation, each piece streamed as `chunk(piece)` where streaming
        (the stream started here); None when a fault cut the stream."""
        if chunk is not None:
            self._sse_start()
        text, meta, pieces = "", dict[str, Any](), 0
        for piece, final in self.sim.generate(prompt, max_new, instruction, stop):
            text += piece
            meta = final or meta
            if chunk is not None and piece:
                self._sse(chunk(piece))
                pieces += 1
                if fault := self.faults.mid_stream(request, pieces):
                    self._fault_in_stream(fault)
                    return None
        return text, meta


def stop_sequences(raw: Any) -> tuple[str, ...]:
    """A request's `stop`: one string or a list of them, as the OpenAI API and SGLang's sampling_params take."""
    found = [raw] if isinstance(raw, str) else raw or []
    return tuple(str(s) for s in found)


def finish(meta: dict[str, Any]) -> str:
    """The OpenAI finish reason of a generation's meta: "stop" where a stop sequence ended it, else "length"."""
    return "stop" if (meta.get("finish_reason") or {}).get("type") == "stop" else "length"


def load_profile(argv: list[str]) -> Profile:
    """The profile `--sim-profile` names among any engine's flags (the default one otherwise)."""
    probe = argparse.ArgumentParser(add_help=False)
    probe.add_argument("--sim-profile")
    known, _ = probe.parse_known_args(argv)
    return Profile.load(Path(known.sim_profile) if known.sim_profile else DEFAULT_PROFILE)


class Listener(ThreadingHTTPServer):
    # uvicorn's (and vLLM's) listen backlog. socketserver's default of 5 refuses the 7th of 16 connections
    # opened at once, and the client's retry a second later staggers a batch that was sent together.
    request_queue_size = 2048


def serve(
    args: argparse.Namespace,
    handler: type[Handler],
    start: Callable[[], Simulator],
    bind_error: Callable[[OSError], str],
    come_up: Callable[[Simulator, ThreadingHTTPServer, threading.Event], bool],
) -> int:
    """A front end's life: its start-up faults, its start (or the failure it prints), its port, then
    `come_up` (which serves the port, at the engine's moment, and says whether it did) until SIGTERM/SIGINT."""
    handler.faults = Faults.parse(args.sim_fault)
    handler.faults.at_start()
    try:
        sim = start()
    except StartupFailure as exc:
        print(f"Traceback (most recent call last):\n{exc}", file=sys.stderr, flush=True)
        return 1
    handler.sim = sim
    try:
        httpd = Listener((args.host, args.port), handler)
    except OSError as exc:
        print(bind_error(exc), file=sys.stderr)
        return 1
    httpd.daemon_threads = True
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    serving = come_up(sim, httpd, stop)
    while not stop.wait(0.5):
        pass
    if serving:
        httpd.shutdown()
    return 0
