#!/bin/bash
# the QKV bias gradient without the key's columns: A/B against the build before (old), the kernel
# tests (bf16 and fp32 builds), the Hugging Face comparison and the poisoned-gradient runs
set -u
tar xJf .try/e.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
pack() { (cd $OUT && tar czf all.tgz w); cp $S $OUT/summary.txt; }
nvidia-smi --query-gpu=name,serial,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee -a $S
T0=$SECONDS
make DEPS=$PWD/.deps -j16 bin/unpad-train bin/test_kernels bin/bench_fmha bin/bench_kernels > $W/build.log 2>&1 &&
  make DEPS=$PWD/.deps PRECISION=fp32 -j16 bin/unpad-train-fp32 bin/test_kernels-fp32 >> $W/build.log 2>&1
rc=$?; say "build rc=$rc at $((SECONDS-T0)) s"
if [ $rc != 0 ]; then tail -30 $W/build.log; pack; exit 1; fi
A="--model models/bert-large.cfg --synthetic --batch 56 --log-every 10 --seed 1 --steps 40"
sps() { grep '^summary' $1 | grep -oE '[0-9.]+ samples/s|whole run [0-9.]+' | tr '\n' ' '; }
for k in 1 2; do for v in old new; do
  b=bin/unpad-train; [ $v = old ] && b=bin/unpad-train-old
  timeout 90 $b $A > $W/tr-$v-$k.log 2>&1
  say "train $v $k rc=$? $(sps $W/tr-$v-$k.log) | last window: $(grep '^step' $W/tr-$v-$k.log | tail -1 | grep -oE '[0-9.]+ samples/s')"
done; done
for v in old new; do
  b=bin/unpad-train; [ $v = old ] && b=bin/unpad-train-old
  timeout 60 $b --model models/bert-large.cfg --synthetic --batch 56 --seed 1 --steps 12 --trace $W/op-$v.csv \
    --trace-steps 8:10 > $W/op-$v.log 2>&1
  say "traced $v rc=$? qkv_bwd us/step: $(awk -F, '$6=="qkv_bwd" {s+=$NF; n++} END {if (n) printf "%.0f (%d rows)", s/3, n}' $W/op-$v.csv)"
done
for v in old new; do
  b=bin/unpad-train; [ $v = old ] && b=bin/unpad-train-old
  timeout 90 $b $A --fp8 on > $W/f8-$v.log 2>&1
  say "train fp8 $v rc=$? $(sps $W/f8-$v.log)"
done
say "A/B done at $((SECONDS-T0)) s"; pack
for t in test_kernels test_kernels-fp32; do
  timeout 150 bin/$t > $W/$t.log 2>&1
  say "$t rc=$? $(tail -1 $W/$t.log) | qkv rows: $(grep -c 'bias_bwd_qkv.*PASS' $W/$t.log) pass, $(grep -c 'bias_bwd_qkv.*FAIL' $W/$t.log) fail"
done
pack
timeout 100 bin/bench_kernels --only bias_bwd > $W/bench-kernels.log 2>&1
say "bench_kernels rc=$?"; grep -E 'bias_bwd|copy' $W/bench-kernels.log | cut -c1-160 >> $S
timeout 100 bin/bench_fmha --fwd-shapes 0,1 --bwd-shapes 0 --reps 50 > $W/bench-fmha.log 2>&1
say "bench_fmha rc=$?"; grep -E '^fwd|^default' $W/bench-fmha.log | cut -c1-200 >> $S
pack
timeout $((560 - SECONDS + T0)) bash bench/bench_train.sh peer,poison $W/bt > $W/bt.log 2>&1
say "bench_train peer,poison rc=$? at $((SECONDS-T0)) s"
cat $W/bt/summary.txt | cut -c1-260 >> $S
pack
echo ====; cat $OUT/summary.txt
