"""The sizing doctor on the released configuration of every family people serve: `tests/models/<org>--<name>/`
holds each model's published `config.json`, and the tests write safetensors headers next to it under the tensor
names that checkpoint releases (its MTP layers where it ships them). Every expected number is worked by hand
here from the engine rule it follows, cited from SGLang 0.5.23's source:

- GQA/MHA (`pool_configurator.py` `_compute_cell_size`): KV heads per GPU x (head_dim + v_head_dim) x layers x
  bytes, the heads per GPU `max(1, heads // tp)` (`ModelConfig.get_num_kv_heads`: replicated past the heads).
- MLA (`kv_cache_configurator.calculate_mla_kv_cache_dim`): (kv_lora_rank + qk_rope_head_dim) x layers x
  bytes, the same on every GPU (not divided by the attention TP size).
- MTP/NEXTN draft layers (`_compute_cell_size`, EAGLE branch): the target's per-layer cost x draft layers.
- Sliding windows (`HybridSWAPoolConfigurator`): a pool of their own at `swa_full_tokens_ratio` (0.8) SWA
  tokens per full token for `is_hybrid_swa_model` architectures; any other model's window layers are full.
- Linear attention (`Mamba2StateShape.create`, `mamba_cache_per_req`): per request, conv state
  (value heads x value dim + 2 x key heads x key dim) x (kernel - 1) in 16 bits plus the recurrent state
  value heads x value dim x key dim in float32, per linear layer, both split over TP.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from sweep.cli import main
from sweep.engines import ENGINES
from sweep.engines.base import Engine
from sweep.engines.flags import params_from_flags
from sweep.engines.llamacpp_bundle import gemma_model
from sweep.engines.values import ServerSetup
from sweep.model.doctor import Diagnosis, diagnose, draft_refusal
from sweep.records import DraftKind
from tests.test_doctor import write_safetensors

MODELS = Path(__file__).parent / "models"
Tensors = dict[str, tuple[str, list[int]]]


# Gemma 3's text_config leaves its vocabulary to transformers' default (`Gemma3TextConfig`).
VOCAB_DEFAULT = 262208


def config_of(name: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((MODELS / name / "config.json").read_text())
    merged = {**config, **config["text_config"]} if "text_config" in config else config
    return {"vocab_size": VOCAB_DEFAULT, **merged}


def gqa(prefix: str, config: dict[str, Any]) -> Tensors:
    """A full-attention layer under the released names: q/k/v/o projections and the MLP's down projection."""
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    dim = config.get("head_dim") or hidden // heads
    kv = config["num_key_value_heads"] * dim
    return {
        f"{prefix}.self_attn.q_proj.weight": ("BF16", [heads * dim, hidden]),
        f"{prefix}.self_attn.k_proj.weight": ("BF16", [kv, hidden]),
        f"{prefix}.self_attn.v_proj.weight": ("BF16", [kv, hidden]),
        f"{prefix}.self_attn.o_proj.weight": ("BF16", [hidden, heads * dim]),
        f"{prefix}.mlp.down_proj.weight": ("BF16", [hidden, 1024]),
    }


def mla(prefix: str, config: dict[str, Any]) -> Tensors:
    """DeepSeek-V3's attention: the latent down-projection (kv_lora_rank + rope rows) and its up-projection."""
    hidden, latent = config["hidden_size"], config["kv_lora_rank"] + config["qk_rope_head_dim"]
    up = config["num_attention_heads"] * (config["qk_nope_head_dim"] + config["v_head_dim"])
    return {
        f"{prefix}.self_attn.kv_a_proj_with_mqa.weight": ("BF16", [latent, hidden]),
        f"{prefix}.self_attn.kv_b_proj.weight": ("BF16", [up, config["kv_lora_rank"]]),
        f"{prefix}.mlp.down_proj.weight": ("BF16", [hidden, 2048]),
    }


def linear(prefix: str, config: dict[str, Any]) -> Tensors:
    """A gated-delta-net layer (Qwen3-Next, Qwen3.5): no k/v projections, no KV cache."""
    return {f"{prefix}.linear_attn.in_proj_qkvz.weight": ("BF16", [12288, config["hidden_size"]])}


