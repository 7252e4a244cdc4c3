"""The sizing doctor on real file formats: a hybrid MTP model folder written here with real safetensors headers
(the names and shapes of report 000's Qwen3.8-27B: 48 linear-attention + 16 full-attention layers, one MTP
layer in its own file; the data regions are sparse, so the files are tiny on disk), the demo's real GGUF, and
report 000's log numbers reproduced: a 44913-token pool that should have been about 211357, cell size x5."""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest

from sweep.cli import main
from sweep.engines import SGLangEngine
from sweep.engines.llamacpp_bundle import gemma_model, llama_server_binary
from sweep.engines.sglang_log import facts_from_log
from sweep.launch.server import ServerProcess, free_port
from sweep.model.doctor import EngineRules, diagnose
from sweep.model.geometry import geometry_of, read_geometry
from sweep.sim.profile import PROFILES
from tests.test_sim_model import PINNED_GRAPHS

HIDDEN, VOCAB, KV_HEADS, HEAD_DIM = 5120, 248320, 4, 256
LAYER_TYPES = ["linear_attention" if (i + 1) % 4 else "full_attention" for i in range(64)]


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A real safetensors file: the JSON header with dtypes, shapes and byte ranges, then a sparse data region."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = {"BF16": 2, "I32": 4, "F32": 4, "I64": 8}[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    with path.open("wb") as file:
        file.write(struct.pack("<Q", len(raw)) + raw)
        file.truncate(8 + len(raw) + offset)


