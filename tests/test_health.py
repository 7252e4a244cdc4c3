"""Output health: the rules that tell text from loops, echoes and template tokens, on answers real servers gave."""

from __future__ import annotations

from sweep.health import (
    DEGENERATE_SHARE,
    OutputHealth,
    Symptom,
    distinct_share,
    loop_tail,
    pieces,
    symptoms,
    total,
)

# What the embedded llama-server (Gemma 3 270M, a base model) wrote under greedy decoding.
# Through llama-server's ChatML fallback (the GGUF has no chat template): the template continued, not answered.
TEMPLATE_LOOP = "<|im_start|>user\n<|im_end|>user\n" * 12
# Raw completion, a story opening: a sentence repeated to the token limit.
SENTENCE_LOOP = (
    "The bottle was full of water, and the smell of the sea was so strong that she could not see the bottom. "
    "The next day, she went to the sea to see if the water was still there. She was afraid that the smell "
    "would make her sick.\nThe next day, she went to the sea to see if the water was still there. She was "
    "afraid that the smell would make her sick.\nThe next day, she went to the sea to see if the water was "
    "still there. She"
)
# A repeat that differs only in line breaks: still a loop.
SPACED_LOOP = (
    "The earliest known bread was made from wheat, which was first domesticated in the Fertile Crescent. "
    "The earliest known bread was made from wheat, which was first domesticated in the Fertile Crescent.\n\n"
    "The earliest known bread was made from wheat, which was first domesticated in the Fertile Crescent. "
    "The earliest known bread was made from wheat, which was first"
)
CJK_LOOP = "他把鞋子放在地上，然后" + "把鞋子往上扔，然后" * 12
COUNTER_LIST = "".join(f"    let part = &str::parse_ipv4(parts[{i}]);\n" for i in range(9))
# Healthy answers: code that stops, a structured copy whose records share their keys, prose, Chinese prose.
CODE = (
    "        if end - start < 1:\n            merged.append(start)\n        else:\n"
    "            merged.append(end)\n    return merged\n"
)
JSON_COPY = (
    '  {"id": "B-2011", "customer": "Olga Berg", "city": "Tromso", "total": 27.10},\n'
    '  {"id": "B-2012", "customer": "Mei Lin", "city": "Tainan", "total": 63.90},\n'
    '  {"id": "B-2013", "customer": "Sam Okoro", "city": "Accra", "total": 18.40},\n'
    '  {"id": "B-2014", "customer": "Hana Novak", "city": "Ljubljana", "total": 71.00}\n]\n'
)
PROSE = (
    "of Sweden in 1626. It was built by the Swedish shipbuilder Svenska Sjöfarten and was built for the "
    "Swedish Royal Navy. It was the first ship to be built in the Swedish Navy.\n\nThe ship was built in "
    "the Swedish shipyard of Svenska Sjöfarten"
)
CHINESE = "是一种以茶树的叶子制成的饮料。绿茶不经过发酵，保留了茶叶的天然物质；红茶经过完全发酵，颜色较深，味道醇厚。乌龙茶介于两者之间。"


def test_loops_of_every_kind_are_found() -> None:
    for text in (TEMPLATE_LOOP, SENTENCE_LOOP, SPACED_LOOP, CJK_LOOP):
        assert Symptom.LOOP in symptoms(text), text[:60]


def test_text_reads_as_text() -> None:
    for text in (CODE, JSON_COPY, PROSE, CHINESE):
        assert symptoms(text) == (), text[:60]


def test_a_doubled_line_at_the_end_is_not_a_loop() -> None:
    text = PROSE + '\n  "type": "product",\n  "type": "product",\n'
    repeated, period = loop_tail(pieces(text))
    assert repeated >= period > 0  # it repeats: twice
    assert Symptom.LOOP not in symptoms(text)  # but not three times, nor over a quarter of the answer


def test_a_list_that_only_counts_is_repetitive() -> None:
    share = distinct_share(pieces(COUNTER_LIST))
    assert share is not None and share < 0.4
    assert Symptom.REPETITIVE in symptoms(COUNTER_LIST)
    assert distinct_share(pieces("short answer")) is None  # too few n-grams to judge


def test_template_tokens_echo_and_empty_answers() -> None:
    assert Symptom.TEMPLATE in symptoms("Sure!<end_of_turn>\n<start_of_turn>user")
    assert Symptom.TEMPLATE in symptoms("[/INST] ok </s>")
    assert Symptom.TEMPLATE not in symptoms("a <b>bold</b> claim, x<|y")
    prompt = "3f9a0c12be77\nWrite a Python function that merges overlapping intervals.\n"
    assert Symptom.ECHO in symptoms("Sure. 3f9a0c12be77 again", prompt, "3f9a0c12be77")
    assert Symptom.ECHO in symptoms("Write a Python function that merges overlapping intervals.", prompt)
    assert Symptom.ECHO not in symptoms("def merge(intervals):\n    return sorted(intervals)", prompt)
    assert symptoms("  \n ") == (Symptom.EMPTY,)


def test_running_to_the_limit_counts_only_where_answers_should_stop() -> None:
    assert Symptom.RUNAWAY in symptoms(CODE, ran_out=True, should_stop=True)
    assert symptoms(CODE, ran_out=True, should_stop=False) == ()
    assert symptoms(CODE, ran_out=False, should_stop=True) == ()


def test_a_workload_is_degenerate_from_one_answer_in_five() -> None:
    healthy = OutputHealth.of([(), (), (), (), ()])
    assert healthy.healthy and healthy.describe() == "5/5 answers read as text"
    one_of_three = OutputHealth.of([(), ("loop", "repetitive"), ()])
    assert one_of_three.degenerate == 1 and one_of_three.symptoms == {"loop": 1, "repetitive": 1}
    assert not one_of_three.healthy and one_of_three.share >= DEGENERATE_SHARE
    assert one_of_three.describe() == (
        "1/3 answers degenerate (loop 1: a span repeated to the end; repetitive 1: few distinct n-grams)"
    )
    added = total([healthy, None, one_of_three])
    assert added is not None and (added.answers, added.degenerate) == (8, 1)
    assert total([None]) is None
    assert OutputHealth.from_dict(one_of_three.to_dict()) == one_of_three
