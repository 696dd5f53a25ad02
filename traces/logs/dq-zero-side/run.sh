#!/bin/bash
# the FMHA backward's dQ accumulator zeroed beside the stream: checks, then A/B (UNPAD_DQ_ZERO_SIDE=0 / default)
tar xJf .try/b.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
nvidia-smi --query-gpu=name,serial --format=csv,noheader | tee $OUT/gpu.txt
S=$OUT/sum.txt; : > $S
for b in test_fmha test_fmha-fp32; do
  timeout 120 bin/$b > $OUT/$b.log 2>&1; echo "$b rc=$? $(tail -1 $OUT/$b.log)" | tee -a $S
  grep -E "zeroed|FAIL" $OUT/$b.log | head -8 >> $S
done
T="bin/unpad-train --model models/bert-large.cfg --synthetic --batch 56 --log-every 10 --seed 1"
for k in 1 2; do for e in 0 1; do
  UNPAD_DQ_ZERO_SIDE=$e timeout 60 $T --steps 40 --trace $OUT/tr-$e-$k.csv --trace-steps 30:32 > $OUT/tr-$e-$k.log 2>&1
  echo "train side=$e rc=$? $(grep '^summary' $OUT/tr-$e-$k.log | grep -oE '[0-9.]+ samples/s' | head -1) loss $(grep '^summary' $OUT/tr-$e-$k.log | grep -oE 'loss [0-9.]+ -> [0-9.]+') | fmha_bwd us/step: $(awk -F, '$6=="fmha_bwd" {s+=$NF; n++} END {if (n) printf "%.0f (%d rows)", s/3, n}' $OUT/tr-$e-$k.csv)" | tee -a $S
done; done
for e in 0 1; do
  UNPAD_DQ_ZERO_SIDE=$e timeout 60 $T --steps 40 --graphs on > $OUT/g-$e.log 2>&1
  echo "train graphs side=$e rc=$? $(grep '^summary' $OUT/g-$e.log | grep -oE '[0-9.]+ samples/s' | head -1) $(grep -oE '^graphs: .{0,60}' $OUT/g-$e.log)" | tee -a $S
  UNPAD_DQ_ZERO_SIDE=$e timeout 60 $T --steps 30 --fp8 on > $OUT/f-$e.log 2>&1
  echo "train fp8 side=$e rc=$? $(grep '^summary' $OUT/f-$e.log | grep -oE '[0-9.]+ samples/s' | head -1)" | tee -a $S
done
timeout 220 bash bench/bench_train.sh graphs,peer $OUT/bt > $OUT/bt.log 2>&1
echo "bench_train graphs,peer rc=$?" | tee -a $S
sed -n '/^---- summary/,$p' $OUT/bt.log | cut -c1-180 >> $S
tar czf $OUT/all.tgz -C $OUT --exclude=all.tgz --exclude='*.bin' . 2>/dev/null
echo ----; cat $S
