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
  (a list whose items differ only in a counter, a table that invents the same row). Real code and structured
  copies stay well above it (JSON records that share their keys: 0.6-0.8).
- ECHO: the answer repeats the request: its nonce, or the prompt's first or last line (ECHO_MIN_CHARS or longer).
- TEMPLATE: chat-template or special tokens in the answer (`<|im_start|>`, `<start_of_turn>`, `[INST]`,
  `</s>`, ...): a model continuing a template it does not follow.
- RUNAWAY: the answer ran to `max_tokens` on a workload whose answers should stop (a user workload says so with
  `stops: true`; built-in classes do not, their answers are longer than a sweep's token limit).

An answer with any symptom is degenerate. A workload's `OutputHealth` counts its answers and their symptoms; it
is degenerate when DEGENERATE_SHARE or more of them are: one prompt in five that loops carries a mean gain, and
the verdicts built on such a baseline are marked as not representative.
"""

from __future__ import annotations

import re
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
ECHO_MIN_CHARS = 16
DEGENERATE_SHARE = 0.2
# Chat-template markers and special tokens of the common families (ChatML and its kin, Gemma, Llama 2/3,
# Mistral, DeepSeek's full-width bars, sentencepiece's <s>): text never contains them, templates do.
TEMPLATE_MARKERS = re.compile(
    r"<\|[A-Za-z0-9_.\-]{2,40}\|>|<(?:start|end)_of_turn>|\[/?INST\]|<</?SYS>>|</?s>|<(?:eos|bos|pad|unk)>"
    r"|<｜[^｜\n]{1,40}｜>"
)


class Symptom(StrEnum):
    EMPTY = "empty"
    LOOP = "loop"
    REPETITIVE = "repetitive"
    ECHO = "echo"
    TEMPLATE = "template"
    RUNAWAY = "runaway"

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
}


def pieces(text: str) -> list[str]:
    """The answer's words, CJK characters and punctuation marks, whitespace left out."""
    return [p for p in PIECE.findall(text) if not p.isspace()]


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


def distinct_share(parts: Sequence[str], n: int = DISTINCT_N) -> float | None:
    """Distinct n-grams over all n-grams of the pieces (None where there are too few to judge)."""
    grams = [tuple(parts[i : i + n]) for i in range(len(parts) - n + 1)]
    if len(grams) < DISTINCT_MIN_GRAMS:
        return None
    return len(set(grams)) / len(grams)


def echoes(text: str, prompt: str, nonce: str) -> bool:
    """The nonce, or the prompt's first or last non-empty line (long enough to mean something), in the answer."""
    if nonce and nonce in text:
        return True
    lines = [line.strip() for line in prompt.splitlines() if line.strip() and line.strip() != nonce]
    ends = {lines[0], lines[-1]} if lines else set()
    return any(len(line) >= ECHO_MIN_CHARS and line in text for line in ends)


def symptoms(
    text: str, prompt: str = "", nonce: str = "", ran_out: bool = False, should_stop: bool = False
) -> tuple[Symptom, ...]:
    """What is wrong with one answer (empty where it reads as text). `ran_out`: it ended at `max_tokens`."""
    if not text.strip():
        return (Symptom.EMPTY,)
    found = []
    parts = pieces(text)
    if is_loop(parts):
        found.append(Symptom.LOOP)
    share = distinct_share(parts)
    if share is not None and share < DISTINCT_MIN:
        found.append(Symptom.REPETITIVE)
    if prompt and echoes(text, prompt, nonce):
        found.append(Symptom.ECHO)
    if TEMPLATE_MARKERS.search(text):
        found.append(Symptom.TEMPLATE)
    if ran_out and should_stop:
        found.append(Symptom.RUNAWAY)
    return tuple(found)


@dataclass(frozen=True)
class OutputHealth:
    """A workload's answers on one launch (or several, added up): how many, how many degenerate, and why."""

    answers: int = 0
    degenerate: int = 0
    symptoms: dict[str, int] = field(default_factory=dict)  # answers showing each symptom

    @classmethod
    def of(cls, found: Iterable[Sequence[str]]) -> Self:
        """From each answer's symptoms (an empty sequence for a healthy answer)."""
        rows = list(found)
        counts = Counter(s for row in rows for s in dict.fromkeys(row))
        return cls(len(rows), sum(1 for row in rows if row), dict(sorted(counts.items())))

    def __add__(self, other: OutputHealth) -> OutputHealth:
        counts = Counter(self.symptoms) + Counter(other.symptoms)
        return OutputHealth(
            self.answers + other.answers, self.degenerate + other.degenerate, dict(sorted(counts.items()))
        )

    @property
    def share(self) -> float:
        return self.degenerate / self.answers if self.answers else 0.0

    @property
    def healthy(self) -> bool:
        """Below DEGENERATE_SHARE: acceptance measured on these answers speaks for real text."""
        return self.share < DEGENERATE_SHARE

    def describe(self) -> str:
        """`2/3 answers degenerate (loop 2: a span repeated to the end; echo 1: ...)`, or `3/3 answers read as text`."""
        if not self.degenerate:
            return f"{self.answers}/{self.answers} answers read as text"
        named = "; ".join(f"{name} {count}: {Symptom(name).meaning}" for name, count in self.symptoms.items())
        return f"{self.degenerate}/{self.answers} answers degenerate ({named})"

    def to_dict(self) -> dict[str, Any]:
        return {"answers": self.answers, "degenerate": self.degenerate, "symptoms": dict(self.symptoms)}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> OutputHealth | None:
        if not data:
            return None
        return cls(int(data["answers"]), int(data["degenerate"]), dict(data.get("symptoms") or {}))


NOT_REPRESENTATIVE = "acceptance measured on repeating output overstates real gains"


def total(healths: Iterable[OutputHealth | None]) -> OutputHealth | None:
    """Several launches' health added up (None where none was measured)."""
    found = [h for h in healths if h is not None]
    return sum(found, OutputHealth()) if found else None
