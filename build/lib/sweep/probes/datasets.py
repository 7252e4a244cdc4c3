"""Prompt files as people already have them: a workload's `file:`, read whatever its shape.

| shape | a record | its prompt |
|---|---|---|
| our own | a string, or `{prompt: ..., form: ...}` (YAML list or mapping `{form, prompts}`, JSON, JSONL) | it |
| HumanEval, MBPP, Alpaca | `{"prompt": ...}`, `{"text": ...}`, `{"question": ...}`, `{"instruction", "input"}` | it (instruction, then input) |
| ShareGPT (vLLM's and SGLang's `--dataset-name sharegpt`) | `{"conversations": [{"from": "human", "value": ...}, ...]}` | the first human turn |
| OpenAI chat | `{"messages": [{"role": "user", "content": ...}, ...]}` | the first user message |
| MT-Bench, Spec-Bench | `{"category": ..., "turns": [...]}` | the first turn; `category:` keeps one (`all`: one workload each) |

The shape is read from the records, not the file's name; a `.gz` file (or any gzip) is read as it is. The text
is read a chunk at a time and each record let go once its prompt is taken (a large file holds no more memory
than its prompts), so a file cut off mid-way (a partial download, gzip or not) says where: the byte offset and
how many records were read before it, and nothing is launched, unless the workload says `partial: true` (then
the complete records are used and the rest counted as dropped). Records without a prompt (a conversation that
opens with the reply) are dropped and counted. `sample: N` keeps N records drawn with `seed:` (0 unless given),
`min_chars:` / `max_chars:` keep prompts of that length; what was read is said in one line (`Dataset.summary`).
"""

from __future__ import annotations

import codecs
import itertools
import json
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sweep.core.errors import UserError
from sweep.engines.endpoints import Turn
from sweep.engines.values import PromptForm

GZIP_MAGIC = b"\x1f\x8b"
GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib reads the gzip header and trailer
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
    category: str | None = None  # the one category kept, where the workload names one
    categories: tuple[str, ...] = ()  # every category the file's prompts belong to, in the file's order

    def summary(self, path: Path) -> str:
        dropped = f", {self.dropped} dropped" if self.dropped else ""
        turns = sum(1 for h in self.histories if h)
        earlier = f" ({turns} after earlier turns of their conversation)" if turns else ""
        replies = f", {sum(1 for r in self.replies if r)} with a recorded reply" if self.replies else ""
        return (
            f"{path.name}: {self.shape}, {self.records} records{dropped}, {len(self.prompts)} prompts kept"
            f"{f' of the category {self.category}' if self.category else ''}{earlier}{replies}"
        )


class Cut(Exception):
    """The file stops being JSON at `offset` (bytes), after `complete` records."""

    def __init__(self, offset: int, complete: int, reason: str) -> None:
        super().__init__(reason)
        self.offset, self.complete, self.reason = offset, complete, reason


def load_dataset(path: Path, selection: Selection = Selection()) -> Dataset:
    """The prompts of a workload file, or a one-line refusal naming what is wrong with it and the fix. The file
    is read a chunk at a time and each record let go once its prompt is taken."""
    text = _Text(path)
    rows, named = _unwrapped(_rows(path, text, selection.partial))
    records = dropped = 0
    shape = "prompt list"
    pairs: list[Kept] = []
    categories: dict[str, None] = {}  # in the order the file first gives them
    for row in rows:
        records += 1
        if isinstance(row, dict):
            shape = _shape(row) if shape == "prompt list" else shape
            if "form" in row:
                named.add(row["form"])
        prompt, category, reply, history = _taken(row, selection.conversation)
        if not prompt:
            dropped += 1
            continue
        if category is not None:
            categories[category] = None
        if selection.category is None or category == selection.category:
            pairs.append((prompt, reply, history))
    if not pairs and categories:
        raise UserError(
            f"workload file {path} has no prompt of the category {selection.category!r}",
            f"its categories: {', '.join(categories)}",
        )
    if not pairs:
        raise UserError(f"workload file {path} holds no prompts", FILE_SHAPES)
    form = _form(path, named)
    kept = _select(pairs, selection)
    if not kept:
        raise UserError(
            f"workload file {path} has no prompt between min_chars and max_chars",
            "widen or drop min_chars / max_chars",
        )
    dropped += 1 if text.cut_short else 0
    replies = tuple(r for _, r, _ in kept) if any(r for _, r, _ in kept) else ()
    histories = tuple(h for *_, h in kept) if any(h for *_, h in kept) else ()
    prompts = tuple(p for p, *_ in kept)
    return Dataset(
        prompts, form, shape, records, dropped, replies, histories, selection.category, tuple(categories)
    )


