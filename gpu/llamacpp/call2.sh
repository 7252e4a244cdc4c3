#!/bin/bash
# GPU host, right after call 1 on the same warm machine, one call per carried piece of the model:
#   `call2.sh store` (carrying .s4/lN, all but the last): keeps the piece;
#   `call2.sh [SPACE]` (carrying the last): joins the model, waits for the build, then specsweep's plan, run,
#   report and export on SPACE (default space-smol.yaml) within what is left of CALL_SECONDS (default 600).
# `call2.sh again [SPACE]` (no carry): the same study goes on (a later call's confirmation).
set -o pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
W=$HOME/w; R=$PWD; START=$(date +%s)
export PYTHONPATH=$R:$W/site PYTHONUNBUFFERED=1
if [ "$1" = store ]; then
  cp .s4/l*/model.part* $W/model/ && ls -la $W/model | tee $OUT/store.log
  exit 0
fi
if [ "$1" != again ]; then
  cp .s4/l*/model.part* .s4/l*/model.sha256 $W/model/
  cat $(ls $W/model/model.part* | sort -V) > $W/model/model.gguf && rm $W/model/model.part*
  echo "$(cat $W/model/model.sha256)  $W/model/model.gguf" | sha256sum -c | tee $OUT/call2.log
  while [ ! -f $W/build.end ]; do sleep 5; done
  echo "build rc=$(cat $W/build.rc) in $(( $(cat $W/build.end) - $(cat $W/build.start) )) s" | tee -a $OUT/call2.log
  tail -3 $W/build.log
else
  shift
fi
SPACE=${1:-gpu/llamacpp/space-smol.yaml}
# The study's budget: what is left of the call's 600 s, less a minute for the report and the way back.
LEFT=$(( ${CALL_SECONDS:-600} - 60 - ($(date +%s) - START) ))
mkdir -p $W/sweep && sed "s#@W@#$W#g" "$R/$SPACE" > $W/sweep/space.yaml && cd $W/sweep
python3 -m sweep plan --space space.yaml 2>&1 | tail -15 | tee -a $OUT/plan.log
t0=$(date +%s)
timeout -s INT $(( LEFT + 20 )) python3 -m sweep run --space space.yaml --study gpu --budget ${LEFT}s 2>&1 | tail -40 | tee -a $OUT/sweep.log
echo "run rc=$? wall=$(( $(date +%s) - t0 )) s" | tee -a $OUT/sweep.log
pgrep -fa llama-server | tee -a $OUT/sweep.log
python3 -m sweep report --study gpu > $OUT/report.txt 2>&1
{ echo; echo "== export"; python3 -m sweep export --study gpu 2>&1; } >> $OUT/report.txt
tar czf $OUT/runs.tgz runs
ls -la $OUT
