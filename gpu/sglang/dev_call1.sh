#!/bin/bash
# GPU-host call 1: install, import check, --help, then the real server by hand: NGRAM, EAGLE (forced acceptance).
# Usage (GPU host, checkout root): bash gpu/sglang/dev_call1.sh [SECONDS]
set -o pipefail
T0=$(date +%s); END=$((T0 + ${1:-550}))
source gpu/sglang/dev_common.sh
export OUT_DIR=$W/res/c1; mkdir -p $OUT_DIR
L=$OUT_DIR/call1.log
left() { echo $(( END - $(date +%s) )); }
pack() { tar czf $OUT/c1.tgz -C $W/res c1; cp $L $OUT/call1.log; }
{
  date -u; nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv; nvcc --version | tail -1
  python3 -c "import sys,torch,transformers,triton; print(sys.version.split()[0], torch.__version__, torch.version.cuda, transformers.__version__, triton.__version__)"
  python3 - <<'PY'
import importlib.metadata as m
for n in ["sglang","sglang-kernel","flashinfer-python","apache-tvm-ffi","xgrammar","fastapi","uvicorn","pydantic","tokenizers","numpy","optuna","httpx","pandas"]:
    try: print(n, m.version(n))
    except Exception as e: print(n, "MISSING")
PY
} 2>&1 | tee $L
IMPORTS="import sglang, sglang.srt.entrypoints.http_server, sglang.srt.managers.scheduler, sglang.srt.managers.detokenizer_manager, sglang.srt.model_executor.model_runner, sglang.srt.models.llama, sglang.srt.models.llama_eagle, sglang.srt.speculative.ngram_worker, sglang.srt.speculative.eagle_worker_v2, sglang.srt.layers.attention.triton_backend"
# Any further "'X' is already used by a Transformers config" at import: add exist_ok=True on that line, retry.
for i in 1 2 3 4 5 6; do
  python3 -c "$IMPORTS" > $OUT_DIR/import-try$i.txt 2>&1 && break
  key=$(grep -o "ValueError: '[^']*' is already used by a Transformers config" $OUT_DIR/import-try$i.txt | cut -d"'" -f2)
  [ -z "$key" ] && break
  f=$(grep -B8 "already used by a Transformers config" $OUT_DIR/import-try$i.txt | grep -o "$W/site/sglang/[^\"]*" | tail -1)
  echo "patching $f for $key" | tee -a $L
  sed -i "s/AutoConfig.register(\"$key\", \([A-Za-z0-9_]*\))/AutoConfig.register(\"$key\", \1, exist_ok=True)/" $f
done
t=$(date +%s)
python3 -c "import sglang, sglang.srt.entrypoints.http_server, sglang.srt.managers.scheduler, sglang.srt.managers.detokenizer_manager, sglang.srt.model_executor.model_runner, sglang.srt.models.llama, sglang.srt.models.llama_eagle, sglang.srt.speculative.ngram_worker, sglang.srt.speculative.eagle_worker_v2, sglang.srt.layers.attention.triton_backend; print('imports ok')" > $OUT_DIR/import.txt 2>&1
rc=$?; echo "import check rc=$rc in $(( $(date +%s) - t )) s" | tee -a $L; tail -5 $OUT_DIR/import.txt | tee -a $L
if [ $rc != 0 ]; then
  python3 $S/probe_imports.py sglang sglang.srt.entrypoints.http_server sglang.srt.managers.scheduler sglang.srt.managers.detokenizer_manager sglang.srt.model_executor.model_runner sglang.srt.models.llama sglang.srt.models.llama_eagle sglang.srt.speculative.ngram_worker sglang.srt.speculative.eagle_worker_v2 > $OUT_DIR/probe.txt 2>&1
  grep -A80 MISSING $OUT_DIR/probe.txt | tee -a $L
fi
t=$(date +%s)
python3 -m sglang.launch_server --help > $OUT_DIR/help.txt 2> $OUT_DIR/help.err; echo "help rc=$? in $(( $(date +%s) - t )) s, $(grep -c -- '--' $OUT_DIR/help.txt) lines" | tee -a $L
tail -3 $OUT_DIR/help.err | tee -a $L
pack
COMMON="--load-format dummy --attention-backend triton --sampling-backend pytorch --cuda-graph-max-bs-decode 8 --cuda-graph-backend-prefill disabled --context-length 4096"
# 1. NGRAM (no draft model)
python3 $S/manual.py ngram $(( $(date +%s) + 300 < END - 60 ? $(date +%s) + 300 : END - 60 )) --speculative-algorithm NGRAM --speculative-num-draft-tokens 8 $COMMON 2>&1 | tee -a $L
grep -E "Error|error|Traceback" $OUT_DIR/ngram/server.log | head -5 | tee -a $L
tail -4 $OUT_DIR/ngram/server.log | tee -a $L
nvidia-smi --query-gpu=memory.used --format=csv,noheader | tee -a $L
pack
if [ ! -f $OUT_DIR/ngram/server_info.json ] && [ $(left) -gt 150 ]; then
  # fall back: no CUDA graphs at all
  python3 $S/manual.py ngram-nograph $(( END - 40 )) --speculative-algorithm NGRAM --speculative-num-draft-tokens 8 --load-format dummy --attention-backend triton --sampling-backend pytorch --disable-cuda-graph --context-length 4096 2>&1 | tee -a $L
  tail -4 $OUT_DIR/ngram-nograph/server.log | tee -a $L
  pack
fi
# 2. EAGLE with a dummy draft and forced acceptance 3.0 (match-expected, fixed token)
if [ $(left) -gt 120 ]; then
  SGLANG_SIMULATE_ACC_LEN=3 SGLANG_SIMULATE_ACC_METHOD=match-expected SGLANG_SIMULATE_ACC_TOKEN_MODE=fixed \
  python3 $S/manual.py eagle-acc3 $(( END - 30 )) --speculative-algorithm EAGLE --speculative-draft-model-path $DRAFT --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 $COMMON 2>&1 | tee -a $L
  grep -E "Error|Traceback" $OUT_DIR/eagle-acc3/server.log | head -5 | tee -a $L
  tail -4 $OUT_DIR/eagle-acc3/server.log | tee -a $L
fi
echo "call1 done in $(( $(date +%s) - T0 )) s" | tee -a $L
ls ~/.cache 2>/dev/null | tee -a $L
pack
