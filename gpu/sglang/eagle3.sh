#!/bin/bash
# SGLang with an EAGLE3 draft trained here for its target (SmolLM2-135M-Instruct): one GPU-host call per step, back
# to back on the same warm machine (pack_eagle3.sh made the carries here first):
#   eagle3.sh site             carrying .s4/c:  unpack SGLang 0.5.17's site, patch, import check
#   eagle3.sh store            carrying .s4/m1: the GGUF's first piece
#   eagle3.sh train            carrying .s4/m2: join and convert the target, train the draft with speculators,
#                              export it for SGLang (train_eagle3.py); the draft's folder comes back as a tarball
#   eagle3.sh target           carrying .s4/m2: join and convert the target only (for store-draft, not train)
#   eagle3.sh store-draft      carrying .s4/d: a draft an earlier train call sent back, instead of training again
#   eagle3.sh study [SPACE]    no carry: specsweep plan / run / report / export on SPACE (default
#                              space-eagle3.yaml), within what is left of CALL_SECONDS (default 600); STUDY names
#                              the study (default gpu): STUDY=adaptive with space-adaptive.yaml runs beside it;
#                              PROFILE=runs/costs/cost-profile.json takes the step costs `costs` measured
#   eagle3.sh costs [SPACE]    no carry: a forced-acceptance cost profile of SPACE's shapes (`specsweep profile`)
#   eagle3.sh again [SPACE]    the same study goes on (its confirmation); on a fresh machine, after site, store and
#                              store-draft, carrying .s4/r/runs.tgz (a study an earlier call sent back)
set -o pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
START=$(date +%s); R=$PWD; W=$HOME/w
step=${1:?site, store, train, target, store-draft, costs, study or again}; shift
case $step in
site)
  source gpu/sglang/dev_common.sh 2>&1 | tee $OUT/site.log
  PYTHONPATH=$W/site python3 -c "import sglang.srt.entrypoints.http_server, sglang.srt.models.llama_eagle3, sglang.srt.speculative.eagle_worker_v2; print('imports ok')" 2>&1 | tail -3 | tee -a $OUT/site.log
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a $OUT/site.log
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a $OUT/site.log
  exit 0 ;;
store)
  mkdir -p $W/real && cp .s4/m1/smol.gguf.part* $W/real/ && ls -la $W/real | tee $OUT/store.log
  exit 0 ;;
