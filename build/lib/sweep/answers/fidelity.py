"""Does a configuration still say what the baseline says? Texts compared prompt by prompt under greedy decoding.

Speculative decoding with greedy verification should not change a single token. Batched verification can
flip a near-tie in floating point, rarely and late in an answer; a broken draft path (users report MTP
breaking tool calls) changes answers early and often.

Like with like: each launch's answers are keyed by the prompt they answered (`RequestMeasurement.prompt_id`,
the digest of the prompt as sent), and two texts are compared only where the same prompt was sent. A capacity
search's runs differ by launch (its bisection visits other rates), an open loop's and a retried batch's
prompts carry other nonces: matching by position would compare answers to prompts that were never the same.

The floor is the baseline against itself: on the prompts that two or more of its launches answered, the share
all of them answered alike (floating point and batching alone, on this machine, in this study). A
configuration whose answers differ on more prompts than the floor allows by more than `TOLERANCE` (half: on a
CPU, llama-server's batched verification was seen to part from the greedy text on one prompt in three, at
character 5), or that breaks structured answers (JSON that parsed, or fields that matched) as often, changed
the output. Each check keeps one example: the first differing token of one prompt, and which side moved: the
floor (the baseline differs launch to launch too) or the engine (the baseline reproduced itself every time).

A baseline that reproduces itself decodes one token a step; a verifier scores several at once, through other
kernels (llama.cpp's CUDA build: batched matrix products for a verify step, vector products for one token), so
the floor cannot see what batching alone moves. A difference is *explained* where the baseline's own server,
asked at the point where the answers part (`TieProbe`: its prompt, the shared text, one token, its top
TIE_CHOICES log-probabilities; a baseline launch of the confirmation asks after its measured requests), either
ranks the other answer's token first (scoring the text in one batch, as a verify step does, the model itself
writes what the configuration wrote) or ranks both answers' next tokens within NEAR_TIE nats of each other (a
near-tie that floating point flips). The point is moved back to the start of the word and its leading spaces,
and the probe walks up to TIE_STEPS tokens on while both answers share the server's first choice, so that it
asks where the tokens part, not mid-token. A broken draft path changes answers where the model is sure: the
other answer's token is far down the list, or not on it. Where batched scoring ranks another token above the
one the baseline's own decode wrote, the two paths disagree by that gap (`disagreement`): the study's largest,
up to NEAR_TIE_MAX, is the tolerance a near-tie is judged by (noise measured in the same study: on an H100,
SmolLM2-135M's Q4_1 weights, 0.60 nats). An explained difference counts as alike; what the probe did not reach
(no baseline launch after the other's, a server that gives no log-probabilities) stays unexplained.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import scipy.stats

from sweep.answers.health import FENCED, JSON_FIELD, PIECE, TEMPLATE_MARKERS

TIE_CHOICES = 5  # next tokens a tie probe asks the baseline's server for
NEAR_TIE = 0.1  # nats (about 10% in probability) between the two answers' tokens: a near-tie at the least
# Nats: the most a study's measured disagreement of batched and one-token scoring may excuse.
NEAR_TIE_MAX = 1.0
TIE_CONTEXT = 24  # characters of each answer kept from where they part
TIE_STEPS = 4  # tokens a probe walks past where both answers share the server's first choice
# Differences a baseline launch asks about per batch (a changed answer each is evidence enough).
TIE_PROBES = 4
TOLERANCE = 0.5  # share of prompts that may differ beyond what the baseline's own launches do
CONTEXT_CHARS = 40  # of the text both sides share, shown before the first difference

# One launch's answers: the prompt each answered (its digest) to the text.
Answers = Mapping[str, str]


@dataclass(frozen=True)
class TieProbe:
    """At the point where another configuration's answer to a prompt parts from this (baseline) launch's, the
    next tokens this server ranks likeliest and their log-probabilities: whether the two answers parted on a
    near-tie (this module). Asked after the launch's measured requests, outside their clock."""

    prompt_id: str  # the prompt both answered (`RequestMeasurement.prompt_id`)
    at: int  # the character where the answers part, moved back to the start of its word
    shared: str  # the tokens from `at` that both answers hold (the probe walked past them)
    baseline: str  # this launch's answer after `shared` (its first characters)
    other: str  # the other configuration's answer after `shared`
    choices: tuple[tuple[str, float], ...] = ()  # (token text, log-probability), likeliest first

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TieProbe:
        return cls(
            str(data["prompt_id"]),
            int(data["at"]),
            str(data.get("shared", "")),
            str(data["baseline"]),
            str(data["other"]),
            tuple((str(token), float(logprob)) for token, logprob in data.get("choices") or ()),
        )


