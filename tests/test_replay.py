"""The n-gram drafters replayed on a baseline's tokens: the rule on token sequences, then held against the real
llama-server's own drafted and accepted counts, request by request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sweep.cli import main
from sweep.engines.llamacpp_replay import NgramSimple, replay_llamacpp
from sweep.replay import TokenIds


def test_ngram_simple_drafts_what_followed_the_latest_earlier_match() -> None:
    drafter = NgramSimple(size_n=2, size_m=3)
    # "5 6" came twice before: the later match (followed by 9 9 9) is the one drafted from.
    history = [0, 1, 5, 6, 7, 7, 7, 2, 5, 6, 9, 9, 9, 4, 5]
    assert drafter.draft(history, 6) == [9, 9, 9]
    assert drafter.draft(history, 3) == []  # "5 3" never came before
    # Fewer tokens after the match than the n-gram's own size: no draft (copy_max < size_n).
    assert drafter.draft([0, 1, 2, 3, 4, 5, 6, 8, 9, 8], 9) == []
    # No more than size_n + size_m + 1 tokens of history: no draft.
    assert drafter.draft(history[:6], 6) == []
    # Position 0 is never a match, as in the release.
    assert NgramSimple(size_n=1, size_m=2).draft([4, 8, 8, 1, 2], 4) == []


def test_the_verify_loop_keeps_the_drafts_prefix_that_the_answer_repeats() -> None:
    prompt = tuple(range(100, 120))
    # The answer copies four tokens of the prompt after "110 111", then departs from it.
    output = (110, 111, 112, 113, 114, 115, 7, 7, 7)
    ids = TokenIds(prompt, output)
    # 110 comes from the prefill; "119 110" has no earlier match; "110 111" has: 112..115 drafted and kept,
    # the target adds 7; "115 7" and "7 7" have none. One verify step of 4 drafted, 4 kept.
    replayed = replay_llamacpp(NgramSimple(size_n=2, size_m=4), ids, 64, 4096)
    assert [(s.drafted, s.accepted) for s in replayed.steps] == [(4, 4)]
    assert replayed.acceptance_length == 5.0
    # A draft is cut to the tokens still allowed less one: 9 allowed, 2 done, so 6 of the 8 drafted.
    capped = replay_llamacpp(NgramSimple(size_n=2, size_m=8), ids, 9, 4096)
    assert [(s.drafted, s.accepted) for s in capped.steps] == [(6, 4)]
    # A context with no room left (its length less the history less 2) drafts nothing.
    assert replay_llamacpp(NgramSimple(2, 4), ids, 64, len(prompt) + 2).steps == ()


# Baseline and ngram-simple at three settings, on the copy-heavy built-in classes as text to continue.
SETTINGS = ((3, 8), (2, 16), (5, 48))
SPACE = {
    "engine": "llamacpp",
    "server": {"startup_timeout": 120},
    "fixed": {"ctx-size": 4096, "parallel": 1, "threads": 2},
    "params": {
        "spec-type": {"choices": ["ngram-simple"]},
        "spec-ngram-simple-size-n": {"int": [2, 6]},
        "spec-ngram-simple-size-m": {"int": [4, 64]},
    },
    "enqueue": [
        {"spec-type": "ngram-simple", "spec-ngram-simple-size-n": n, "spec-ngram-simple-size-m": m}
        for n, m in SETTINGS
    ],
    "workloads": [{"class": "edit"}, {"class": "quote"}, {"class": "code"}, {"class": "prose"}],
    "probe": {"repeats": 2, "max_tokens": 64},
    "confirm": {"launches": 0},
    "trials": 1 + len(SETTINGS),
    "seed": 1,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("replay")
    space = root / "space.json"
    space.write_text(json.dumps(SPACE))
    assert main(["run", "--space", str(space), "--study", "replay", "--runs", str(root / "runs")]) == 0
    return root / "runs"


@pytest.fixture(scope="module")
def served(runs: Path) -> dict[int, list[dict[str, Any]]]:
    trials = runs / "replay" / "trials"
    return {
        int(folder.name): [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
        for folder in sorted(trials.iterdir())
    }


@pytest.mark.server
def test_every_answer_keeps_its_token_ids(served: dict[int, list[dict[str, Any]]]) -> None:
    for rows in served.values():
        ok = [r for r in rows if r["status"] == "ok"]
        assert ok
        for row in ok:
            assert row["ids_missing"] == "" and len(row["prompt_ids"]) == row["prompt_tokens"], row[
                "ids_missing"
            ]
            assert len(row["output_ids"]) in (row["completion_tokens"], row["completion_tokens"] - 1)


@pytest.mark.server
def test_the_replay_matches_llama_servers_own_counts(served: dict[int, list[dict[str, Any]]]) -> None:
    baseline = {r["prompt_id"]: r for r in served[0] if r["status"] == "ok"}
    compared = differed = served_drafts = 0
    for number, (size_n, size_m) in enumerate(SETTINGS, start=1):
        for row in (r for r in served[number] if r["status"] == "ok"):
            base = baseline[row["prompt_id"]]
            if row["output_ids"] != base["output_ids"]:
                differed += 1  # the speculative answer is not the baseline's: nothing to hold the replay to
                continue
            ids = TokenIds(tuple(base["prompt_ids"]), tuple(base["output_ids"]))
            replayed = replay_llamacpp(NgramSimple(size_n, size_m), ids, row["max_tokens"], 4096)
            compared += 1
            served_drafts += row["draft_tokens"]
            for mine, theirs in (
                (replayed.drafted, row["draft_tokens"]),
                (replayed.accepted, row["accepted_tokens"]),
            ):
                assert abs(mine - theirs) <= 0.02 * max(theirs, 1), (
                    size_n,
                    size_m,
                    row["prompt_id"],
                    mine,
                    theirs,
                )
    # A draft verified as one batch may tip a near-tie the baseline's one-token steps did not (free-form
    # text): those answers depart and are counted, not compared. The copy-heavy ones agree.
    assert compared >= 2 * 2 * len(SETTINGS) and compared + differed == 8 * len(SETTINGS), (
        compared,
        differed,
    )
    assert served_drafts > 0  # the copy-heavy answers drafted: the counts held to are not all zero


@pytest.mark.server
def test_replay_prints_every_configuration_without_launching(
    runs: Path, served: dict[int, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", "--study", "replay", "--runs", str(runs), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["replayed"] is True and found["baseline"] == 0 and found["missing"] == {}
    rows = {
        (r["workload"], r["params"]["spec-ngram-simple-size-n"], r["params"]["spec-ngram-simple-size-m"]): r
        for r in found["rows"]
    }
    assert {w for w, _, _ in rows} == {"edit", "quote", "code", "prose"} and len(rows) == 4 * 30
    # The grid's point the study launched replays to the launch's own counts where the answers agreed.
    launched = served[1]
    edit = [r for r in launched if r["workload"] == "edit" and r["status"] == "ok"]
    base = {r["prompt_id"]: r["output_ids"] for r in served[0]}
    if all(base[r["prompt_id"]] == r["output_ids"] for r in edit):
        assert rows[("edit", 3, 8)]["accepted"] == sum(r["accepted_tokens"] for r in edit)
        assert rows[("edit", 3, 8)]["drafted"] == sum(r["draft_tokens"] for r in edit)
    assert main(["replay", "--study", "replay", "--runs", str(runs), "--top", "2"]) == 0
    table = capsys.readouterr().out
    assert "not measured" in table and table.count("spec-type ngram-simple") == 4 * 2


def test_replay_of_no_study_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--study", "none", "--runs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no study 'none'" in err and len(err.strip().splitlines()) == 1