def layer(prefix: str, kind: str) -> dict[str, tuple[str, list[int]]]:
    if kind == "full_attention":
        attention = {
            f"{prefix}.self_attn.{p}_proj.weight": ("I32", [KV_HEADS * HEAD_DIM, HIDDEN // 8]) for p in "kv"
        }
        attention[f"{prefix}.self_attn.q_proj.weight"] = ("I32", [2 * 24 * HEAD_DIM, HIDDEN // 8])
    else:
        attention = {f"{prefix}.linear_attn.in_proj_qkvz.weight": ("I32", [12288, HIDDEN // 8])}
    return {**attention, f"{prefix}.mlp.down_proj.weight": ("I32", [HIDDEN, 17408 // 8])}


@pytest.fixture
def qwen_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "Qwen3.8-27B-int4"
    folder.mkdir()
    text = {
        "num_hidden_layers": 64,
        "layer_types": LAYER_TYPES,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "num_attention_heads": 24,
        "hidden_size": HIDDEN,
        "vocab_size": VOCAB,
        "mtp_num_hidden_layers": 1,
    }
    config = {"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": text}
    (folder / "config.json").write_text(json.dumps(config))
    body: dict[str, tuple[str, list[int]]] = {
        "model.language_model.embed_tokens.weight": ("BF16", [VOCAB, HIDDEN]),
        "lm_head.weight": ("BF16", [VOCAB, HIDDEN]),
    }
    for i, kind in enumerate(LAYER_TYPES):
        body |= layer(f"model.language_model.layers.{i}", kind)
    write_safetensors(folder / "model.safetensors", body)
    write_safetensors(folder / "model_mtp.safetensors", layer("mtp.layers.0", "full_attention"))
    return folder


def test_geometry_from_the_headers_with_sources(qwen_folder: Path) -> None:
    g = geometry_of(qwen_folder)
    assert g.layers is not None and (g.layers.value, g.layers.source) == (
        64,
        "config.json: text_config.num_hidden_layers",
    )
    assert g.kv_layers is not None and g.kv_layers.value == 16
    assert g.state_layers is not None and g.state_layers.value == 48
    assert g.kv_width is not None and g.kv_width.value == 1024
    assert g.draft_layers is not None and g.draft_layers.value == 1
    assert "model_mtp.safetensors" in g.draft_layers.source
    assert (
        g.vocab_tensor_bytes is not None and g.vocab_tensor_bytes.value == 2 * VOCAB * HIDDEN * 2
    )  # ~5.1 GB
    assert g.weight_bytes is not None and g.weight_bytes.value > g.vocab_tensor_bytes.value
    # fp8 KV: 16 layers x 2 x 1024 B = 32768 B per token for the target, 2048 B for the one MTP layer.
    assert g.cell_bytes(1) == (32768, 2048)
    assert sum(p.stat().st_blocks for p in qwen_folder.iterdir()) * 512 < 1_000_000  # sparse: tiny on disk


REPORT_000_LOG = """[2026-03-02 10:00:00 TP0] Load weight end. elapsed=31.20 s, type=Qwen3_5ForConditionalGeneration, avail mem=13.80 GB, mem usage=17.70 GB.
[2026-03-02 10:00:01 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 44913, K size: 0.69 GB, V size: 0.69 GB
[2026-03-02 10:00:01 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 44913, K size: 0.04 GB, V size: 0.04 GB
[2026-03-02 10:00:01 TP0] Memory pool end. avail mem=7.90 GB
[2026-03-02 10:00:09 TP0] max_total_num_tokens=44913, chunked_prefill_size=4096, max_prefill_tokens=16384, max_running_requests=48, context_len=262144, available_gpu_mem=7.20 GB
"""


REPORT_000_FIXED_LOG = (
    REPORT_000_LOG.replace(
        "#tokens: 44913, K size: 0.69 GB, V size: 0.69 GB",
        "#tokens: 211357, K size: 3.23 GB, V size: 3.23 GB",
    )
    .replace(
        "#tokens: 44913, K size: 0.04 GB, V size: 0.04 GB",
        "#tokens: 211357, K size: 0.20 GB, V size: 0.20 GB",
    )
    .replace("avail mem=7.90 GB", "avail mem=2.47 GB")
    .replace("max_total_num_tokens=44913", "max_total_num_tokens=211357")
)


def test_report_000_the_pool_cut_x5_and_its_cause(qwen_folder: Path) -> None:
    found = diagnose(
        qwen_folder, "fp8_e4m3", facts_from_log(REPORT_000_LOG), EngineRules(SGLangEngine.draft_layers_read)
    )
    pool, free = found.findings[:2]
    assert (
        not pool.ok and "KV pool 44913 tokens, should be 211355" in pool.what
    )  # the report: 211357 after the fix
    assert "cell size x5.0" in pool.detail
    assert "draft depth read as 64 layers (config.json: num_hidden_layers" in pool.detail
    assert "the tensors hold 1" in pool.detail
    assert not free.ok and "a miscalculation, not a shortage" in free.detail
    # After the fix (the pool at 34816 B per token: its memory could never have held 211357 tokens at 163840 B),
    # the pool is what the files predict, with little memory left over.
    fixed = facts_from_log(REPORT_000_FIXED_LOG)
    after = diagnose(qwen_folder, "fp8_e4m3", fixed, EngineRules(SGLangEngine.draft_layers_read)).findings
    assert [f.ok for f in after] == [True] and "KV pool 211357 tokens" in after[0].what


def test_the_per_token_line_prices_the_draft_only_where_one_drafts(qwen_folder: Path) -> None:
    """The 27B's MTP layer holds cache only while it drafts: the geometry line says what the verdicts price."""
    drafting = diagnose(qwen_folder, "fp8_e4m3", speculative=True).lines()
    plain = diagnose(qwen_folder, "fp8_e4m3", speculative=False).lines()
    assert "KV per token at 1 B/element: 32768 B target + 2048 B draft = 34816 B" in drafting
    assert "KV per token at 1 B/element: 32768 B (the draft's 2048 B more when speculating)" in plain


def test_decode_graphs_above_the_running_limit_are_named_with_their_memory(qwen_folder: Path) -> None:
    log = REPORT_000_LOG.replace("max_running_requests=48", "max_running_requests=3") + (
        "[2026-03-02 10:00:05 TP0] Capture cuda graph end. Time elapsed: 12.00 s. bs=[1, 2, 4, 8, 12, 16, 24, 32, "
        "40, 48], mem usage=0.20 GB, avail mem=7.70 GB.\n"
    )
    graphs = diagnose(qwen_folder, "fp8_e4m3", facts_from_log(log)).findings[-1]
    assert not graphs.ok and "8 of 10 batch sizes above the max running requests (3)" in graphs.what
    assert "about 0.16 GB" in graphs.detail


@pytest.mark.server
def test_the_real_gguf_against_the_real_servers_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Gemma 3's GGUF carries its sliding window, not which layers use it: llama.cpp's pattern for the
    architecture (every 6th layer full) gives 3 full and 15 sliding layers, and the real llama-server's own
    KV lines (at verbosity 4) agree: 12 MiB for 4096 cells of the 3 full layers."""
    argv = [str(llama_server_binary()), "-m", str(gemma_model()), "-c", "4096", "-np", "1", "-lv", "4"]
    argv += ["--host", "127.0.0.1", "--port", str(free_port())]
    with ServerProcess(argv, tmp_path / "llama.log", dict(os.environ)) as server:
        assert server.await_line("llama_kv_cache: size", 60), server.log_text()[-2000:]
        assert server.await_line("creating     SWA KV cache", 10)
        log = server.log_path
    assert main(["doctor", str(gemma_model()), "--engine", "llamacpp", "--json"]) == 0
    geometry = json.loads(capsys.readouterr().out)["geometry"]
    assert geometry["layers"] == {"value": 18, "source": "gguf: gemma3.block_count"}
    assert geometry["kv_layers"]["value"] == 3 and geometry["sliding_layers"]["value"] == 15
    assert geometry["sliding_window"]["value"] == 512
    assert geometry["kv_width"]["value"] == 256  # 1 KV head x 256
    assert geometry["weight_bytes"]["value"] == gemma_model().stat().st_size
    assert main(["doctor", str(gemma_model()), "--engine", "llamacpp", "--log", str(log)]) == 0
    out = capsys.readouterr().out
    assert "plus 15360 B per token for the last 512 tokens only (15 sliding-window layers)" in out
    assert "ok: KV pool 4096 tokens" in out and "PROBLEM" not in out
    # The same log read as a q8_0 cache: every token costs twice what the files say at one byte.
    assert (
        main(["doctor", str(gemma_model()), "--engine", "llamacpp", "--log", str(log), "--kv-dtype", "q8_0"])
        == 0
    )
    assert "PROBLEM: KV pool costs 3072 B per token, the files say 1536 B" in capsys.readouterr().out


def test_a_dense_model_folder(tmp_path: Path) -> None:
    """Llama 3 8B's config and tensor names and shapes (GQA: 8 KV heads of 128, from hidden size / heads): every
    layer full attention, no draft, 128 KiB per token at 16 bits, the well-known figure."""
    folder = tmp_path / "Meta-Llama-3-8B"
    folder.mkdir()
    config = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "num_attention_heads": 32}
    config |= {"num_key_value_heads": 8, "hidden_size": 4096, "vocab_size": 128256}
    (folder / "config.json").write_text(json.dumps(config))
    body: dict[str, tuple[str, list[int]]] = {"model.embed_tokens.weight": ("BF16", [128256, 4096])}
    for i in range(32):
        prefix = f"model.layers.{i}.self_attn"
        body |= {f"{prefix}.q_proj.weight": ("BF16", [4096, 4096])}
        body |= {f"{prefix}.{p}_proj.weight": ("BF16", [1024, 4096]) for p in "kv"}
    for half, names in enumerate((list(body)[:40], list(body)[40:])):
        write_safetensors(folder / f"model-0000{half + 1}-of-00002.safetensors", {n: body[n] for n in names})
    g = geometry_of(folder)
    assert g.kv_layers is not None and g.kv_layers.value == 32 and g.sliding_layers is None
    assert g.kv_width is not None and g.kv_width.value == 1024 and g.head_dim == 128
    assert g.draft_layers is not None and g.draft_layers.value == 0 and not g.disagreements
    assert g.cell_bytes(2) == (131072, 0)
    # Tensor parallel 4 splits the 8 KV heads: 2 per GPU; 16 GPUs still hold one each.
    assert g.per_gpu(4).cell_bytes(2) == (32768, 0) and g.per_gpu(16).cell_bytes(2) == (16384, 0)


def test_the_headers_are_read_once_while_the_files_are_unchanged(qwen_folder: Path) -> None:
    first = read_geometry(qwen_folder)
    assert read_geometry(qwen_folder) is first
    config = qwen_folder / "config.json"
    text = json.loads(config.read_text())
    text["text_config"]["mtp_num_hidden_layers"] = 2
    config.write_text(json.dumps(text))
    os.utime(config, ns=(1, 1))  # a different time, however fast the write
    again = read_geometry(qwen_folder)
    assert again is not first and again.draft_layers_config is not None
    assert (
        again.draft_layers_config.value == 2
        and "says 2 draft layers, the tensors hold 1" in again.disagreements[0]
    )


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(tmp_path / "nothing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "x.gguf").write_bytes(b"NOPE" + bytes(20))
    assert main(["doctor", str(tmp_path / "x.gguf")]) == 2
    assert "is not a GGUF file" in capsys.readouterr().err


def baseline_and_nextn(profile: Path, model: Path, runs: Path, fixed: str = "") -> optuna.Study:
    """A sweep of the simulator serving `model`: the baseline, then NEXTN with 3 steps (study `s` in `runs`)."""
    space = runs.parent / "s.yaml"
    space.write_text(f"""
engine: sglang
server: {{launcher: ["{{python}}", -m, sweep.sim, --sim-time-scale, "0.005", --sim-profile, "{profile}"],
         model: "{model}"}}
fixed: {{kv-cache-dtype: fp8_e4m3, mem-fraction-static: 0.92, {fixed}}}
params:
  speculative-algorithm: {{choices: [NEXTN]}}
  speculative-num-steps: {{choices: [3]}}
workloads: [{{class: code}}]
probe: {{repeats: 1, max_tokens: 16}}
confirm: {{launches: 0}}
trials: 2
""")
    assert main(["run", "--space", str(space), "--study", "s", "--runs", str(runs)]) == 0
    return optuna.load_study(study_name="s", storage=f"sqlite:///{runs / 's' / 'study.db'}")


@pytest.mark.server
def test_a_sweep_records_the_doctors_verdicts_and_the_report_lists_them(
    qwen_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The simulator with report 000's bug (`mtp_misread`) serving the model folder above: the speculative
    trial's record carries the pool verdict, the baseline's pool (no draft) is as predicted."""
    profile = tmp_path / "misread.yaml"
    profile.write_text(
        (PROFILES / "qwen3.8-27b-int4-32gb.yaml")
        .read_text()
        .replace("mtp_misread: false", "mtp_misread: true")
    )
    runs = tmp_path / "runs"
    study = baseline_and_nextn(profile, qwen_folder, runs, "chunked-prefill-size: 2048")
    base, nextn = (t.user_attrs["record"] for t in study.trials)
    # The pool as predicted; the prefill graph (4096 tokens by default) above the 2048-token chunk: never run.
    assert [f["ok"] for f in base["facts"]["sizing"]] == [True, False]
    prefill = base["facts"]["sizing"][1]
    assert "1 of 1 batch sizes above the chunked-prefill size (2048)" in prefill["what"]
    assert prefill["flags"] == {"cuda-graph-max-bs-prefill": 2048}
    pool = nextn["facts"]["sizing"][0]
    assert not pool["ok"] and "cell size x5.0" in pool["detail"] and "the tensors hold 1" in pool["detail"]
    capsys.readouterr()
    assert main(["report", "--study", "s", "--runs", str(runs)]) == 0
    assert "sizing (trial 1): KV pool" in capsys.readouterr().out
    page = tmp_path / "d.html"
    assert main(["dashboard", "--study", "s", "--runs", str(runs), "-o", str(page)]) == 0
    assert "KV pool the files predict (tokens)" in page.read_text()
    capsys.readouterr()
    assert main(["export", "--study", "s", "--runs", str(runs), "--pin-graphs"]) == 0
    command, notes = capsys.readouterr()
    assert "--cuda-graph-max-bs-prefill 2048" in command and "--chunked-prefill-size 2048" in command
    assert "CUDA-graph capture capped" in notes


def launch_log(tmp_path: Path, name: str, flags: list[str]) -> Path:
    """The start-up log of the simulator with report 004's profile (one of two 3090s), as SGLang writes it."""
    argv = [sys.executable, "-m", "sweep.sim", "--model-path", "/models/hybrid", "--port", str(free_port())]
    argv += ["--sim-profile", str(PROFILES / "report004-3090-24gb.yaml"), "--sim-startup-scale", "0"]
    argv += ["--tp-size", "2", "--mem-fraction-static", "0.9", *flags]
    with ServerProcess(argv, tmp_path / name / "server.log", dict(os.environ)) as server:
        assert server.await_line("fired up", 60), server.log_text()[-2000:]
        return server.log_path


@pytest.mark.server
def test_report_004_the_defaults_against_pinned_flags(
    qwen_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.5.20's defaults (chunk 4096, prefill graph 4096, decode graphs to 48) against the pinned 0.5.19 values:
    the same server but for 0.56 GB of prefill graph, about 18K tokens of context at 32 KB per token (16
    full-attention layers x 2 x 2 KV heads per GPU x 256 x 2 bytes)."""
    defaults = launch_log(tmp_path, "defaults", [])
    pinned = launch_log(tmp_path, "pinned", list(PINNED_GRAPHS))
    argv = ["doctor", str(qwen_folder), "--log", str(defaults), "--against", str(pinned), "--tp", "2"]
    assert main([*argv, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["geometry"]["kv_width"]["value"] == 512  # 4 KV heads x 256 over two GPUs
    (saved,) = [f for f in found["against"] if "graph_gb_saved" in f["numbers"]]
    assert saved["numbers"]["graph_gb_saved"] == pytest.approx(0.56, abs=0.005)
    assert saved["numbers"]["context_tokens"] == int(0.56 * 1024**3 / 32768)  # 18350
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "differs: target prefill graph: 1.69 GB (size 4096) -> 1.13 GB (size 2048): -0.56 GB" in text
    assert "the first launch holds 0.56 GB more CUDA-graph memory than the second" in text
    assert "same: max running requests: 3 -> 3" in text and "differs: chunked prefill: 4096 -> 2048" in text


def test_the_room_a_gpu_leaves_for_the_pool(
    qwen_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "fixed.log"
    log.write_text(REPORT_000_FIXED_LOG)
    flags = ["--", "--mem-fraction-static", "0.92", "--kv-cache-dtype", "fp8_e4m3"]
    assert main(["doctor", str(qwen_folder), "--log", str(log), "--gpu-memory", "32", *flags]) == 0
    room = capsys.readouterr().out
    # 0.92 x 32 GB - 17.70 GB of weights (the log's) = 11.74 GB, at 34816 B per token (a draft pool is logged).
    assert (
        "ok: room for the KV pool: at most 11.74 GB, 362067 tokens: 0.92 (--mem-fraction-static) x 32 GB - 17.70 GB"
        in room
    )
    assert "the log's pool holds 58% of it" in room
    # A GPU too small for the logged pool is not the launch's GPU.
    assert main(["doctor", str(qwen_folder), "--log", str(log), "--gpu-memory", "24", *flags]) == 0
    assert "PROBLEM: room for the KV pool: at most 4.38 GB" in capsys.readouterr().out
    # No log, no share given: SGLang's automatic share for the GPU, the weights from the files. 0.5.23 keeps back
    # 512 MB + 1.5 x 4096 + 128 (one GPU) + 2 x 48 decode sizes + 8 x 50 prefill sizes = 7280 MB of 24576.
    assert main(["doctor", str(qwen_folder), "--gpu-memory", "24", "--json"]) == 0
    (finding,) = json.loads(capsys.readouterr().out)["findings"]
    assert "0.704 (SGLang's automatic value for a 24 GB GPU)" in finding["detail"]
    assert "of weights (the files)" in finding["detail"]
    assert main(["doctor", str(qwen_folder), "--gpu-memory", "24", "--", "0.92"]) == 2
    assert "'0.92' is not a flag" in capsys.readouterr().err


def folder_of(tmp_path: Path, name: str, config: dict[str, Any], prefixes: list[str]) -> Path:
    """A model folder: config.json and one safetensors file with a full-attention layer at each prefix."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({**config, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM})
    )
    body: dict[str, tuple[str, list[int]]] = {}
    for prefix in prefixes:
        body |= layer(prefix, "full_attention")
    write_safetensors(folder / "model.safetensors", body)
    return folder


@pytest.mark.parametrize(
    ("family", "prefixes"),
    [
        # DeepSeek-V3 / GLM-4.5: the MTP layer is the decoder layer after the last (model.layers.61 of 61).
        ("next decoder layer", [f"model.layers.{i}" for i in range(4)]),
        # MiMo: its own namespace.
        ("mtp_layers", [*(f"model.layers.{i}" for i in range(3)), "model.mtp_layers.0"]),
        # Qwen3-Next / Qwen3.5: mtp.layers.
        ("mtp.layers", [*(f"model.layers.{i}" for i in range(3)), "mtp.layers.0"]),
    ],
)
def test_mtp_layers_under_every_released_naming(tmp_path: Path, family: str, prefixes: list[str]) -> None:
    g = geometry_of(
        folder_of(tmp_path, "m", {"num_hidden_layers": 3, "num_nextn_predict_layers": 1}, prefixes)
    )
    assert g.draft_layers is not None and g.draft_layers.value == 1, family
    assert g.kv_layers is not None and g.kv_layers.value == 3 and not g.disagreements, g.disagreements
    assert g.cell_bytes(1) == (3 * 2 * KV_HEADS * HEAD_DIM, 2 * KV_HEADS * HEAD_DIM)  # the draft is priced


def test_a_vision_towers_layers_are_neither_decoder_nor_draft_layers(tmp_path: Path) -> None:
    prefixes = [*(f"model.language_model.layers.{i}" for i in range(3))]
    prefixes += [f"model.vision_tower.encoder.layers.{i}" for i in range(5)]  # deeper than the decoder
    g = geometry_of(folder_of(tmp_path, "vlm", {"num_hidden_layers": 3}, prefixes))
    assert g.draft_layers is not None and g.draft_layers.value == 0 and not g.disagreements, g.disagreements
    # A checkpoint whose config counts no MTP layer but holds one past the decoder's: said, not silently priced.
    g = geometry_of(
        folder_of(tmp_path, "unsaid", {"num_hidden_layers": 2}, [f"model.layers.{i}" for i in range(3)])
    )
    assert g.draft_layers is not None and g.draft_layers.value == 1
    assert any("names no draft depth" in d for d in g.disagreements)


@pytest.mark.server
def test_a_sweep_fails_a_draft_the_model_cannot_run_before_starting_a_server(
    qwen_folder: Path, tmp_path: Path
) -> None:
    """The same checkpoint repacked without its MTP file (config.json still counts one layer): the NEXTN trial
    fails before launch with the doctor's reason, no server started for it; the baseline runs."""
    (qwen_folder / "model_mtp.safetensors").unlink()
    runs = tmp_path / "runs"
    study = baseline_and_nextn(PROFILES / "qwen3.8-27b-int4-32gb.yaml", qwen_folder, runs)
    base, nextn = (t.user_attrs["record"] for t in study.trials)
    assert not base.get("failure"), base.get("failure")
    assert nextn["stage"] == "params"
    assert nextn["failure"].startswith(
        "the draft does not fit the model: --speculative-algorithm NEXTN drafts"
    )
    assert "although config.json: text_config.mtp_num_hidden_layers says 1" in nextn["failure"]
    trials = runs / "s" / "trials"
    assert (trials / str(study.trials[0].number) / "server.log").exists()
    assert not (trials / str(study.trials[1].number) / "server.log").exists()
