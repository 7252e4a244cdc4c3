"""The SGLang adapter and simulator held against the pinned release's own source (its log format strings, error
messages, metric and meta_info names, rules and argument parser), read from the cached wheel, not our notes.

A release template is any string or f-string of its `sglang/srt` tree, `{}` or `%d`/`%s`/`%.2f` where a value
goes. A simulated line conforms when some template matches it whole; an engine pattern conforms when it reads
at least one conforming line.
"""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from sweep.core.errors import UserError
from sweep.engines import ServerSetup, SGLangEngine, sglang, sglang_log
from sweep.launch.server import reason_from_log
from sweep.releases import sglang_rules as rules
from sweep.releases.sglang import (
    PINNED,
    SGLANG,
    load_table,
    parse_source,
    release_parser,
    source_strings,
)
from sweep.sim.flags import build_parser, normalize
from sweep.sim.model import StartupFailure
from sweep.sim.profile import DEFAULT_PROFILE, Profile
from sweep.sim.sglang_server import start_up
from sweep.sim.sglang_server import template_lines as chat_template_lines

# Every test here reads the real SGLang release source (downloaded once): `make check` leaves them out.
pytestmark = pytest.mark.release

PROFILE = Profile.load(DEFAULT_PROFILE)
HOOK = Path("sglang/srt/arg_groups/speculative_hook.py")
ADAPTIVE = Path("sglang/srt/speculative/adaptive_spec_params.py")
PLACEHOLDER = re.compile(r"\{\}|%(?:\.\d+)?[sdf]")
STAMP = re.compile(r"^\[[\d\- :]+(?: TP0)?\] ")
# Lines that are not SGLang's: uvicorn's banner, Python's traceback frame and code lines.
NOT_SGLANG = re.compile(r"^(INFO: +Uvicorn running on |Traceback |  File |    )")


@cache
def templates() -> tuple[re.Pattern[str], ...]:
    """Each release string with values as wildcards, longest first (the most specific)."""
    found = sorted(source_strings(SGLANG.source_root(PINNED)), key=len, reverse=True)
    patterns = []
    for text in found:
        parts = PLACEHOLDER.split(text)
        if len(text) < 12 or (len(parts) == 1 and len(text) < 20):
            continue  # a word or a fragment: it would match by accident
        patterns.append(re.compile(".*?".join(re.escape(p) for p in parts), re.DOTALL))
    return tuple(patterns)


@cache
def template_lines() -> frozenset[str]:
    """The lines of the release's multi-line messages (a capture failure's "Possible solutions:" list)."""
    return frozenset(
        line.strip()
        for text in source_strings(SGLANG.source_root(PINNED))
        if "\n" in text
        for line in text.splitlines()
    )


def release_prints(line: str) -> bool:
    return line.strip() in template_lines() or any(t.fullmatch(line) for t in templates())


def lines_of(text: str) -> list[str]:
    return [STAMP.sub("", line) for line in text.splitlines() if line.strip()]


# Start-ups that reach each line the engine reads: plain, speculative with every warning, adaptive, capped by the
# mamba cache, a pool shorter than the context, and the failures.
CHAIN = ("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1")
STARTS: tuple[tuple[str, ...], ...] = (
    (),
    (*CHAIN, "--speculative-num-draft-tokens", "6"),
    ("--speculative-algorithm", "EAGLE", "--speculative-adaptive"),
    (
        "--speculative-algorithm",
        "STANDALONE",
        "--speculative-draft-model-path",
        "/d",
        "--speculative-adaptive",
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "1",
    ),
    ("--speculative-algorithm", "NGRAM"),
    (
        "--speculative-algorithm",
        "DFLASH",
        "--speculative-draft-model-path",
        "/d",
        "--speculative-num-steps",
        "2",
    ),
    ("--speculative-algorithm", "DSPARK"),
    ("--max-mamba-cache-size", "12", "--context-length", "1000000"),
    ("--mem-fraction-static", "0.5"),
    ("--max-mamba-cache-size", "2", *CHAIN),
    ("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"),
    ("--speculative-algorithm", "NEXTN", "--speculative-eagle-topk", "2"),
    ("--speculative-algorithm", "MEDUSA"),
    (
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-adaptive",
        "--speculative-num-steps",
        "4",
        "--speculative-eagle-topk",
        "1",
    ),
    (
        "--speculative-algorithm",
        "DSPARK",
        "--speculative-dspark-block-size",
        "3",
        "--speculative-num-draft-tokens",
        "3",
    ),
    (
        "--mem-fraction-static",
        "0.99",
        "--cuda-graph-max-bs-decode",
        "512",
        "--cuda-graph-max-bs-prefill",
        "16384",
    ),
)


