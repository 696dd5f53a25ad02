#!/bin/bash
# ours beside the two fastest PyTorch peers on the card lent
tar xJf .try/b.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
nvidia-smi --query-gpu=name,serial --format=csv,noheader | tee $OUT/gpu.txt
TORCH_VARIANTS=unpad-compile:ad,unpad-compile-model timeout 330 bash bench/bench_train.sh torch $OUT/torch > $OUT/torch-stage.log 2>&1
echo "torch stage rc=$?"
tar czf $OUT/all.tgz -C $OUT --exclude=all.tgz . 2>/dev/null
sed -n '/^---- summary/,$p' $OUT/torch-stage.log | tail -14
