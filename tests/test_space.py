"""Space files: parsing, clear errors, and conditional suggestions through Optuna."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import optuna
import pytest
import yaml

from sweep.core.errors import UserError
from sweep.core.stats import MIN_GAIN
from sweep.engines.values import PromptForm, RequestSettings
from sweep.probes.settings import ProbeSettings
from sweep.space import ConfirmSettings, load_space, parse_space
from sweep.space.shipped import example_paths

REPO = Path(__file__).resolve().parents[1]

SPACE = """
engine: llamacpp
fixed: {ctx-size: 4096, parallel: 1}
params:
  spec-type: {choices: [ngram-simple, ngram-mod]}
  spec-ngram-simple-size-n: {int: [2, 12], when: {spec-type: ngram-simple}}
  spec-ngram-mod-n-min: {int: [8, 48], step: 8, when: {spec-type: ngram-mod}}
  spec-draft-p-min: {float: [0.0, 0.5], when_not: {spec-type: ngram-mod}}
workloads:
  - {class: code}
  - {class: tool, context: [null, 2048], streams: [1, 2]}
  - {name: mine, prompts: ["one", "two"]}
probe: {repeats: 2, max_tokens: 32}
trials: 5
"""


def test_parse_expands_context_and_stream_variants(tmp_path: Path) -> None:
    space = parse_space(yaml.safe_load(SPACE), tmp_path)
    assert space.workload_keys == ["code", "tool", "tool/2streams", "tool@2k", "tool@2k/2streams", "mine"]
    assert space.objective_names == space.workload_keys
    assert (space.probe.repeats, space.probe.request.max_tokens, space.trials) == (2, 32, 5)
    assert space.launch_params({"spec-type": "ngram-mod"}) == {
        "ctx-size": 4096,
        "parallel": 1,
        "spec-type": "ngram-mod",
    }


def test_a_space_that_says_nothing_takes_each_default_from_its_one_home(tmp_path: Path) -> None:
    """The minimum gain, the confirmation, the repeats and the sampling seed are stated once, as the value
    objects' defaults (once written again as literals in the parser); a partial confirmation keeps the rest."""
    data = yaml.safe_load(SPACE)
    del data["probe"]
    data["workloads"] = data["workloads"][:2]  # "mine" holds 2 prompts, fewer than the default repeats
    space = parse_space(data, tmp_path)
    assert space.confirm == ConfirmSettings() and space.confirm.min_gain == MIN_GAIN
    assert space.probe.repeats == ProbeSettings().repeats
    assert space.probe.request.seed == RequestSettings().seed
    data["confirm"] = {"min_gain": 0.05}
    assert parse_space(data, tmp_path).confirm == ConfirmSettings(min_gain=0.05)


def test_conditional_parameters_follow_their_condition(tmp_path: Path) -> None:
    space = parse_space(yaml.safe_load(SPACE), tmp_path)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen = set()
    for _ in range(30):
        trial = study.ask()
        params = space.suggest(trial)
        study.tell(trial, 0.0)
        seen.add(params["spec-type"])
        if params["spec-type"] == "ngram-mod":
            assert set(params) == {"spec-type", "spec-ngram-mod-n-min"}
            assert params["spec-ngram-mod-n-min"] in {8, 16, 24, 32, 40, 48}
        else:
            assert set(params) == {"spec-type", "spec-ngram-simple-size-n", "spec-draft-p-min"}
            assert 2 <= params["spec-ngram-simple-size-n"] <= 12
    assert seen == {"ngram-simple", "ngram-mod"}


def test_single_objective_workload(tmp_path: Path) -> None:
    data = yaml.safe_load(SPACE) | {"objective": {"workload": "tool@2k"}}
    assert parse_space(data, tmp_path).objective_names == ["tool@2k"]
    with pytest.raises(UserError, match="no workload 'nope'"):
        parse_space(data | {"objective": {"workload": "nope"}}, tmp_path)


