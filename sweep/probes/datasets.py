"""Prompt files as people already have them: a workload's `file:`, read whatever its shape.

| shape | a record | its prompt |
|---|---|---|
| our own | a string, or `{prompt: ..., form: ...}` (YAML list or mapping `{form, prompts}`, JSON, JSONL) | it |
| HumanEval, MBPP, Alpaca | `{"prompt": ...}`, `{"text": ...}`, `{"question": ...}`, `{"instruction", "input"}` | it (instruction, then input) |
| ShareGPT (vLLM's and SGLang's `--dataset-name sharegpt`) | `{"conversations": [{"from": "human", "value": ...}, ...]}` | the first human turn |
| OpenAI chat | `{"messages": [{"role": "user", "content": ...}, ...]}` | the first user message |
| MT-Bench, Spec-Bench | `{"category": ..., "turns": [...]}` | the first turn; `category:` keeps one category |

The shape is read from the records, not the file's name; a `.gz` file (or any gzip) is read as it is. A JSON
array is read record by record, so a file cut off mid-way (a partial download) says where: the byte offset and
how many records were read before it, and nothing is launched, unless the workload says `partial: true` (then
the complete records are used and the rest counted as dropped). Records without a prompt (a conversation that
opens with the reply) are dropped and counted. `sample: N` keeps N records drawn with `seed:` (0 unless given),
`min_chars:` / `max_chars:` keep prompts of that length; what was read is said in one line (`Dataset.summary`).
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sweep.engines.base import PromptForm, Turn
from sweep.errors import UserError
from sweep.files import decode_text, read_bytes

GZIP_MAGIC = b"\x1f\x8b"
FILE_SHAPES = (
    "give a list of strings or of {prompt: ...} (YAML, JSON or JSONL), or a dataset as it comes: ShareGPT "
    "(conversations), OpenAI chat (messages), HumanEval/MBPP (prompt/text), MT-Bench or Spec-Bench (turns)"
)


SELECTION_KEYS = ("sample", "seed", "min_chars", "max_chars", "category", "partial", "conversation")


@dataclass(frozen=True)
class Selection:
    """Which records of a file a workload keeps (the workload's keys beside `file:`)."""

    sample: int | None = None
    seed: int = 0
    min_chars: int | None = None
    max_chars: int | None = None
    category: str | None = None
    partial: bool = False
    conversation: bool = False  # a conversation up to its last user turn, not its first turn alone


@dataclass(frozen=True)
class Dataset:
    """The prompts a file gave, the form it names (None: the model's), and what was read."""

    prompts: tuple[str, ...]
    form: PromptForm | None
    shape: str
    records: int
    dropped: int
    replies: tuple[str, ...] = ()  # each prompt's recorded reply ("" where none), where the file holds any
    histories: tuple[tuple[Turn, ...], ...] = ()  # each prompt's earlier turns, where `conversation` asks

    def summary(self, path: Path) -> str:
        dropped = f", {self.dropped} dropped" if self.dropped else ""
        turns = sum(1 for h in self.histories if h)
        earlier = f" ({turns} after earlier turns of their conversation)" if turns else ""
        replies = f", {sum(1 for r in self.replies if r)} with a recorded reply" if self.replies else ""
        return (
            f"{path.name}: {self.shape}, {self.records} records{dropped}, {len(self.prompts)} prompts kept"
            f"{earlier}{replies}"
        )


class Cut(Exception):
    """The file stops being JSON at `offset` (bytes), after `complete` records."""

    def __init__(self, offset: int, complete: int, reason: str) -> None:
        super().__init__(reason)
        self.offset, self.complete, self.reason = offset, complete, reason


def load_dataset(path: Path, selection: Selection = Selection()) -> Dataset:
    """The prompts of a workload file, or a one-line refusal naming what is wrong with it and the fix."""
    if not path.is_file():
        raise UserError(f"workload file {path} does not exist", "fix the path in the space file's workloads")
    rows, cut_short = _rows(path, _text(path), selection.partial)
    named: set[Any] = set()
    if len(rows) == 1 and isinstance(rows[0], dict) and "prompts" in rows[0]:  # {form: ..., prompts: [...]}
        top = rows[0]
        named |= {top.get("form")} if "form" in top else set()
        rows = top["prompts"] if isinstance(top["prompts"], list) else []
    named |= {row["form"] for row in rows if isinstance(row, dict) and "form" in row}
    shape = _shape(rows)
    turns = [_turns(row) if selection.conversation else None for row in rows]
    found = [
        (t.turns[-1].content, _category(row), t.reply, t.turns[:-1])
        if t
        else (None if selection.conversation else _prompt(row), _category(row), _reply(row), ())
        for row, t in zip(rows, turns, strict=True)
    ]
    pairs = [
        (p, r, h) for p, c, r, h in found if p and (selection.category is None or c == selection.category)
    ]
    if not pairs:
        raise UserError(f"workload file {path} holds no prompts", FILE_SHAPES)
    form = _form(path, named)
    kept = _select(pairs, selection)
    if not kept:
        raise UserError(
            f"workload file {path} has no prompt between min_chars and max_chars",
            "widen or drop min_chars / max_chars",
        )
    dropped = sum(1 for p, *_ in found if not p) + (1 if cut_short else 0)
    replies = tuple(r for _, r, _ in kept) if any(r for _, r, _ in kept) else ()
    histories = tuple(h for *_, h in kept) if any(h for *_, h in kept) else ()
    return Dataset(tuple(p for p, *_ in kept), form, shape, len(rows), dropped, replies, histories)


def _rows(path: Path, text: str, partial: bool) -> tuple[list[Any], bool]:
    """The file's records, and whether it was cut short (its complete records kept only where `partial`)."""
    rows: list[Any] = []
    try:
        for row in _records(path, text):
            rows.append(row)
    except Cut as cut:
        if not partial:
            raise UserError(
                f"workload file {path} is cut off or malformed at byte {cut.offset} ({cut.reason}; it holds "
                f"{len(text.encode())} bytes), after {cut.complete} complete records",
                f"download it again, or set `partial: true` on the workload to use the {cut.complete} records",
            ) from None
        return rows, True
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise UserError(
            f"workload file {path} cannot be parsed ({exc.__class__.__name__})", "fix its syntax"
        ) from None
    return rows, False


def _text(path: Path) -> str:
    """The file's text, a gzip file's looked through."""
    data = read_bytes(path)
    if data.startswith(GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise UserError(
                f"workload file {path} is a broken gzip file ({exc})", "download it again"
            ) from None
    return decode_text(data, path, "workload file", "save it as UTF-8 text (YAML or JSONL)")


def _records(path: Path, text: str) -> Iterator[Any]:
    """Each record, by the file's suffix (a `.gz` looked through), else by its first character: a JSON array's
    elements one by one, a JSONL file's lines, else YAML (a list's items, or the one mapping)."""
    suffix = Path(path.name.removesuffix(".gz")).suffix
    body = text.lstrip()
    if suffix in (".yaml", ".yml") or (suffix not in (".json", ".jsonl") and body[:1] not in ("[", "{")):
        loaded = yaml.safe_load(text)
        yield from loaded if isinstance(loaded, list) else [loaded]
    elif body.startswith("["):
        yield from _array(text)
    elif suffix == ".json":
        yield json.loads(text)
    else:
        yield from _lines(text)


def _array(text: str) -> Iterator[Any]:
    decoder = json.JSONDecoder()
    at, count = text.index("[") + 1, 0
    while True:
        at = _skip(text, at)
        if at < len(text) and text[at] == "]":
            return
        try:
            record, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            raise Cut(_bytes(text, exc.pos), count, exc.msg) from None
        count += 1
        yield record
        at = _skip(text, at)
        if at >= len(text):
            raise Cut(_bytes(text, at), count, "the array never closes")
        if text[at] == ",":
            at += 1
        elif text[at] != "]":
            raise Cut(_bytes(text, at), count, "expected ',' or ']'")


def _lines(text: str) -> Iterator[Any]:
    offset = count = 0
    for line in text.splitlines(keepends=True):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise Cut(_bytes(text, offset) + exc.pos, count, exc.msg) from None
            count += 1
        offset += len(line)


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _bytes(text: str, at: int) -> int:
    return len(text[:at].encode("utf-8"))


def _shape(rows: list[Any]) -> str:
    first = next((row for row in rows if isinstance(row, dict)), None)
    if first is None:
        return "prompt list"
    for key, name in (
        ("conversations", "ShareGPT"),
        ("messages", "OpenAI chat"),
        ("turns", "MT-Bench / Spec-Bench questions"),
    ):
        if key in first:
            return name
    return "prompt records"


def _prompt(row: Any) -> str | None:
    if isinstance(row, str):
        return row if row.strip() else None
    if not isinstance(row, dict):
        return None
    if isinstance(turns := row.get("conversations"), list):
        return _first(turns, "from", ("human", "user"), "value")
    if isinstance(messages := row.get("messages"), list):
        return _first(messages, "role", ("user",), "content")
    if isinstance(turns := row.get("turns"), list):
        return next((t for t in turns if isinstance(t, str) and t.strip()), None)
    if isinstance(instruction := row.get("instruction"), str) and instruction.strip():
        extra = row.get("input")
        return instruction + (f"\n\n{extra}" if isinstance(extra, str) and extra.strip() else "")
    for key in ("prompt", "text", "question"):
        if isinstance(row.get(key), str) and row[key].strip():
            return str(row[key])
    return None


# The roles chat templates know, by the names ShareGPT's and OpenAI's records give them.
ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "system": "system",
}


@dataclass(frozen=True)
class Conversation:
    """A conversation up to its last user turn, and the reply recorded after that turn ("" where none)."""

    turns: tuple[Turn, ...]
    reply: str = ""


def _turns(row: Any) -> Conversation | None:
    """A ShareGPT or OpenAI chat record as chat turns, up to its last user turn (None: not a conversation, or
    one with a turn of a role chat templates do not know)."""
    if not isinstance(row, dict):
        return None
    for key, who, said in (("conversations", "from", "value"), ("messages", "role", "content")):
        if isinstance(raw := row.get(key), list):
            turns = [
                Turn(ROLES[t[who]], t[said])
                for t in raw
                if isinstance(t, dict) and t.get(who) in ROLES and isinstance(t.get(said), str)
            ]
            if len(turns) != len(raw):
                return None
            last = max((i for i, t in enumerate(turns) if t.role == "user"), default=None)
            if last is None or not turns[last].content.strip():
                return None
            following = turns[last + 1] if last + 1 < len(turns) else None
            reply = following.content if following and following.role == "assistant" else ""
            return Conversation(tuple(turns[: last + 1]), reply)
    return None


def _reply(row: Any) -> str:
    """The recorded answer to a conversation's first turn (ShareGPT's gpt turn, OpenAI chat's assistant
    message), "" where the record holds none."""
    if not isinstance(row, dict):
        return ""
    for key, who, said in (("conversations", "from", "value"), ("messages", "role", "content")):
        turns = row.get(key)
        if isinstance(turns, list) and len(turns) > 1 and isinstance(second := turns[1], dict):
            text = second.get(said)
            return text if ROLES.get(str(second.get(who))) == "assistant" and isinstance(text, str) else ""
    return ""


def _first(turns: list[Any], who: str, asking: tuple[str, ...], said: str) -> str | None:
    """The first turn that asks (the human's, the user's), where the conversation opens with one."""
    first = turns[0] if turns else None
    if isinstance(first, dict) and first.get(who) in asking and isinstance(first.get(said), str):
        return first[said] if first[said].strip() else None
    return None


def _category(row: Any) -> str | None:
    return str(row["category"]) if isinstance(row, dict) and "category" in row else None


def _form(path: Path, named: set[Any]) -> PromptForm | None:
    forms = {f.value for f in PromptForm}
    if len(named) > 1 or not named <= forms:
        raise UserError(
            f"workload file {path} names the form {' and '.join(sorted(map(str, named)))}",
            "name one form for the whole file: chat (instructions) or completion (text to continue)",
        )
    return PromptForm(str(next(iter(named)))) if named else None


Kept = tuple[str, str, tuple[Turn, ...]]  # a prompt, its recorded reply, the turns before it


def _select(pairs: list[Kept], selection: Selection) -> list[Kept]:
    """The records kept: by the prompt's length, then a seeded sample."""
    low, high = selection.min_chars or 0, selection.max_chars
    kept = [k for k in pairs if len(k[0]) >= low and (high is None or len(k[0]) <= high)]
    if selection.sample is not None and selection.sample < len(kept):
        kept = random.Random(selection.seed).sample(kept, selection.sample)
    return kept
