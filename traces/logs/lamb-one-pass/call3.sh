#!/bin/bash
# the one-pass LAMB in rounds of several tensors: checks, speed A/B (UNPAD_LAMB_ONE_PASS=0 / default)
tar xJf .try/b.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
nvidia-smi --query-gpu=name,serial --format=csv,noheader | tee $OUT/gpu.txt
S=$OUT/sum.txt; : > $S
for b in test_kernels test_kernels-fp32; do
  timeout 120 bin/$b > $OUT/$b.log 2>&1; echo "$b rc=$? $(tail -1 $OUT/$b.log)" | tee -a $S
  grep -E "lamb_tensors|lamb_update step|FAIL" $OUT/$b.log | head -20 >> $S
done
for k in 1 2; do for e in 0 1; do
  UNPAD_LAMB_ONE_PASS=$e timeout 60 bin/bench_kernels --only lamb --reps 30 > $OUT/bk-$e-$k.log 2>&1
  echo "bench one_pass=$e: $(grep -E '^lamb_update: ' $OUT/bk-$e-$k.log | cut -c13-70) $(grep -E '^lamb_update  ' $OUT/bk-$e-$k.log | tr -s ' ' | cut -c1-150)" | tee -a $S
done; done
for k in 1 2; do for e in 0 1; do
  UNPAD_LAMB_ONE_PASS=$e timeout 60 bin/unpad-train --model models/bert-large.cfg --synthetic --batch 56 --steps 40 --log-every 10 --seed 1 --trace $OUT/tr-$e-$k.csv --trace-steps 20:22 > $OUT/tr-$e-$k.log 2>&1
  echo "train one_pass=$e rc=$? $(grep '^  LAMB' $OUT/tr-$e-$k.log | cut -c1-70) | $(grep '^summary' $OUT/tr-$e-$k.log | grep -oE '[0-9.]+ samples/s' | head -1) | lamb us: $(grep -E ',lamb,' $OUT/tr-$e-$k.csv | awk -F, '{printf "%s ", $NF}')" | tee -a $S
done; done
for e in 0 1; do
  UNPAD_LAMB_ONE_PASS=$e timeout 60 bin/unpad-train --model models/bert-large.cfg --synthetic --batch 56 --steps 40 --log-every 10 --seed 1 --fp8 on > $OUT/f8-$e.log 2>&1
  echo "train fp8 one_pass=$e rc=$? $(grep '^summary' $OUT/f8-$e.log | grep -oE '[0-9.]+ samples/s' | head -1)" | tee -a $S
done
timeout 150 compute-sanitizer --tool racecheck bin/test_kernels > $OUT/race-tk.log 2>&1
echo "racecheck test_kernels rc=$? $(grep -E 'RACECHECK SUMMARY' $OUT/race-tk.log) $(grep 'test_kernels:' $OUT/race-tk.log | tail -1)" | tee -a $S
timeout 100 compute-sanitizer --tool memcheck bin/unpad-train --model models/bert-base.cfg --synthetic --batch 8 --steps 3 > $OUT/mem.log 2>&1
echo "memcheck bert-base rc=$? $(grep -E 'ERROR SUMMARY' $OUT/mem.log) $(grep '^  LAMB' $OUT/mem.log)" | tee -a $S
timeout 200 bash bench/bench_train.sh resume,nonfinite,steps $OUT/bt > $OUT/bt.log 2>&1
echo "bench_train resume,nonfinite,steps rc=$?" | tee -a $S
sed -n '/^---- summary/,$p' $OUT/bt.log | grep -E "resume|nonfinite|steps" | cut -c1-200 >> $S
tar czf $OUT/all.tgz -C $OUT --exclude=all.tgz --exclude='*.bin' . 2>/dev/null
echo ----; cat $S
