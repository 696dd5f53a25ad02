# the third call, on the same machine, its build kept
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
TORCH_VARIANTS=unpad-compile:ad,unpad-compile-model timeout 400 bash bench/bench_train.sh torch $OUT/torch > $OUT/torch.log 2>&1