def decoder(config: dict[str, Any], prefix: str, attention: Any = gqa) -> Tensors:
    """Every decoder layer, full or linear as the config's layer plan says."""
    count = config["num_hidden_layers"]
    plan = config.get("layer_types") or [
        "linear_attention" if (i + 1) % config.get("full_attention_interval", 1) else "full_attention"
        for i in range(count)
    ]
    out: Tensors = {f"{prefix}.embed_tokens.weight": ("BF16", [config["vocab_size"], config["hidden_size"]])}
    for i, kind in enumerate(plan):
        out |= (
            linear(f"{prefix}.layers.{i}", config)
            if kind == "linear_attention"
            else attention(f"{prefix}.layers.{i}", config)
        )
    return out


def deepseek_mtp(config: dict[str, Any]) -> Tensors:
    """DeepSeek-V3 / GLM-4.5: the MTP layer is stored as the decoder layer after the last, with its own
    embedding, the two norms, eh_proj and a shared head."""
    index, hidden = config["num_hidden_layers"], config["hidden_size"]
    prefix = f"model.layers.{index}"
    attention = mla if "kv_lora_rank" in config else gqa
    return {
        **attention(prefix, config),
        f"{prefix}.embed_tokens.weight": ("BF16", [config["vocab_size"], hidden]),
        f"{prefix}.enorm.weight": ("BF16", [hidden]),
        f"{prefix}.hnorm.weight": ("BF16", [hidden]),
        f"{prefix}.eh_proj.weight": ("BF16", [hidden, 2 * hidden]),
        f"{prefix}.shared_head.norm.weight": ("BF16", [hidden]),
    }


def mimo_mtp(config: dict[str, Any]) -> Tensors:
    """MiMo: `model.mtp_layers.0.*` with token and hidden layernorms and an input projection."""
    hidden = config["hidden_size"]
    return {
        **gqa("model.mtp_layers.0", config),
        "model.mtp_layers.0.token_layernorm.weight": ("BF16", [hidden]),
        "model.mtp_layers.0.hidden_layernorm.weight": ("BF16", [hidden]),
        "model.mtp_layers.0.input_proj.weight": ("BF16", [hidden, 2 * hidden]),
        "model.mtp_layers.0.final_layernorm.weight": ("BF16", [hidden]),
    }


def qwen_mtp(config: dict[str, Any]) -> Tensors:
    """Qwen3-Next / Qwen3.5: `mtp.layers.0.*` (a full-attention layer) with `mtp.fc` and its norms."""
    hidden = config["hidden_size"]
    return {
        **gqa("mtp.layers.0", config),
        "mtp.fc.weight": ("BF16", [hidden, 2 * hidden]),
        "mtp.pre_fc_norm_embedding.weight": ("BF16", [hidden]),
        "mtp.pre_fc_norm_hidden.weight": ("BF16", [hidden]),
        "mtp.norm.weight": ("BF16", [hidden]),
    }


