#!/bin/bash
# GPU-host call (the first of a session, carrying .s4/c with sgl_deep_gemm's wheel): unpack, then EAGLE with a
# dummy 1-layer draft, forced acceptance 3.0 and CUDA graphs on (the draft's graphs need deep_gemm), by hand.
# Usage (GPU host, checkout root): bash gpu/sglang/dev_eagle.sh [SECONDS]
set -o pipefail
T0=$(date +%s); END=$((T0 + ${1:-300}))
source gpu/sglang/dev_common.sh
export OUT_DIR=$W/res/eagle; mkdir -p $OUT_DIR
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
SGLANG_SIMULATE_ACC_LEN=3 SGLANG_SIMULATE_ACC_METHOD=match-expected SGLANG_SIMULATE_ACC_TOKEN_MODE=fixed \
python3 $S/manual.py eagle-acc3-graphs $(( END - 15 )) --speculative-algorithm EAGLE \
  --speculative-draft-model-path $DRAFT --speculative-num-steps 3 --speculative-eagle-topk 1 \
  --speculative-num-draft-tokens 4 --load-format dummy --attention-backend triton --sampling-backend pytorch \
  --cuda-graph-max-bs-decode 8 --cuda-graph-backend-prefill disabled --context-length 4096
L=$OUT_DIR/eagle-acc3-graphs/server.log
grep -E "Capture|capture|Error|Traceback|deep_gemm" $L | grep -v "Ignore import" | head -12
grep -E "Decode batch" $L | tail -3
echo "eagle done in $(( $(date +%s) - T0 )) s"
tar czf $OUT/eagle.tgz -C $W/res eagle