@cache
def simulated_logs() -> tuple[str, ...]:
    """What the simulator prints for each start-up (a failure as the traceback tail SGLang prints)."""
    import contextlib
    import io

    logs = []
    for flags in STARTS:
        argv = ["--model-path", "/m", "--sim-time-scale", "0", *flags]
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            try:
                start_up(normalize(build_parser(PROFILE.sglang_version).parse_args(argv)), PROFILE)
                for line in (*chat_template_lines(PROFILE), "The server is fired up and ready to roll!"):
                    print(line, file=stderr)
            except StartupFailure as exc:
                print(f"Traceback (most recent call last):\n{exc}", file=stderr)
        logs.append(stderr.getvalue())
    return tuple(logs)


def test_every_line_the_simulator_logs_is_one_the_release_prints() -> None:
    lines = {line for log in simulated_logs() for line in lines_of(log) if not NOT_SGLANG.match(line)}
    # A traceback's last line is `Error: message`; the message is what the release holds.
    messages = {re.sub(r"^(?:[\w.]+Error): ", "", line) for line in lines}
    unknown = sorted(m for m in messages if m not in ("AssertionError",) and not release_prints(m))
    assert not unknown, unknown
    assert len(messages) > 25


def engine_patterns() -> Iterator[tuple[str, re.Pattern[str]]]:
    for name in (
        "KV_ALLOCATED",
        "WEIGHT_END",
        "POOL_END",
        "SCHEDULER",
        "CAPTURE_BEGIN",
        "CAPTURE_END",
        "MAMBA_CACHE",
    ):
        yield name, getattr(sglang_log, name)
    for index, pattern in enumerate(sglang_log.LIMIT_LINES):
        yield f"LIMIT_LINES[{index}]", pattern
    for index, (pattern, _) in enumerate(sglang_log.EXIT_REASONS):
        yield f"EXIT_REASONS[{index}]", pattern


# Patterns for text SGLang does not write: torch's CUDA and dtype errors, argparse's, Python's own exceptions (a module
# missing), flashinfer's JIT build, and an older release's limit line (0.5.23 says "per attention-DP worker").
OTHERS_TEXT = (
    "CUDA (?:error",
    "error: (",
    "_handle_eagle_family",
    "(per dp worker)",
    "No module named",
    "Ninja build failed",
    "expected mat1 and mat2",
)


def test_every_pattern_the_engine_reads_matches_a_line_the_release_prints() -> None:
    """Read from a simulated line the release prints, or (a failure the simulator does not reach) from the
    release's own message with its values filled in."""
    text = "\n".join(simulated_logs())
    rendered = [PLACEHOLDER.sub("0", t) for t in source_strings(SGLANG.source_root(PINNED)) if len(t) > 20]
    read: dict[str, bool] = {}
    for name, pattern in engine_patterns():
        found = [m.group(0) for m in pattern.finditer(text)]
        read[name] = any(release_prints(_line_around(text, m)) for m in found) or any(
            pattern.search(prefix + message)
            for message in rendered
            for prefix in ("", "AssertionError: ", "RuntimeError: ", "ValueError: ")
        )
    missing = sorted(
        name
        for name, ok in read.items()
        if not ok
        and not any(
            other in pattern.pattern for n, pattern in engine_patterns() if n == name for other in OTHERS_TEXT
        )
    )
    assert not missing, missing
    assert sum(read.values()) >= 20, read


def _line_around(text: str, found: str) -> str:
    """The whole line (stamp removed) a match lies in, or the traceback's last line for a multi-line match."""
    start = text.index(found)
    line_start = text.rfind("\n", 0, start) + 1
    end = text.find("\n", start + len(found))
    line = STAMP.sub("", text[line_start : end if end >= 0 else len(text)].splitlines()[-1])
    return re.sub(r"^(?:[\w.]+Error): ", "", line)


