"""Prompt files as people have them (ShareGPT, OpenAI chat, HumanEval/MBPP/Alpaca, MT-Bench), read by shape, gzip
looked through, a file cut short named by its byte offset, and a workload's selection of records."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from maintainers import make_prompts
from sweep.core.errors import UserError
from sweep.probes import datasets
from sweep.probes.datasets import Selection, load_dataset
from tests.conftest import specsweep_argv


def sharegpt(count: int) -> list[dict[str, object]]:
    """ShareGPT's records: an id and the conversation; every fifth one opens with the model's reply."""
    return [
        {
            "id": f"c{i}",
            "conversations": [
                {"from": "gpt" if i % 5 == 4 else "human", "value": f"Question number {i} about étoiles?"},
                {"from": "gpt", "value": f"Answer {i}."},
            ],
        }
        for i in range(count)
    ]


def test_sharegpt_gives_each_conversations_first_human_turn(tmp_path: Path) -> None:
    path = tmp_path / "ShareGPT_V3_unfiltered_cleaned_split.json"
    path.write_text(json.dumps(sharegpt(10), ensure_ascii=False, indent=1))
    found = load_dataset(path)
    assert found.shape == "ShareGPT" and (found.records, found.dropped) == (10, 2)
    assert found.prompts[:2] == ("Question number 0 about étoiles?", "Question number 1 about étoiles?")
    summary = f"{path.name}: ShareGPT, 10 records, 2 dropped, 8 prompts kept, 8 with a recorded reply"
    assert found.summary(path) == summary


def test_the_recorded_replies_stay_with_their_prompts_through_a_sample(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(sharegpt(30)))
    found = load_dataset(path, Selection(sample=7, seed=3))
    assert len(found.replies) == 7
    for prompt, reply in zip(found.prompts, found.replies, strict=True):
        assert reply == f"Answer {prompt.split()[2]}."  # "Question number 12 ..." answered by "Answer 12."
    chat = tmp_path / "chat.jsonl"
    rows = [
        [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there"}],
        [{"role": "user", "content": "Bye"}],
    ]
    chat.write_text("\n".join(json.dumps({"messages": m}) for m in rows))
    assert load_dataset(chat).replies == ("Hi there", "")  # a conversation with no reply yet has none
    plain = tmp_path / "HumanEval.jsonl"
    plain.write_text(json.dumps({"task_id": "t/0", "prompt": "def f():\n"}))
    assert load_dataset(plain).replies == ()


def test_a_file_cut_short_names_its_byte_offset_and_the_records_before_it(tmp_path: Path) -> None:
    whole = json.dumps(sharegpt(10), ensure_ascii=False).encode()
    cut_at = whole.index(b"Question number 7") + 5  # mid-string, as a partial download ends
    path = tmp_path / "sharegpt.json"
    path.write_bytes(whole[:cut_at])
    with pytest.raises(UserError) as refused:
        load_dataset(path)
    message = str(refused.value)
    record_seven = whole.index(b'{"id": "c7"')
    offset = int(message.split("at byte ")[1].split()[0])
    assert record_seven < offset <= cut_at and f"it holds {cut_at} bytes" in message, message
    assert "after 7 complete records" in message and "partial: true" in refused.value.fix
    kept = load_dataset(path, Selection(partial=True))
    assert len(kept.prompts) == 6 and kept.records == 7  # record 4 opens with the reply


def test_a_large_file_is_streamed_holding_only_the_prompts_it_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each record is given up once its prompt is taken: reading 8 MB of conversations whose later turns are long,
    64 KiB at a time, holds far less than the file at its peak (the text is never read whole)."""
    monkeypatch.setattr(datasets, "CHUNK_CHARS", 1 << 16)
    long_turns = [{"from": w, "value": "x" * 4000} for w in ("human", "gpt")]
    rows = [
        {"id": i, "conversations": [*sharegpt(i + 1)[i]["conversations"], *long_turns]}  # type: ignore[list-item]
        for i in range(1000)
    ]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(rows, ensure_ascii=False))
    tracemalloc.start()
    try:
        found = load_dataset(path, Selection(sample=10, seed=1))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found.records == 1000 and found.dropped == 200 and len(found.prompts) == 10
    assert peak < path.stat().st_size / 4, (peak, path.stat().st_size)


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_records_split_across_chunks_read_as_whole_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """A record, a number, a line or a multi-byte character cut by a chunk's end is read on, never taken for a cut
    file; a cut file's byte offset is the same however it was read."""
    whole = json.dumps([*sharegpt(6), "a prompt of its own", 12345], ensure_ascii=False, indent=1).encode()
    lines = "\r\n".join(json.dumps(r, ensure_ascii=False) for r in sharegpt(6)).encode()
    files = {"whole.json": whole, "lines.jsonl": lines, "cut.json": whole[: whole.index(b"number 4") + 3]}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    expected = {name: _read(tmp_path / name) for name in files}
    monkeypatch.setattr(datasets, "CHUNK_CHARS", chunk)
    assert {name: _read(tmp_path / name) for name in files} == expected
    assert expected["whole.json"].prompts[-1] == "a prompt of its own"  # the number is no prompt: dropped
    assert (expected["whole.json"].records, expected["whole.json"].dropped) == (8, 2)  # and record 4
    assert "after 4 complete records" in str(expected["cut.json"])