def _unwrapped(rows: Iterator[Any]) -> tuple[Iterator[Any], set[Any]]:
    """The records, and the forms the file names: a file that is one mapping `{form: ..., prompts: [...]}` gives
    its prompts and its form."""
    head = list(itertools.islice(rows, 2))
    if len(head) == 1 and isinstance(top := head[0], dict) and isinstance(top.get("prompts"), list):
        return iter(top["prompts"]), ({top["form"]} if "form" in top else set())
    return itertools.chain(head, rows), set()


def _taken(row: Any, conversation: bool) -> tuple[str | None, str | None, str, tuple[Turn, ...]]:
    """What a record gives: its prompt (None: none), its category, its recorded reply, its earlier turns."""
    if conversation:
        turns = _turns(row)
        if turns is None:
            return None, _category(row), "", ()
        return turns.turns[-1].content, _category(row), turns.reply, turns.turns[:-1]
    return _prompt(row), _category(row), _reply(row), ()


def _rows(path: Path, text: _Text, partial: bool) -> Iterator[Any]:
    """The file's records; one cut short ends them (its complete records kept only where `partial`)."""
    complete = 0
    try:
        for row in _records(path, text):
            yield row
            complete += 1
        if text.ended_early:  # a gzip file cut between two records
            raise Cut(text.taken, complete, "the gzip file ends early")
    except Cut as cut:
        if not partial:
            raise UserError(
                f"workload file {path} is cut off or malformed at byte {cut.offset} ({cut.reason}; it holds "
                f"{text.size()} bytes), after {cut.complete} complete records",
                f"download it again, or set `partial: true` on the workload to use the {cut.complete} records",
            ) from None
        text.cut_short = True
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise UserError(
            f"workload file {path} cannot be parsed ({exc.__class__.__name__})", "fix its syntax"
        ) from None


# Text is read this many characters at a time: a record longer than it is read on until it ends.
CHUNK_CHARS = 1 << 20
# A gzip file is read this many bytes at a time: text compresses 5 to 100 times.
GZIP_READ_BYTES = 1 << 16


class _Text:
    """A workload file's text, a chunk at a time (a gzip file looked through), refused in one line where it is not
    UTF-8 text. `taken` counts the bytes of text given out, so a place in it can be named by its byte offset."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise UserError(
                f"workload file {path} does not exist", "fix the path in the space file's workloads"
            )
        self.path = path
        self.cut_short = False
        self.ended_early = False
        self.taken = 0  # bytes read from the (decompressed) file so far
        try:
            with path.open("rb") as probe:
                self.gzipped = probe.read(2) == GZIP_MAGIC
        except OSError as exc:
            raise UserError(
                f"workload file {path} cannot be read ({exc.strerror})", "check the path and its permissions"
            ) from None
        self._decoder = codecs.getincrementaldecoder("utf-8")()

    def chunks(self) -> Iterator[str]:
        fix = "save it as UTF-8 text (YAML or JSONL)"
        for data in itertools.chain(self._data(), [b""]):
            if b"\0" in data:
                raise UserError(f"workload file {self.path} is a binary file, not text", fix)
            pending = len(self._decoder.getstate()[0])
            try:
                chunk = self._decoder.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                raise UserError(
                    f"workload file {self.path} is not UTF-8 text (byte {self.taken - pending + exc.start})",
                    fix,
                ) from None
            self.taken += len(data)
            if chunk:
                yield chunk

    def size(self) -> int:
        """The file's bytes of text (a gzip file's once looked through)."""
        if not self.gzipped:
            return self.path.stat().st_size
        return sum(len(data) for data in self._data())

    def _data(self) -> Iterator[bytes]:
        """The file's bytes of text, a chunk at a time. A gzip file is inflated as it comes, so where it ends
        early (a partial download) the text before is read and `ended_early` says it was cut."""
        with self.path.open("rb") as raw:
            if not self.gzipped:
                yield from iter(lambda: raw.read(CHUNK_CHARS), b"")
                return
            inflate = zlib.decompressobj(GZIP_WBITS)
            try:
                for data in iter(lambda: raw.read(GZIP_READ_BYTES), b""):
                    while data:
                        yield inflate.decompress(data)
                        # One gzip member ends: the next (concatenated, as `cat a.gz b.gz` makes) starts after it.
                        data = inflate.unused_data if inflate.eof else b""
                        if inflate.eof and data:
                            inflate = zlib.decompressobj(GZIP_WBITS)
            except zlib.error as exc:
                raise UserError(
                    f"workload file {self.path} is a broken gzip file ({exc})", "download it again"
                ) from None
            self.ended_early = not inflate.eof


def _records(path: Path, text: _Text) -> Iterator[Any]:
    """Each record, by the file's suffix (a `.gz` looked through), else by its first character: a JSON array's
    elements one by one, a JSONL file's lines, else YAML (a list's items, or the one mapping)."""
    suffix = Path(path.name.removesuffix(".gz")).suffix
    chunks = text.chunks()
    head = ""
    for chunk in chunks:  # up to the first character that is not a space
        head += chunk
        if head.strip():
            break
    body = head.lstrip()
    rest = itertools.chain([head], chunks)
    if suffix in (".yaml", ".yml") or (suffix not in (".json", ".jsonl") and body[:1] not in ("[", "{")):
        loaded = yaml.safe_load("".join(rest))
        yield from loaded if isinstance(loaded, list) else [loaded]
    elif body.startswith("["):
        yield from _array(rest)
    elif suffix == ".json":
        yield json.loads("".join(rest))
    else:
        yield from _lines(rest)


class _Buffer:
    """Text read so far and not yet parsed, and the bytes before it: a place in it named as the file's byte."""

    def __init__(self, chunks: Iterator[str]) -> None:
        self.chunks, self.text, self.before, self.ended = chunks, "", 0, False

    def more(self) -> bool:
        chunk = next(self.chunks, None)
        if chunk is None:
            self.ended = True
            return False
        self.text += chunk
        return True

    def drop(self, at: int) -> None:
        """Forget the text before `at` (parsed): what was `at` is now 0."""
        self.before += len(self.text[:at].encode())
        self.text = self.text[at:]

    def byte(self, at: int) -> int:
        return self.before + len(self.text[:at].encode())


