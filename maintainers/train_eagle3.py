"""Train an EAGLE3 draft for a Llama-architecture target with vLLM's `speculators` (0.9.0), and export it for SGLang.

Runs on a GPU host with its own torch and transformers (speculators 0.9.0 takes torch 2.9-2.14 and transformers
5.0-5.19). SpecForge 0.2.0 was not used: it removed its Hugging Face
target backend ("HF/custom target backends were removed with the server-only cutover", config/schema.py) and
captures hidden states only through an SGLang 0.5.14 server whose model runner it patches. 0.5.14 pins the host's
torch 2.11.0, but with its own kernels (sglang-kernel 0.4.4, flashinfer 0.6.12) and transformers 5.8.1 against the
host's 5.17: a second SGLang install beside the 0.5.17 one the study served. Not tried.

speculators trains from hidden states that a vLLM server extracts; where vLLM is not installed, the one thing it
would do is done here with transformers, in the file layout speculators' `FileTransfer` reads from
`DATA/hidden_states/hs_{i}.safetensors` (keys `token_ids` [T] and `hidden_states` [T, 4, H]: the three auxiliary
layers, then the last layer before the final norm, which speculators passes through the verifier's own norm and
head for the target logits). The auxiliary layers are the inputs of layers 2, L/2 and L-3, the ones SGLang
captures when the draft's config names none (`set_eagle3_layers_to_capture`), so training and serving agree.

Steps (each reads the previous one's files, so a step can be run again alone):
  generate  the target's own greedy replies to chat prompts (on-policy text, as EAGLE3 recipes regenerate it)
  hidden    the target's hidden states for each prompt + reply, and speculators' dataset (input_ids, loss_mask)
  train     `python -m speculators.train` (1 draft layer, the full vocabulary, 3 test-time-training steps)
  export    the newest checkpoint as SGLang's `LlamaForCausalLMEagle3` folder (config names and weight names)

Usage: python train_eagle3.py all|generate|hidden|train|export TARGET_DIR PROMPTS.jsonl WORK_DIR [options]
(export reads the target's dtype with specsweep's own rule: the checkout on PYTHONPATH)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("step", choices=["all", "generate", "hidden", "train", "export"])
    p.add_argument("target", type=Path, help="the target's Hugging Face folder")
    p.add_argument("prompts", type=Path, help="JSON Lines of {prompt: ...}: the chat prompts to train on")
    p.add_argument("work", type=Path)
    p.add_argument("--samples", type=int, default=1536)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument(
        "--train-seconds", type=int, default=180, help="then stop: the newest epoch's checkpoint is kept"
    )
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--total-seq-len", type=int, default=4096)
    p.add_argument(
        "--draft-vocab",
        type=int,
        default=16384,
        help="the replies' most frequent tokens (SGLang maps them: d2t)",
    )
    p.add_argument("--device", default="cuda")
    p.add_argument(
        "--train-arg", action="append", default=[], help="passed to speculators.train (repeatable)"
    )
    return p.parse_args(argv)


def aux_layers(num_layers: int) -> list[int]:
    """SGLang's default EAGLE3 capture points (inputs of these layers), speculators' default ids."""
    return [2, num_layers // 2, num_layers - 3]


def load_target(args: argparse.Namespace) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.target)
    model = AutoModelForCausalLM.from_pretrained(args.target, dtype=torch.bfloat16).to(args.device).eval()
    return tokenizer, model


def generate(args: argparse.Namespace) -> None:
    """The target's greedy replies (as the study asks: temperature 0), up to max_new_tokens each."""
    import torch

    tokenizer, model = load_target(args)
    tokenizer.padding_side = "left"
    prompts = [json.loads(line)["prompt"] for line in args.prompts.read_text().splitlines() if line.strip()]
    prompts = prompts[: args.samples]
    rows = []
    t0 = time.time()
    for start in range(0, len(prompts), args.batch):
        chunk = prompts[start : start + args.batch]
        texts = [
            tokenizer.apply_chat_template(
                [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
            )
            for p in chunk
        ]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(args.device)
        with torch.no_grad():
            out = model.generate(
                **enc,
                max_new_tokens=args.max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        width = enc["input_ids"].shape[1]
        for i, prompt in enumerate(chunk):
            prompt_ids = [
                int(t) for t, m in zip(enc["input_ids"][i], enc["attention_mask"][i], strict=True) if int(m)
            ]
            reply = [int(t) for t in out[i, width:]]
            if tokenizer.eos_token_id in reply:  # keep the end of turn: the draft learns to end a reply too
                reply = reply[: reply.index(tokenizer.eos_token_id) + 1]
            rows.append({"prompt": prompt, "prompt_ids": prompt_ids, "reply_ids": reply})
        print(f"generated {len(rows)}/{len(prompts)} in {time.time() - t0:.0f} s", flush=True)
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / "replies.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    reply_tokens = sum(len(r["reply_ids"]) for r in rows)
    print(f"replies: {len(rows)}, {reply_tokens} tokens, {time.time() - t0:.0f} s", flush=True)


def hidden(args: argparse.Namespace) -> None:
    """Hidden states for each row, in speculators' file layout, and its dataset (input_ids, loss_mask, seq_len)."""
    import torch
    from datasets import Dataset
    from safetensors.torch import save_file
    from speculators.train.vocab_mapping import save_token_frequency_distribution

    _, model = load_target(args)
    layers = model.model.layers
    wanted = aux_layers(len(layers))
    captured: dict[str, Any] = {}

    def keep(name: str) -> Any:
        def hook(_module: Any, hook_args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            captured[name] = hook_args[0] if hook_args else kwargs["hidden_states"]

        return hook

    for index in wanted:
        layers[index].register_forward_pre_hook(keep(f"aux{index}"), with_kwargs=True)
    model.model.norm.register_forward_pre_hook(keep("last"), with_kwargs=True)

    rows = [json.loads(line) for line in (args.work / "replies.jsonl").read_text().splitlines()]
    data = args.work / "data"
    states = data / "hidden_states"
    states.mkdir(parents=True, exist_ok=True)
    columns: dict[str, list[Any]] = {"input_ids": [], "loss_mask": [], "seq_len": []}
    t0 = time.time()
    for row in rows:
        if not row["reply_ids"]:
            continue
        ids = row["prompt_ids"] + row["reply_ids"]
        index = len(columns["input_ids"])
        with torch.no_grad():
            model.model(input_ids=torch.tensor([ids], device=args.device))
        stacked = torch.stack([captured[f"aux{i}"][0] for i in wanted] + [captured["last"][0]], dim=1)
        save_file(
            {"token_ids": torch.tensor(ids), "hidden_states": stacked.to(torch.bfloat16).cpu().contiguous()},
            str(states / f"hs_{index}.safetensors"),
        )
        columns["input_ids"].append(ids)
        columns["loss_mask"].append([0] * len(row["prompt_ids"]) + [1] * len(row["reply_ids"]))
        columns["seq_len"].append(len(ids))
    dataset = Dataset.from_dict(columns)
    # speculators compares its rows with tensors (as its own preprocessing saves them)
    dataset.set_format(type="torch")
    dataset.save_to_disk(str(data))
    # the replies' token counts, from which speculators picks the draft's vocabulary (--draft-vocab-size)
    save_token_frequency_distribution(dataset, data / "token_freq.pt")
    tokens = sum(columns["seq_len"])
    print(
        f"hidden states: {len(columns['seq_len'])} rows, {tokens} tokens, layers {wanted} + last, "
        f"{time.time() - t0:.0f} s",
        flush=True,
    )


def verifier_folder(args: argparse.Namespace) -> Path:
    """The target as speculators reads it: a tied head is written out as `lm_head.weight` (speculators looks the
    verifier's head up by that name), everything else linked."""
    from safetensors.torch import load_file, save_file

    out = args.work / "verifier"
    out.mkdir(parents=True, exist_ok=True)
    for item in args.target.iterdir():
        if item.name != "model.safetensors" and not (out / item.name).exists():
            (out / item.name).symlink_to(item.resolve())
    if not (out / "model.safetensors").exists():
        weights = load_file(str(args.target / "model.safetensors"))
        weights.setdefault("lm_head.weight", weights["model.embed_tokens.weight"].clone())
        save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


# SGLang 0.5.17's EAGLE3 first layer keeps the target's hidden state as its residual before `hidden_norm`
# (`llama_eagle3.py`); speculators' default takes it after the norm (`norm_before_residual`, a flag with no
# CLI negation), so the draft is trained the way SGLang serves it. norm_before_fc and norm_output SGLang reads.
TRAIN_CONFIG = "train:\n  draft:\n    norm_before_residual: false\n"


def train(args: argparse.Namespace) -> None:
    verifier = verifier_folder(args)
    config = args.work / "train.yaml"
    config.write_text(TRAIN_CONFIG)
    flags: dict[str, object] = {
        "config": config,
        "speculator-type": "eagle3",
        "verifier-name-or-path": verifier,
        "data-path": args.work / "data",
        "save-path": args.work / "checkpoints",
        "log-dir": args.work / "logs",
        "on-missing": "raise",
        "num-layers": 1,
        "draft-vocab-size": args.draft_vocab,
        "epochs": args.epochs,
        "lr": args.lr,
        "total-seq-len": args.total_seq_len,
        "train-data-ratio": 0.95,
        "num-workers": 8,
        "draft-attn-impl": "sdpa",
        # speculators' fused Triton loss under torch.compile dies in dynamo on the host's torch 2.11 / triton 3.6
        # ("ListVariable ... is already tracked for mutation", losses/fused.py): its eager loss, compile off
        "loss-implementation": "eager",
    }
    argv = [
        sys.executable,
        "-m",
        "speculators.train",
        *(word for flag, value in flags.items() for word in (f"--{flag}", str(value))),
        *args.train_arg,
    ]
    print("$ " + " ".join(argv), flush=True)
    t0 = time.time()
    env = {**os.environ, "TORCHDYNAMO_DISABLE": "1"}
    with subprocess.Popen(argv, start_new_session=True, env=env) as trainer:
        try:
            rc = trainer.wait(timeout=args.train_seconds)
        except subprocess.TimeoutExpired:
            os.killpg(trainer.pid, signal.SIGTERM)  # speculators unwinds on SIGTERM; its saved epochs stay
            rc = trainer.wait()
            print(f"stopped after {args.train_seconds} s: the newest saved epoch is the draft", flush=True)
    print(f"trained in {time.time() - t0:.0f} s (rc {rc})", flush=True)


def newest_checkpoint(root: Path) -> Path:
    """The last whole epoch's checkpoint (speculators names them 0, 1, ...); one written while the trainer was
    stopped (`interrupted`) may be cut short, so it is the draft only where no epoch ended."""
    epochs = sorted(
        (p for p in root.glob("[0-9]*") if (p / "config.json").is_file()), key=lambda p: int(p.name)
    )
    found = epochs or sorted((p.parent for p in root.rglob("config.json")), key=lambda p: p.stat().st_mtime)
    if not found:
        raise SystemExit(f"no checkpoint under {root}")
    return found[-1]


# speculators' names -> SGLang 0.5.17 `LlamaForCausalLMEagle3` (which prefixes `model.` where it must).
# The embedding is the target's (SGLang's EAGLE3 worker sets it from the target: `set_embed`), so it is not kept.
DROPPED = ("verifier_norm.", "verifier_lm_head.", "t2d", "embed_tokens.")


def export(args: argparse.Namespace) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    from sweep.releases.sglang_rules import auto_dtype

    checkpoint = newest_checkpoint(args.work / "checkpoints")
    spec = json.loads((checkpoint / "config.json").read_text())
    layer = spec["transformer_layer_config"]
    target = json.loads((args.target / "config.json").read_text())
    weights: dict[str, Any] = {}
    for file in sorted(checkpoint.glob("*.safetensors")):
        weights.update(load_file(str(file)))
    # The draft in the target's dtype: SGLang runs each model in its config's dtype, and an EAGLE3 draft of another
    # one concatenates the target's embeddings with its own hidden state into float32 (0.5.17 on the H100:
    # "expected mat1 and mat2 to have the same dtype, but got: float != c10::BFloat16" in the draft's capture).
    dtype = auto_dtype(target)  # as SGLang resolves `--dtype auto`: the rule specsweep checks a draft against
    kept = {
        name: tensor.to(getattr(torch, dtype)) if tensor.is_floating_point() else tensor
        for name, tensor in weights.items()
        if not name.startswith(DROPPED)
    }
    vocab = int(kept["lm_head.weight"].shape[0])
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": layer["hidden_size"],
        "intermediate_size": layer["intermediate_size"],
        "num_hidden_layers": 1,
        "num_attention_heads": layer["num_attention_heads"],
        "num_key_value_heads": layer["num_key_value_heads"],
        "head_dim": layer.get("head_dim") or layer["hidden_size"] // layer["num_attention_heads"],
        "hidden_act": layer.get("hidden_act", "silu"),
        "rms_norm_eps": layer["rms_norm_eps"],
        "max_position_embeddings": target["max_position_embeddings"],
        "rope_theta": target.get("rope_theta", 10000.0),
        "vocab_size": target["vocab_size"],
        "draft_vocab_size": vocab,
        "target_hidden_size": target["hidden_size"],
        "tie_word_embeddings": False,
        # the draft's own norms, as speculators trained it (SGLang reads these names)
        "norm_before_fc": bool(spec.get("norm_before_fc")),
        "norm_output": bool(spec.get("norm_output")),
        "fc_norm": bool(spec.get("fc_norm")),
        "bos_token_id": target.get("bos_token_id"),
        "eos_token_id": target.get("eos_token_id"),
        "torch_dtype": dtype,
    }
    out = args.work / "sglang-eagle3"
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    save_file(
        {k: v.contiguous() for k, v in kept.items()},
        str(out / "model.safetensors"),
        metadata={"format": "pt"},
    )
    (out / "source.json").write_text(
        json.dumps({"checkpoint": str(checkpoint), "speculators_config": spec}, indent=2)
    )
    size = sum(v.numel() for v in kept.values())
    print(
        f"exported {checkpoint} -> {out}: {len(kept)} tensors, {size / 1e6:.1f} M parameters, "
        f"draft vocabulary {vocab}; names: {sorted(kept)}",
        flush=True,
    )
    return out


def main() -> None:
    args = parse(sys.argv[1:])
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    steps = ["generate", "hidden", "train", "export"] if args.step == "all" else [args.step]
    for step in steps:
        t0 = time.time()
        {"generate": generate, "hidden": hidden, "train": train, "export": export}[step](args)
        print(f"== {step} done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
