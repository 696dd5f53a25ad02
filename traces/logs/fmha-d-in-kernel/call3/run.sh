#!/bin/bash
# run on the tree of commit 04ed84e with call3/fmha-d-in.patch applied (shapes 4 and 5 added), carried with .try/e.tar.xz
# one call: the backward with D computed in the main kernel (bwd shapes 4, 5) against shapes 0, 1:
# correctness (test_fmha every pair, sanitizers on the new ones), bench_fmha, the trainer A/B
set -u
tar xJf .try/e.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
pack() { (cd $OUT && tar czf all.tgz w); cp $S $OUT/summary.txt; }
nvidia-smi --query-gpu=name,serial,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee -a $S
T0=$SECONDS
make DEPS=$PWD/.deps -j16 bin/unpad-train bin/test_fmha bin/bench_fmha > $W/build.log 2>&1
rc=$?; say "build rc=$rc at $((SECONDS-T0)) s"
if [ $rc != 0 ]; then tail -30 $W/build.log; pack; exit 1; fi
for p in 0/0 0/4 1/5 1/4; do
  timeout 60 bin/test_fmha --pairs $p > $W/test-${p/\//-}.log 2>&1
  say "test $p rc=$? $(tail -1 $W/test-${p/\//-}.log | cut -c1-150)"
  grep -E 'FAIL' $W/test-${p/\//-}.log | head -5 | cut -c1-300 >> $S
done
pack
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 bin/test_fmha --small --pairs 0/4,1/5 > $W/san-$tool.log 2>&1
  say "sanitize $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/san-$tool.log | tr '\n' ' ' | cut -c1-160)"
done
pack
for r in 1 2; do
  timeout 90 bin/bench_fmha --fwd-shapes 0,1 --bwd-shapes 0,4,1,5 --reps 50 > $W/bench-fmha-$r.log 2>&1
  say "bench_fmha $r rc=$?"
done
timeout 60 bin/bench_fmha --fwd-shapes 0,1 --bwd-shapes 4 --default 0/4 --reps 50 > $W/bench-fmha-din.log 2>&1
say "bench_fmha --default 0/4 rc=$?"
grep -hE '^bwd|^fwd\+bwd|^default|^fwd|^backward|^  ' $W/bench-fmha-1.log $W/bench-fmha-din.log | cut -c1-160 >> $S
pack
A="--model models/bert-large.cfg --synthetic --log-every 10 --seed 1 --steps 40 --batch 56"
sps() { grep '^summary' $1 | grep -oE '[0-9.]+ samples/s|whole run [0-9.]+|in use [0-9.]+ GiB' | tr '\n' ' '; }
for r in 1 2; do for sh in 0 4; do
  UNPAD_FMHA_BWD_SHAPE=$sh timeout 60 bin/unpad-train $A > $W/train-s$sh-$r.log 2>&1
  say "train bwd shape $sh run $r rc=$? $(sps $W/train-s$sh-$r.log)"
done; done
for sh in 0 4; do
  UNPAD_FMHA_BWD_SHAPE=$sh timeout 60 bin/unpad-train $A --attn-dropout 0 > $W/train-s$sh-ad0.log 2>&1
  say "train bwd shape $sh attn-dropout 0 rc=$? $(sps $W/train-s$sh-ad0.log)"
done
pack
echo ====; cat $OUT/summary.txt
