"""Space files: parsing, clear errors, and conditional suggestions through Optuna."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import yaml

from sweep.errors import UserError
from sweep.space import load_space, parse_space

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


@pytest.mark.parametrize("path", sorted((REPO / "search_spaces").glob("*.yaml")), ids=lambda p: p.name)
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
