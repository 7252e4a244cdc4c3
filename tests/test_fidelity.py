"""The output check: texts against the baseline's where the same prompt was sent, with structured answers parsed,
the floor measured from the baseline's own launches, and one example of where the texts part."""

from __future__ import annotations

import dataclasses
import math

import pytest

from sweep.answers import fidelity
from sweep.answers.fidelity import TieProbe
from sweep.engines.endpoints import read_top_logprobs

BASE = [
    '{"city": "BUSAN", "id": "A-1042"}',
    "Once upon a time there was a lighthouse.",
    "def f(x):\n    return x",
]
PROMPTS = ["p1", "p2", "p3"]


def launch(texts: list[str], prompts: list[str] = PROMPTS) -> dict[str, str]:
    return fidelity.answers(texts, prompts)


def check(candidate: list[str], *baselines: list[str]) -> fidelity.OutputCheck:
    found = fidelity.check([launch(candidate)], [launch(b) for b in baselines or (BASE,)])
    assert found is not None
    return found


def test_identical_outputs_pass() -> None:
    found = check(list(BASE))
    assert found.identical == 3 and found.first_divergence is None and found.example is None
    assert found.structured == 1 and found.structured_broken == 0 and not found.changed


def test_one_late_floating_point_divergence_is_tolerated() -> None:
    found = check([BASE[0], "Once upon a time there was a lighthouse keeper.", BASE[2]])
    assert found.identical == 2 and not found.changed
    assert found.first_divergence == len("Once upon a time there was a lighthouse")


def test_most_outputs_changed_is_flagged_with_its_first_differing_token() -> None:
    found = check(["garbage", "Once upon a midnight dreary", BASE[2] + "  # changed"])
    assert found.changed and found.identical == 0
    assert "0/3 outputs identical" in found.describe()
    assert found.example is not None and found.example.prompt == 1 and found.example.at == 0
    second = check([BASE[0], "Once upon a midnight dreary", BASE[2]], BASE, BASE)
    assert second.example is not None and second.example.prompt == 2
    assert (second.example.before, second.example.baseline, second.example.candidate) == (
        "Once upon a ",
        "time",
        "midnight",
    )


def test_broken_json_answer_is_flagged_even_when_text_mostly_matches() -> None:
    found = check(['{"city": "BUSAN", "id": "A-1O42"}', BASE[1], BASE[2]])  # one field's value changed
    assert found.structured_broken == 1 and found.changed


def test_fields_of_a_cut_answer_are_compared() -> None:
    # Answers cut by max_tokens do not parse: their complete "key": value fields must match the baseline's.
    cut = '```json\n{"orders": [{"id": "B-2010", "customer": "Ines Duarte", "city": "Porto", "ite'
    base = [cut, *BASE[1:]]
    kept = check(['```json\n{"orders": [{"id": "B-2010", "customer": "Ines Duarte", "ci', *BASE[1:]], base)
    broken = check(['```json\n{"orders": [{"id": "B-2010", "customer": "Ines Duerte", "ci', *BASE[1:]], base)
    assert kept.structured == 1 and kept.structured_broken == 0 and not kept.changed
    assert broken.structured_broken == 1 and broken.changed


def test_the_baselines_own_launches_are_the_floor_and_say_who_moved() -> None:
    unstable = [BASE[0], "different", "also different"]
    floor = fidelity.reproducibility([launch(BASE), launch(unstable)])
    assert (floor.prompts, floor.reproduced) == (3, 1)
    other = [BASE[0], "y", "z"]
    engine = check(other, BASE, BASE)  # the baseline reproduced itself: speculation moved the answers
    assert engine.changed and engine.moved == "engine" and engine.floor.prompts == 3
    assert "0/3 identical" not in engine.evidence() and engine.evidence().startswith(
        "1/3 identical against a floor of 3/3"
    )
    moving = check(other, BASE, unstable)  # the baseline moves too: within its own floor
    assert not moving.changed and moving.moved == "floor"
    assert "differ launch to launch" in moving.describe()
    alone = check(other)  # one baseline launch: no floor measured, said so
    assert alone.changed and alone.moved == "" and "no floor" in alone.evidence()


