#!/bin/bash
# GPU-host call 2: specsweep plan / run / report / dashboard / export against the real SGLang server.
# Usage (GPU host, checkout root): bash gpu/sglang/dev_call2.sh [SPACE_YAML] [RUN_SECONDS]
set -o pipefail
T0=$(date +%s)
source gpu/sglang/dev_common.sh
SPACE=$(realpath ${1:-$S/space-ngram.yaml}); LIMIT=${2:-420}; STUDY=$(basename $SPACE .yaml)
D=$W/res/c2-$STUDY; mkdir -p $D; cd $D
sed "s#MODEL_DIR#$MODEL#; s#DRAFT_DIR#$DRAFT#" $SPACE > space.yaml
L=$D/call2.log
pack() { tar czf $OUT/c2-$STUDY.tgz --exclude="*.db-journal" -C $W/res c2-$STUDY; cp $L $OUT/call2-$STUDY.log; }
python3 -m sweep plan --space space.yaml 2>&1 | tee $L
t=$(date +%s)
timeout -s INT $LIMIT python3 -m sweep run --space space.yaml --study $STUDY 2>&1 | tee -a $L
echo "run rc=$? wall=$(( $(date +%s) - t )) s" | tee -a $L
pack
python3 -m sweep report --study $STUDY > report.txt 2>&1; cat report.txt | tee -a $L
python3 -m sweep report --study $STUDY --json > report.json 2>&1
python3 -m sweep dashboard --study $STUDY -o dashboard.html 2>&1 | tail -3 | tee -a $L
{ echo "== export"; python3 -m sweep export --study $STUDY 2>&1; } >> report.txt
for f in $(ls runs/$STUDY/trials/*/server.log 2>/dev/null | head -2); do
  python3 -m sweep inspect-log --engine sglang $f --json > inspect-$(basename $(dirname $f)).json 2>&1
done
python3 -m sweep doctor $MODEL --engine sglang --json > doctor.json 2>&1
python3 -m sweep doctor $MODEL --engine sglang > doctor.txt 2>&1
LOG1=$(ls runs/$STUDY/trials/*/server.log 2>/dev/null | head -1); [ -n "$LOG1" ] && python3 -m sweep doctor $MODEL --engine sglang --log $LOG1 > doctor-log.txt 2>&1
find runs -maxdepth 3 | head -40 | tee -a $L
echo "call2 done in $(( $(date +%s) - T0 )) s" | tee -a $L
pack
