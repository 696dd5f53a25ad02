#!/bin/bash
# one call: build, the headline (BERT-Large b56 bf16 / --fp8 on, b96 bf16), the calibration sets (Wikipedia,
# then three other distributions), the held-out set, then bench_fmha and the sanitizers with what is left
set -u
tar xJf .try/e.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
pack() { (cd $OUT && tar czf all.tgz w); cp $S $OUT/summary.txt; }
nvidia-smi --query-gpu=name,serial,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee -a $S
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) HWN=h200-sxm ;; *) HWN=h100-sxm ;; esac
END=$(( $(date +%s) + ${BUDGET:-575} ))
left() { echo $(( END - $(date +%s) )); }
T0=$SECONDS
make DEPS=$PWD/.deps -j16 bin/unpad-train bin/test_fmha bin/bench_fmha > $W/build.log 2>&1
rc=$?; say "build rc=$rc at $((SECONDS-T0)) s hw=$HWN"
if [ $rc != 0 ]; then tail -30 $W/build.log; pack; exit 1; fi
sps() { grep '^summary' $1 | grep -oE '[0-9.]+ samples/s|whole run [0-9.]+|in use [0-9.]+ GiB' | tr '\n' ' '; }
A="--model models/bert-large.cfg --synthetic --log-every 10 --seed 1 --steps 40"
for r in "56 off" "56 on" "96 off"; do set -- $r
  timeout 60 bin/unpad-train $A --batch $1 --fp8 $2 > $W/hl-b$1-fp8$2.log 2>&1
  say "headline b$1 fp8 $2 rc=$? $(sps $W/hl-b$1-fp8$2.log)"
done
pack
DEADLINE_AT=$(( END - 330 )) TRACE_LATE=1 HW=$HWN STEPS=100 bash scripts/gpu-calib.sh $W/cal > $W/cal.log 2>&1
say "calib wiki rc=$? at $((SECONDS-T0)) s: $(grep -c rc=0 $W/cal.log) ok, $(grep -c skipped $W/cal.log) skipped"
pack
DEADLINE_AT=$(( END - 170 )) TRACE_LATE=1 HW=$HWN STEPS=100 \
  SETS="mid:16,64,128 ramp384:16,64,128 vshort:64,128,256" bash scripts/gpu-calib.sh $W/dists > $W/dists.log 2>&1
say "calib dists rc=$? at $((SECONDS-T0)) s: $(grep -c rc=0 $W/dists.log) ok, $(grep -c skipped $W/dists.log) skipped"
pack
DEADLINE_AT=$(( END - 12 )) TRACE_LATE=1 HW=$HWN STEPS=${HO_STEPS:-120} bash scripts/gpu-heldout.sh $W/ho > $W/ho.log 2>&1
say "heldout rc=$? at $((SECONDS-T0)) s: $(grep -c rc=0 $W/ho.log) ok, $(grep -c skipped $W/ho.log) skipped"
pack
if [ $(left) -gt 40 ]; then
  timeout $(( $(left) - 10 )) bin/bench_fmha --fwd-shapes 0,1 --bwd-shapes 0 --reps 50 > $W/bench-fmha.log 2>&1
  say "bench_fmha rc=$?"; grep -E '^fwd|^default' $W/bench-fmha.log | cut -c1-200 >> $S
fi
pack
echo ====; cat $OUT/summary.txt