train|target)
  source gpu/sglang/dev_common.sh > /dev/null
  L=$OUT/$step.log
  cp .s4/m2/smol.gguf.part* .s4/m2/smol.gguf.sha256 $W/real/
  cat $(ls $W/real/smol.gguf.part* | sort -V) > $W/real/smol.gguf
  echo "$(cat $W/real/smol.gguf.sha256)  $W/real/smol.gguf" | sha256sum -c | tee $L
  T=$W/real/smollm2-135m-instruct
  [ -f $T/model.safetensors ] || PYTHONPATH=$W/site python3 gpu/sglang/gguf_to_hf.py all $W/real/smol.gguf $T 2>&1 | tee -a $L
  # EAGLE's draft CUDA graphs import deep_gemm; speculators and what the host lacks of its needs (pydantic,
  # openai, loguru come with SGLang's site)
  python3 -m pip install -q --no-index --no-deps --no-compile --target $W/site .s4/m2/site-extra/*.whl 2>&1 | tail -2 | tee -a $L
  # `target` stops here: the target converted, for a draft that `store-draft` brings instead of training again
  [ $step = target ] && { ls -la $T | tee -a $L; exit 0; }
  python3 -m pip install -q --no-index --no-deps --no-compile --target $W/train .s4/m2/wheels/*.whl 2>&1 | tail -2 | tee -a $L
  export PYTHONPATH=$W/train:$W/site:$R  # the checkout last: export reads the target's dtype with its rule
  t0=$(date +%s)
  timeout ${TRAIN_SECONDS:-520} python3 gpu/sglang/train_eagle3.py all $T .s4/m2/chat/train-prompts.jsonl $W/eagle3 \
    --samples ${SAMPLES:-1536} --epochs ${EPOCHS:-10} --train-seconds ${TRAIN_LIMIT:-180} 2>&1 | grep -v "it/s\]$" | tee -a $L
  echo "train_eagle3 rc=$? in $(( $(date +%s) - t0 )) s" | tee -a $L
  mkdir -p $W/chat && cp .s4/m2/chat/chat-heldout.json $W/chat/
  # the draft comes back: its config, where it came from, and its weights in pieces of 15 MB (a file back is at most
  # 16 MiB); `eagle3.sh store-draft` carries them to a later machine instead of training again
  tar czf $OUT/train.tgz -C $W/eagle3 train.yaml sglang-eagle3/config.json sglang-eagle3/source.json 2>/dev/null
  ( cd $W/eagle3/sglang-eagle3 && sha256sum model.safetensors > $OUT/draft.sha256 && split -b 15M -d model.safetensors $OUT/draft.part )
  ls -la $W/eagle3 $W/eagle3/sglang-eagle3 | tee -a $L
  exit 0 ;;
store-draft)
  # a draft an earlier `train` sent back (draft.part*, draft.sha256, train.tgz; chat-heldout.json beside them)
  D=$W/eagle3/sglang-eagle3; mkdir -p $D && tar xzf .s4/d/train.tgz -C $W/eagle3
  cat $(ls .s4/d/draft.part* | sort -V) > $D/model.safetensors && (cd $D && sha256sum -c $R/.s4/d/draft.sha256) | tee $OUT/store.log
  mkdir -p $W/chat && cp .s4/d/chat-heldout.json $W/chat/
  exit 0 ;;
costs)
  # The step costs with SGLang's forced acceptance (SGLANG_SIMULATE_ACC_LEN), the arms of SPACE as shapes: a
  # cost profile (`specsweep profile`) for the simulator's fit. 6 launches at SHAPES=2: 381 s on the H100 (6 Dec;
  # benchmarks/data/sglang-0.5.17-h100-smollm2-costs.json); a `study` after it on the same machine can take it
  # with PROFILE=runs/costs/cost-profile.json.
  source gpu/sglang/dev_common.sh > /dev/null
  export PYTHONPATH=$R:$W/site
  mkdir -p $W/sweep && sed "s#@W@#$W#g" "$R/${1:-gpu/sglang/space-eagle3.yaml}" > $W/sweep/costs.yaml && cd $W/sweep
  timeout -s INT $(( ${CALL_SECONDS:-600} - 60 - ($(date +%s) - START) )) python3 -m sweep profile --space costs.yaml \
    --study costs --shapes ${SHAPES:-2} 2>&1 | tail -40 | tee $OUT/costs.log
  cp runs/costs/cost-profile.json $OUT/ 2>/dev/null; tar czf $OUT/costs-runs.tgz runs/costs
  exit 0 ;;
study|again)
  source gpu/sglang/dev_common.sh > /dev/null
  export PYTHONPATH=$R:$W/site ;;
*) echo "unknown step $step: give site, store, train, target, store-draft, costs, study or again"; exit 2 ;;
esac
SPACE=${1:-gpu/sglang/space-eagle3.yaml}
# What is left of the call, less a minute and a half for the report and the way back. No `--budget`: it keeps back
# the whole confirmation's time, which a 10-minute call never has (the search stopped after its baseline); Ctrl-C at
# the call's end keeps every finished trial, and `again` resumes the same study (its search, then its confirmation).
LEFT=$(( ${CALL_SECONDS:-600} - 90 - ($(date +%s) - START) ))
mkdir -p $W/sweep && sed "s#@W@#$W#g" "$R/$SPACE" > $W/sweep/space.yaml && cd $W/sweep
# a study an earlier machine sent back (runs.tgz, carried in .s4/r) goes on here: the same paths under $W
[ ! -d runs ] && [ -f $R/.s4/r/runs.tgz ] && tar xzf $R/.s4/r/runs.tgz && echo "resumed from .s4/r/runs.tgz" | tee -a $OUT/sweep.log
[ $step = study ] && python3 -m sweep plan --space space.yaml 2>&1 | tail -25 | tee -a $OUT/plan.log
t0=$(date +%s)
timeout -s INT $LEFT python3 -m sweep run --space space.yaml --study ${STUDY:-gpu} ${PROFILE:+--profile $PROFILE} 2>&1 | tail -40 | tee -a $OUT/sweep.log
echo "run rc=$? wall=$(( $(date +%s) - t0 )) s" | tee -a $OUT/sweep.log
pgrep -fa sglang | tee -a $OUT/sweep.log
python3 -m sweep report --study ${STUDY:-gpu} > $OUT/report.txt 2>&1
python3 -m sweep report --study ${STUDY:-gpu} --json > $OUT/report.json 2>&1
{ echo; echo "== export"; python3 -m sweep export --study ${STUDY:-gpu} 2>&1; } >> $OUT/report.txt
python3 -m sweep dashboard --study ${STUDY:-gpu} -o $OUT/dashboard.html > /dev/null 2>&1
tar czf $OUT/runs.tgz --exclude="*.db-journal" runs
ls -la $OUT