def checkpoint(
    tmp_path: Path, name: str, prefix: str = "model", mtp: Any = None, attention: Any = gqa
) -> Path:
    """The released config.json with safetensors headers under the released names (two files, the MTP layers
    in the second where the checkpoint has them)."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(MODELS / name / "config.json", folder / "config.json")
    config = config_of(name)
    write_safetensors(folder / "model-00001-of-00002.safetensors", decoder(config, prefix, attention))
    tail: Tensors = {"lm_head.weight": ("BF16", [config["vocab_size"], config["hidden_size"]])}
    write_safetensors(folder / "model-00002-of-00002.safetensors", tail | (mtp(config) if mtp else {}))
    return folder


def doctor(folder: Path, flags: list[str], engine: str = "sglang", tp: int | None = None) -> Diagnosis:
    runner: Engine = ENGINES[engine](ServerSetup([], str(folder)))
    params = params_from_flags(flags)
    return diagnose(folder, "auto", rules=runner.doctor_rules(params, tp), speculative=bool(flags) or None)


NEXTN = ["--speculative-algorithm", "NEXTN"]


def per_token(found: Diagnosis) -> dict[str, Any]:
    cost = found.to_dict()["per_token"]
    assert cost is not None
    return dict(cost)


def test_mla_one_latent_per_layer_the_same_on_every_gpu(tmp_path: Path) -> None:
    """DeepSeek-V3: (512 + 64) x 2 B = 1152 B a layer; 61 layers 70272 B, its MTP layer (model.layers.61)
    1152 B; at tp 8 the same, where 128 heads of K and V would have been x25 and then divided by 8."""
    folder = checkpoint(tmp_path, "deepseek-ai--DeepSeek-V3", mtp=deepseek_mtp, attention=mla)
    found = doctor(folder, NEXTN)
    g = found.geometry
    assert g.latent is not None and g.latent.value == 576 and g.kv_width is None
    assert g.draft_layers is not None and g.draft_layers.value == 1 and not g.disagreements, g.disagreements
    assert (per_token(found)["target"], per_token(found)["draft"]) == (61 * 1152, 1152)
    at_tp8 = per_token(doctor(folder, [*NEXTN, "--tp-size", "8"]))
    assert (at_tp8["target"], at_tp8["draft"], at_tp8["tensor_parallel"]) == (70272, 1152, 8)
    assert not [f for f in found.findings if not f.ok]


def test_deepseek_sparse_attention_adds_its_index_keys(tmp_path: Path) -> None:
    """DeepSeek-V3.2 (`index_topk`: DSA): each layer also caches index keys of 128 fp8 + 128 / 128 x 4 B of
    scale = 132 B (`_compute_dsa_indexer_cell_size`). At fp8 the latent is 512 fp8 + 512 / 128 x 4 B of scale +
    64 rope values in bf16 = 656 B (`calculate_mla_kv_cache_dim`): 788 B a layer, 61 layers 48068 B. At 16
    bits: 1152 + 132 = 1284 B a layer."""
    folder = checkpoint(tmp_path, "deepseek-ai--DeepSeek-V3.2-Exp", mtp=deepseek_mtp, attention=mla)
    runner = ENGINES["sglang"](ServerSetup([], str(folder)))
    fp8 = diagnose(folder, "fp8_e4m3", rules=runner.doctor_rules({"speculative-algorithm": "NEXTN"}))
    assert (per_token(fp8)["target"], per_token(fp8)["draft"]) == (61 * 788, 788)
    assert (per_token(doctor(folder, NEXTN))["target"], per_token(doctor(folder, NEXTN))["draft"]) == (
        61 * 1284,
        1284,
    )


@pytest.mark.parametrize(
    ("name", "tp", "target", "draft"),
    [
        # GLM-4.5: 8 KV heads x (128 + 128) x 2 B = 4096 B a layer, 92 layers; MTP at model.layers.92.
        ("zai-org--GLM-4.5", 1, 92 * 4096, 4096),
        # tp 8: one head a GPU, 512 B a layer; tp 16: still one (replicated), not half of one.
        ("zai-org--GLM-4.5", 8, 92 * 512, 512),
        ("zai-org--GLM-4.5", 16, 92 * 512, 512),
    ],
)
def test_gqa_heads_split_over_tp_and_replicated_past_them(
    tmp_path: Path, name: str, tp: int, target: int, draft: int
) -> None:
    folder = checkpoint(tmp_path, name, mtp=deepseek_mtp)
    found = doctor(folder, [*NEXTN, "--tp-size", str(tp)])
    assert not found.geometry.disagreements, found.geometry.disagreements  # 92 layers + 1 MTP, not "93"
    assert (per_token(found)["target"], per_token(found)["draft"]) == (target, draft)


def test_mimo_mtp_layers_in_their_own_namespace(tmp_path: Path) -> None:
    """MiMo-7B: 8 KV heads x 256 x 2 B = 4096 B a layer, 36 layers 147456 B; model.mtp_layers.0: 4096 B."""
    found = doctor(checkpoint(tmp_path, "XiaomiMiMo--MiMo-7B-RL", mtp=mimo_mtp), NEXTN)
    assert (per_token(found)["target"], per_token(found)["draft"]) == (147456, 4096)
    assert not found.geometry.disagreements


@pytest.mark.parametrize(
    ("name", "tp", "target"),
    [
        ("Qwen--Qwen3-8B", 1, 36 * 8 * 256 * 2),  # 147456: 8 KV heads of 128, K and V
        ("Qwen--Qwen3-30B-A3B", 1, 48 * 4 * 256 * 2),  # 98304: 4 KV heads
        ("Qwen--Qwen3-30B-A3B", 8, 48 * 1 * 256 * 2),  # 24576: 4 heads over 8 GPUs, one each
        ("meta-llama--Llama-3.1-8B-Instruct", 1, 32 * 8 * 256 * 2),  # 131072: the well-known 128 KiB
        ("meta-llama--Llama-3.3-70B-Instruct", 8, 80 * 1 * 256 * 2),  # 40960: 8 heads, one per GPU
    ],
)
def test_dense_and_moe_models_without_a_draft(tmp_path: Path, name: str, tp: int, target: int) -> None:
    found = doctor(checkpoint(tmp_path, name), ["--tp-size", str(tp)])
    cost = per_token(found)
    assert (cost["target"], cost["draft"], cost["sliding"], cost["state_per_request"]) == (target, 0, 0, 0)
    assert not found.geometry.disagreements, found.geometry.disagreements


def test_hybrid_linear_attention_state_per_request(tmp_path: Path) -> None:
    """Qwen3-Next-80B: 12 of 48 layers full (every 4th): 2 KV heads x (256 + 256) x 2 B = 2048 B, 24576 B a
    token, mtp.layers.0 2048 B; 36 gated-delta-net layers each hold (32 x 128 + 2 x 16 x 128) x 3 x 2 B =
    49152 B of conv state and 32 x 128 x 128 x 4 B = 2097152 B of recurrent state: 77266944 B a request.
    At tp 2: one KV head (12288 B a token) and half of each state (38633472 B)."""
    folder = checkpoint(tmp_path, "Qwen--Qwen3-Next-80B-A3B-Instruct", mtp=qwen_mtp)
    cost = per_token(doctor(folder, NEXTN))
    assert (cost["target"], cost["draft"], cost["state_per_request"]) == (24576, 2048, 36 * 2146304)
    cost = per_token(doctor(folder, [*NEXTN, "--tp-size", "2"]))
    assert (cost["target"], cost["draft"], cost["state_per_request"]) == (12288, 1024, 38633472)
    lines = "\n".join(doctor(folder, NEXTN).lines())
    assert "77266944 B (73.7 MiB) of linear-attention state per request" in lines


def test_a_multimodal_hybrid_under_text_config(tmp_path: Path) -> None:
    """Qwen3.5-9B: text_config's layer_types, 8 full layers x 4 KV heads x 512 x 2 B = 32768 B; MTP counted by
    mtp_num_hidden_layers and held under mtp.layers.0 (4096 B); 24 linear layers x 2146304 B a request."""
    folder = checkpoint(tmp_path, "Qwen--Qwen3.5-9B", prefix="model.language_model", mtp=qwen_mtp)
    found = doctor(folder, NEXTN)
    cost = per_token(found)
    assert (cost["target"], cost["draft"], cost["state_per_request"]) == (32768, 4096, 24 * 2146304)
    assert found.geometry.draft_layers_config is not None
    assert found.geometry.draft_layers_config.source.endswith("mtp_num_hidden_layers")


def test_sliding_windows_as_each_engine_pools_them(tmp_path: Path) -> None:
    """gpt-oss-20b, 12 full + 12 sliding layers of 8 KV heads x (64 + 64) x 2 B = 2048 B: SGLang pools the
    sliding ones apart (GptOssForCausalLM is hybrid SWA) at 0.8 SWA tokens per full token, so a full token
    costs 24576 + 0.8 x 24576 B; `--swa-full-tokens-ratio 0.5` halves the second part; llama.cpp's and vLLM's
    windows hold the window's tokens only. Gemma 3 27B is no hybrid-SWA architecture for SGLang: its 52
    sliding layers are priced as full ones, 62 x 16 KV heads x 256 x 2 B = 507904 B; elsewhere 10 full
    layers (every 6th) and 52 window layers."""
    oss = checkpoint(tmp_path, "openai--gpt-oss-20b")
    cost = per_token(doctor(oss, []))
    assert (cost["target"], cost["sliding"], cost["sliding_ratio"]) == (24576, 24576, 0.8)
    assert doctor(oss, []).geometry.token_bytes(2, False) == 24576 + round(0.8 * 24576)
    half = doctor(oss, ["--swa-full-tokens-ratio", "0.5"])
    assert half.geometry.token_bytes(2, False) == 24576 + 12288
    vllm = per_token(doctor(oss, [], engine="vllm"))
    assert (vllm["target"], vllm["sliding"], vllm["sliding_ratio"], vllm["sliding_window"]) == (
        24576,
        24576,
        None,
        128,
    )

    gemma = checkpoint(tmp_path, "google--gemma-3-27b-it", prefix="language_model.model")
    sglang = per_token(doctor(gemma, []))
    assert (sglang["target"], sglang["sliding"]) == (62 * 8192, 0)
    assert "as full layers" in sglang["sliding_pooled"]
    window = per_token(doctor(gemma, [], engine="vllm"))
    assert (window["target"], window["sliding"], window["sliding_window"]) == (10 * 8192, 52 * 8192, 1024)


def test_llama4_chunked_attention_is_sglangs_sliding_pool(tmp_path: Path) -> None:
    """Llama 4 Scout: `attention_chunk_size` 8192 on every layer but each 4th (`get_hybrid_layer_ids`), a
    hybrid-SWA architecture for SGLang: 12 full layers x 8 KV heads x 256 x 2 B = 49152 B a token, and 36
    chunked ones (147456 B) at 0.8 tokens per full token."""
    folder = checkpoint(tmp_path, "meta-llama--Llama-4-Scout-17B-16E-Instruct", prefix="language_model.model")
    cost = per_token(doctor(folder, []))
    assert (cost["target"], cost["sliding"], cost["sliding_layers"], cost["sliding_window"]) == (
        49152,
        147456,
        36,
        8192,
    )
    assert doctor(folder, []).geometry.token_bytes(2, False) == 49152 + round(0.8 * 147456)


def eagle_target(tmp_path: Path) -> Path:
    return checkpoint(tmp_path, "meta-llama--Llama-3.1-8B-Instruct")


def head(tmp_path: Path, name: str) -> Path:
    """A released EAGLE head: its config.json and its one decoder layer under the released names (EAGLE-3:
    `midlayer.*`, `fc` over three hidden states, the `d2t` vocabulary map; EAGLE: `layers.0.*` and `fc`)."""
    folder = tmp_path / name
    folder.mkdir()
    config = config_of(name)
    shutil.copy(MODELS / name / "config.json", folder / "config.json")
    hidden = config["hidden_size"]
    if "draft_vocab_size" in config:
        body = gqa("midlayer", config) | {
            "fc.weight": ("BF16", [hidden, 3 * hidden]),
            "d2t": ("I64", [config["draft_vocab_size"]]),
            "lm_head.weight": ("BF16", [config["draft_vocab_size"], hidden]),
        }
    else:
        body = gqa("layers.0", config) | {"fc.weight": ("BF16", [hidden, 2 * hidden])}
    write_safetensors(folder / "model.safetensors", body)
    return folder


def test_an_eagle3_head_launched_as_eagle_is_named_and_refused(tmp_path: Path) -> None:
    """SGLang launched with an EAGLE-3 head as EAGLE accepts nothing (accept length 1.00): the doctor names it,
    the sweep fails the trial before a server starts. As EAGLE3 it fits, and its one layer is priced at its
    own 8 KV heads x 256 x 2 B = 4096 B."""
    target, eagle3 = eagle_target(tmp_path), head(tmp_path, "yuhuili--EAGLE3-LLaMA3.1-Instruct-8B")
    flags = ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", str(eagle3)]
    found = doctor(target, flags)
    problem = next(f for f in found.findings if not f.ok)
    assert "loads an EAGLE-3 head (LlamaForCausalLMEagle3) as EAGLE" in problem.detail
    engine = ENGINES["sglang"](ServerSetup([], str(target)))
    why = draft_refusal(str(target), engine.doctor_rules(params_from_flags(flags)))
    assert why is not None and "launch it as EAGLE3" in why
    good = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(eagle3)]
    fits = doctor(target, good)
    assert all(f.ok for f in fits.findings) and per_token(fits)["draft"] == 4096
    assert draft_refusal(str(target), engine.doctor_rules(params_from_flags(good))) is None
    # The reverse: an EAGLE (1/2) head launched as EAGLE3.
    eagle = head(tmp_path, "yuhuili--EAGLE-LLaMA3-Instruct-8B")
    wrong = doctor(
        target, ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(eagle)]
    )
    assert any("not an EAGLE-3 head" in f.detail for f in wrong.findings if not f.ok)


def test_a_draft_for_another_model(tmp_path: Path) -> None:
    """The Llama 3.1 8B EAGLE-3 head held against Qwen3-8B: another vocabulary (128256 against 151936); a head
    whose hidden size is not the target's reads hidden states it was not trained on."""
    target = checkpoint(tmp_path, "Qwen--Qwen3-8B")
    eagle3 = head(tmp_path, "yuhuili--EAGLE3-LLaMA3.1-Instruct-8B")
    found = doctor(
        target, ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(eagle3)]
    )
    problems = " ".join(f.detail for f in found.findings if not f.ok)
    assert "vocabulary is 128256 tokens, the target's 151936" in problems
    wide = tmp_path / "wide"
    shutil.copytree(eagle3, wide)
    (wide / "config.json").write_text(
        json.dumps({**config_of("yuhuili--EAGLE3-LLaMA3.1-Instruct-8B"), "hidden_size": 5120})
    )
    found = doctor(
        eagle_target(tmp_path),
        ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(wide)],
    )
    assert any("hidden states of width 5120, the target's are 4096" in f.detail for f in found.findings)


