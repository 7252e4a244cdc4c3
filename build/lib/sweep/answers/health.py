"""Output health: whether what a server wrote is text, before any acceptance measured on it is believed.

Speculative decoding pays where the next tokens are predictable, and nothing is more predictable than a loop: a
base model served through a chat template it does not know repeats the template's markers to `max_tokens`, a
small model under greedy decoding repeats a sentence, and n-gram lookups copy such output almost perfectly
(acceptance lengths of 20-40 where real text gives 1-3). A gain measured there says nothing about real text.

Each answer is checked on its own, by rules a reader can follow, and each rule that fires is a `Symptom`:

- EMPTY: no visible text at all.
- LOOP: the answer ends in a span repeated to the end. On the answer's pieces (words, CJK characters and
  punctuation; whitespace left out, so a repeat that differs only in line breaks still counts), the longest
  periodic tail: at least two copies of the span and LOOP_MIN_PIECES pieces repeated, and either three copies or
  LOOP_MIN_SHARE of the answer. A doubled line at the end is not a loop; a sentence said three times is.
- REPETITIVE: too few distinct n-grams: under DISTINCT_MIN of the answer's 4-grams of pieces are distinct
  (a list whose items differ only in a counter). Structured answers (JSON, YAML, a table, CSV: `Shape`) are
  judged as structure: their keys, header and markup repeat by design, so the rule reads their values alone
  (a table that invents the same row is still repetitive; records that share their keys are not).
- ECHO: the answer repeats the request: its nonce, or the prompt's first or last line (ECHO_MIN_CHARS or longer).
  A workload whose task repeats its input (a quote, an edit, a reformatting: `copies`, named by the workload or
  read from its prompt's words) expects the input's lines in its answer: there only the nonce, or the prompt's
  first line after the answer has begun (the prompt's pattern started again), is an echo.
- UNCOPIED: a task that repeats its input, named so by the workload (`copies: true`, as the built-in edit, quote
  and reformat classes are), whose answer holds no run of COPY_MIN_PIECES pieces of its prompt: a quote answered
  with "." or with a sentence about the document did not do the task, and a lookup's gain on it says nothing
  of the gain on the task. Read from the prompt's words alone (a translation says "translate") it is not
  applied: such an answer may rightly share no run with its input.
- TEMPLATE: chat-template or special tokens in the answer (`<|im_start|>`, `<start_of_turn>`, `[INST]`,
  `</s>`, ...): a model continuing a template it does not follow.
- RUNAWAY: the answer ran to `max_tokens` on a workload whose answers should stop (a user workload says so with
  `stops: true`; built-in classes do not, their answers are longer than a sweep's token limit).
- RAN_ON: beside an ECHO or TEMPLATE that starts after RUN_ON_MIN_PIECES pieces of text: the answer did its
  task, then ran on (a base model that never stops starts the prompt's pattern again; a chat model continues
  into the next turn). `Judgement.task_chars` is the healthy span; the fix is a stop sequence where the task
  ends (the workload's `stop`) or a `max_tokens` fitted to the task, so that only the task is measured. A loop
  is never "ran on": loops stay loops.

An answer with any symptom is degenerate. A workload's `OutputHealth` counts its answers and their symptoms; it
is degenerate when DEGENERATE_SHARE or more of them are: one prompt in five that loops carries a mean gain, and
the verdicts built on such a baseline are marked as not representative.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Self

# Words, single CJK (and Hangul) characters, punctuation one mark at a time, and runs of whitespace.
PIECE = re.compile(r"[\u3000-\u9fff\uac00-\ud7af\uff00-\uffef]|\w+|[^\w\s]|\s+")
LOOP_MIN_PIECES = 12
LOOP_MIN_SHARE = 0.25
DISTINCT_N = 4
DISTINCT_MIN = 0.4
DISTINCT_MIN_GRAMS = 24  # shorter answers are not judged on distinct n-grams (too few to tell)
STRUCTURED_MIN_GRAMS = 12  # a structured answer's values: fewer pieces, each one carrying content
ECHO_MIN_CHARS = 16
COPY_MIN_PIECES = 8  # a run this long shared with the prompt: the answer copied some of its input
RUN_ON_MIN_PIECES = 12  # the text before an echo or a template marker that counts as a task done
DEGENERATE_SHARE = 0.2
# Chat-template markers and special tokens of the common families (ChatML and its kin, Gemma, Llama 2/3,
# Mistral, DeepSeek's full-width bars, sentencepiece's <s>): text never contains them, templates do.
TEMPLATE_MARKERS = re.compile(
    r"<\|[A-Za-z0-9_.\-]{2,40}\|>|<(?:start|end)_of_turn>|\[/?INST\]|<</?SYS>>|</?s>|<(?:eos|bos|pad|unk)>"
    r"|<｜[^｜\n]{1,40}｜>"
)
# A task that repeats its input: its answer holds the input's lines by design.
COPY_WORDS = re.compile(
    r"\b(?:quote|quoting|verbatim|copy|copying|repeat|reproduce|rewrite|reformat|re-format|edit|convert|"
    r"translate|transcribe|unchanged|exactly|as it is|word for word)\b",
    re.I,
)
# A Markdown code fence with its language tag (```json, ```python, ```jsonc): its own lines, and what it holds.
FENCE_TAG = r"```[\w-]*"
FENCE_LINE = re.compile(rf"^\s*{FENCE_TAG}\s*$", re.M)
FENCED = re.compile(rf"{FENCE_TAG}\s*(.*?)(?:```|$)", re.S)
# A JSON object's key and its colon (escapes allowed, one line), and a key with a scalar value after it.
JSON_KEY_TEXT = r'"((?:[^"\\\n]|\\.){1,80})"\s*:'
JSON_KEY = re.compile(JSON_KEY_TEXT)
JSON_FIELD = re.compile(JSON_KEY_TEXT + r'\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null)')
YAML_LINE = re.compile(r"^\s*(?:-\s+)?[\w][\w .\-/]{0,60}:(?:\s|$)")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}")
STRUCTURED_SHARE = 0.6  # lines of the shape's kind a structured answer is made of, at least


class Symptom(StrEnum):
    EMPTY = "empty"
    LOOP = "loop"
    REPETITIVE = "repetitive"
    ECHO = "echo"
    TEMPLATE = "template"
    RUNAWAY = "runaway"
    RAN_ON = "ran_on"
    UNCOPIED = "uncopied"

    @property
    def meaning(self) -> str:
        return MEANINGS[self]


MEANINGS = {
    Symptom.EMPTY: "no text",
    Symptom.LOOP: "a span repeated to the end",
    Symptom.REPETITIVE: "few distinct n-grams",
    Symptom.ECHO: "the prompt echoed",
    Symptom.TEMPLATE: "chat-template or special tokens",
    Symptom.RUNAWAY: "ran to max_tokens where it should stop",
    Symptom.RAN_ON: "did its task, then ran on",
    Symptom.UNCOPIED: "holds none of the input it was asked to repeat",
}


class Shape(StrEnum):
    """What an answer is made of: text (prose, code) or one of the structured forms judged by their values."""

    TEXT = "text"
    JSON = "json"
    YAML = "yaml"
    TABLE = "table"
    CSV = "csv"


def pieces(text: str) -> list[str]:
    """The answer's words, CJK characters and punctuation marks, whitespace left out."""
    return [p for p in PIECE.findall(text) if not p.isspace()]


