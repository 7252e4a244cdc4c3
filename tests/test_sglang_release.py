"""The SGLang adapter held against the real releases' own source (downloaded once into the cache)."""

from __future__ import annotations

import ast

import pytest

from sweep.engines import sglang
from sweep.releases.sglang import (
    PINNED,
    SGLANG,
    load_table,
    parse_source,
    read_flags,
    table_json,
)
from sweep.releases.sglang_rules import EAGLE_FAMILY

# Every test here reads the real SGLang release source (downloaded once): `make check` leaves them out.
pytestmark = pytest.mark.release


@pytest.mark.parametrize("version", SGLANG.tabled)
def test_the_committed_table_is_what_the_release_source_declares(version: str) -> None:
    flags = read_flags(SGLANG.source_root(version))
    assert table_json(flags) == table_json(load_table(version)), "run: python -m sweep.releases.sglang write"
    assert len(flags) > 400


def test_every_flag_the_adapter_sets_or_checks_exists_in_the_pinned_release() -> None:
    spelled = {name.lstrip("-") for flag in load_table(PINNED).values() for name in flag.names}
    ours = (sglang.MANAGED - {"help"}) | set(sglang.VALUE_RANGES)
    # Only an older release's spellings (the CUDA-graph renames) may be missing; 0.5.20 already has the new ones.
    assert ours - spelled <= set(sglang.RENAMED), sorted(ours - spelled)


def test_the_release_refuses_the_short_tp_and_knows_its_choices() -> None:
    table = load_table(PINNED)
    assert table["tp-size"].names == ("--tp-size", "--tensor-parallel-size")
    assert "tp" not in table
    assert table["speculative-draft-kv-cache-dtype"].choices == (
        "auto",
        "fp8_e5m2",
        "fp8_e4m3",
        "bf16",
        "bfloat16",
    )
    assert table["attention-backend"].choices is not None and len(table["attention-backend"].choices) == 25
    assert table["speculative-adaptive"].kind == "switch" and table["speculative-num-steps"].type == "int"


def test_the_eagle_family_holds_what_the_pinned_releases_is_eagle_does() -> None:
    """The adapter and the simulator read one family (`sglang_rules.EAGLE_FAMILY`); the adapter's own copy once
    left out FROZEN_KV_MTP, which `SpeculativeAlgorithm.is_eagle` holds (what NEXTN/EAGLE become for Gemma 4
    assistant drafts): the simulator's copy was the right one."""
    tree = parse_source(SGLANG.source_root(PINNED) / "sglang" / "srt" / "speculative" / "spec_info.py")
    is_eagle = next(
        node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "is_eagle"
    )
    named = {n.attr for n in ast.walk(is_eagle) if isinstance(n, ast.Attribute) and n.attr.isupper()}
    assert named == {"EAGLE", "EAGLE3", "FROZEN_KV_MTP"}
    assert named <= set(EAGLE_FAMILY) and {"NEXTN", "STANDALONE"} <= set(EAGLE_FAMILY)
