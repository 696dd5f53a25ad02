#!/bin/bash
# the held-out set alone on a fresh start, judged afterwards by the committed calibration
set -u
tar xJf .try/e.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
pack() { (cd $OUT && tar czf all.tgz w); cp $S $OUT/summary.txt; }
nvidia-smi --query-gpu=name,serial,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee -a $S
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) HWN=h200-sxm ;; *) HWN=h100-sxm ;; esac
T0=$SECONDS
make DEPS=$PWD/.deps -j16 bin/unpad-train > $W/build.log 2>&1
rc=$?; say "build rc=$rc at $((SECONDS-T0)) s hw=$HWN"
[ $rc != 0 ] && { tail -30 $W/build.log; pack; exit 1; }
DEADLINE_AT=$(( $(date +%s) + ${BUDGET:-230} )) TRACE_LATE=1 HW=$HWN STEPS=120 bash scripts/gpu-heldout.sh $W/ho > $W/ho.log 2>&1
say "heldout rc=$? at $((SECONDS-T0)) s: $(grep -c rc=0 $W/ho.log) ok, $(grep -c skipped $W/ho.log) skipped"
timeout 40 bin/unpad-train --model models/bert-large.cfg --synthetic --log-every 10 --seed 1 --steps 40 --batch 56 > $W/hl-b56.log 2>&1
say "headline b56 bf16 rc=$? $(grep '^summary' $W/hl-b56.log | grep -oE '[0-9.]+ samples/s|whole run [0-9.]+' | tr '\n' ' ')"
pack; cat $S
