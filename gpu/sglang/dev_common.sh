# Sourced by the GPU-host calls: unpack the carried site (once per warm machine) and set the environment.
# Carried (an ignored folder of the checkout): .s4/c/site.tar.xz, .s4/c/models.tar.gz, .s4/c/specsweep.tar.gz
W=$HOME/w
R=$(pwd)
S=$R/gpu/sglang
if [ ! -f $W/.ready ]; then
  t=$(date +%s)
  mkdir -p $W/site $W/models $W/specsweep
  xz -dc .s4/c/site.tar.xz | tar -x -C $W/site
  [ -f .s4/c/models.tar.gz ] && tar xzf .s4/c/models.tar.gz -C $W/models  # the tiny random-weight models
  tar xzf .s4/c/specsweep.tar.gz -C $W/specsweep
  touch $W/.ready
  echo "unpacked in $(( $(date +%s) - t )) s"
else
  echo "site already unpacked (warm machine)"
fi
# Patches (idempotent, every call):
# 1. sglang 0.5.17 pins transformers 5.12.1; the GPU host's 5.17.0 already registers "qwen3_asr", and
#    sglang/srt/configs/qwen3_asr.py:167-168 registers it again without exist_ok (ValueError at import).
sed -i 's/AutoConfig.register("qwen3_asr", Qwen3ASRConfig)$/AutoConfig.register("qwen3_asr", Qwen3ASRConfig, exist_ok=True)/; s/AutoConfig.register("qwen3_asr_thinker", Qwen3ASRThinkerConfig)$/AutoConfig.register("qwen3_asr_thinker", Qwen3ASRThinkerConfig, exist_ok=True)/' $W/site/sglang/srt/configs/qwen3_asr.py
# 2. sgl_kernel 0.4.5 routes rmsnorm / fused_add_rmsnorm / sampling through flashinfer whenever flashinfer imports,
#    and flashinfer JIT-compiles them from its data/ sources (not carried). Honour the same switch SGLang reads
#    (SGLANG_IS_FLASHINFER_AVAILABLE=false) so sgl_kernel's own precompiled ops (sm90/common_ops) run instead.
sed -i 's/^    _has_flashinfer = True$/    _has_flashinfer = __import__("os").environ.get("SGLANG_IS_FLASHINFER_AVAILABLE", "true").lower() not in ("0", "false")/' $W/site/sgl_kernel/elementwise.py $W/site/sgl_kernel/sampling.py
grep -c "exist_ok=True" $W/site/sglang/srt/configs/qwen3_asr.py; grep -c "SGLANG_IS_FLASHINFER_AVAILABLE" $W/site/sgl_kernel/elementwise.py $W/site/sgl_kernel/sampling.py
export PYTHONPATH=$W/site:$W/specsweep PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# flashinfer is carried only because http_server's import chain (layers/attention/vision.py) imports
# flashinfer.prefill under is_cuda(); this keeps SGLang from choosing (and JIT-compiling) its kernels.
export SGLANG_IS_FLASHINFER_AVAILABLE=false
export MODEL=${MODEL:-$W/models/tiny-llama} DRAFT=${DRAFT:-$W/models/tiny-llama-eagle}
# 3. EAGLE's draft CUDA graphs import deep_gemm (layers/attention/dsa_backend.py): carried as a wheel when present.
if ls .s4/c/sgl_deep_gemm-*.whl >/dev/null 2>&1 && [ ! -d $W/site/deep_gemm ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target $W/site .s4/c/sgl_deep_gemm-*.whl
  echo "deep_gemm installed: $(ls -d $W/site/deep_gemm)"
fi
