"""The simulated model's text: tokens (a word piece each), the greedy continuation a prompt of each kind gets (code,
records, quotes, tool calls, prose), the likeliest next tokens and their log-probabilities, usage; and the watch
that ends a generation at its stop sequences (`StopWatch`). Which kind a prompt is: `sim/kind.py`."""

from __future__ import annotations

import json
import math
import random
import re
import zlib
from collections.abc import Sequence
from typing import Any

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
# A request to repeat a passage of the prompt word for word; the simulated model is a base model there: it
# quotes the prompt's longest paragraph, then never stops (it starts the request's pattern again).
QUOTE_REQUEST = re.compile(r"\b(?:quote|quoting|verbatim|word for word)\b", re.I)
QUOTE_MIN_WORDS = 8
TEXT_PIECE = re.compile(r"\s*\S+")
PARAGRAPH = re.compile(r"\n\s*\n")  # what parts a text's paragraphs


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


def chat_content(prompt: str) -> str:
    """A chat prompt's message as the template rendered it (text sent as it is: itself)."""
    opening, closing = CHAT_TEMPLATE.split("{content}")
    return prompt.removeprefix(opening).removesuffix(closing)


def quote_of(prompt: str) -> list[str]:
    """What a base model writes for a quoting request, piece by piece (nothing for other prompts): the prompt's
    longest paragraph word for word, then a blank line and the request's instruction again, the prompt's pattern
    started over (a model that never stops)."""
    content = chat_content(prompt)
    asked = next((line.strip() for line in content.splitlines() if QUOTE_REQUEST.search(line)), "")
    paragraphs = [p.strip() for p in PARAGRAPH.split(content) if asked and asked not in p]
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
