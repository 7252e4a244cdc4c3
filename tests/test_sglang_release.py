"""The SGLang adapter held against the real releases' own source (downloaded once into the cache)."""

from __future__ import annotations

import pytest

from sweep.engines import sglang
from sweep.engines.sglang_release import (
    PINNED,
    RELEASES,
    load_table,
    read_flags,
    source_root,
    table_json,
)

# Every test here reads the real SGLang release source (downloaded once): `make check` leaves them out.
pytestmark = pytest.mark.release


@pytest.mark.parametrize("version", RELEASES)
def test_the_committed_table_is_what_the_release_source_declares(version: str) -> None:
    flags = read_flags(source_root(version))
    assert table_json(flags) == table_json(load_table(version)), (
        "run: python -m sweep.engines.sglang_release write"
    )
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