def test_open_loop_workloads_are_keyed_by_their_rate_and_arrive_on_a_seeded_clock(tmp_path: Path) -> None:
    data = yaml.safe_load(SPACE) | {
        "workloads": [
            {"class": "prose", "rate": [0.5, 2]},
            {"class": "code", "rate": 4, "arrivals": "constant", "duration": 2.2},
        ],
        "latency_limits": {"ttft_p90_s": 1.5},
    }
    space = parse_space(data, tmp_path)
    assert space.workload_keys == ["prose/0.5rps", "prose/2rps", "code/4rps"]
    slow, fast, even = space.workloads
    assert (slow.requests, fast.requests, even.requests) == (8, 8, 9)  # the default; ceil(4/s x 2.2 s)
    assert space.probe.latency_limits == {"ttft_p90_s": 1.5}
    assert even.send_offsets(0) == pytest.approx([i / 4 for i in range(9)])
    # Poisson: the same arrivals in every trial (seeded by the family and the repeat), others in the next
    # repeat; at another rate the same pattern, scaled (common random numbers: runs differ by their rate alone).
    assert fast.send_offsets(1) == fast.send_offsets(1) != fast.send_offsets(2)
    assert slow.send_offsets(1) == pytest.approx([4 * t for t in fast.send_offsets(1)])
    gaps = [b - a for r in range(200) for a, b in itertools.pairwise(fast.send_offsets(r))]
    assert statistics.mean(gaps) == pytest.approx(0.5, rel=0.1)  # 1 / rate
    assert statistics.stdev(gaps) == pytest.approx(0.5, rel=0.15)  # exponential: the sd is the mean
    # Each request its own prompt: repeats x requests of them, the next workload on the list after it.
    used = [w.prompt_index(r, i) for w in (slow, fast) for r in range(2) for i in range(w.per_repeat)]
    assert len(used) == len(set(used)) == 32