def _read(path: Path) -> Any:
    try:
        return load_dataset(path)
    except UserError as exc:
        return str(exc)


def test_a_gzip_file_cut_short_gives_the_records_before_the_cut(tmp_path: Path) -> None:
    """A partial download of a `.gz` is inflated as far as it goes: the cut is named like a plain file's, and
    `partial: true` uses the complete records; gzip members one after another (`cat a.gz b.gz`) read as one."""
    text = "".join(json.dumps({"prompt": f"question {i}: {'why ' * (i % 40)}"}) + "\n" for i in range(4000))
    packed = gzip.compress(text.encode())
    cut = tmp_path / "questions.jsonl.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(UserError, match=r"cut off or malformed at byte \d+ .* complete records") as refused:
        load_dataset(cut)
    complete = int(str(refused.value).split("after ")[1].split()[0])
    assert 0 < complete < 4000
    kept = load_dataset(cut, Selection(partial=True))
    assert kept.prompts == tuple(json.loads(line)["prompt"] for line in text.splitlines()[:complete])
    joined = tmp_path / "joined.jsonl.gz"
    joined.write_bytes(gzip.compress(b'{"prompt": "a"}\n') + gzip.compress(b'{"prompt": "b"}\n'))
    assert load_dataset(joined).prompts == ("a", "b")
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(packed[:10] + b"not deflate at all" * 8)
    with pytest.raises(UserError, match="is a broken gzip file"):
        load_dataset(broken)


def test_a_line_holds_its_record_whatever_separators_its_strings_hold(tmp_path: Path) -> None:
    """JSON Lines end at a newline alone: a string may hold a line separator (U+2028) unescaped, and a byte
    offset counts a line's bytes, not its characters."""
    path = tmp_path / "lines.jsonl"
    path.write_text(
        json.dumps({"prompt": "one\u2028two"}, ensure_ascii=False) + '\n{"prompt": "étoile", "x": }\n'
    )
    with pytest.raises(UserError) as refused:
        load_dataset(path)
    first_line = len((json.dumps({"prompt": "one\u2028two"}, ensure_ascii=False) + "\n").encode())
    before_the_fault = len('{"prompt": "étoile", "x": '.encode())  # é is two bytes
    assert f"at byte {first_line + before_the_fault} " in str(refused.value)
    assert "after 1 complete records" in str(refused.value)
    assert load_dataset(path, Selection(partial=True)).prompts == ("one\u2028two",)