def test_texts_compare_only_where_the_same_prompt_was_sent() -> None:
    # A capacity search's runs differ by launch: the candidate's runs visited other rates (other prompts).
    baseline = launch(BASE, ["low/1", "low/2", "high/1"])
    candidate = launch(["something else", BASE[1], "a third answer"], ["mid/1", "low/2", "mid/2"])
    found = fidelity.check([candidate], [baseline])
    assert found is not None and (found.prompts, found.identical) == (1, 1) and not found.changed
    assert fidelity.check([launch(["x"], ["never"])], [baseline]) is None  # nothing in common: no check
    # Records from before prompts were named compare by position, as they were sent.
    assert fidelity.answers(["a", "b"], []) == {"#0": "a", "#1": "b"}


# What the H100's llama-server (CUDA, SmolLM2-135M-Instruct) wrote: the baseline and ngram-simple parted here.
TIE_BASE = "It measures your workloads with unique, cold requests per second within your latency limits."
TIE_OTHER = "It measures your workloads with unique, cold requests\nper second within your latency limits."


def tie(other: str, choices: tuple[tuple[str, float], ...], prompt: str = "p1") -> TieProbe:
    at = fidelity.part_at(TIE_BASE, other)
    assert at is not None
    return TieProbe(prompt, at, "", TIE_BASE[at : at + 24], other[at : at + 24], choices)


def test_a_difference_the_baselines_server_calls_a_near_tie_is_explained() -> None:
    # The answers part at the space after "requests": the probe continues from there, on a token boundary.
    assert fidelity.part_at(TIE_BASE, TIE_OTHER) == len(
        "It measures your workloads with unique, cold requests"
    )
    # Back to the start of the word and the space before it (a tokenizer's word carries its leading space: a
    # prefix ending in a space made SmolLM2 rank digits first).
    assert fidelity.part_at("and the worth", "and the whether") == len("and the")
    near = tie(TIE_OTHER, ((" per", -0.71), ("\n", -0.76), (" to", -3.2)))
    assert fidelity.tie_gap(near) == pytest.approx(0.05)
    base, other = [{"p1": TIE_BASE}] * 2, [{"p1": TIE_OTHER}]
    found = fidelity.check(other, base, [near])
    assert found is not None and found.explained == 1 and found.identical == 0 and not found.changed
    assert "the model itself is unsure" in found.describe() and "within 0.05 nats" in found.evidence()
    # Without the probe the same difference changes the output (the floor is 1/1: nothing else moved it).
    unexplained = fidelity.check(other, base)
    assert unexplained is not None and unexplained.changed and unexplained.explained == 0
    assert "no launch of the baseline after them asked its server" in unexplained.describe()


def test_a_token_the_baseline_was_sure_against_or_never_ranked_is_not_explained() -> None:
    base, other = [{"p1": TIE_BASE}] * 2, [{"p1": TIE_OTHER}]
    sure = tie(TIE_OTHER, ((" per", -0.02), ("\n", -4.1)))  # a broken draft path's kind of change
    unranked = tie(TIE_OTHER, ((" per", -0.4), (" to", -1.3)))  # the other answer's token is not listed
    elsewhere = tie(TIE_OTHER, ((" per", -0.71), ("\n", -0.76)), prompt="p2")  # another prompt's probe
    for probe in (sure, unranked, elsewhere):
        found = fidelity.check(other, base, [probe])
        assert found is not None and found.changed and found.explained == 0, probe
        assert found.asked == (probe is not elsewhere)  # asked, and the answer did not explain it
    assert fidelity.tie_gap(unranked) is None


def test_top_logprobs_are_read_from_either_openai_shape() -> None:
    chat = {
        "choices": [
            {
                "logprobs": {
                    "content": [
                        {
                            "token": " per",
                            "logprob": -0.7,
                            "top_logprobs": [
                                {"token": "\n", "logprob": -0.76},
                                {"token": " per", "logprob": -0.71},
                            ],
                        }
                    ]
                }
            }
        ]
    }
    legacy = {"choices": [{"logprobs": {"tokens": [" per"], "top_logprobs": [{"\n": -0.76, " per": -0.71}]}}]}
    expected = ((" per", -0.71), ("\n", -0.76))
    assert read_top_logprobs(chat) == expected and read_top_logprobs(legacy) == expected
    assert read_top_logprobs({"choices": [{"text": "x"}]}) == () and read_top_logprobs({"error": "no"}) == ()


