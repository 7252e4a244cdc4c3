"""The vLLM adapter held against the real release's own source (its wheel, downloaded once into the cache): the
committed table is what the source declares, and every flag, speculative-config field, method, metric and log
line the adapter uses is the release's."""

from __future__ import annotations

import ast
import json
import re
import sys
from functools import cache
from pathlib import Path

import pytest

from sweep.engines import ServerSetup
from sweep.engines import vllm as adapter
from sweep.releases.vllm import (
    PINNED,
    VLLM,
    Release,
    load_table,
    read_release,
    release_parser,
    table_json,
)

# Every test here reads the real vLLM release source (downloaded once): `make check` leaves them out.
pytestmark = pytest.mark.release

SPEC = adapter.SPEC
TYPES = {str: "str", int: "int", bool: "bool", float: "float", list: "list"}


@cache
def release() -> Release:
    return read_release(VLLM.source_root(PINNED))


@cache
def release_text() -> str:
    """Every string and f-string part of the release's `v1` and `engine` trees, one per line."""
    parts = []
    root = VLLM.source_root(PINNED) / "vllm"
    for path in [*sorted((root / "v1").rglob("*.py")), *sorted((root / "engine").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                parts.append(node.value)
    return "\n".join(parts)


def test_the_committed_table_is_what_the_release_source_declares() -> None:
    assert table_json(release()) == table_json(load_table(PINNED)), "run: python -m sweep.releases.vllm write"
    found = release()
    assert len(found.flags) > 300 and len(found.speculative) > 40
    # Spot checks against the source as a person reads it: a bool is --x/--no-x, a config takes JSON, an
    # alias is kept, a Literal gives choices, a pydantic bound is kept.
    assert found.flags["enable-prefix-caching"].kind == "toggle"
    assert found.flags["speculative-config"].names == ("--speculative-config", "-sc")
    assert found.flags["speculative-config"].type == "json"
    assert found.flags["tensor-parallel-size"].names == ("--tensor-parallel-size", "-tp")
    assert found.flags["dtype"].choices and "bfloat16" in found.flags["dtype"].choices
    assert found.speculative["num_speculative_tokens"].low == 1
    assert found.speculative["enable_adaptive_verification"].type == "bool"


def test_every_flag_the_adapter_sets_or_checks_exists_with_its_type() -> None:
    flags = load_table(PINNED).flags
    spelled = {name.lstrip("-"): flag for flag in flags.values() for name in flag.names}
    ours = (adapter.MANAGED - {"help", "model"}) | set(adapter.VALUE_RANGES)
    assert ours <= set(spelled), sorted(ours - set(spelled))
    for name, (kind, _, _) in adapter.VALUE_RANGES.items():
        assert spelled[name].type == TYPES[kind], name


def test_every_speculative_field_and_method_the_adapter_takes_is_the_releases() -> None:
    table = load_table(PINNED)
    assert set(adapter.SPEC_FIELDS) <= set(table.speculative), sorted(
        set(adapter.SPEC_FIELDS) - set(table.speculative)
    )
    for name, (kind, low, _) in adapter.SPEC_FIELDS.items():
        field = table.speculative[name]
        assert field.type == TYPES[kind], name
        assert field.low is None or (low is not None and low >= field.low), name
    assert set(adapter.METHODS) <= set(table.methods), sorted(set(adapter.METHODS) - set(table.methods))


def test_every_metric_and_log_line_the_adapter_reads_is_the_releases() -> None:
    metrics = set(load_table(PINNED).metrics)
    for counter in (
        "spec_decode_num_drafts",
        "spec_decode_num_draft_tokens",
        "spec_decode_num_accepted_tokens",
    ):
        assert f"vllm:{counter}" in metrics  # exported as NAME_total: a counter
    assert "vllm:spec_decode_num_accepted_tokens_per_pos" in metrics
    templates = release_text().splitlines()
    for pattern in (
        adapter.KV_TOKENS,
        adapter.CONCURRENCY,
        adapter.KV_MEMORY,
        adapter.WEIGHTS,
        adapter.GRAPHS,
    ):
        words = re.split(r"[(\[\\]", pattern.pattern)[0].removeprefix("GPU ")  # the words before any value
        found = [t for t in templates if words in t and "%" in t]
        assert found, words
        assert any(pattern.search(render(t)) for t in found), (pattern.pattern, found)


def render(template: str) -> str:
    """A log template as the logger fills it: a leading %s is the device ("GPU"), any other a number in text
    (a token count, GiB: `format_gib`), a %f a float."""
    values = []
    for at, match in enumerate(re.finditer(r"%(?:\.\d+)?([sdf])", template)):
        kind = match.group(1)
        values.append("GPU" if at == 0 and match.start() == 0 else "16576" if kind == "s" else 4.05)
    return template % tuple(values)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"max-model-len": 8192, "gpu-memory-utilization": 0.85, "enable-prefix-caching": False},
        {SPEC + "method": "ngram", SPEC + "num_speculative_tokens": 4, SPEC + "prompt_lookup_max": 4},
        {
            SPEC + "method": "eagle3",
            SPEC + "model": "/models/draft",
            SPEC + "num_speculative_tokens": 3,
            SPEC + "enable_adaptive_verification": True,
            "max-num-seqs": 64,
        },
    ],
)
def test_every_launch_the_adapter_builds_is_accepted_by_the_releases_parser(
    params: dict[str, object],
) -> None:
    engine = adapter.VLLMEngine(ServerSetup(launcher=["vllm"], model="/models/q"))
    argv = engine.argv(params, 8123)
    parsed = release_parser(PINNED).parse_args(argv[argv.index("serve") + 1 :])
    assert parsed.model_tag == "/models/q" and parsed.port == 8123
    fields = load_table(PINNED).speculative
    config = parsed.speculative_config or {}
    assert set(config) <= set(fields) and config.get("method", "ngram") in load_table(PINNED).methods