def test_a_separate_draft_model_may_pad_its_vocabulary(tmp_path: Path) -> None:
    """STANDALONE with a small model of the same tokenizer whose embedding is padded otherwise (Qwen2.5 0.5B:
    151936 rows against 72B's 152064) fits; one of another tokenizer (Llama 3's 128256) does not."""
    target = checkpoint(tmp_path, "Qwen--Qwen3-8B")
    padded = tmp_path / "padded"
    padded.mkdir()
    (padded / "config.json").write_text(
        json.dumps({**config_of("Qwen--Qwen3-8B"), "vocab_size": 151936 + 128})
    )
    flags = ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path"]
    assert all(f.ok for f in doctor(target, [*flags, str(padded)]).findings)
    other = eagle_target(tmp_path)
    problems = [f.detail for f in doctor(target, [*flags, str(other)]).findings if not f.ok]
    assert problems and "vocabulary is 128256 tokens" in problems[0]


@pytest.mark.parametrize(
    ("name", "mtp", "why"),
    [
        # Kimi-K2 keeps DeepSeek-V3's architecture and says num_nextn_predict_layers: 0.
        ("moonshotai--Kimi-K2-Instruct", None, "config.json: num_nextn_predict_layers"),
        # Llama 3.1 has no MTP layers and no key for them: the tensors say none.
        ("meta-llama--Llama-3.1-8B-Instruct", None, "tensors:"),
    ],
)
def test_mtp_asked_of_a_model_without_mtp_layers(tmp_path: Path, name: str, mtp: Any, why: str) -> None:
    attention = mla if "kv_lora_rank" in config_of(name) else gqa
    folder = checkpoint(tmp_path, name, mtp=mtp, attention=attention)
    if name.startswith("moonshotai"):
        for f in folder.glob("*.safetensors"):  # config alone: the doctor reads the key
            f.unlink()
    found = doctor(folder, NEXTN)
    problem = next(f for f in found.findings if not f.ok)
    assert (
        "drafts with the checkpoint's MTP layers, and it has none" in problem.detail and why in problem.detail
    )


