#!/bin/bash
# Fetch here (the package registries are reachable here, not from the GPU host) what a vLLM 0.34.0 site folder
# needs beside the GPU host's own packages (torch 2.11.0+cu130, transformers 5.17, triton 3.6, numba 0.68) and
# the pure-Python packages the SGLang site already carries (llguidance, for one structured-output backend, is
# left out: 0.34 asks 1.7, which PyPI here does not hold) (gpu/sglang/build_site.sh: fastapi, uvicorn, pydantic,
# msgspec, pyzmq, ...): the wheel and the needs of its server that those lack or hold too old.
set -e
mkdir -p .s4/vllm34 .s4/vdl
pip download --no-deps vllm==0.34.0 -d .s4/vllm34
pip download --no-deps --only-binary :all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d .s4/vdl \
  'tokenizers>=0.23.3' 'openai>=2.25.0' 'xgrammar==0.2.8' blake3 cbor2 cachetools \
  'prometheus-fastapi-instrumentator>=8.0.0' py-cpuinfo ijson 'depyf==0.20.0' astor \
  'outlines_core==0.2.14' 'lark==1.2.2' 'lm-format-enforcer==0.11.3' tiktoken diskcache python-json-logger \
  watchfiles einops partial-json-parser 'compressed-tensors==0.17.0' 'mistral_common>=1.13.0' \
  'model-hosting-container-standards>=0.1.14,<1.0.0' 'oss-harmony>=0.0.11'
ls -la .s4/vllm34 .s4/vdl
