#!/bin/bash
# the tables on the card lent: FMHA beside PyTorch's, ours beside the two fastest PyTorch peers, batch 56/96
tar xJf .try/b.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
nvidia-smi --query-gpu=name,serial,clocks.max.sm,power.limit --format=csv,noheader | tee $OUT/gpu.txt
(nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 500 > $OUT/clocks.csv 2>&1 &)
start=$(date +%s)
timeout 60 bin/bench_fmha --lengths $OUT/fmha_lengths.txt --result $OUT/fmha_result.csv > $OUT/fmha.log 2>&1
echo "bench_fmha rc=$?"
timeout 90 python3 bench/fmha_peer.py --lengths $OUT/fmha_lengths.txt --ours $OUT/fmha_result.csv > $OUT/fmha_peer.log 2>&1
echo "fmha_peer rc=$?"
TORCH_VARIANTS=unpad-compile:ad,unpad-compile-model timeout 360 bash bench/bench_train.sh torch $OUT/torch > $OUT/torch-stage.log 2>&1
echo "torch stage rc=$? at $(( $(date +%s) - start )) s"
for f in off on; do for b in 56 96; do
  [ $(( 555 - ($(date +%s) - start) )) -lt 30 ] && break
  timeout 40 bin/unpad-train --model models/bert-large.cfg --synthetic --batch $b --steps 30 --log-every 10 --seed 1 --fp8 $f > $OUT/large-b$b-$f.log 2>&1
  echo "large b$b fp8 $f rc=$? $(grep '^summary' $OUT/large-b$b-$f.log | cut -c1-200)"
done; done
pkill nvidia-smi
tar czf $OUT/all.tgz -C $OUT --exclude=all.tgz . 2>/dev/null
echo ---- fmha; grep -vE '^fmha_peer: varlen_attn\(' $OUT/fmha_peer.log | tail -12
echo ---- torch; sed -n '/^---- summary/,$p' $OUT/torch-stage.log | tail -14
