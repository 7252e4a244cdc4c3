"""Tiny model folders for SGLang's --load-format dummy (random weights): a byte-level BPE tokenizer trained here on
English and code text, a 4-layer Llama target and a 1-layer EAGLE draft that share it.

Usage: python3 maintainers/tiny_model.py DIR TEXT_FILE_OR_DIR...   (needs the `tokenizers` package only)
Writes DIR/tiny-llama (config.json, generation_config.json, tokenizer.json, tokenizer_config.json) and
DIR/tiny-llama-eagle (config.json + the same tokenizer files).
"""

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

out = Path(sys.argv[1])
files: list[str] = []
for arg in sys.argv[2:]:
    p = Path(arg)
    files += (
        [str(f) for f in sorted(p.rglob("*")) if f.is_file() and f.suffix in {".py", ".md", ".txt"}]
        if p.is_dir()
        else [str(p)]
    )

VOCAB = 8192
SPECIAL = ["<|pad|>", "<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>"]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(
    vocab_size=VOCAB,
    special_tokens=SPECIAL,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False,
)
tok.train(files, trainer)
ids = {t: tok.token_to_id(t) for t in SPECIAL}
CHAT = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
tok_config = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": "<|bos|>",
    "eos_token": "<|im_end|>",
    "pad_token": "<|pad|>",
    "unk_token": None,
    "add_bos_token": False,
    "model_max_length": 8192,
    "chat_template": CHAT,
}
vocab = tok.get_vocab_size()
target = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "hidden_act": "silu",
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "vocab_size": vocab,
    "bos_token_id": ids["<|bos|>"],
    "eos_token_id": ids["<|im_end|>"],
    "pad_token_id": ids["<|pad|>"],
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
draft = dict(target, architectures=["LlamaForCausalLMEagle"], num_hidden_layers=1)
for name, config in (("tiny-llama", target), ("tiny-llama-eagle", draft)):
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config, indent=2))
    (d / "generation_config.json").write_text(
        json.dumps(
            {"bos_token_id": ids["<|bos|>"], "eos_token_id": ids["<|im_end|>"], "do_sample": False}, indent=2
        )
    )
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2))
    (d / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": "<|bos|>", "eos_token": "<|im_end|>", "pad_token": "<|pad|>"}, indent=2)
    )
enc = tok.encode("def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n")
print(f"vocab {vocab}, specials {ids}, {len(files)} files; sample: {len(enc.ids)} tokens: {enc.tokens[:12]}")
