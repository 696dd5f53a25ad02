#!/bin/bash
# device call: D inside the FMHA backward's main kernel — checks, bench, trainer A/B
set -u
tar xJf .try/b.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
W=$OUT/w; mkdir -p $W
S=$W/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
nvidia-smi --query-gpu=name,serial,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader | tee -a $S
(nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader -lms 500 > $W/clocks.csv) & SMI=$!
T0=$SECONDS
for p in 0/4 1/5 0/0 1/1 0/2 1/3; do
  timeout 90 bin/test_fmha --pairs $p > $W/test-${p/\//-}.log 2>&1; say "test $p rc=$? $(tail -1 $W/test-${p/\//-}.log)"
done
say "tests done at $((SECONDS-T0)) s"
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 bin/test_fmha --small --pairs 0/4,1/5 > $W/san-$tool.log 2>&1
  say "sanitize $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|checks passed' $W/san-$tool.log | tr '\n' ' ' | cut -c1-160)"
done
say "sanitize done at $((SECONDS-T0)) s"
for r in 1 2; do
  timeout 120 bin/bench_fmha --fwd-shapes 0 --bwd-shapes 0,1,4,5 --reps 50 > $W/bench-$r.log 2>&1; say "bench $r rc=$?"
  timeout 120 bin/bench_fmha --fwd-shapes 0 --bwd-shapes 4 --default 0/4 --reps 50 > $W/bench-d4-$r.log 2>&1; say "bench d4 $r rc=$?"
done
say "bench done at $((SECONDS-T0)) s"
for f in $W/bench-2.log $W/bench-d4-2.log; do echo "== $f" >> $S; grep -vE "^#" $f | tail -40 >> $S; done
for r in 1 2; do for sh in 0 4; do
  UNPAD_FMHA_BWD_SHAPE=$sh timeout 120 bin/unpad-train --model models/bert-large.cfg --synthetic --batch 56 --steps 40 --log-every 10 --seed 1 > $W/train-s$sh-$r.log 2>&1
  say "train shape $sh run $r rc=$? $(grep -E '^summary' $W/train-s$sh-$r.log | cut -c1-200)"
done; done
say "train done at $((SECONDS-T0)) s"
kill $SMI
cd $OUT && tar czf all.tgz w && cp w/summary.txt . && rm -rf w
echo ==== ; cat $OUT/summary.txt