def answers(outputs: Sequence[str], prompts: Sequence[str]) -> dict[str, str]:
    """A launch's texts keyed by the prompt each answered (by position where the record names no prompts)."""
    keys = prompts if len(prompts) == len(outputs) else [f"#{i}" for i in range(len(outputs))]
    return dict(zip(keys, outputs, strict=True))


@dataclass(frozen=True)
class Floor:
    """The baseline against itself: of the prompts two or more of its launches answered, how many alike."""

    prompts: int = 0
    reproduced: int = 0

    @property
    def measured(self) -> bool:
        return self.prompts > 0

    @property
    def share(self) -> float:
        """Share reproduced (1.0 where unmeasured: no allowance for what was not seen)."""
        return self.reproduced / self.prompts if self.prompts else 1.0

    def describe(self) -> str:
        if not self.measured:
            return "no floor (no prompt was sent to two launches of the baseline)"
        return f"a floor of {self.reproduced}/{self.prompts} (the baseline's own launches alike)"


@dataclass(frozen=True)
class Difference:
    """One prompt's first difference: where the texts part, what both said before it, and each side's token."""

    prompt: int  # its position among the compared prompts, from 1
    at: int  # character
    before: str
    baseline: str
    candidate: str

    def describe(self) -> str:
        return (
            f"prompt {self.prompt} parts at character {self.at}: after {self.before!r} the baseline says "
            f"{self.baseline!r}, this configuration {self.candidate!r}"
        )


