#!/bin/bash
# the forward shape by dropout: test_fmha, bench_fmha's default rows, the trainer against the build
# before (old = cb34fbc, before the QKV bias change too); on an H200 also batch 96 and --fp8 on
set -u
tar xJf .try/e.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
pack() { (cd $OUT && tar czf all.tgz w); cp $S $OUT/summary.txt; }
nvidia-smi --query-gpu=name,serial,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee -a $S
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
T0=$SECONDS
make DEPS=$PWD/.deps -j16 bin/unpad-train bin/test_fmha bin/bench_fmha > $W/build.log 2>&1
rc=$?; say "build rc=$rc at $((SECONDS-T0)) s"
if [ $rc != 0 ]; then tail -30 $W/build.log; pack; exit 1; fi
timeout 100 bin/test_fmha > $W/test_fmha.log 2>&1; say "test_fmha rc=$? $(tail -1 $W/test_fmha.log)"
timeout 100 bin/bench_fmha --fwd-shapes 0,1 --bwd-shapes 0 --reps 50 > $W/bench-fmha.log 2>&1
say "bench_fmha rc=$?"; grep -E '^fwd|^default' $W/bench-fmha.log | cut -c1-200 >> $S
sps() { grep '^summary' $1 | grep -oE '[0-9.]+ samples/s|whole run [0-9.]+|in use [0-9.]+ GiB' | tr '\n' ' '; }
A="--model models/bert-large.cfg --synthetic --log-every 10 --seed 1 --steps 40"
for k in 1 2; do for v in old new; do
  b=bin/unpad-train; [ $v = old ] && b=bin/unpad-train-old
  timeout 90 $b $A --batch 56 > $W/tr-$v-$k.log 2>&1; say "train b56 $v $k rc=$? $(sps $W/tr-$v-$k.log)"
done; done
pack
case "$GPU" in
*H200*)
  for f in on off; do for b in 56 96; do
    timeout 90 bin/unpad-train $A --batch $b --fp8 $f > $W/h200-b$b-fp8$f.log 2>&1
    say "h200 b$b fp8 $f rc=$? $(sps $W/h200-b$b-fp8$f.log)"
  done; done ;;
esac
pack
echo ====; cat $OUT/summary.txt
