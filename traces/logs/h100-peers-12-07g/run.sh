#!/bin/bash
set -u
tar xJf .try/b.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
W=$OUT/w; mkdir -p $W
S=$W/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
pack() { (cd $OUT && tar czf all.tgz w); cp $S $OUT/summary.txt; }
nvidia-smi --query-gpu=name,serial,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee -a $S
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
T0=$SECONDS
UNPAD_FMHA_BWD_SHAPE=99 timeout 60 bin/unpad-train --model models/bert-tiny.cfg --synthetic --batch 8 --steps 2 \
  > $W/bad-shape.log 2>&1
say "bad UNPAD_FMHA_BWD_SHAPE rc=$? $(grep -i 'UNPAD_FMHA_BWD_SHAPE' $W/bad-shape.log | head -2 | tr '\n' ' ' | cut -c1-220)"
UNPAD_FMHA_BWD_SHAPE=x1 timeout 60 bin/unpad-train --model models/bert-tiny.cfg --synthetic --batch 8 --steps 2 \
  > $W/bad-shape2.log 2>&1
say "bad UNPAD_FMHA_BWD_SHAPE=x1 rc=$? $(grep -i 'UNPAD_FMHA_BWD_SHAPE' $W/bad-shape2.log | head -2 | tr '\n' ' ' | cut -c1-220)"
for r in 1 2; do
  timeout 100 bin/bench_fmha --fwd-shapes 0,1 --bwd-shapes 0 --reps 50 > $W/bench-fmha-$r.log 2>&1
  say "bench_fmha $r rc=$?"; grep -E '^fwd|^default' $W/bench-fmha-$r.log | cut -c1-200 >> $S
done
case "$GPU" in
*H200*)
  TRACE_LATE=1 HW=h200-sxm STEPS=100 SETS="mid:16,64,128 ramp384:16,64,128 vshort:64,128,256" \
    timeout 250 bash scripts/gpu-calib.sh $W/h200-6/dists > $W/h200-dists.log 2>&1
  say "h200 dists rc=$? at $((SECONDS-T0)) s: $(grep -c . $W/h200-6/dists/workloads-calib.csv) lines"
  pack
  TRACE_LATE=1 HW=h200-sxm STEPS=120 timeout $((560 - SECONDS + T0)) bash scripts/gpu-heldout.sh $W/h200-6 \
    > $W/h200-heldout.log 2>&1
  say "h200 heldout rc=$? at $((SECONDS-T0)) s: $(grep -c . $W/h200-6/workloads-heldout.csv) lines"
  ;;
*)
  TORCH_VARIANTS=unpad-compile:ad,unpad-compile-model timeout 480 bash bench/bench_train.sh torch $W/torch \
    > $W/torch.log 2>&1
  say "torch rc=$? at $((SECONDS-T0)) s"
  sed -n '/---- summary/,$p' $W/torch.log | cut -c1-220 >> $S
  ;;
esac
pack
echo ====; cat $OUT/summary.txt