@dataclass(frozen=True)
class OutputCheck:
    """One configuration's texts against the baseline's, for one workload, on the prompts both answered."""

    prompts: int
    identical: int
    first_divergence: int | None  # median character position where differing texts part, None if none do
    structured: int  # prompts whose baseline answer is structured (JSON or "key": value fields)
    structured_broken: int  # of those, answers that no longer parse or whose fields changed
    floor: Floor = Floor()  # the baseline's own launches against each other (unmeasured: no allowance)
    example: Difference | None = None
    explained: int = 0  # of the differing prompts, those where every difference is explained (`TieProbe`)
    asked: int = 0  # differing answers the baseline's server was asked about (explained or not)
    tolerance: float = NEAR_TIE  # nats two answers' tokens may part by and be floating point (`tolerance`)
    batch_picks: int = 0  # explaining differences where the server's batched scoring writes the other's token
    tie_gaps: tuple[float, ...] = ()  # the other explaining differences' gaps in nats (near-ties)

    @property
    def identical_share(self) -> float:
        return self.identical / self.prompts if self.prompts else 1.0

    @property
    def changed(self) -> bool:
        """More than TOLERANCE of the structured answers broken, or of the prompts changed beyond the floor."""
        broken = self.structured_broken > TOLERANCE * self.structured if self.structured else False
        return broken or self.unexplained > self.tolerated_share * self.prompts + 1e-9

    @property
    def tolerated_share(self) -> float:
        """The share of prompts whose answers may part, unexplained, before the veto: what the baseline's own
        launches part on (1 - floor), and TOLERANCE more."""
        return (1 - self.floor.share) + TOLERANCE

    @property
    def moved(self) -> str:
        """Which side moved where answers differ: "engine" (the baseline reproduced itself on every prompt),
        "floor" (the baseline itself differs launch to launch), "" where nothing differs or no floor was seen."""
        if self.identical == self.prompts or not self.floor.measured:
            return ""
        return "engine" if self.floor.share >= 1.0 else "floor"

    @property
    def unexplained(self) -> int:
        """Prompts whose answers differ from the baseline's where no probe explains the difference."""
        return self.prompts - self.identical - self.explained

    @property
    def veto_needs(self) -> int:
        """The fewest unexplained differing prompts `changed` vetoes at (structured answers aside)."""
        return math.floor(self.tolerated_share * self.prompts + 1e-9) + 1

    def chance_under_tolerance(self) -> float:
        """How often a configuration that parts from the greedy text on the tolerated share of prompts beyond the
        floor (what batched verification alone was seen to do) would part on this many or more: the binomial tail."""
        rate = min(1.0, self.tolerated_share)
        return float(scipy.stats.binom.sf(self.unexplained - 1, self.prompts, rate))

    def silent_change(self) -> str:
        """Where speculation moved answers the baseline reproduced every time, no probe explains it and the
        veto does not hold: what moved, where, and why the evidence is too thin to veto; "" otherwise."""
        if self.changed or self.moved != "engine" or not self.unexplained:
            return ""
        asked = (
            "its server, asked where they part, did not call the point a near-tie"
            if self.asked
            else "no probe asked its server where they part"
        )
        where = f"; {self.example.describe()}" if self.example else ""
        return (
            f"speculation moved {self.unexplained} of {self.prompts} answers that the baseline reproduced every "
            f"time, and {asked}{where}; not vetoed, the evidence is too thin: a configuration whose answers part on "
            f"{min(1.0, self.tolerated_share):.0%} of the prompts (batched verification alone was seen to "
            f"part on one in three) would part on {self.unexplained} or more of {self.prompts} "
            f"{self.chance_under_tolerance():.0%} of the time; a veto needs {self.veto_needs} of {self.prompts}"
        )

    def ties_text(self) -> str:
        """`2 of them parted where ... (...)`, or "" where no difference was explained."""
        if not self.explained:
            return ""
        why = []
        if self.batch_picks:
            why.append(
                f"{self.batch_picks} where its batched scoring, as a verify step's, writes the other token"
            )
        if self.tie_gaps:
            measured = " (its batched and one-token scoring disagree by that much in this study)"
            why.append(
                f"{len(self.tie_gaps)} with the two tokens within {max(self.tie_gaps):.2f} nats, under "
                f"{self.tolerance:.2f}{measured if self.tolerance > NEAR_TIE else ''}"
            )
        return (
            f"{self.explained} of them parted where the model itself is unsure (the baseline's server asked at the "
            f"point: {'; '.join(why)}): floating point of batched scoring, not the draft"
        )

    def evidence(self) -> str:
        """`1/3 identical against a floor of 3/3 (...)`: the figure a veto on changed output names."""
        text = f"{self.identical}/{self.prompts} identical against {self.floor.describe()}"
        if self.explained:
            text += f", {self.ties_text()}"
        if self.structured_broken:
            text += f", {self.structured_broken}/{self.structured} structured answers broken"
        return text

    def describe(self) -> str:
        text = f"{self.identical}/{self.prompts} outputs identical to the baseline's"
        if self.first_divergence is not None:
            text += f", first difference at character {self.first_divergence} (median)"
        if self.explained:
            text += f"; {self.ties_text()}"
        elif self.identical < self.prompts and not self.asked:
            text += "; no launch of the baseline after them asked its server where they part (a confirmation does)"
        if self.structured:
            text += f"; {self.structured_broken}/{self.structured} structured answers broken"
        text += f"; {self.floor.describe()}"
        if self.moved == "engine":
            text += ": the baseline reproduced itself every time, so speculation moved these answers"
        elif self.moved == "floor":
            text += ": the baseline's own answers differ launch to launch, so floating point moves them too"
        if self.example is not None:
            text += f"; {self.example.describe()}"
        return text

    def to_dict(self) -> dict[str, object]:
        found = {k: v for k, v in self.__dict__.items() if k not in ("example", "floor")}
        return {
            **found,
            # The floor as a share (the key's first meaning) and the prompts it was measured on.
            "floor": self.floor.share,
            "floor_prompts": self.floor.prompts,
            "example": self.example.__dict__ if self.example else None,
            "identical_share": self.identical_share,
            "changed": self.changed,
            "unexplained": self.unexplained,
            "silent_change": self.silent_change(),
        }