def _lines(text: str) -> list[str]:
    return [line for line in FENCE_LINE.sub("", text).splitlines() if line.strip()]


def shape_of(text: str) -> Shape:
    """The answer's shape: JSON (it opens a value, or its lines are `"key": value` fields), a table (rows of
    `|` cells), YAML (`key: value` lines), CSV (rows of one comma count), else text."""
    lines = _lines(text)
    if not lines:
        return Shape.TEXT
    body = "\n".join(lines).lstrip()
    keyed = sum(bool(JSON_KEY.search(line)) for line in lines)
    if body[:1] in "[{" and (keyed or body[:2] in ("[{", "[[", '["', "{}")):
        return Shape.JSON
    if keyed >= 2 and keyed >= STRUCTURED_SHARE * len(lines):
        return Shape.JSON
    enough = max(2, STRUCTURED_SHARE * len(lines))
    if sum(line.count("|") >= 2 for line in lines) >= enough:
        return Shape.TABLE
    if sum(bool(YAML_LINE.match(line)) for line in lines) >= enough:
        return Shape.YAML
    commas = Counter(line.count(",") for line in lines)
    count, rows = commas.most_common(1)[0]
    if count >= 2 and rows >= 3 and rows >= STRUCTURED_SHARE * len(lines):
        return Shape.CSV
    return Shape.TEXT


def _values(text: str, shape: Shape) -> str:
    """A structured answer's content: its keys, header row, rules and markup taken out."""
    lines = _lines(text)
    if shape is Shape.JSON:
        return JSON_KEY.sub(" ", "\n".join(lines))
    if shape is Shape.YAML:
        return "\n".join(YAML_LINE.sub(" ", line) for line in lines)
    rows = [line for line in lines if not TABLE_RULE.match(line)]
    return "\n".join(rows[1:])  # a table's or CSV's first row is its header