@pytest.mark.parametrize("flags", STARTS[9:15], ids=lambda f: " ".join(f[:4]))
def test_each_start_up_failure_has_a_reason_the_engine_names(flags: tuple[str, ...]) -> None:
    log = simulated_logs()[STARTS.index(flags)]
    reason = reason_from_log(log, 1, sglang_log.EXIT_REASONS, "SGLang")
    assert not reason.startswith("SGLang exited with code"), reason


def test_the_crash_on_steps_without_topk_is_named() -> None:
    log = simulated_logs()[STARTS.index(("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"))]
    assert "set speculative-eagle-topk" in reason_from_log(log, 1, sglang_log.EXIT_REASONS, "SGLang")


def test_every_name_the_engine_reads_from_the_server_is_the_releases() -> None:
    """Every `.get("...")` key in the adapter: a flag of the release where it has dashes, else a field, meta_info
    key or state name its source holds (or an older release's name, read as a fallback)."""
    tree = ast.parse(Path(sglang.__file__).read_text(encoding="utf-8"))
    keys = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", "") == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }
    flags = {name.lstrip("-") for flag in release_table().values() for name in flag.names}
    strings = source_strings(SGLANG.source_root(PINNED))
    older = {"spec_accept_token_num", "spec_draft_token_num", "cuda-graph-max-bs"}
    unknown = sorted(k for k in keys - older if (k not in flags if "-" in k else k not in strings))
    assert not unknown, unknown
    assert len(keys) > 20


def release_table() -> dict[str, Any]:
    return load_table(PINNED)


# --- rules ---------------------------------------------------------------------------------------------------


def function(path: Path, name: str, version: str = PINNED) -> ast.FunctionDef:
    tree = parse_source(SGLANG.source_root(version) / path)
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


@pytest.mark.parametrize("version", SGLANG.tabled)
def test_auto_chosen_parameters_are_the_releases(version: str) -> None:
    """`_auto_choose_speculative_params`, branch by branch: each architecture it names, and the rest."""
    body = function(HOOK, "_auto_choose_speculative_params", version).body
    named: dict[str, tuple[int, ...]] = {}
    default: tuple[int, ...] = ()
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            listed = node.test.comparators[0]
            returned = next(n for n in node.body if isinstance(n, ast.Return))
            value = ast.literal_eval(returned.value)  # type: ignore[arg-type]
            if isinstance(listed, ast.List):
                named |= {ast.literal_eval(e): value for e in listed.elts}
            elif isinstance(listed, ast.Constant):
                named[f"algorithm:{listed.value}"] = value
            orelse = node.orelse
            if orelse and isinstance(orelse[0], ast.Return):
                default = ast.literal_eval(orelse[0].value)  # type: ignore[arg-type]
    assert len(named) > 10 and default
    for key, value in named.items():
        if key.startswith("algorithm:"):
            assert rules.auto_spec_params(key.split(":")[1], "LlamaForCausalLM") == value
        else:
            assert rules.auto_spec_params("EAGLE", key) == value, key
    assert rules.auto_spec_params("EAGLE", "SomeNewForCausalLM") == default


@pytest.mark.parametrize("version", SGLANG.tabled)
def test_both_releases_crash_on_steps_without_topk_and_start_adaptive_in_the_middle(version: str) -> None:
    """The rules the engine's `derive` and the simulator follow are the same in 0.5.17 and 0.5.20: top-k
    compared unset where steps are given, adaptive's starting steps the middle of every slot's candidates.
    0.5.17 writes `server_args.x = ...` where the later releases write `cfg` and keyword arguments."""

    def source(name: str) -> str:
        text = ast.unparse(function(HOOK, name, version)).replace("server_args.", "cfg.")
        return re.sub(r" ?= ?", "=", text)

    eagle = source("_handle_eagle_family")
    assert "if not cfg.speculative_adaptive and cfg.speculative_num_steps is None:" in eagle
    assert "cfg.speculative_eagle_topk > 1" in eagle and "cfg.speculative_eagle_topk==1" in eagle
    start = source("_init_adaptive_speculative_params")
    assert "speculative_num_steps=candidate_steps[len(candidate_steps) // 2]" in start
    assert "speculative_num_draft_tokens=cfg.speculative_num_steps + 1" in start


