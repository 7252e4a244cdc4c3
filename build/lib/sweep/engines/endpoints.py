"""What engines read from a running server over HTTP: Prometheus metrics, chat turns and their rendering, the
likeliest next tokens (log-probabilities), and whether the server renders a chat template."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import httpx


def parse_prometheus(text: str, prefix: str) -> dict[str, float]:
    """Samples of a Prometheus text page (the engines' `/metrics`), names without `prefix`; a metric with
    labels (model, engine, position) is the sum over its label sets."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(prefix):
            continue
        series, _, value = line.rpartition("}") if "{" in line else line.partition(" ")
        name = series.split("{", 1)[0].strip().removeprefix(prefix)
        try:
            values[name] = values.get(name, 0.0) + float(value.split()[0])
        except (ValueError, IndexError):
            continue
    return values


def prometheus_by_label(text: str, name: str, label: str) -> dict[str, float]:
    """The samples of one metric by the value of one label (summed over the other labels): per-position
    counters, `{position="0"}` ..."""
    found: dict[str, float] = {}
    pattern = re.compile(re.escape(name) + r"\{([^}]*)\}\s+(\S+)")
    for match in pattern.finditer(text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        if label in labels:
            found[labels[label]] = found.get(labels[label], 0.0) + float(match.group(2))
    return found


# What a chat template is asked to render to tell whether the server has one (and how long its header is).
TEMPLATE_PROBES = ("alpha", "omega")


class Turn(NamedTuple):
    """An earlier turn of a conversation that a chat request continues (a dataset's, ShareGPT's)."""

    role: str  # user, assistant or system, as chat templates name them
    content: str


def chat_messages(content: str, history: tuple[Turn, ...] = ()) -> list[dict[str, str]]:
    """A chat request's messages: the conversation so far, then `content` as the user's turn."""
    return [*({"role": t.role, "content": t.content} for t in history), {"role": "user", "content": content}]


def _chat_tokenize(content: str, history: tuple[Turn, ...] = ()) -> dict[str, Any]:
    return {"messages": chat_messages(content, history)}


def read_top_logprobs(body: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    """The first generated token's top log-probabilities from an OpenAI-style answer, likeliest first: the chat
    form's `logprobs.content[0].top_logprobs` list (llama-server gives it for completions too) or the legacy
    completions form's `logprobs.top_logprobs[0]` mapping; () where the answer holds neither."""
    try:
        logprobs = (body.get("choices") or [{}])[0].get("logprobs") or {}
        if logprobs.get("content"):
            listed = logprobs["content"][0].get("top_logprobs") or ()
            found = [(str(t["token"]), float(t["logprob"])) for t in listed]
        elif logprobs.get("top_logprobs"):
            found = [(str(t), float(lp)) for t, lp in (logprobs["top_logprobs"][0] or {}).items()]
        else:
            return ()
    except (AttributeError, KeyError, IndexError, TypeError, ValueError):  # a shape no engine gives: no word
        return ()
    return tuple(sorted(found, key=lambda pair: -pair[1]))


def first_line(response: httpx.Response, limit: int = 160) -> str:
    """The first line of a server's answer, cut at `limit` characters: its reason, for one-line messages."""
    return (response.text.strip().splitlines() or [""])[0][:limit]


def renders_chat(client: httpx.Client) -> tuple[bool, str]:
    """Whether a server renders chat messages with a template (`/tokenize` with `messages`, as SGLang and vLLM
    take it: an error where the model has no chat template), and the server's word on it."""
    response = client.post("/tokenize", json=_chat_tokenize(TEMPLATE_PROBES[0]))
    if response.status_code == 200:
        return True, "the server renders chat messages (/tokenize with messages)"
    return (
        False,
        f"the server renders no chat messages (/tokenize with messages: HTTP {response.status_code} "
        f"{first_line(response)})",
    )


async def chat_tokens(client: httpx.AsyncClient, content: str, history: tuple[Turn, ...] = ()) -> list[int]:
    """The token ids of `content` as a user message after `history`, rendered by the server's chat template
    (with the assistant's turn opened, as a chat completion renders it)."""
    response = await client.post("/tokenize", json=_chat_tokenize(content, history))
    if response.status_code != 200:  # the server's reason, not only its status (no chat template, say)
        raise httpx.HTTPStatusError(
            f"the chat template could not render the prompt (/tokenize with messages: HTTP "
            f"{response.status_code} {first_line(response, 300)})",
            request=response.request,
            response=response,
        )
    return [int(t) for t in response.json()["tokens"]]


async def template_header(client: httpx.AsyncClient) -> int:
    """Tokens a server's chat template puts before every user message: what two renderings share."""
    first, second = [await chat_tokens(client, probe) for probe in TEMPLATE_PROBES]
    return next(
        (i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b),
        min(len(first), len(second)),
    )