def test_a_checkpoint_that_dropped_its_mtp_layers(tmp_path: Path) -> None:
    """A GLM-4.5 repack whose config still says num_nextn_predict_layers: 1 but whose tensors lost layer 92
    (quantized releases do): the tensors decide, and the config's word is quoted."""
    found = doctor(checkpoint(tmp_path, "zai-org--GLM-4.5"), NEXTN)
    problem = next(f for f in found.findings if f.what == "the draft does not fit the model")
    assert "although config.json: num_nextn_predict_layers says 1" in problem.detail


def test_the_json_has_every_part_per_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = checkpoint(tmp_path, "Qwen--Qwen3-Next-80B-A3B-Instruct", mtp=qwen_mtp)
    assert (
        main(["doctor", str(folder), "--json", "--", "--speculative-algorithm", "NEXTN", "--tp-size", "2"])
        == 0
    )
    cost = json.loads(capsys.readouterr().out)["per_token"]
    assert cost == {
        "kv_bytes_per_element": 2,
        "tensor_parallel": 2,
        "target": 12288,
        "draft": 1024,
        "sliding": 0,
        "sliding_layers": 0,
        "sliding_window": None,
        "sliding_ratio": None,
        "sliding_pooled": "SGLang pools Qwen3NextForCausalLM's windows as full layers",
        "state_per_request": 38633472,
    }