def test_adaptive_defaults_and_refusals_are_the_releases() -> None:
    tree = parse_source(SGLANG.source_root(PINNED) / ADAPTIVE)
    declared = next(
        n.value
        for n in tree.body
        if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "DEFAULT_ADAPTIVE_CONFIG"
    )
    assert ast.literal_eval(declared) == rules.DEFAULT_ADAPTIVE_CONFIG  # type: ignore[arg-type]
    strings = source_strings(SGLANG.source_root(PINNED))
    for flag, reason in rules.ADAPTIVE_UNSUPPORTED:
        assert reason in strings and flag in {
            n.lstrip("-") for f in release_table().values() for n in f.names
        }
    assert rules.adaptive_candidate_steps(None) == [0, 1, 3, 5, 7]


def test_the_models_that_turn_multi_layer_eagle_on_are_the_releases() -> None:
    """Every model override of the release that sets `enable_multi_layer_eagle` (adaptive then does not run),
    by the architectures its registration names."""
    named: set[str] = set()
    root = SGLANG.source_root(PINNED) / "sglang/srt/arg_groups"
    for path in [root / "overrides.py", *sorted((root / "model_overrides").glob("*.py"))]:
        for node in ast.walk(parse_source(path)):
            if not isinstance(node, ast.FunctionDef) or not node.decorator_list:
                continue
            turns_on = any(
                isinstance(a, ast.Assign)
                and isinstance(a.targets[0], ast.Subscript)
                and getattr(a.targets[0].slice, "value", None) == "enable_multi_layer_eagle"
                and getattr(a.value, "value", None) is True
                for a in ast.walk(node)
            )
            if turns_on:
                named |= {
                    c.value
                    for d in node.decorator_list
                    for c in ast.walk(d)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value[:1].isupper()
                }
    assert named == rules.MULTI_LAYER_EAGLE_ARCHITECTURES


def test_the_automatic_memory_fraction_follows_the_releases_reserve() -> None:
    """`reserve_for_graph_mb` counts the captured prefill sizes (8 MB each), not the tokens; MLA keeps 1.5 GB."""
    body = ast.unparse(function(Path("sglang/srt/arg_groups/memory_hook.py"), "reserve_for_graph_mb"))
    assert "len(prefill_cuda_graph_config.bs) * 8" in body and "1.5 * 1024" in body
    sizes = ast.unparse(
        function(Path("sglang/srt/arg_groups/cuda_graph_hook.py"), "generate_prefill_cuda_graph_batch_sizes")
    )
    assert "range(4608, max_bs + 1, 512)" in sizes
    assert len(rules.prefill_graph_sizes(8192)) == 58
    plain = rules.GraphReserve(chunk=4096, decode_max_bs=32, prefill_max_bs=4096)
    assert plain.megabytes == 512 + 1.5 * 4096 + 128 + 64 + 8 * 50
    assert rules.GraphReserve(chunk=4096, decode_max_bs=32, prefill_max_bs=4096, mla=True).megabytes == (
        512 + 1.5 * 4096 + 128 + 64 + 1536
    )
    assert rules.auto_memory_fraction(141, plain) == round((141 * 1024 - 10 * 1024) / (141 * 1024), 3)


# --- argv ----------------------------------------------------------------------------------------------------

SPACES: tuple[dict[str, Any], ...] = (
    {"speculative-algorithm": "NEXTN", "speculative-num-steps": 3},
    {
        "speculative-algorithm": "EAGLE3",
        "speculative-num-steps": 2,
        "speculative-eagle-topk": 4,
        "speculative-num-draft-tokens": 8,
        "speculative-draft-model-path": "/d",
    },
    {"speculative-algorithm": "STANDALONE", "speculative-num-steps": 4, "speculative-draft-model-path": "/d"},
    {"speculative-algorithm": "NGRAM", "speculative-num-draft-tokens": 8, "speculative-eagle-topk": 4},
    {
        "speculative-algorithm": "DFLASH",
        "speculative-dflash-block-size": 8,
        "speculative-num-steps": 3,
        "speculative-draft-model-path": "/d",
    },
    {
        "speculative-algorithm": "DSPARK",
        "speculative-dspark-block-size": 4,
        "speculative-draft-kv-cache-dtype": "fp8_e4m3",
    },
    {
        "speculative-algorithm": "none",
        "mem-fraction-static": 0.9,
        "cuda-graph-max-bs-decode": 16,
        "cuda-graph-max-bs-prefill": 2048,
        "context-length": 8192,
        "tp-size": 1,
    },
)


