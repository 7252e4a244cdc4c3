#!/bin/bash
# GPU-host call 3: EAGLE with a dummy 1-layer draft, forced acceptance 3.0, CUDA graphs off. With decode graphs on,
# 0.5.17's eagle_worker_v2._capture_cuda_graphs imports layers/attention/dsa_backend.py, which imports deep_gemm
# (not carried) under is_cuda(); with --disable-cuda-graph it returns before that import.
set -o pipefail
T0=$(date +%s); END=$((T0 + ${1:-270}))
source gpu/sglang/dev_common.sh
export OUT_DIR=$W/res/c3; mkdir -p $OUT_DIR
L=$OUT_DIR/call3.log
pack() { tar czf $OUT/c3.tgz -C $W/res c3; cp $L $OUT/call3.log; }
SGLANG_SIMULATE_ACC_LEN=3 SGLANG_SIMULATE_ACC_METHOD=match-expected SGLANG_SIMULATE_ACC_TOKEN_MODE=fixed \
python3 $S/manual.py eagle-acc3-nograph $(( END - 10 )) --speculative-algorithm EAGLE --speculative-draft-model-path $DRAFT --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --load-format dummy --attention-backend triton --sampling-backend pytorch --disable-cuda-graph --context-length 4096 2>&1 | tee -a $L
grep -E "Error|Traceback" $OUT_DIR/eagle-acc3-nograph/server.log | grep -v "Ignore import" | head -5 | tee -a $L
echo "call3 done in $(( $(date +%s) - T0 )) s" | tee -a $L
pack