def test_the_draft_kinds_each_engine_reads_from_its_flags(tmp_path: Path) -> None:
    target = str(eagle_target(tmp_path))
    cases = [
        ("sglang", {"speculative-algorithm": "NEXTN"}, DraftKind.MTP),
        ("sglang", {"speculative-algorithm": "EAGLE"}, DraftKind.MTP),  # path-less EAGLE: the model's MTP
        ("sglang", {"speculative-algorithm": "EAGLE", "speculative-draft-model-path": "/h"}, DraftKind.EAGLE),
        (
            "sglang",
            {"speculative-algorithm": "STANDALONE", "speculative-draft-model-path": "/h"},
            DraftKind.MODEL,
        ),
        ("vllm", {"speculative-config.method": "deepseek_mtp"}, DraftKind.MTP),
        ("vllm", {"speculative-config.method": "eagle3", "speculative-config.model": "/h"}, DraftKind.EAGLE3),
        ("llamacpp", {"spec-type": "draft-mtp"}, DraftKind.MTP),
        ("llamacpp", {"spec-type": "draft-simple", "spec-draft-model": "/h"}, DraftKind.MODEL),
    ]
    for engine, params, kind in cases:
        ask = ENGINES[engine](ServerSetup([], target)).draft_ask(params)
        assert ask is not None and ask.kind is kind, (engine, params, ask)
    assert ENGINES["sglang"](ServerSetup([], target)).draft_ask({"speculative-algorithm": "NGRAM"}) is None
    assert ENGINES["llamacpp"](ServerSetup([], target)).draft_ask({"spec-type": "ngram-mod"}) is None


def test_llama_server_mtp_asked_of_a_gguf_without_nextn_layers() -> None:
    """The demo's real GGUF (Gemma 3 270M) has no `gemma3.nextn_predict_layers`: `--spec-type draft-mtp` is
    named before launch; the same file as its own draft model (`draft-simple -md`) shares its vocabulary."""
    model = gemma_model()
    engine = ENGINES["llamacpp"](ServerSetup([], str(model)))
    mtp = engine.doctor_rules({"spec-type": "draft-mtp"})
    why = draft_refusal(str(model), mtp)
    assert why is not None and "--spec-type draft-mtp drafts with the checkpoint's MTP layers" in why
    assert "gguf: no gemma3.nextn_predict_layers" in why
    same = engine.doctor_rules({"spec-type": "draft-simple", "spec-draft-model": str(model)})
    assert draft_refusal(str(model), same) is None