def test_a_capacity_objective_searches_each_open_loop_workload_over_its_range(tmp_path: Path) -> None:
    data = yaml.safe_load(SPACE) | {
        "workloads": [{"class": "code"}, {"class": "prose", "rate": [8, 0.5, 2], "requests": 6}],
        "objective": {"capacity": {"steps": 2}},
        "latency_limits": {"ttft_p90_s": 2.0},
    }
    space = parse_space(data, tmp_path)
    assert space.workload_keys == ["code", "prose/capacity"] and space.objective_names == ["prose/capacity"]
    prose = space.workloads[1]
    # At most: both ends, two steps, and two runs again near a limit.
    assert (prose.capacity, prose.capacity_steps, prose.capacity_probes) == ((0.5, 8), 2, 6)
    assert space.search.value == "tpe"  # the surface model predicts decode t/s, not a capacity
    # Every rate sends one slice of prompts (runs differ by their rate alone); a run again near a limit sends
    # the next: two of them at most, three slices of 6.
    first = [prose.at_rate(rate, 0).prompt_index(0, 0) for rate in (0.5, 8, 2)]
    assert first == [prose.first_prompt] * 3
    runs = [prose.at_rate(4, prompts) for prompts in range(3)]
    used = [run.prompt_index(0, i) for run in runs for i in range(run.requests)]
    assert len(used) == len(set(used)) == prose.prompts_needed(repeats=3) == 18
    assert runs[2].key == "prose/4rps" and runs[2].capacity is None


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"objective": "capacity"}, "no workload arrives open loop over a range"),
        ({"objective": "capacity", "workloads": [{"class": "code", "rate": 1}]}, "names one rate"),
        (
            {"objective": "capacity", "workloads": [{"class": "code", "rate": [1, 4]}]},
            "sets no latency limit",
        ),
        (
            {
                "objective": "capacity",
                "search": "model",
                "workloads": [{"class": "code", "rate": [1, 4]}],
                "latency_limits": {"ttft_p90_s": 1.0},
            },
            "is model, which predicts decode t/s",
        ),
        (
            {"objective": {"capacity": {"steps": 40}}, "workloads": [{"class": "code", "rate": [1, 4]}]},
            "out of range",
        ),
        (
            {
                "objective": "capacity",
                "workloads": [{"class": "code", "rate": [1, 4], "requests": 14}],
                "latency_limits": {"ttft_p90_s": 1.0},
            },
            r"needs 42 different prompts \(requests x 3: every rate's, and 2 runs again near a limit\)",
        ),
    ],
)
def test_bad_capacity_objectives_are_one_line(tmp_path: Path, patch: dict[str, object], message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_space(yaml.safe_load(SPACE) | patch, tmp_path)


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ({"class": "code", "rate": 1, "streams": 2}, "has both `streams`"),
        ({"class": "code", "rate": 1, "requests": 4, "duration": 5}, "has both `requests` and `duration`"),
        ({"class": "code", "arrivals": "poisson"}, "without a rate"),
        ({"class": "code", "rate": 1, "arrivals": "bursty"}, "cannot be 'bursty'"),
        ({"class": "code", "rate": 0}, "out of range"),
        ({"class": "code", "rate": 1, "requests": 1}, "out of range"),
        ({"class": "code", "rate": 1, "requests": 30}, r"needs 60 different prompts \(repeats x requests\)"),
    ],
)
def test_bad_open_loop_workloads_are_one_line(
    tmp_path: Path, workload: dict[str, object], message: str
) -> None:
    with pytest.raises(UserError, match=message):
        parse_space(yaml.safe_load(SPACE) | {"workloads": [workload]}, tmp_path)


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"engin": "llamacpp"}, "unknown key 'engin'"),
        ({"workloads": [{"class": "poetry"}]}, "unknown workload class 'poetry'"),
        ({"workloads": []}, "must be a non-empty list"),
        ({"params": {"x": {"int": [5, 1]}}}, "bad range"),
        ({"params": {"x": {"int": [1, 5], "choices": [1]}}}, "exactly one of"),
        ({"objective": "fastest"}, "cannot be 'fastest'"),
        ({"workloads": [{"name": "a", "file": "missing.jsonl"}]}, "does not exist"),
    ],
)
def test_bad_spaces_say_what_and_where(tmp_path: Path, patch: dict[str, object], message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_space(yaml.safe_load(SPACE) | patch, tmp_path)


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("engine: llamacpp\nparams:\n  spec-type: {choices: [a, b]\nworkloads: []\n")
    with pytest.raises(UserError, match=r"not valid YAML at line \d+") as err:
        load_space(path)
    assert err.value.fix == "fix the YAML syntax there"


def test_user_workload_files(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text('{"prompt": "alpha"}\n{"prompt": "beta"}\n')
    (tmp_path / "p.yaml").write_text("- gamma\n- prompt: delta\n")
    (tmp_path / "empty.yaml").write_text("{}\n")
    data = yaml.safe_load(SPACE) | {
        "workloads": [{"name": "j", "file": "p.jsonl"}, {"name": "y", "file": "p.yaml"}]
    }
    space = parse_space(data, tmp_path)
    assert [w.prompts for w in space.workloads] == [("alpha", "beta"), ("gamma", "delta")]
    with pytest.raises(UserError, match="holds no prompts"):
        parse_space(data | {"workloads": [{"name": "e", "file": "empty.yaml"}]}, tmp_path)


def test_one_workload_per_category_of_a_question_file(tmp_path: Path) -> None:
    """`category: all` makes one workload per category a question file gives (MT-Bench, Spec-Bench), in its
    order; a list keeps those named; a category the file lacks is refused naming the ones it has."""
    rows = [
        {"question_id": i, "category": c, "turns": [f"{c} question {i}"]} for i, c in enumerate("ababcabc")
    ]
    (tmp_path / "question.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    one = {"name": "mt", "file": "question.jsonl"}
    space = parse_space(yaml.safe_load(SPACE) | {"workloads": [one | {"category": "all"}]}, tmp_path)
    assert space.workload_keys == ["mt-a", "mt-b", "mt-c"]
    assert space.workloads[1].prompts == ("b question 1", "b question 3", "b question 6")
    assert space.workloads[1].source.endswith("8 records, 3 prompts kept of the category b")
    space = parse_space(yaml.safe_load(SPACE) | {"workloads": [one | {"category": ["c", "a"]}]}, tmp_path)
    assert [(w.key, len(w.prompts)) for w in space.workloads] == [("mt-c", 2), ("mt-a", 3)]
    with pytest.raises(UserError, match=r"no prompt of the category 'z'; its categories: a, b, c"):
        parse_space(yaml.safe_load(SPACE) | {"workloads": [one | {"category": "z"}]}, tmp_path)
    (tmp_path / "plain.jsonl").write_text('{"prompt": "alpha"}\n')
    plain = {"name": "p", "file": "plain.jsonl", "category": "all"}
    with pytest.raises(UserError, match="gives its prompts no category"):
        parse_space(yaml.safe_load(SPACE) | {"workloads": [plain]}, tmp_path)


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.name)
def test_shipped_spaces_parse(path: Path) -> None:
    assert load_space(path).workloads


def test_covering_start_up_trials_span_methods_and_depths(tmp_path: Path) -> None:
    text = """
engine: sglang
params:
  speculative-algorithm: {choices: [NEXTN, EAGLE]}
  speculative-num-steps: {int: [1, 7], step: 2}
  speculative-eagle-topk: {choices: [1, 4]}
  speculative-num-draft-tokens: {int: [2, 16], when: {speculative-eagle-topk: [4]}}
  speculative-draft-model-path: {choices: [a, b], when: {speculative-algorithm: EAGLE}}
workloads: [{class: code}]
"""
    space = parse_space(yaml.safe_load(text), tmp_path)
    found = space.covering(100)
    # Methods: the algorithm and the top-k (each conditions another parameter): 4 combinations x shallow/deep.
    assert len(found) == 8
    assert found[0] == {
        "speculative-algorithm": "NEXTN",
        "speculative-num-steps": 1,
        "speculative-eagle-topk": 1,
    }
    deep_tree = {
        "speculative-algorithm": "EAGLE",
        "speculative-num-steps": 7,
        "speculative-eagle-topk": 4,
        "speculative-num-draft-tokens": 16,
        "speculative-draft-model-path": "b",
    }
    assert deep_tree in found and found.index(deep_tree) >= 4  # shallow ones first
    assert space.covering(3) == found[:3] and space.covering(0) == []


def test_a_workload_names_its_stop_sequences_and_whether_it_copies(tmp_path: Path) -> None:
    data = yaml.safe_load(SPACE)
    data["workloads"] = [{"class": "tool", "stop": ["\n\n", "</quote>"], "copies": True}, {"class": "code"}]
    tool, code = parse_space(data, tmp_path).workloads[:2]
    assert (tool.stop, tool.copies) == (("\n\n", "</quote>"), True)
    assert (code.stop, code.copies) == ((), None)  # None: read from each prompt's words
    data["workloads"] = [{"class": "tool", "stop": "\n\n"}]
    assert parse_space(data, tmp_path).workloads[0].stop == ("\n\n",)
    for bad, message in (
        ({"stop": 5}, r"workloads\[0\]\.stop: 5 is not a list of up to 4 non-empty strings"),
        ({"stop": [""]}, r"workloads\[0\]\.stop: \[''\] is not a list"),
        ({"copies": "yes"}, r"workloads\[0\]\.copies: 'yes' is not true or false"),
    ):
        data["workloads"] = [{"class": "tool", **bad}]
        with pytest.raises(UserError, match=message):
            parse_space(data, tmp_path)


def test_the_copy_heavy_classes_end_with_their_task_and_a_workload_may_say_otherwise(tmp_path: Path) -> None:
    data = yaml.safe_load(SPACE)
    data["workloads"] = [
        {"class": "edit"},
        {"class": "summary"},
        {"class": "quote", "stop": "</q>", "copies": False, "stops": False},
        {"class": "prose"},
    ]
    edit, summary, quote, prose = parse_space(data, tmp_path).workloads[:4]
    assert (edit.stops, edit.copies, edit.stop_in(PromptForm.COMPLETION)) == (True, True, ("```",))
    assert edit.stop_in(PromptForm.CHAT) == ()  # an instruct model ends on its own; a fence opens its answer
    assert (summary.stops, summary.copies) == (True, None)
    assert (quote.stops, quote.copies) == (False, False)
    assert quote.stop_in(PromptForm.CHAT) == ("</q>",) and quote.stop_in(PromptForm.COMPLETION) == (
        "</q>",
        "\n\n",
    )
    assert (prose.stops, prose.stop_in(PromptForm.COMPLETION)) == (
        False,
        (),
    )  # free-form: no end to hold it to
    # Each form is its own file: the completion form ends where the copy begins, the chat form asks for it.
    assert edit.prompt(0, PromptForm.COMPLETION).endswith("```python\n")
    assert "Rename the parameter" in edit.prompt(0, PromptForm.CHAT)
    assert edit.prompt(0, PromptForm.CHAT) not in edit.continuations


def test_a_workload_sets_its_task_length_or_takes_each_recorded_replys(tmp_path: Path) -> None:
    data = yaml.safe_load(SPACE)
    data["probe"] = {"max_tokens": 256}
    share = [
        {"conversations": [{"from": "human", "value": f"Ask {i}"}, {"from": "gpt", "value": f"Reply {i}"}]}
        for i in range(4)
    ]
    (tmp_path / "share.json").write_text(json.dumps(share))
    data["workloads"] = [
        {"name": "chat", "file": "share.json", "max_tokens": "reply"},
        {"class": "edit", "max_tokens": 200},
        {"class": "code"},
    ]
    chat, edit, code = parse_space(data, tmp_path).workloads[:3]
    assert chat.reply_tokens and chat.reply(1) == "Reply 1" and chat.max_tokens is None
    assert (edit.max_tokens, edit.reply_tokens, code.max_tokens) == (200, False, None)
    (tmp_path / "plain.jsonl").write_text(json.dumps({"prompt": "def f():"}))
    for bad, message in (
        ({"class": "edit", "max_tokens": 300}, r"workloads\[0\]\.max_tokens: .*300"),
        ({"class": "edit", "max_tokens": "reply"}, r"workloads\[0\]\.max_tokens: is `reply`, but"),
        ({"name": "p", "file": "plain.jsonl", "max_tokens": "reply"}, r"hold no recorded replies"),
    ):
        data["workloads"] = [bad]
        with pytest.raises(UserError, match=message):
            parse_space(data, tmp_path)


def test_the_plan_prices_each_workload_at_its_own_task_length(tmp_path: Path) -> None:
    from sweep.engines import ServerSetup
    from sweep.engines.llamacpp import LlamaCppEngine
    from sweep.run.plan import ASSUMED_DECODE_TPS, assumed_launch_time

    data = yaml.safe_load(SPACE)
    data["probe"] = {"repeats": 2, "max_tokens": 256, "warmup": False}
    engine = LlamaCppEngine(ServerSetup(["llama-server"], "m.gguf"))
    data["workloads"] = [{"class": "edit"}]
    whole = assumed_launch_time(parse_space(data, tmp_path), engine).probe_s
    data["workloads"] = [{"class": "edit", "max_tokens": 64}]
    short = assumed_launch_time(parse_space(data, tmp_path), engine).probe_s
    assert whole - short == pytest.approx(2 * (256 - 64) / ASSUMED_DECODE_TPS)
