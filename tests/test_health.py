"""Output health: the rules that tell text from loops, echoes and template tokens, on answers real servers gave."""

from __future__ import annotations

from sweep.answers.health import (
    DEGENERATE_SHARE,
    OutputHealth,
    Shape,
    Symptom,
    copies_input,
    distinct_share,
    judge,
    loop_tail,
    pieces,
    shape_of,
    symptoms,
    total,
    value_pieces,
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
    assert Symptom.RUNAWAY in judge(CODE, ran_out=True, should_stop=True).symptoms
    assert judge(CODE, ran_out=True, should_stop=False).symptoms == ()
    assert judge(CODE, ran_out=False, should_stop=True).symptoms == ()


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


# Structured answers a person would call structured: keys, header rows and markup repeat by design.
TABLE = "| id | customer | total |\n|---|---|---|\n" + "\n".join(
    f"| B-20{i}1 | {name} | {12.5 + 3 * i:.2f} |"
    for i, name in enumerate(("Mei Lin", "Sam Okoro", "Hana Novak", "Ravi Rao", "Ines Silva", "Olga Berg"))
)
SAME_ROW = "| id | customer | total |\n|---|---|---|\n" + "| B-2011 | Mei Lin | 12.50 |\n" * 6
YAML_ORDERS = "".join(
    f"- id: B-20{i}1\n  customer: {name}\n  city: {city}\n  status: shipped\n"
    for i, (name, city) in enumerate((("Mei Lin", "Tainan"), ("Sam Okoro", "Accra"), ("Ravi Rao", "Pune")))
)
CSV_ORDERS = "id,customer,city,total\n" + "\n".join(
    f"B-20{i}1,{name},{city},{9.5 * (i + 1):.2f}"
    for i, (name, city) in enumerate((("Mei Lin", "Tainan"), ("Sam Okoro", "Accra"), ("Ravi Rao", "Pune")))
)


def test_structured_answers_are_judged_by_their_values() -> None:
    assert [shape_of(t) for t in (JSON_COPY, TABLE, YAML_ORDERS, CSV_ORDERS, PROSE, CODE)] == [
        Shape.JSON,
        Shape.TABLE,
        Shape.YAML,
        Shape.CSV,
        Shape.TEXT,
        Shape.TEXT,
    ]
    for text in (TABLE, YAML_ORDERS, CSV_ORDERS):
        assert symptoms(text) == (), text[:60]
    # A table that invents the same row is still repetitive, and a loop.
    assert {Symptom.REPETITIVE, Symptom.LOOP} <= set(symptoms(SAME_ROW))
    assert "| id |" not in " ".join(value_pieces(TABLE, Shape.TABLE))  # the header is markup


PARAGRAPH = (
    "The river runs through the old town, past the mill and the church, and under three stone bridges that\n"
    "the Romans built. In spring it floods the meadows by the school, and the children watch from the wall."
)
QUOTE_PROMPT = f"3f9a0c12be77\nA Guide to Weirton\n\n{PARAGRAPH}\n\nQuote the paragraph above exactly:\n"


def test_a_quote_is_the_task_not_an_echo() -> None:
    assert copies_input(QUOTE_PROMPT) and not copies_input("Write a story about a lighthouse.")
    assert symptoms(PARAGRAPH, QUOTE_PROMPT, "3f9a0c12be77") == ()
    # The nonce is never part of the task; and where the workload says it does not copy (`copies: false`), the
    # prompt's last line in the answer is an echo again.
    assert Symptom.ECHO in symptoms(PARAGRAPH + "\n3f9a0c12be77", QUOTE_PROMPT, "3f9a0c12be77")
    asked = "Quote the paragraph above exactly: here it is."
    assert Symptom.ECHO in symptoms(asked, QUOTE_PROMPT, "3f9a0c12be77", copies=False)
    assert Symptom.ECHO not in symptoms(asked, QUOTE_PROMPT, "3f9a0c12be77")


def test_a_copy_task_answered_without_its_input_did_not_do_the_task() -> None:
    # What Gemma 3 270M and SmolLM2-135M wrote for built-in quote prompts: "." (then the stop sequence) and a
    # sentence about the document. Named a copy task (`copies: true`), neither holds any of its input.
    for answer in (".", 'The document is "Documentation" of a guide to Weirton.'):
        assert Symptom.UNCOPIED in symptoms(answer, QUOTE_PROMPT, "3f9a0c12be77", copies=True), answer
    # The quote, a quote inside a sentence, and an edit that changed one word all hold a run of the input.
    edited = PARAGRAPH.replace("three stone bridges", "four stone bridges")
    for answer in (PARAGRAPH, f"Here it is: {PARAGRAPH[:120]}", edited):
        assert Symptom.UNCOPIED not in symptoms(answer, QUOTE_PROMPT, "3f9a0c12be77", copies=True), answer
    # Read from the prompt's words alone (a translation asks to "translate"), the rule is not applied.
    translated = "Le fleuve traverse la vieille ville, passe le moulin et l'église."
    assert symptoms(translated, f"Translate to French:\n\n{PARAGRAPH}") == ()
    assert copies_input(f"Translate to French:\n\n{PARAGRAPH}")


def test_an_answer_that_does_its_task_then_runs_on_says_so() -> None:
    ran_on = PARAGRAPH + "\n\nA Guide to Weirton\n\nThe river runs through"  # the prompt's pattern again
    found = judge(ran_on, QUOTE_PROMPT, "3f9a0c12be77")
    assert found.symptoms == (Symptom.ECHO, Symptom.RAN_ON) and found.task_chars == len(PARAGRAPH) + 2
    chat = "Sure: the meadows flood in spring, and the children watch the river from the wall.<end_of_turn>\nuser"
    assert judge(chat).symptoms == (Symptom.TEMPLATE, Symptom.RAN_ON)
    health = OutputHealth.of([found.symptoms, (), found.symptoms], [170, 168])
    assert not health.healthy and health.ran_on == 2
    assert "~169 tokens (median), the task, then ran on" in health.describe()
    assert "`stop: [...]`" in health.describe() and "probe.max_tokens" in health.describe()
    assert OutputHealth.from_dict(health.to_dict()) == health


def test_loops_stay_loops() -> None:
    """A sentence said again and again after a healthy start did not do its task and stop: it loops."""
    for text in (SENTENCE_LOOP, SPACED_LOOP, TEMPLATE_LOOP):
        found = judge(text)
        assert Symptom.LOOP in found.symptoms and Symptom.RAN_ON not in found.symptoms
        assert found.task_chars is None
