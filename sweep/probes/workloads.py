"""Workload classes: the prompts a trial is measured with, in the form the served model takes.

Built-in classes differ in how much of the answer is already in the prompt, which is what drafting feeds on:
`tool` copies and extracts from a given document (high overlap), `code` writes new code (structured, partly
predictable), `prose` is writing in English and Chinese (least predictable).

Each class has two forms (`PromptForm`): instructions for a chat model, sent through its own chat template,
and text a base model continues (`sweep/probes/continuations.py`), sent as it is. A base model under a chat
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
import hashlib
import json
import random
from dataclasses import dataclass
from enum import StrEnum

from sweep.engines.base import PromptForm
from sweep.probes import continuations

_ORDERS = json.dumps(
    {
        "orders": [
            {
                "id": "A-1042",
                "customer": "Lina Park",
                "city": "Busan",
                "items": ["usb-c cable", "charger"],
                "total": 38.5,
            },
            {"id": "A-1043", "customer": "Tomas Novak", "city": "Brno", "items": ["keyboard"], "total": 74.0},
            {
                "id": "A-1044",
                "customer": "Amara Obi",
                "city": "Lagos",
                "items": ["monitor", "hdmi cable"],
                "total": 219.9,
            },
            {
                "id": "A-1045",
                "customer": "Kenji Sato",
                "city": "Osaka",
                "items": ["mouse", "mouse pad"],
                "total": 31.2,
            },
        ]
    },
    indent=2,
)

_INVOICE = """INVOICE No. 2024-0917
Seller: Nordlicht Components GmbH, Hafenstrasse 12, 20457 Hamburg, Germany, VAT DE 294 117 503
Buyer: Meridian Robotics Ltd, 4 Canal Walk, Leeds LS1 4BN, United Kingdom
Date of issue: 17 September 2024. Due date: 17 October 2024.
Line 1: Stepper motor NEMA-17, quantity 40, unit price 18.20 EUR, amount 728.00 EUR
Line 2: Motor driver board TMC2209, quantity 40, unit price 9.75 EUR, amount 390.00 EUR
Line 3: Aluminium extrusion 2020, 1 m, quantity 120, unit price 4.10 EUR, amount 492.00 EUR
Subtotal 1610.00 EUR, VAT 0 % (intra-community supply), total 1610.00 EUR.
Payment by bank transfer to IBAN DE44 2005 0550 1234 5678 90, reference 2024-0917."""

_SERVICE = """def handle_request(request, db, cache):
    user = db.get_user(request.user_id)
    if user is None:
        return {"status": 404, "error": "unknown user"}
    key = f"profile:{user.id}"
    profile = cache.get(key)
    if profile is None:
        profile = db.load_profile(user.id)
        cache.set(key, profile, ttl=300)
    return {"status": 200, "profile": profile, "name": user.name}"""

BUILTIN_PROMPTS: dict[str, list[str]] = {
    "code": [
        "Write a Python function `merge_intervals(intervals)` that merges overlapping intervals, "
        "with type hints, a docstring and three pytest tests.",
        "Write a C function that reverses a singly linked list in place, with the struct definition "
        "and a small main() that prints the list before and after.",
        "Write a TypeScript class `LruCache<K, V>` with get, set and a capacity limit, using a Map, and "
        "a short usage example.",
        'Write a Go HTTP handler that accepts JSON {"a": int, "b": int}, returns their sum as JSON, and '
        "rejects bad input with status 400.",
        "Write a SQL schema for a library (books, members, loans) with foreign keys, then a query listing "
        "overdue loans with the member's name.",
    ],
    "tool": [
        "Here is a JSON document:\n" + _ORDERS + "\nReturn the same JSON with every order's `city` in upper "
        "case. Output only the JSON.",
        "Extract every field of this invoice into JSON with keys seller, buyer, date, due, lines "
        "(description, quantity, unit_price, amount) and total. Copy the values exactly.\n\n" + _INVOICE,
        "Here is a Python function:\n" + _SERVICE + "\nRewrite it with type hints added to the signature and "
        "every other line unchanged. Output only the code.",
        "Copy this JSON exactly, then add a field `count` with the number of items to each order:\n"
        + _ORDERS,
        "From this invoice, list each line as `description | quantity | amount`, one per line, copying the "
        "text exactly:\n\n" + _INVOICE,
    ],
    "prose": [
        "Write a short story about a lighthouse keeper who finds a message in a bottle written in her own "
        "handwriting.",
        "用中文写一篇短篇小说：一位老人在雨夜的火车站等待一个多年未见的朋友。",
        "Write a poem-like paragraph about the smell of rain on hot stone in a mountain village.",
        "请用中文写一段散文，描写秋天傍晚城市里的一条老街和街上的人们。",
        "Write the opening of a fantasy novel in which the moon has stopped rising and a baker is the first "
        "to notice.",
    ],
}

# More prompts per class, made from parts, so that repeats x streams x variants of one class rarely need a
# prompt twice on one server (each composed prompt has text of its own: its own document, task or subject).
_LANGUAGES = ("Python", "Rust", "Go", "Java", "C++", "Kotlin")
_CODE_TASKS = (
    "parses an ISO-8601 date string and returns the day of the week",
    "counts word frequencies in a text file and prints the ten most common words",
    "implements a thread-safe bounded queue with put and get",
    "validates an IPv4 address without using regular expressions",
    "computes the shortest path in a weighted graph with Dijkstra's algorithm",
    "flattens an arbitrarily nested list of integers",
)
_TOOL_TASKS = (
    "Return the same JSON with every `city` in upper case. Output only the JSON.",
    "Copy this JSON exactly, then add a field `count` with the number of items to each order.",
    "List each order as `id | customer | total`, one per line, copying the values exactly.",
    "Extract every customer name and city into a JSON list of {name, city}. Copy the values exactly.",
)
_SUBJECTS = (
    "a clockmaker who repairs a clock that runs backwards",
    "two strangers sharing an umbrella at a bus stop",
    "a city where it has not rained for a hundred years",
    "a child who teaches a robot to whistle",
    "the last ferry of the season crossing a grey lake",
    "an old map that shows a street nobody can find",
)
_FORMS = (
    "Write a short story about",
    "Write a letter, in the voice of a grandmother, about",
    "用中文写一段故事，主题是",
    "Write a fable with a moral about",
    "Describe, as a travel writer would,",
)


def _orders(seed: int) -> str:
    return json.dumps({"orders": continuations.orders(seed, 3)}, indent=2)


BUILTIN_PROMPTS["code"] += [
    f"Write a {lang} function that {task}, with a short usage example."
    for task in _CODE_TASKS
    for lang in _LANGUAGES
]
BUILTIN_PROMPTS["tool"] += [
    f"Here is a JSON document:\n{_orders(seed)}\n{_TOOL_TASKS[seed % len(_TOOL_TASKS)]}"
    for seed in range(1, 31)
]
BUILTIN_PROMPTS["prose"] += [f"{form} {subject}." for subject in _SUBJECTS for form in _FORMS]
BUILTIN_CLASSES = tuple(BUILTIN_PROMPTS)
# The same classes as text a base model continues (the completion form).
BUILTIN_CONTINUATIONS: dict[str, list[str]] = {
    "code": continuations.CODE,
    "tool": continuations.TOOL,
    "prose": continuations.PROSE,
}


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
    # Whether the task repeats its input (a quote, an edit, a reformatting): its answer holds the input's lines,
    # which is not an echo (`sweep/health.py`). None: read from each prompt's words.
    copies: bool | None = None
    source: str = ""  # where a dataset file's prompts came from, in one line (`Dataset.summary`)

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