@pytest.mark.parametrize("version", SGLANG.tabled)
@pytest.mark.parametrize("params", SPACES, ids=lambda p: str(p["speculative-algorithm"]))
def test_every_launch_the_engine_builds_is_accepted_by_the_releases_parser(
    version: str, params: dict[str, Any]
) -> None:
    engine = SGLangEngine(ServerSetup(launcher=["sglang"], model="/models/q"))
    # As `prepare` reads them from the installed release's --help.
    engine.flags = {name.lstrip("-") for flag in load_table(version).values() for name in flag.names}
    derived = engine.derive(params)
    lacking = [k for k in derived if k not in engine.flags and sglang.RENAMED.get(k) not in engine.flags]
    if (
        lacking
    ):  # an older release (0.5.17 has no --speculative-draft-kv-cache-dtype): refused, never launched
        with pytest.raises(UserError, match=f"has no flag --{lacking[0]}"):
            engine.check_params(derived)
        return
    engine.check_params(derived)
    argv = engine.argv(derived, port=30001)[1:]
    parsed = release_parser(version).parse_args(argv)
    assert parsed.model_path == "/models/q" and parsed.port == 30001
    if "speculative-num-steps" in derived and sglang.algorithm(derived) in sglang.EAGLE_FAMILY:
        assert parsed.speculative_eagle_topk is not None  # 0.5.23 crashes without it
    if parsed.speculative_adaptive_config:  # specsweep's candidate-steps dimension, as the release reads it
        assert rules.adaptive_candidate_steps(parsed.speculative_adaptive_config) == [1, 3, 5]


def test_an_exported_schedule_runs_only_where_the_release_runs_adaptive(tmp_path: Path) -> None:
    engine = SGLangEngine(ServerSetup(launcher=["sglang"], model="/models/q"))
    depths = [(1, 4), (8, 2), (32, 0)]
    config = str(tmp_path / "schedule.json")
    launch = engine.schedule_params({"speculative-algorithm": "NEXTN"}, depths, config)
    assert (
        launch is not None and launch["speculative-eagle-topk"] == 1 and launch["speculative-num-steps"] == 4
    )
    parsed = release_parser(PINNED).parse_args(engine.argv(launch, port=1)[1:])
    assert parsed.speculative_adaptive and parsed.speculative_adaptive_config == config
    standalone = {"speculative-algorithm": "STANDALONE", "speculative-draft-model-path": "/d"}
    assert engine.schedule_params(standalone, depths, config) is None  # 0.5.23 would run static steps
    multi_layer = {"speculative-algorithm": "EAGLE", "enable-multi-layer-eagle": True}
    assert engine.schedule_params(multi_layer, depths, config) is None


def namespace(argv: list[str]) -> argparse.Namespace:
    return release_parser(PINNED).parse_args(argv)


def test_a_draft_runs_in_its_own_configs_dtype() -> None:
    """The release gives a draft's model config the server's `--dtype`, as the target's (it does not take the
    target's resolved dtype: no `server_args.dtype =` in its speculative workers), and `auto` resolves from each
    config.json, float32 as float16 but Gemma's as bfloat16: what `draft_dtype_clash` reads before a launch."""
    configs = Path("sglang/srt/configs/model_config.py")
    assert "dtype=cfg.dtype" in ast.unparse(function(configs, "from_server_args"))
    resolve = ast.unparse(function(configs, "_get_and_verify_dtype"))
    assert "model_type.startswith('gemma')" in resolve and "torch_dtype = torch.float16" in resolve
    workers = SGLANG.source_root(PINNED) / "sglang" / "srt" / "speculative"
    assert not [
        f.name for f in workers.rglob("*.py") if "server_args.dtype =" in f.read_text(encoding="utf-8")
    ]
    assert rules.auto_dtype({"torch_dtype": "float32", "model_type": "gemma3"}) == "bfloat16"
