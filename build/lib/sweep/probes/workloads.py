"""Workload classes: the prompts a trial is measured with, in the form the served model takes.

Built-in classes differ in how much of the answer is already in the prompt, which is what drafting feeds on:
`tool` copies and extracts from a given document (high overlap), `code` writes new code (structured, partly
predictable), `prose` is writing in English and Chinese (least predictable). `edit`, `quote`, `summary` and
`reformat` answer by quoting their input (where n-gram drafting pays) and end with their task.

Each class has two forms (`PromptForm`), two data files in `prompts/`: instructions for a chat model, sent
through its own chat template, and text a base model continues, sent as it is. A base model under a chat
template continues the template instead of answering: the form follows the model unless a workload names one.
User workloads come from a YAML list or a JSONL file of prompts, used as they are in either form.

A workload's load is closed-loop (`streams`: N requests sent at once, the next repeat when the last ends) or
open-loop (`rate`: requests arriving on their own clock, Poisson by default, `requests` of them per repeat):
production traffic arrives open-loop, and that is where verification competes with other requests for the
batch. Arrival times are drawn from a seed of the workload and the repeat, so every trial sees the same ones
and two trials' repeats pair up as closed-loop repeats do.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import random
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from sweep.engines.endpoints import Turn
from sweep.engines.values import PromptForm
from sweep.probes.datasets import load_dataset

PROMPTS = Path(__file__).with_name("prompts")


@dataclass(frozen=True)
class BuiltinClass:
    """A built-in workload class: its prompts in both forms (`prompts/NAME.chat.jsonl` and
    `NAME.completion.jsonl`, read by the loader a user's dataset goes through), whether its answers repeat the
    prompt's text, and the stop sequences that end the completion form's task (a base model runs on past it)."""

    name: str
    copies: bool | None = None  # None: read from each prompt's words (`sweep/answers/health.py`)
    completion_stop: tuple[str, ...] = ()

    @property
    def stops(self) -> bool:
        """Whether an answer should end before max_tokens: a task with an end (an edit, a quote, a table)."""
        return bool(self.completion_stop)

    def prompts(self, form: PromptForm) -> tuple[str, ...]:
        return _builtin_prompts(self.name, form)


@functools.cache
def _builtin_prompts(name: str, form: PromptForm) -> tuple[str, ...]:
    """A built-in class's prompts of one form, read once a process (every space parsed reads them)."""
    return load_dataset(PROMPTS / f"{name}.{form.value}.jsonl").prompts


# code writes new code, tool extracts and copies from a given document, prose writes; the four copy-heavy
# classes quote their input (`sweep/probes/make_prompts.py` made them from the project's own code and docs).
BUILTIN = {
    c.name: c
    for c in (
        BuiltinClass("code"),
        BuiltinClass("tool"),
        BuiltinClass("prose"),
        BuiltinClass("edit", copies=True, completion_stop=("```",)),
        BuiltinClass("quote", copies=True, completion_stop=("\n\n",)),
        BuiltinClass("summary", completion_stop=("\n\n",)),
        BuiltinClass("reformat", copies=True, completion_stop=("\n\n",)),
    )
}
BUILTIN_CLASSES = tuple(BUILTIN)


def served_form(
    declared: PromptForm | None, chat_template: bool | None, source: str = ""
) -> tuple[PromptForm, str]:
    """The form a workload's requests take on a server, and why: the workload's own where it names one, else
    the model's (chat where the server has a chat template, completion where it has none); `source` is where
    the engine read the template."""
    if declared is not None:
        return declared, "named by the workload"
    where = f": {source}" if source else ""
    if chat_template is False:
        return PromptForm.COMPLETION, f"no chat template (a base model){where}"
    if chat_template is None:
        return PromptForm.CHAT, f"chat assumed: whether the model has a chat template is unknown{where}"
    return PromptForm.CHAT, f"the model's chat template{where}"


class Arrivals(StrEnum):
    """How an open-loop workload's requests arrive."""

    POISSON = "poisson"  # independent arrivals: exponential gaps of mean 1 / rate (traffic from many users)
    CONSTANT = "constant"  # one every 1 / rate seconds


# Requests per repeat of an open-loop workload that names neither requests nor duration, and the bisection
# steps of a capacity search after both ends of its range.
DEFAULT_OPEN_REQUESTS = 8
DEFAULT_CAPACITY_STEPS = 3
# A capacity run whose percentile lands this close to a limit (a fraction of it) is run again at the same rate and
# judged on both runs' requests together: a few requests' p90 near a limit is a coin toss. At most this many a
# search, so its launch stays bounded.
NEAR_LIMIT = 0.15
CAPACITY_RECHECKS = 2


def rate_label(rate: float) -> str:
    """A request rate as keys and labels write it: 2 -> `2rps`, 0.5 -> `0.5rps`."""
    return f"{rate:g}rps"


@dataclass(frozen=True)
class Workload:
    """A class of prompts at one context length, under one load: `streams` concurrent requests (closed loop) or
    `requests` arriving at `rate` per second (open loop)."""

    name: str
    prompts: tuple[str, ...]  # the chat form (a built-in class's instructions), or a user's prompts
    context_tokens: int | None = None
    streams: int = 1
    rate: float | None = None  # requests per second, open loop (None: closed loop, `streams` at once)
    arrivals: Arrivals = Arrivals.POISSON
    requests: int = 0  # per repeat, open loop
    # Capacity (`objective: capacity`): the range of rates to find the highest within the latency limits in,
    # and the bisection's steps inside it (each a run of `requests` at one rate, after both ends).
    capacity: tuple[float, float] | None = None
    capacity_steps: int = 0
    # Where this workload's prompts start in its list: workloads that share a list (tool and tool@8k) take
    # different prompts, so no prompt reaches one server twice while the list is long enough.
    first_prompt: int = 0
    # The completion form's prompts (a built-in class's continuations); empty: `prompts` serve both forms.
    continuations: tuple[str, ...] = ()
    form: PromptForm | None = None  # None: the form the served model takes
    stops: bool = False  # answers should end before max_tokens (one that runs to it is a symptom)
    stop: tuple[str, ...] = ()  # stop sequences: where the task ends, so that only the task is measured
    completion_stop: tuple[str, ...] = ()  # more of them in the completion form (a built-in class's)
    # Whether the task repeats its input (a quote, an edit, a reformatting): its answer holds the input's lines,
    # which is not an echo (`sweep/answers/health.py`). None: read from each prompt's words.
    copies: bool | None = None
    source: str = ""  # where a dataset file's prompts came from, in one line (`Dataset.summary`)
    max_tokens: int | None = None  # a task's length (None: the probe's max_tokens, never more than it)
    # Each prompt's recorded reply, and whether a request's max_tokens is that reply's length in the served
    # model's tokens (as vLLM's and SGLang's ShareGPT benchmarks send), no more than `max_tokens`.
    replies: tuple[str, ...] = ()
    reply_tokens: bool = False
    # Each prompt's earlier turns (a dataset's conversations, `conversation: true`): a chat request sends them
    # before the prompt; the completion form has no turns and sends the prompt alone.
    histories: tuple[tuple[Turn, ...], ...] = ()

    @property
    def family(self) -> str:
        """The name and context without the stream count (`tool@8k`): the workloads a depth schedule spans."""
        if not self.context_tokens:
            return self.name
        ctx = self.context_tokens  # 128000 -> 128k, 8192 -> 8k, 3500 -> 3500
        label = f"{ctx // 1000}k" if ctx % 1000 == 0 else f"{ctx // 1024}k" if ctx % 1024 == 0 else str(ctx)
        return f"{self.name}@{label}"

    @property
    def key(self) -> str:
        """The name results and objectives use: `tool`, `tool@8k`, `tool@8k/2streams`, `tool/0.5rps`."""
        if self.capacity is not None:
            return f"{self.family}/capacity"
        if self.open_loop:
            return f"{self.family}/{rate_label(self.rate or 0.0)}"
        return self.family + (f"/{self.streams}streams" if self.streams > 1 else "")

    @property
    def open_loop(self) -> bool:
        return self.rate is not None or self.capacity is not None

    @property
    def capacity_probes(self) -> int:
        """Runs a capacity search makes in one launch, at most: both ends of its range, each bisection step, and
        the runs again near a limit."""
        return 2 + self.capacity_steps + CAPACITY_RECHECKS if self.capacity is not None else 0

    def at_rate(self, rate: float, prompts: int) -> Workload:
        """One run of a capacity search: this workload open loop at `rate`, its prompts the `prompts`-th slice
        of the search's own (0 at every rate; a run again near a limit takes the next slice)."""
        return dataclasses.replace(
            self,
            rate=rate,
            capacity=None,
            capacity_steps=0,
            first_prompt=self.first_prompt + prompts * self.requests,
        )

    @property
    def per_repeat(self) -> int:
        """Requests one repeat sends: its streams, or its open-loop requests."""
        return self.requests if self.open_loop else self.streams

    def prompt_index(self, repeat: int, stream: int) -> int:
        """The prompt of a repeat's stream (or request): the same in every trial, so trials pair up prompt by
        prompt."""
        return self.first_prompt + repeat * self.per_repeat + stream

    def send_offsets(self, repeat: int) -> list[float]:
        """When each of a repeat's requests is sent, in seconds from the repeat's start: all at once (closed
        loop) or on the open loop's arrival clock, the same in every trial. Seeded by the family and the repeat,
        not the rate: every rate's Poisson arrivals are one pattern scaled in time (common random numbers), so
        runs at different rates, in one capacity search or across launches, differ by their rate alone."""
        if not self.open_loop or not self.rate:
            return [0.0] * self.streams
        if self.arrivals is Arrivals.CONSTANT:
            return [i / self.rate for i in range(self.requests)]
        seed = int.from_bytes(hashlib.sha256(f"{self.family}/{repeat}".encode()).digest()[:8], "big")
        draw = random.Random(seed)
        offsets, at = [], 0.0
        for _ in range(self.requests):
            offsets.append(at)  # the first request opens the repeat; the gaps after it are exponential
            at += draw.expovariate(1.0) / self.rate  # one unit-rate pattern, scaled
        return offsets

    def history(self, index: int, form: PromptForm) -> tuple[Turn, ...]:
        """The turns before prompt `index` in a chat request (none in the completion form)."""
        if form is PromptForm.COMPLETION or not self.histories:
            return ()
        return self.histories[index % len(self.histories)]

    def reply(self, index: int) -> str:
        """The recorded reply to prompt `index` ("" where there is none)."""
        return self.replies[index % len(self.replies)] if self.replies else ""

    def stop_in(self, form: PromptForm) -> tuple[str, ...]:
        """The stop sequences of the form the requests are sent in."""
        return self.stop + (self.completion_stop if form is PromptForm.COMPLETION else ())

    def texts(self, form: PromptForm) -> tuple[str, ...]:
        """The prompts of one form."""
        return self.continuations if form is PromptForm.COMPLETION and self.continuations else self.prompts

    def prompt(self, index: int, form: PromptForm = PromptForm.CHAT) -> str:
        texts = self.texts(form)
        return texts[index % len(texts)]

    @property
    def prompt_count(self) -> int:
        """Different prompts in either form it may be sent in."""
        forms = [self.form] if self.form else list(PromptForm)
        return min(len(self.texts(f)) for f in forms)

    def prompts_needed(self, repeats: int) -> int:
        """A capacity search runs once a launch, whatever the repeats (its noise is the launches'), its rates on
        one slice of prompts and each run again near a limit on a slice of its own."""
        return (1 + CAPACITY_RECHECKS) * self.requests if self.capacity else repeats * self.per_repeat