def value_pieces(text: str, shape: Shape) -> list[str]:
    """The pieces of a structured answer's values (punctuation left out: quotes, commas and bars are markup)."""
    return [p for p in pieces(_values(text, shape)) if p[0].isalnum() or p[0] == "_" or ord(p[0]) > 0x2FFF]


def loop_tail(parts: Sequence[str]) -> tuple[int, int]:
    """The longest periodic tail: (pieces repeated, the span's length in pieces), (0, 0) where none is.

    For a period p, the tail is the run of positions from the end where each piece equals the one p before it:
    a tail of L pieces means the last p pieces occur L / p + 1 times in a row (counting the first copy)."""
    n = len(parts)
    best = (0, 0)
    for period in range(1, n // 2 + 1):
        run = 0
        while run < n - period and parts[n - 1 - run] == parts[n - 1 - run - period]:
            run += 1
        if run >= period and run > best[0]:
            best = (run, period)
    return best


def is_loop(parts: Sequence[str]) -> bool:
    repeated, period = loop_tail(parts)
    if not period or repeated < LOOP_MIN_PIECES:
        return False
    return repeated >= 2 * period or repeated >= LOOP_MIN_SHARE * len(parts)


def distinct_share(
    parts: Sequence[str], n: int = DISTINCT_N, least: int = DISTINCT_MIN_GRAMS
) -> float | None:
    """Distinct n-grams over all n-grams of the pieces (None where there are fewer than `least` to judge)."""
    grams = [tuple(parts[i : i + n]) for i in range(len(parts) - n + 1)]
    if len(grams) < least:
        return None
    return len(set(grams)) / len(grams)


def repetitive(text: str, parts: Sequence[str]) -> bool:
    """Too few distinct n-grams: of the pieces for text, of the values for a structured answer."""
    shape = shape_of(text)
    if shape is Shape.TEXT:
        share = distinct_share(parts)
    else:
        share = distinct_share(value_pieces(text, shape), least=STRUCTURED_MIN_GRAMS)
    return share is not None and share < DISTINCT_MIN


def copies_input(prompt: str) -> bool:
    """Whether a prompt asks for its input repeated (a quote, an edit, a reformatting), by its words."""
    return bool(COPY_WORDS.search(prompt))


def holds_input(text: str, prompt: str, least: int = COPY_MIN_PIECES) -> bool:
    """Whether the answer shares a run of `least` pieces with the prompt (a copy of some of its input)."""
    asked = pieces(prompt)
    runs = {tuple(asked[i : i + least]) for i in range(len(asked) - least + 1)}
    answer = pieces(text)
    return any(tuple(answer[i : i + least]) in runs for i in range(len(answer) - least + 1))


def echo_at(text: str, prompt: str, nonce: str, copies: bool = False) -> int | None:
    """Where the answer starts repeating the request (None where it does not): the nonce, or the prompt's first
    or last non-empty line (long enough to mean something). Where the task repeats its input (`copies`), only
    the nonce, or the first line once the answer has begun: the prompt's pattern started again."""
    found = [text.find(nonce)] if nonce else []
    lines = [line.strip() for line in prompt.splitlines() if line.strip() and line.strip() != nonce]
    ends = ([lines[0]] if copies else [lines[0], lines[-1]]) if lines else []
    for line in ends:
        if len(line) < ECHO_MIN_CHARS:
            continue
        at = text.find(line, 1 if copies else 0)
        if copies and at >= 0 and not text[:at].strip():
            at = text.find(line, at + 1)  # the answer opens with it: the quote itself, not a restart
        found.append(at)
    return min((at for at in found if at >= 0), default=None)


@dataclass(frozen=True)
class Judgement:
    """One answer's symptoms, and where it ran on: the characters of its task done before an echo or a template
    marker (None where it did not run on)."""

    symptoms: tuple[Symptom, ...] = ()
    task_chars: int | None = None


def judge(
    text: str,
    prompt: str = "",
    nonce: str = "",
    ran_out: bool = False,
    should_stop: bool = False,
    copies: bool | None = None,
) -> Judgement:
    """What is wrong with one answer (no symptoms where it reads as text). `ran_out`: it ended at `max_tokens`;
    `copies`: the task repeats its input (None: read from the prompt's words; True, named so: its answer must
    hold some of it)."""
    if not text.strip():
        return Judgement((Symptom.EMPTY,))
    found = []
    parts = pieces(text)
    loops = is_loop(parts)
    if loops:
        found.append(Symptom.LOOP)
    if repetitive(text, parts):
        found.append(Symptom.REPETITIVE)
    copying = copies_input(prompt) if copies is None else copies
    echo = echo_at(text, prompt, nonce, copying) if prompt else None
    if echo is not None:
        found.append(Symptom.ECHO)
    marker = TEMPLATE_MARKERS.search(text)
    if marker:
        found.append(Symptom.TEMPLATE)
    if ran_out and should_stop:
        found.append(Symptom.RUNAWAY)
    if copies and prompt and not holds_input(text, prompt):
        found.append(Symptom.UNCOPIED)
    starts = [at for at in (echo, marker.start() if marker else None) if at is not None]
    task = min(starts, default=0)
    if starts and not loops and len(pieces(text[:task])) >= RUN_ON_MIN_PIECES:
        before = judge(text[:task], prompt, nonce, copies=copies)
        if not before.symptoms:
            return Judgement((*found, Symptom.RAN_ON), task)
    return Judgement(tuple(found))


def symptoms(text: str, prompt: str = "", nonce: str = "", copies: bool | None = None) -> tuple[Symptom, ...]:
    """What is wrong with one answer that ended on its own (empty where it reads as text): `judge`'s symptoms."""
    return judge(text, prompt, nonce, copies=copies).symptoms


@dataclass(frozen=True)
class OutputHealth:
    """A workload's answers on one launch (or several, added up): how many, how many degenerate, and why; and
    for those that did their task and ran on, the tokens of the task done (each answer's, estimated from its
    share of the answer's characters)."""

    answers: int = 0
    degenerate: int = 0
    symptoms: dict[str, int] = field(default_factory=dict)  # answers showing each symptom
    task_tokens: tuple[int, ...] = ()  # per answer that ran on: the tokens before it did

    @classmethod
    def of(cls, found: Iterable[Sequence[str]], task_tokens: Iterable[int] = ()) -> Self:
        """From each answer's symptoms (an empty sequence for a healthy answer)."""
        rows = list(found)
        counts = Counter(s for row in rows for s in dict.fromkeys(row))
        return cls(len(rows), sum(1 for row in rows if row), dict(sorted(counts.items())), tuple(task_tokens))

    def __add__(self, other: OutputHealth) -> OutputHealth:
        counts = Counter(self.symptoms) + Counter(other.symptoms)
        return OutputHealth(
            self.answers + other.answers,
            self.degenerate + other.degenerate,
            dict(sorted(counts.items())),
            self.task_tokens + other.task_tokens,
        )

    @property
    def share(self) -> float:
        return self.degenerate / self.answers if self.answers else 0.0

    @property
    def healthy(self) -> bool:
        """Below DEGENERATE_SHARE: acceptance measured on these answers speaks for real text."""
        return self.share < DEGENERATE_SHARE

    @property
    def ran_on(self) -> int:
        return self.symptoms.get(Symptom.RAN_ON, 0)

    def describe(self) -> str:
        """`2/3 answers degenerate (loop 2: a span repeated to the end; echo 1: ...)`, or `3/3 answers read as text`;
        where answers ran on, how much of each was the task and how to measure the task alone."""
        if not self.degenerate:
            return f"{self.answers}/{self.answers} answers read as text"
        named = "; ".join(f"{name} {count}: {Symptom(name).meaning}" for name, count in self.symptoms.items())
        text = f"{self.degenerate}/{self.answers} answers degenerate ({named})"
        if self.task_tokens:
            tokens = round(statistics.median(self.task_tokens))
            text += (
                f"; {self.ran_on} read as text for their first ~{tokens} tokens (median), the task, then ran on: "
                f"name where the task ends in the workload (`stop: [...]`) or fit `probe.max_tokens` to about "
                f"{tokens}, so that only the task is measured"
            )
        return text

    def remedy(self) -> str:
        """What to do where these answers are not text: measure the task alone where every degenerate answer did
        its task and ran on (the fix `describe` names), else prompts the model answers with text."""
        if self.degenerate and self.ran_on >= self.degenerate:
            return "keep speculation off until only the task is measured, then sweep again"
        return "keep speculation off, and measure prompts the model answers with text"

    def to_dict(self) -> dict[str, Any]:
        return {
            "answers": self.answers,
            "degenerate": self.degenerate,
            "symptoms": dict(self.symptoms),
            "task_tokens": list(self.task_tokens),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> OutputHealth | None:
        if not data:
            return None
        return cls(
            int(data["answers"]),
            int(data["degenerate"]),
            dict(data.get("symptoms") or {}),
            tuple(int(t) for t in data.get("task_tokens") or ()),
        )


NOT_REPRESENTATIVE = "acceptance measured on repeating output overstates real gains"


def total(healths: Iterable[OutputHealth | None]) -> OutputHealth | None:
    """Several launches' health added up (None where none was measured)."""
    found = [h for h in healths if h is not None]
    return sum(found, OutputHealth()) if found else None
