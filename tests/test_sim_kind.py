"""The simulator reads which kind of answer a prompt asks for (code, a copy or an extraction, prose) from prompts
it was not written for: in any programming language, human language and form (an instruction as chat, the same
sent as text to continue, a base model's text), and whatever context filling puts before it. Acceptance follows
the kind: a code prompt read as prose gave code x1.50 and 2.64 tokens a step where report 000 measured x2.07 and
3.56 (`benchmarks/sim_vs_seed_figures.py` measures the figures on these prompts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.engines.values import PromptForm
from sweep.probes.filler import compose, filler_slice
from sweep.probes.workloads import BUILTIN
from sweep.sim.kind import classify
from sweep.sim.text import CHAT_TEMPLATE

DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data"
INSTRUCTIONS = [json.loads(line) for line in (DATA / "prompts-by-kind.jsonl").read_text().splitlines()]
CONTINUATIONS = [json.loads(line) for line in (DATA / "continuations-by-kind.jsonl").read_text().splitlines()]
# What each built-in class's answer is: code; a copy (an edit of a function, a quote, records re-laid); prose.
BUILTIN_KINDS = {
    "code": "code",
    "edit": "tool",
    "quote": "tool",
    "reformat": "tool",
    "tool": "tool",
    "prose": "prose",
    "summary": "prose",
}


def read(prompt: str, form: PromptForm) -> str:
    if form is PromptForm.CHAT:
        return classify(CHAT_TEMPLATE.format(content=prompt))
    return classify(prompt, instruction=False)


@pytest.mark.parametrize("form", list(PromptForm))
@pytest.mark.parametrize("row", INSTRUCTIONS, ids=lambda r: r["prompt"][:40])
def test_an_instruction_is_read_by_what_its_answer_will_be_in_either_form(
    row: dict[str, str], form: PromptForm
) -> None:
    assert read(row["prompt"], form) == row["category"]


@pytest.mark.parametrize("row", CONTINUATIONS, ids=lambda r: r["prompt"][:40])
def test_text_to_continue_is_read_by_what_it_ends_on(row: dict[str, str]) -> None:
    assert read(row["prompt"], PromptForm.COMPLETION) == row["category"]


@pytest.mark.parametrize(
    ("prompt", "kind"),
    [
        # Code in the prompt: changed, the answer is code; explained, prose.
        (
            "Explain what this function does:\n\ndef f(xs):\n    return sum(x * x for x in xs if x % 2 == 0)",
            "prose",
        ),
        (
            "Add type hints to this function:\n\ndef f(xs):\n    return sum(x * x for x in xs if x % 2 == 0)",
            "code",
        ),
        # The words of a document to work on are not the request: a summary of a text about code is prose.
        (
            'Summarize the section "Python API" below in two sentences.\n\nThe package exposes a Python function that copies records verbatim into a JSON table.',
            "prose",
        ),
        # A script, a program or a class that is not code.
        ("Please write a youtube script for a video about sleep.", "prose"),
        ("Which class of ships crossed the Atlantic fastest?", "prose"),
    ],
)
def test_the_request_decides_not_the_words_it_quotes(prompt: str, kind: str) -> None:
    assert read(prompt, PromptForm.CHAT) == kind


@pytest.mark.parametrize("name", sorted(BUILTIN_KINDS))
def test_the_builtin_classes_are_read_as_their_answers_are(name: str) -> None:
    builtin = BUILTIN[name]
    for form in PromptForm:
        kinds = {read(p, form) for p in builtin.prompts(form)}
        assert kinds == {BUILTIN_KINDS[name]}, (name, form)


@pytest.mark.parametrize("form", list(PromptForm))
def test_context_filling_does_not_change_a_prompts_kind(form: PromptForm) -> None:
    """Filling puts real text before the task (the standard library's documentation, full of code words); a
    continuation's end and an instruction's request are read past it."""
    prompts = [r["prompt"] for r in INSTRUCTIONS] + (
        [r["prompt"] for r in CONTINUATIONS] if form is PromptForm.COMPLETION else []
    )
    for prompt in prompts:
        alone = read(prompt, form)
        for start in range(0, 400_000, 97_000):
            for length in (600, 3_000):
                filled = compose(filler_slice(start, length), prompt, form)
                assert read(filled, form) == alone, (prompt[:40], start, length)


@pytest.mark.parametrize(
    ("opening", "kind"),
    [
        ("Edit `space.yaml`: `server.model` is your target,", "tool"),  # a verb, cut at a comma: an opening
        ("Rewrite the paragraph above in plain words:", "prose"),  # it asks: the request, not an opening
    ],
)
def test_a_quote_s_opening_is_what_the_answer_continues_not_a_request(opening: str, kind: str) -> None:
    document = (
        "The search reads every launch's acceptance and speed, fits a model over the space, and picks the next "
        "configuration where the model expects the most gain for the time a launch costs. It stops where no "
        "untried configuration can beat the best by more than the study's own noise."
    )
    quote = f"{document}\n\nThe first paragraph of the section above, quoted in full:\n\n{opening}"
    assert read(quote if kind == "tool" else f"{document}\n\n{opening}", PromptForm.COMPLETION) == kind
