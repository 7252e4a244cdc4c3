"""The request form follows the model: chat through its own template where it has one, text to continue where
it has none (a base model), unless a workload names its form; the report says which form and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweep.cli import main
from sweep.core.errors import UserError
from sweep.engines.llamacpp import LlamaCppEngine
from sweep.engines.values import PromptForm, ServerSetup
from sweep.model.files import chat_template
from sweep.probes.workloads import BUILTIN, BUILTIN_CLASSES, Workload, served_form
from sweep.sim.profile import DEFAULT_PROFILE
from sweep.space import parse_space
from tests.test_verdicts_sim import space, vllm_space


def base_profile(tmp_path: Path) -> Path:
    """The default simulator profile as a base model: no chat template."""
    data = yaml.safe_load(DEFAULT_PROFILE.read_text())
    data["model"]["chat_template"] = False
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def workloads_of(runs: Path, study: str) -> dict[str, dict[str, Any]]:
    record = json.loads((runs / study / "trials" / "0" / "record.json").read_text())
    found: dict[str, dict[str, Any]] = record["workloads"]
    return found


def test_every_builtin_class_has_both_forms_with_distinct_prompts() -> None:
    for cls in BUILTIN_CLASSES:
        texts = BUILTIN[cls].prompts(PromptForm.COMPLETION)
        # Enough for the default 3 repeats of several streams before a prompt comes twice.
        assert len(texts) >= 28 and len(set(texts)) == len(texts), cls
        assert len(set(BUILTIN[cls].prompts(PromptForm.CHAT))) >= 28, cls
        # No two continuations open alike: one request's text never feeds another's n-gram drafts.
        assert len({t[:60] for t in texts}) == len(texts), cls


def test_the_form_follows_the_model_unless_the_workload_names_one() -> None:
    assert served_form(None, True)[0] is PromptForm.CHAT
    form, why = served_form(None, False, "the GGUF has no tokenizer.chat_template")
    assert form is PromptForm.COMPLETION and "no chat template" in why and "GGUF" in why
    assert served_form(None, None)[0] is PromptForm.CHAT  # unknown: instructions, and the report says so
    assert served_form(PromptForm.CHAT, False) == (PromptForm.CHAT, "named by the workload")
    work = Workload("code", ("instruction",) * 4, continuations=("text",) * 2)
    assert (
        work.prompt(0, PromptForm.CHAT) == "instruction" and work.prompt(1, PromptForm.COMPLETION) == "text"
    )
    assert work.prompt_count == 2  # either form may be sent: the shorter list bounds the repeats


def test_a_space_names_a_workloads_form_and_says_what_is_wrong(tmp_path: Path) -> None:
    data = {
        "engine": "llamacpp",
        "workloads": [
            {"class": "code", "form": "completion"},
            {"name": "mine", "prompts": ["a", "b", "c"], "form": "chat", "stops": True},
        ],
    }
    found = parse_space(data, tmp_path)
    assert [(w.form, w.stops) for w in found.workloads] == [
        (PromptForm.COMPLETION, False),
        (PromptForm.CHAT, True),
    ]
    data["workloads"] = [{"class": "code", "form": "base"}]
    with pytest.raises(UserError, match=r"workloads\[0\]\.form: cannot be 'base'"):
        parse_space(data, tmp_path)
    data["workloads"] = [{"class": "code", "stops": "yes"}]
    with pytest.raises(UserError, match=r"workloads\[0\]\.stops"):
        parse_space(data, tmp_path)


def test_model_files_say_whether_there_is_a_chat_template(tmp_path: Path, gemma: Path) -> None:
    assert chat_template(gemma) == (False, "the GGUF has no tokenizer.chat_template")
    folder = tmp_path / "model"
    folder.mkdir()
    assert chat_template(folder)[0] is False
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    assert chat_template(folder) == (True, "tokenizer_config.json's chat_template")
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>"}))
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    assert chat_template(folder) == (True, "chat_template.jinja in the model folder")
    assert chat_template(tmp_path / "nowhere")[0] is None


def test_llama_server_serves_a_template_given_on_its_command_line(llama_server: Path, gemma: Path) -> None:
    plain = LlamaCppEngine(ServerSetup([str(llama_server)], str(gemma)))
    assert plain.served_template[0] is False and "fall back to ChatML" in plain.served_template[1]
    given = LlamaCppEngine(
        ServerSetup([str(llama_server)], str(gemma), extra_args=["--chat-template", "gemma"])
    )
    assert given.served_template == (True, "--chat-template in server.extra_args")


@pytest.mark.server
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_base_model_on_the_simulators_gets_continuations(engine: str, tmp_path: Path) -> None:
    """Each front end answers /tokenize with chat messages as its release does (400 without a template): the
    sweep sends continuations, says why, and a workload that insists on chat fails with the server's reason."""
    body = (
        "workloads: [{class: code}, {class: tool, form: chat}]\nprobe: {repeats: 2, max_tokens: 24}\n"
        "confirm: {launches: 0}\ntrials: 1\n"
    )
    profile = base_profile(tmp_path)
    if engine == "sglang":
        path = space(tmp_path, body, profile=profile)
    else:
        path = vllm_space(tmp_path, body, "--sim-time-scale", "0.002", "--sim-profile", str(profile))
    runs = tmp_path / "runs"
    assert main(["run", "--space", str(path), "--study", "base", "--runs", str(runs)]) == 0
    found = workloads_of(runs, "base")
    code, tool = found["code"], found["tool"]
    assert (code["status"], code["form"]) == ("ok", "completion")
    assert "no chat template" in code["form_reason"] and "HTTP 400" in code["form_reason"]
    assert code["output_health"]["answers"] == 2
    assert tool["status"] == "error" and "chat_template is not set" in tool["reason"]


def test_a_workload_file_names_its_form(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        "form: completion\nprompts: ['def add(a, b):', 'The river', 'Once upon']\n"
    )
    (tmp_path / "chat.jsonl").write_text(
        '{"prompt": "Summarise this.", "form": "chat"}\n{"prompt": "List it."}\n{"prompt": "Say it."}\n'
    )
    (tmp_path / "mixed.jsonl").write_text(
        '{"prompt": "a", "form": "chat"}\n{"prompt": "b", "form": "completion"}\n'
    )
    data: dict[str, Any] = {
        "engine": "llamacpp",
        "workloads": [{"name": "base", "file": "base.yaml"}, {"name": "chat", "file": "chat.jsonl"}],
    }
    found = parse_space(data, tmp_path)
    assert [w.form for w in found.workloads] == [PromptForm.COMPLETION, PromptForm.CHAT]
    data["workloads"] = [{"name": "mixed", "file": "mixed.jsonl"}]
    with pytest.raises(UserError, match="names the form chat and completion"):
        parse_space(data, tmp_path)
    data["workloads"] = [{"name": "base", "file": "base.yaml", "form": "chat"}]
    with pytest.raises(UserError, match="is 'chat' but its file names 'completion'"):
        parse_space(data, tmp_path)
