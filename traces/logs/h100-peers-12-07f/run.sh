#!/bin/bash
# ours beside the two fastest PyTorch peers on the card lent (the trainer of that day's tree:
# its FMHA backward default unchanged)
tar xJf .try/b.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
nvidia-smi --query-gpu=name,serial --format=csv,noheader
(nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader -lms 1000 > $OUT/clocks.csv) &
TORCH_VARIANTS=unpad-compile:ad,unpad-compile-model timeout 500 bash bench/bench_train.sh torch $OUT/w > $OUT/torch.out 2>&1
echo rc=$?
kill %1
cd $OUT && tar czf all.tgz w && rm -rf w
tail -30 torch.out