def divergence(a: str, b: str) -> int | None:
    """The first character position where two texts differ (None if equal)."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def part_at(base: str, other: str) -> int | None:
    """Where two answers part, moved back to the start of the word (or mark) it falls in, in either answer, and
    the spaces before it (a tokenizer's word carries its leading space): the point a tie probe continues from, on what is most
    likely a token boundary (None where they are equal)."""
    at = divergence(base, other)
    if at is None:
        return None
    # The word in either answer: "a" and "an" part after the "a" both share.
    start = min(
        next((p.start() for p in PIECE.finditer(t) if p.start() <= at < p.end()), at) for t in (base, other)
    )
    while start > 0 and base[start - 1] in " \t":
        start -= 1
    return start


def starts(token: str, text: str) -> bool:
    """Whether `token` is the next token of `text`; where the answer ended, the end-of-text token, which servers
    show as "" or as a special token."""
    if not text:
        return not token or bool(TEMPLATE_MARKERS.fullmatch(token))
    return bool(token) and text.startswith(token)


def _rank(choices: Sequence[tuple[str, float]], mine: str, theirs: str) -> tuple[int, float] | None:
    """The place and log-probability of the likeliest token that starts `mine` and not `theirs` (None: none
    listed)."""
    return next(
        (
            (i, lp)
            for i, (token, lp) in enumerate(choices)
            if starts(token, mine) and not starts(token, theirs)
        ),
        None,
    )


def tie_gap(probe: TieProbe) -> float | None:
    """The gap in nats between the two answers' next tokens at the probe (None: one is not among the choices)."""
    base = _rank(probe.choices, probe.baseline, probe.other)
    other = _rank(probe.choices, probe.other, probe.baseline)
    return None if base is None or other is None else abs(base[1] - other[1])


def batch_picks_other(probe: TieProbe) -> bool:
    """Whether the server, scoring the answer so far in one batch as a verify step does, ranks the other answer's
    token first: the model itself writes what the configuration wrote; the one-token decode the baseline ran
    is what differs."""
    found = _rank(probe.choices, probe.other, probe.baseline)
    return found is not None and found[0] == 0


def disagreement(probe: TieProbe) -> float | None:
    """By how many nats the server's batched scoring prefers another token to the one its one-token decode
    wrote in the baseline's answer (None where it agrees, or the baseline's token is not listed)."""
    base = _rank(probe.choices, probe.baseline, probe.other)
    if base is None or base[0] == 0:
        return None
    return probe.choices[0][1] - base[1]


def tolerance(ties: Sequence[TieProbe]) -> float:
    """The gap a difference may part on and be floating point: NEAR_TIE, or the largest disagreement of the
    server's batched scoring with its own one-token decode seen in the study's probes (at most NEAR_TIE_MAX)."""
    seen = [d for t in ties if (d := disagreement(t)) is not None]
    return min(NEAR_TIE_MAX, max([NEAR_TIE, *seen]))


def explains(probe: TieProbe, allowed: float = NEAR_TIE) -> bool:
    """The two answers part where the model is unsure (their tokens within `allowed` nats), or where its
    batched scoring writes the other's token."""
    gap = tie_gap(probe)
    return batch_picks_other(probe) or (gap is not None and gap <= allowed)


def _probe_for(
    ties: Mapping[tuple[str, int, str], TieProbe], prompt: str, base: str, other: str
) -> TieProbe | None:
    """The probe that asked where `other` parts from `base` on `prompt` (None: none did)."""
    at = part_at(base, other)
    return None if at is None else ties.get((prompt, at, other[at : at + TIE_CONTEXT]))


def structured_answer(text: str) -> object | None:
    """The JSON in an answer (fenced or bare), or its "key": value fields where the JSON is cut short."""
    fenced = FENCED.search(text)
    body = fenced.group(1) if fenced else text
    start = min((i for i in (body.find("{"), body.find("[")) if i >= 0), default=-1)
    if start >= 0:
        try:
            parsed: object = json.loads(body[start:].strip())
            return parsed
        except json.JSONDecodeError:
            pass
    fields = JSON_FIELD.findall(body)
    return sorted(set(fields)) if fields else None


def _structure_kept(base: object, other: str) -> bool:
    found = structured_answer(other)
    if isinstance(base, list) and base and isinstance(base[0], tuple):
        # Fields of a cut answer: every field the other answer has must be one the baseline has.
        theirs = found if isinstance(found, list) else []
        return all(field in base for field in theirs) and bool(theirs)
    return found == base


def _by_prompt(runs: Sequence[Answers]) -> dict[str, list[str]]:
    """Every launch's text for each prompt, in launch order."""
    seen: dict[str, list[str]] = {}
    for run in runs:
        for prompt, text in run.items():
            seen.setdefault(prompt, []).append(text)
    return seen


def _floor(seen: Mapping[str, list[str]]) -> Floor:
    repeated = [texts for texts in seen.values() if len(texts) > 1]
    return Floor(len(repeated), sum(len(set(texts)) == 1 for texts in repeated))


def reproducibility(runs: Sequence[Answers]) -> Floor:
    """The baseline against itself: on the prompts two or more launches answered, how many all alike."""
    return _floor(_by_prompt(runs))


def _difference(number: int, base: str, other: str) -> Difference | None:
    at = divergence(base, other)
    if at is None:
        return None

    def token(text: str) -> str:
        found = PIECE.match(text, at)
        return found.group(0) if found else "(the end)"

    return Difference(number, at, base[max(0, at - CONTEXT_CHARS) : at], token(base), token(other))


def check(
    candidate: Sequence[Answers], baseline: Sequence[Answers], ties: Sequence[TieProbe] = ()
) -> OutputCheck | None:
    """The candidate's launches against the baseline's, on the prompts both answered: a prompt is identical
    where every candidate text is one the baseline gave it, explained where every other text parted from it on a
    near-tie (`ties`, the baseline launches' probes); the floor from the baseline's own launches."""
    base = _by_prompt(baseline)
    mine = {prompt: texts for prompt, texts in _by_prompt(candidate).items() if prompt in base}
    if not mine:
        return None
    probes = {(t.prompt_id, t.at, (t.shared + t.other)[:TIE_CONTEXT]): t for t in ties}
    allowed = tolerance(ties)
    identical = structured = broken = explained = asked = 0
    positions, example, near = [], None, []
    for number, (prompt, texts) in enumerate(mine.items(), start=1):
        reference = base[prompt][0]
        differs = [t for t in texts if t not in base[prompt]]
        identical += not differs
        found = [_probe_for(probes, prompt, reference, t) for t in dict.fromkeys(differs)]
        asked += sum(t is not None for t in found)
        if differs and all(t is not None and explains(t, allowed) for t in found):
            explained += 1
            near += [t for t in found if t is not None]
        if differs:
            positions.append(divergence(reference, differs[0]) or 0)
            example = example or _difference(number, reference, differs[0])
        parsed = structured_answer(reference)
        if parsed is not None:
            structured += 1
            broken += not all(_structure_kept(parsed, t) for t in texts)
    positions.sort()
    return OutputCheck(
        prompts=len(mine),
        identical=identical,
        first_divergence=positions[len(positions) // 2] if positions else None,
        structured=structured,
        structured_broken=broken,
        floor=_floor(base),
        example=example,
        explained=explained,
        asked=asked,
        tolerance=allowed,
        batch_picks=sum(batch_picks_other(t) for t in near),
        tie_gaps=tuple(g for t in near if not batch_picks_other(t) and (g := tie_gap(t)) is not None),
    )
