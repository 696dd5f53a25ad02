#!/bin/bash
tar xJf .try/b.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
nvidia-smi --query-gpu=name,serial --format=csv,noheader | tee $OUT/gpu.txt
S=$OUT/sum.txt; : > $S
for k in 1 2; do for e in 0 1; do
  UNPAD_LAMB_ONE_PASS=$e timeout 60 bin/bench_kernels --only lamb --reps 30 > $OUT/bk-$e-$k.log 2>&1
  echo "bench one_pass=$e: $(grep -E '^lamb_update  ' $OUT/bk-$e-$k.log | tr -s ' ' | cut -c1-150)" | tee -a $S
done; done
for k in 1 2; do for e in 0 1; do
  UNPAD_LAMB_ONE_PASS=$e timeout 60 bin/unpad-train --model models/bert-large.cfg --synthetic --batch 56 --steps 30 --log-every 10 --seed 1 --trace $OUT/tr-$e-$k.csv --trace-steps 20:22 > $OUT/tr-$e-$k.log 2>&1
  echo "train one_pass=$e rc=$? $(grep '^  LAMB' $OUT/tr-$e-$k.log) | $(grep '^summary' $OUT/tr-$e-$k.log | grep -oE '[0-9.]+ samples/s' | head -1) | lamb rows us: $(grep -E '(^|,)lamb,' $OUT/tr-$e-$k.csv | head -3 | tr '\n' ' ' | cut -c1-300)" | tee -a $S
done; done
head -3 $OUT/tr-1-1.csv >> $S
timeout 200 compute-sanitizer --tool racecheck bin/test_kernels > $OUT/race-tk.log 2>&1
echo "racecheck test_kernels rc=$? $(grep -E 'RACECHECK SUMMARY' $OUT/race-tk.log) $(grep 'test_kernels:' $OUT/race-tk.log | tail -1)" | tee -a $S
tar czf $OUT/all.tgz -C $OUT --exclude=all.tgz . 2>/dev/null
echo ----; cat $S
