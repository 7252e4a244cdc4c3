#!/bin/bash
# Build the carried site folder and tarballs (from the project checkout root, after fetch_wheels.sh), with any local
# Python 3.12 (PY312=...): pip only unpacks wheels here, nothing is imported.
set -e
PY=${PY312:-python3.12}
PROJECT=${PROJECT:?set PROJECT to the specsweep checkout}
rm -rf .s4/site && mkdir -p .s4/site .s4/c
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .s4/site \
  .s4/dl/sglang-0.5.17-*.whl .s4/dl/sglang_kernel-*.whl .s4/dl/flashinfer_python-*.whl .s4/dl/apache_tvm_ffi-*.whl \
  .s4/dl/xgrammar-*.whl .s4/whl/*.whl .s4/whl_ss/*.whl
cd .s4/site
# sglang-kernel 0.4.5 is 1.2 GB unpacked; FA3 (flash_ops 1.1 GB), FlashMLA, InfLLM and the sm100 build are not
# needed with --attention-backend triton on sm90 (sm90/common_ops.abi3.so, 19 MB, needs libcudart.so.13).
rm -f sgl_kernel/flash_ops.abi3.so sgl_kernel/infllm_ops*.so sgl_kernel/flashmla_ops.abi3.so
rm -rf sgl_kernel/sm100 xgrammar/lib/libxgrammar.a share bin
# flashinfer is only imported (layers/attention/vision.py, layers/sampler.py import it under is_cuda()); its JIT
# sources are dropped, so SGLANG_IS_FLASHINFER_AVAILABLE=false and the sgl_kernel patch in dev_common.sh are needed.
rm -rf flashinfer/data/cutlass flashinfer/data/cccl flashinfer/data/csrc flashinfer/data/include flashinfer/data/spdlog
# IPython is imported by sglang/utils.py (sglang/__init__ -> lang.api) for notebook display only: a stand-in.
mkdir -p IPython
printf '"""Stand-in for IPython: sglang.utils imports IPython.display for notebook helpers only."""\n' > IPython/__init__.py
printf 'class HTML:\n    def __init__(self, data=None, *a, **k):\n        self.data = data\n\n\ndef display(*objs, **k):\n    for o in objs:\n        print(getattr(o, "data", o))\n' > IPython/display.py
cd ../..
tar -C .s4/site -cf - . | xz -T1 -6 > .s4/c/site.tar.xz          # 56 MB (225 MB unpacked), 1 min 49 s on one core
git -C "$PROJECT" archive --format=tar.gz -o "$(pwd)/.s4/c/specsweep.tar.gz" HEAD
# tokenizers needed here only: pip install --target SOMEWHERE tokenizers
python3 gpu/sglang/make_model.py .s4/models "${CORPUS:-$PROJECT/sweep}" "$PROJECT/docs" && tar -czf .s4/c/models.tar.gz -C .s4/models .
ls -la .s4/c   # the carry: [".s4/c"], 57 MB with the repo's own files: under the 64 MiB limit