def test_the_study_measures_how_far_batched_scoring_strays_from_the_one_token_decode() -> None:
    # Where the baseline's server, scoring in one batch, ranks another token above the one its decode wrote, the
    # two paths disagree by that much: differences within it are floating point too (up to NEAR_TIE_MAX).
    other = "It measures your workloads with unique, cold requests at most per second."
    strays = tie(other, ((" at", -0.3), (" per", -0.7), ("\n", -2.0)))
    assert fidelity.disagreement(strays) == pytest.approx(0.4) and fidelity.batch_picks_other(strays)
    wide = tie(TIE_OTHER, ((" per", -0.7), ("\n", -1.0)))  # 0.3 nats apart: beyond NEAR_TIE
    base = [{"p1": TIE_BASE, "p2": TIE_BASE}] * 2
    others = [{"p1": TIE_OTHER, "p2": other}]
    alone = fidelity.check([{"p1": TIE_OTHER}], base[:1] * 2, [wide])
    assert alone is not None and alone.explained == 0 and alone.tolerance == fidelity.NEAR_TIE
    both = fidelity.check(
        others, base, [wide, TieProbe("p2", strays.at, "", strays.baseline, strays.other, strays.choices)]
    )
    assert both is not None and both.explained == 2 and both.tolerance == pytest.approx(0.4)
    assert both.batch_picks == 1 and both.tie_gaps == pytest.approx((0.3,))
    assert "batched and one-token scoring disagree" in both.describe()
    far = tie(other, ((" at", -0.1), ("\n", -1.5), (" per", -3.0)))  # a broken path's size of disagreement
    assert fidelity.tolerance([far]) == fidelity.NEAR_TIE_MAX


def test_an_answer_that_ended_parts_on_the_end_of_text_token() -> None:
    ended, ran_on = "The paragraph.", "The paragraph.\n\nThis implementation"
    probe = TieProbe(
        "p1", len(ended), "", "", ran_on[len(ended) :], (("", -0.68), ("\n", -0.71), ("\n\n", -7.7))
    )
    assert fidelity.tie_gap(probe) == pytest.approx(0.03) and fidelity.explains(probe)
    assert fidelity.starts("<|im_end|>", "") and not fidelity.starts("<|im_end|>", "text")


@pytest.mark.parametrize(("prompts", "moved", "needs"), [(2, 1, 2), (6, 2, 4), (6, 3, 4), (9, 4, 5)])
def test_too_thin_to_veto_is_the_binomial_tail_at_the_tolerated_share(
    prompts: int, moved: int, needs: int
) -> None:
    """Answers the baseline reproduced every time, `moved` of them parted with nothing to explain it: the veto
    holds from `needs` on (more than half beyond the floor), and below it the note gives the chance that a
    configuration parting on half the prompts parts on as many: sum over j >= moved of C(n, j) / 2^n."""
    check = fidelity.OutputCheck(
        prompts=prompts,
        identical=prompts - moved,
        first_divergence=10,
        structured=0,
        structured_broken=0,
        floor=fidelity.Floor(prompts, prompts),
    )
    assert check.unexplained == moved and check.veto_needs == needs and check.moved == "engine"
    tail = sum(math.comb(prompts, j) for j in range(moved, prompts + 1)) / 2**prompts
    assert check.chance_under_tolerance() == pytest.approx(tail)
    note = check.silent_change()
    assert not check.changed and note.startswith(f"speculation moved {moved} of {prompts} answers")
    assert note.endswith(f"{tail:.0%} of the time; a veto needs {needs} of {prompts}")
    at_veto = dataclasses.replace(check, identical=prompts - needs)
    assert at_veto.changed and at_veto.silent_change() == ""
    # Where the baseline itself differs launch to launch, floating point moves answers too: no such note.
    assert dataclasses.replace(check, floor=fidelity.Floor(prompts, prompts - 1)).silent_change() == ""


def test_a_structured_answer_is_read_the_same_whatever_its_fence_says() -> None:
    """One fence and one JSON-key pattern for the health check and the output check. Where the two copies
    disagreed, `health`'s was right: `fidelity`'s key pattern took no escapes, so a cut answer's field whose key
    holds an escaped quote was not compared (the fence tag never mattered: the body is read from its first
    brace either way)."""
    body = '{"name": "a \\"b\\"", "n": 3}'
    bare = fidelity.structured_answer(body)
    assert bare == {"name": 'a "b"', "n": 3}
    for tag in ("json", "jsonc", "JSON", "", "json5"):
        assert fidelity.structured_answer(f"Here:\n```{tag}\n{body}\n```\nDone.") == bare, tag
    cut = '```json\n{"say \\"hi\\"": "yes", "count": 12, "note": "unfinish'
    assert fidelity.structured_answer(cut) == [("count", "12"), ('say \\"hi\\"', '"yes"')]
