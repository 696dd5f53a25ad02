#!/bin/bash
# the throughput table on the card lent: ours beside the two fastest PyTorch peers, then batch 56/96
tar xJf .try/b.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
nvidia-smi --query-gpu=name,serial,clocks.max.sm,power.limit --format=csv,noheader | tee $OUT/gpu.txt
(nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 500 > $OUT/clocks.csv 2>&1 &)
start=$(date +%s)
TORCH_VARIANTS=unpad-compile:ad,unpad-compile-model timeout 420 bash bench/bench_train.sh torch $OUT/torch > $OUT/torch-stage.log 2>&1
echo "torch stage rc=$? in $(( $(date +%s) - start )) s"
left=$(( 560 - ($(date +%s) - start) ))
if [ $left -gt 60 ]; then
  for f in off on; do for b in 56 96; do
    [ $(( 560 - ($(date +%s) - start) )) -lt 45 ] && break
    timeout 60 bin/unpad-train --model models/bert-large.cfg --synthetic --batch $b --steps 30 --log-every 10 --seed 1 --fp8 $f > $OUT/large-b$b-$f.log 2>&1
    echo "large b$b fp8 $f rc=$? $(grep '^summary' $OUT/large-b$b-$f.log | cut -c1-200)"
  done; done
fi
pkill nvidia-smi
tar czf $OUT/all.tgz -C $OUT --exclude=all.tgz . 2>/dev/null
echo ---- torch summary
sed -n '/^---- summary/,$p' $OUT/torch-stage.log | tail -25
