"""Does a configuration still say what the baseline says? Texts compared prompt by prompt under greedy decoding.

Speculative decoding with greedy verification should not change a single token. Batched verification can
flip a near-tie in floating point, rarely and late in an answer; a broken draft path (users report MTP
breaking tool calls) changes answers early and often. The baseline's own launches, compared with each other,
show what floating point alone does on this machine; a configuration that changes more prompts than that by
more than `TOLERANCE` (half: on a CPU, llama-server's batched verification was seen to part from the greedy text
on one prompt in three, at character 5), or breaks structured answers (JSON that parsed, or fields that
matched) as often, is flagged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

TOLERANCE = 0.5  # share of prompts that may differ beyond what the baseline's own launches do
FIELD = re.compile(r'"([^"\\]{1,80})"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null)')
FENCE = re.compile(r"```(?:json)?\s*(.*?)(?:```|$)", re.S)


@dataclass(frozen=True)
class OutputCheck:
    """One configuration's texts against the baseline's, for one workload."""

    prompts: int
    identical: int
    first_divergence: int | None  # median character position where differing texts part, None if none do
    structured: int  # prompts whose baseline answer is structured (JSON or "key": value fields)
    structured_broken: int  # of those, answers that no longer parse or whose fields changed
    floor: float  # share of prompts the baseline's own launches reproduce (1.0 where not measured)

    @property
    def identical_share(self) -> float:
        return self.identical / self.prompts if self.prompts else 1.0

    @property
    def changed(self) -> bool:
        """More than TOLERANCE of the structured answers broken, or of the prompts changed beyond the floor."""
        broken = self.structured_broken > TOLERANCE * self.structured if self.structured else False
        differing = self.prompts - self.identical
        return broken or differing > ((1 - self.floor) + TOLERANCE) * self.prompts + 1e-9

    def describe(self) -> str:
        text = f"{self.identical}/{self.prompts} outputs identical to the baseline's"
        if self.first_divergence is not None:
            text += f", first difference at character {self.first_divergence} (median)"
        if self.structured:
            text += f"; {self.structured_broken}/{self.structured} structured answers broken"
        return text

    def to_dict(self) -> dict[str, object]:
        return {**self.__dict__, "identical_share": self.identical_share, "changed": self.changed}


def divergence(a: str, b: str) -> int | None:
    """The first character position where two texts differ (None if equal)."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def structured_answer(text: str) -> object | None:
    """The JSON in an answer (fenced or bare), or its "key": value fields where the JSON is cut short."""
    fenced = FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start = min((i for i in (body.find("{"), body.find("[")) if i >= 0), default=-1)
    if start >= 0:
        try:
            parsed: object = json.loads(body[start:].strip())
            return parsed
        except json.JSONDecodeError:
            pass
    fields = FIELD.findall(body)
    return sorted(set(fields)) if fields else None


def _structure_kept(base: object, other: str) -> bool:
    found = structured_answer(other)
    if isinstance(base, list) and base and isinstance(base[0], tuple):
        # Fields of a cut answer: every field the other answer has must be one the baseline has.
        theirs = found if isinstance(found, list) else []
        return all(field in base for field in theirs) and bool(theirs)
    return found == base


def check(candidate: Sequence[str], baseline: Sequence[str], floor: float = 1.0) -> OutputCheck | None:
    """Compare texts prompt by prompt (the same order on both sides)."""
    n = min(len(candidate), len(baseline))
    if n == 0:
        return None
    positions = sorted(
        p for a, b in zip(candidate, baseline, strict=False) if (p := divergence(a, b)) is not None
    )
    structured = broken = 0
    for a, b in zip(candidate[:n], baseline[:n], strict=True):
        base = structured_answer(b)
        if base is not None:
            structured += 1
            broken += not _structure_kept(base, a)
    return OutputCheck(
        prompts=n,
        identical=sum(a == b for a, b in zip(candidate[:n], baseline[:n], strict=True)),
        first_divergence=positions[len(positions) // 2] if positions else None,
        structured=structured,
        structured_broken=broken,
        floor=floor,
    )


def reproducibility(runs: Sequence[Sequence[str]]) -> float:
    """Share of prompts on which launches of one configuration said the same thing (1.0 with one launch)."""
    if len(runs) < 2:
        return 1.0
    n = min(len(run) for run in runs)
    if n == 0:
        return 1.0
    return sum(all(run[i] == runs[0][i] for run in runs) for i in range(n)) / n