def test_the_releases_parser_refuses_what_vllm_refuses() -> None:
    parser = release_parser(PINNED)
    for bad in (["m", "--dtype", "bf17"], ["m", "--max-num-seqs", "many"], ["m", "--no-such-flag"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)
    assert parser.parse_args(["m", "--no-enable-prefix-caching"]).enable_prefix_caching is False
    assert json.loads(json.dumps(parser.parse_args(["m", "-sc", '{"method": "ngram"}']).speculative_config))


def test_the_table_is_read_without_importing_vllm() -> None:
    assert "vllm" not in sys.modules and "torch" not in sys.modules
    assert Path(VLLM.source_root(PINNED) / "vllm" / "config" / "speculative.py").is_file()


def test_the_simulators_vllm_takes_the_releases_flags_fields_and_methods() -> None:
    """The simulator's vLLM front end says what the release says: every flag it parses is the release's (an
    option the release takes as a value takes one here), every speculative field and method too."""
    from sweep.sim import vllm as sim

    table = load_table(PINNED)
    spelled = {name: flag for flag in table.flags.values() for name in flag.names}
    # A toggle is --x and --no-x, as argparse's BooleanOptionalAction spells it.
    spelled |= {f"--no-{f.names[0][2:]}": f for f in table.flags.values() if f.kind == "toggle"}
    for action in sim.build_parser()._actions:
        for name in action.option_strings:
            if name in ("--help", "-h") or name.startswith("--sim-"):
                continue
            assert name in spelled, name
            takes_value = spelled[name].kind in ("value", "list", "optional")
            assert takes_value == (action.nargs != 0), name
    assert set(table.speculative) >= sim.SPEC_FIELDS, sorted(sim.SPEC_FIELDS - set(table.speculative))
    assert set(sim.ALL_METHODS) - {"custom_class"} <= set(table.methods)