def _array(chunks: Iterator[str]) -> Iterator[Any]:
    decoder = json.JSONDecoder()
    buffer = _Buffer(chunks)
    buffer.more()
    at, count = buffer.text.index("[") + 1, 0
    while True:
        at = _space(buffer, at)
        if at < len(buffer.text) and buffer.text[at] == "]":
            return
        try:
            record, end = decoder.raw_decode(buffer.text, at)
            # A record that ends where the text read so far ends may go on (a number) in the next chunk.
            if end >= len(buffer.text) and not buffer.ended and buffer.more():
                continue
        except json.JSONDecodeError as exc:
            # Near the end of what was read (or in a string left open), the record goes on in the next chunk.
            if (
                exc.pos >= len(buffer.text) - 64 or exc.msg.startswith("Unterminated string")
            ) and buffer.more():
                continue
            raise Cut(buffer.byte(exc.pos), count, exc.msg) from None
        count += 1
        yield record
        at = _space(buffer, end)
        if at >= len(buffer.text):
            raise Cut(buffer.byte(at), count, "the array never closes")
        if buffer.text[at] == ",":
            at += 1
        elif buffer.text[at] != "]":
            raise Cut(buffer.byte(at), count, "expected ',' or ']'")
        if at > CHUNK_CHARS:
            buffer.drop(at)
            at = 0


def _space(buffer: _Buffer, at: int) -> int:
    """Past the spaces from `at`, reading on where the text read so far ends in them."""
    while True:
        while at < len(buffer.text) and buffer.text[at] in " \t\r\n":
            at += 1
        if at < len(buffer.text) or not buffer.more():
            return at


def _lines(chunks: Iterator[str]) -> Iterator[Any]:
    buffer, count = _Buffer(chunks), 0
    while not buffer.ended:
        buffer.more()
        # The lines read whole so far (all that is left, at the end): one may end in the next chunk.
        whole = len(buffer.text) if buffer.ended else buffer.text.rfind("\n") + 1
        start = 0
        while start < whole:
            end = buffer.text.find("\n", start, whole)
            end = whole if end < 0 else end + 1
            if (line := buffer.text[start:end]).strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise Cut(buffer.byte(start + exc.pos), count, exc.msg) from None
                count += 1
            start = end
        buffer.drop(whole)


def _shape(row: dict[str, Any]) -> str:
    """The shape the file's first record that is a mapping shows."""
    for key, name in (
        ("conversations", "ShareGPT"),
        ("messages", "OpenAI chat"),
        ("turns", "MT-Bench / Spec-Bench questions"),
    ):
        if key in row:
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
            turns = _alternating(turns)
            last = max((i for i, t in enumerate(turns) if t.role == "user"), default=None)
            if last is None or not turns[last].content.strip():
                return None
            following = turns[last + 1] if last + 1 < len(turns) else None
            reply = following.content if following and following.role == "assistant" else ""
            return Conversation(tuple(turns[: last + 1]), reply)
    return None


def _alternating(turns: list[Turn]) -> list[Turn]:
    """Turns as the strictest chat templates take them (Gemma's refuses any other order): the model's replies
    before the first user turn left out (ShareGPT splits long conversations, so a third of its records open
    with one), and turns of one role in a row joined into one."""
    first_user = next((i for i, t in enumerate(turns) if t.role == "user"), len(turns))
    kept = [t for i, t in enumerate(turns) if i >= first_user or t.role != "assistant"]
    joined: list[Turn] = []
    for turn in kept:
        if joined and joined[-1].role == turn.role:
            joined[-1] = Turn(turn.role, f"{joined[-1].content}\n\n{turn.content}")
        else:
            joined.append(turn)
    return joined


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