def test_gzip_chat_jsonl_and_prompt_records_are_read_as_they_come(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl.gz"
    rows = [
        {"messages": [{"role": "user", "content": f"Hello {i}"}, {"role": "assistant", "content": "Hi"}]}
        for i in range(3)
    ]
    chat.write_bytes(gzip.compress("\n".join(json.dumps(r) for r in rows).encode()))
    assert load_dataset(chat).prompts == ("Hello 0", "Hello 1", "Hello 2")
    assert load_dataset(chat).shape == "OpenAI chat"
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                {"task_id": "HumanEval/0", "prompt": "def add(a, b):\n    "},
                {"task_id": 2, "text": "Write a function to find the shared elements of two lists."},
                {"instruction": "Translate to French.", "input": "Good morning"},
                {"question": "What is 2 + 2?"},
            )
        )
    )
    assert load_dataset(mixed).prompts == (
        "def add(a, b):\n    ",
        "Write a function to find the shared elements of two lists.",
        "Translate to French.\n\nGood morning",
        "What is 2 + 2?",
    )
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"prompt": "a"}\n{"prompt": "b"\n')
    with pytest.raises(UserError, match=r"cut off or malformed at byte 31 .* after 1 complete records"):
        load_dataset(broken)


def test_a_workload_keeps_a_category_a_sample_and_a_length(tmp_path: Path) -> None:
    questions = tmp_path / "question.jsonl"
    categories = ("writing", "coding", "math")
    questions.write_text(
        "\n".join(
            json.dumps(
                {"question_id": i, "category": categories[i % 3], "turns": [f"{'x' * i} turn", "next"]}
            )
            for i in range(30)
        )
    )
    coding = load_dataset(questions, Selection(category="coding"))
    assert coding.shape == "MT-Bench / Spec-Bench questions" and len(coding.prompts) == 10
    sample = load_dataset(questions, Selection(sample=5, seed=3))
    assert len(sample.prompts) == 5 and sample == load_dataset(questions, Selection(sample=5, seed=3))
    assert sample != load_dataset(questions, Selection(sample=5, seed=4))
    short = load_dataset(questions, Selection(max_chars=10))
    assert short.prompts and all(len(p) <= 10 for p in short.prompts)
    with pytest.raises(UserError, match="no prompt between min_chars and max_chars"):
        load_dataset(questions, Selection(min_chars=1000))


@pytest.mark.server
def test_a_space_reads_a_dataset_and_refuses_a_cut_one_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "sharegpt.json"
    data.write_text(json.dumps(sharegpt(40)))
    space = tmp_path / "space.yaml"
    space.write_text(
        "engine: sglang\n"
        f'server: {{launcher: ["{sys.executable}", -m, sweep.sim], model: /models/q}}\n'
        "params: {speculative-algorithm: {choices: [NGRAM]}}\n"
        "workloads: [{name: chat, file: sharegpt.json, sample: 6, seed: 1}]\nprobe: {repeats: 2}\ntrials: 2\n"
    )
    argv = specsweep_argv("plan", "--space", str(space), "--runs", str(tmp_path / "runs"))
    plan = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr
    assert (
        "workload chat: sharegpt.json: ShareGPT, 40 records, 8 dropped, 6 prompts kept, 6 with a"
        in plan.stdout
    )
    data.write_bytes(data.read_bytes()[:-40])
    refused = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "is cut off or malformed at byte" in refused.stderr and "complete records" in refused.stderr


def baseline_requests(tmp_path: Path, records: list[Any], workloads: str, probe: str) -> list[dict[str, Any]]:
    """The requests a baseline launch on the simulator sent for `workloads` over `records` (as share.json)."""
    (tmp_path / "share.json").write_text(json.dumps(records))
    space = tmp_path / "space.yaml"
    space.write_text(
        "engine: sglang\n"
        f'server: {{launcher: ["{sys.executable}", -m, sweep.sim, --sim-time-scale, "0.002"], model: /models/q}}\n'
        f"params: {{speculative-algorithm: {{choices: [NGRAM]}}}}\nworkloads: {workloads}\nprobe: {probe}\n"
        "trials: 1\nconfirm: {launches: 0}\n"
    )
    argv = specsweep_argv("run", "--space", str(space), "--runs", str(tmp_path / "runs"), "--study", "b")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "runs" / "b" / "trials" / "0" / "requests.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.server
def test_each_request_is_held_to_its_recorded_replys_length_in_the_servers_tokens(tmp_path: Path) -> None:
    """`max_tokens: reply`, as vLLM's ShareGPT benchmark sends: a request's limit is its prompt's recorded reply,
    counted by the served model's tokenizer (the simulator's /tokenize), no more than the probe's max_tokens."""
    from sweep.sim.text import tokenize

    replies = [" ".join(["word"] * n) for n in (3, 9, 20, 400)]
    rows = [
        {"conversations": [{"from": "human", "value": f"Tell me thing {i}."}, {"from": "gpt", "value": r}]}
        for i, r in enumerate(replies)
    ]
    workloads = "[{name: chat, file: share.json, max_tokens: reply}]"
    found = baseline_requests(tmp_path, rows, workloads, "{repeats: 4, max_tokens: 64, ignore_eos: true}")
    sent = sorted(r["completion_tokens"] for r in found)
    assert sent == sorted(min(64, len(tokenize(r))) for r in replies)


def test_a_conversation_up_to_its_last_user_turn_keeps_the_turns_before_it(tmp_path: Path) -> None:
    talk = [
        {"from": "human", "value": "What is a KV cache?"},
        {"from": "gpt", "value": "Keys and values kept per token."},
        {"from": "human", "value": "And why does it fill up?"},
        {"from": "gpt", "value": "Every token of every running request holds a slot."},
    ]
    odd = [{"from": "human", "value": "Hi"}, {"from": "tool", "value": "?"}]  # a role no chat template knows
    path = tmp_path / "share.json"
    path.write_text(json.dumps([{"conversations": talk}, {"conversations": odd}]))
    found = load_dataset(path, Selection(conversation=True))
    assert found.prompts == ("And why does it fill up?",) and found.dropped == 1
    assert [(t.role, t.content) for t in found.histories[0]] == [
        ("user", "What is a KV cache?"),
        ("assistant", "Keys and values kept per token."),
    ]
    assert found.replies == ("Every token of every running request holds a slot.",)
    assert load_dataset(path).prompts == ("What is a KV cache?", "Hi")  # the first turn alone, by default
    chat = tmp_path / "chat.jsonl"
    system = {"role": "system", "content": "Be brief."}
    chat.write_text(json.dumps({"messages": [system, {"role": "user", "content": "Why?"}]}))
    again = load_dataset(chat, Selection(conversation=True))
    assert again.prompts == ("Why?",) and again.histories[0][0].role == "system" and again.replies == ()


def test_a_conversation_goes_out_in_the_order_every_chat_template_takes(tmp_path: Path) -> None:
    """Turns alternate, opening with the user's (Gemma's template refuses anything else): a split ShareGPT
    record's opening reply is left out, and two turns of one role in a row are one turn."""
    split = [
        {"from": "gpt", "value": "...and that is the end of the first part."},
        {"from": "human", "value": "Go on."},
        {"from": "human", "value": "Shorter, please."},
        {"from": "gpt", "value": "Part two."},
        {"from": "human", "value": "Thanks. And part three?"},
    ]
    path = tmp_path / "split.json"
    path.write_text(json.dumps([{"conversations": split}]))
    found = load_dataset(path, Selection(conversation=True))
    assert found.prompts == ("Thanks. And part three?",) and found.dropped == 0
    assert [(t.role, t.content) for t in found.histories[0]] == [
        ("user", "Go on.\n\nShorter, please."),
        ("assistant", "Part two."),
    ]


@pytest.mark.server
def test_a_conversation_reaches_the_server_as_its_turns_and_stays_uncached(tmp_path: Path) -> None:
    """`conversation: true`: each request sends the turns before its prompt through the chat template, the
    nonce opening the first turn, so the server counts the whole conversation and serves none of it cached."""
    earlier = " ".join(["Tell me about the harbour, the boats and the weather there."] * 6)
    rows = [
        {
            "conversations": [
                {"from": "human", "value": f"{earlier} ({i})"},
                {"from": "gpt", "value": "The harbour is busy in the morning."},
                {"from": "human", "value": f"And in the evening {i}?"},
            ]
        }
        for i in range(6)
    ]
    workloads = "[{name: last, file: share.json}, {name: whole, file: share.json, conversation: true}]"
    rows_by: dict[str, list[dict[str, Any]]] = {"last": [], "whole": []}
    for row in baseline_requests(tmp_path, rows, workloads, "{repeats: 3, max_tokens: 16}"):
        rows_by[row["workload"]].append(row)
    assert all(r["status"] == "ok" for r in rows_by["whole"]), rows_by["whole"]
    # The first turn alone (60 words) against the whole conversation (its 60 words and two turns more).
    assert min(r["prompt_tokens"] for r in rows_by["whole"]) > max(
        r["prompt_tokens"] for r in rows_by["last"]
    )
    assert all(not r["cached_tokens"] for r in rows_by["whole"])  # the simulator's template has no header


def test_the_built_in_copy_heavy_prompts_can_be_made_again_from_the_tree(tmp_path: Path) -> None:
    """`make prompts` still runs on the current tree (its sources found by import name, so a module that moves
    is found where it went). Its output may differ from the committed files, which keep the prompts the
    published figures were measured on: the classes, their forms and their counts do not."""
    make_prompts.main(["--out", str(tmp_path)])
    made = sorted(p.name for p in tmp_path.glob("*.jsonl"))
    assert made == sorted(
        f"{name}.{form}.jsonl" for name in make_prompts.CLASSES for form in ("chat", "completion")
    )
    for name in made:
        rows = [json.loads(line) for line in (tmp_path / name).read_text(encoding="utf-8").splitlines()]
        committed = (make_prompts.OUT / name).read_text(encoding="utf-8").splitlines()
        form = name.split(".")[1]
        assert len(rows) == len(committed) == make_prompts.PER_FORM, name
        assert all(r["form"] == form and len(r["prompt"]) > 100 for r in rows), name
