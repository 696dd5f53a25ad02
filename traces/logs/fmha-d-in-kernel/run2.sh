#!/bin/bash
set -u
tar xJf .try/b.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
W=$OUT/w; mkdir -p $W
S=$W/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
nvidia-smi --query-gpu=name,serial,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader | tee -a $S
(nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader -lms 500 > $W/clocks.csv) & SMI=$!
T0=$SECONDS
timeout 120 bin/test_fmha > $W/test-all.log 2>&1; say "test all rc=$? $(tail -1 $W/test-all.log)"
timeout 90 bin/test_fmha --pairs 0/4 > $W/test-0-4.log 2>&1; say "test 0/4 rc=$? $(tail -1 $W/test-0-4.log)"
grep -h PASS $W/test-*.log | awk '{print $(NF-1), $0}' | sort -g -r | head -3 | cut -c1-120 >> $S
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 bin/test_fmha --small --pairs 0/4 > $W/san-$tool.log 2>&1
  say "sanitize $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|checks passed' $W/san-$tool.log | tr '\n' ' ' | cut -c1-160)"
done
say "checks done at $((SECONDS-T0)) s"
for r in 1 2; do
  timeout 120 bin/bench_fmha --fwd-shapes 0 --bwd-shapes 0,4 --reps 50 > $W/bench-$r.log 2>&1; say "bench $r rc=$?"
  timeout 120 bin/bench_fmha --fwd-shapes 0 --bwd-shapes 4 --default 0/4 --reps 50 > $W/bench-d4-$r.log 2>&1; say "bench d4 $r rc=$?"
done
for f in $W/bench-*.log; do echo "== $f" >> $S; grep -E "^bwd wgmma|^default|^bwd launches|two halves" $f >> $S; done
say "bench done at $((SECONDS-T0)) s"
for r in 1 2; do for sh in 0 4; do
  UNPAD_FMHA_BWD_SHAPE=$sh timeout 120 bin/unpad-train --model models/bert-large.cfg --synthetic --batch 56 --steps 40 --log-every 10 --seed 1 > $W/train-s$sh-$r.log 2>&1
  say "train shape $sh run $r rc=$? $(grep -E '^summary' $W/train-s$sh-$r.log | cut -c1-130)"
done; done
say "train done at $((SECONDS-T0)) s"
for m in tiny base2; do
  cfg=models/bert-$m.cfg
  if [ $m = base2 ]; then sed -e 's/^layers *=.*/layers = 2/' -e 's/^name *=.*/name = bert-base-2layers/' models/bert-base.cfg > $W/bert-base2.cfg; cfg=$W/bert-base2.cfg; fi
  UNPAD_FMHA_BWD_SHAPE=4 timeout 120 bin/unpad-train --gelu tanh --model $cfg --synthetic --batch 8 --steps 1 --no-dropout --seed 7 --dump-weights $W/w-$m.bin --dump-grads $W/g-$m.bin > $W/peer-$m-train.log 2>&1
  rc=$?
  timeout 180 python3 tests/gpu/compare_hf.py --model $cfg --gelu tanh --weights $W/w-$m.bin --grads $W/g-$m.bin > $W/peer-$m.log 2>&1
  say "peer shape4 $m train rc=$rc compare rc=$? $(tail -1 $W/peer-$m.log)"; rm -f $W/w-$m.bin $W/g-$m.bin
done
say "peer done at $((SECONDS-T0)) s"
kill $SMI
cd $OUT && tar czf all.tgz w && cp w/summary.txt . && rm -rf w
echo ==== ; cat $OUT/summary.txt
