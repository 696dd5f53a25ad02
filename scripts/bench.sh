#!/usr/bin/env bash
# bench.sh — runs the benchmarks: every bin/bench_* (GPU .cu and CPU .c benches alike), or only
# the named ones: `scripts/bench.sh kernels` runs bin/bench_kernels. bench_fmha is followed by
# its PyTorch peer on the same lengths; with no names and a GPU, bench/bench_train.sh runs the
# trainer beside its PyTorch peers. Each prints its own table;
# output also goes to build/bench/<name>.log. Exits nonzero if a benchmark fails.
set -u
cd "$(dirname "$0")/.."
logdir=build/bench
mkdir -p "$logdir"

if [ "$#" -gt 0 ]; then
    list=(); for n in "$@"; do list+=("bin/bench_$n"); done
else
    list=(bin/bench_*)
fi

failed=0 ran=0
for b in "${list[@]}"; do
    if [ ! -x "$b" ]; then
        echo "$b: not built (run 'make gpu' or 'make bench')"; failed=$((failed + 1)); continue
    fi
    echo "=== $(basename "$b")"
    if [ "$(basename "$b")" = bench_fmha ]; then
        # the FMHA beside PyTorch's variable-length flash attention on the same lengths
        ./$b --lengths "$logdir/fmha_lengths.txt" --result "$logdir/fmha_result.csv" 2>&1 |
            tee "$logdir/bench_fmha.log"
        rc=${PIPESTATUS[0]}
        if [ "$rc" -eq 0 ] && command -v python3 >/dev/null 2>&1; then
            python3 bench/fmha_peer.py --lengths "$logdir/fmha_lengths.txt" --ours "$logdir/fmha_result.csv" 2>&1 |
                tee "$logdir/fmha_peer.log"
            rc=${PIPESTATUS[0]}
        fi
    else
        "./$b" 2>&1 | tee "$logdir/$(basename "$b").log"
        rc=${PIPESTATUS[0]}
    fi
    ran=$((ran + 1))
    [ "$rc" -eq 0 ] || { echo "$(basename "$b") failed (exit $rc)"; failed=$((failed + 1)); }
done
# The trainer beside its PyTorch peers (BERT-Large, batch 56), where a GPU and the trainer are.
if [ "$#" -eq 0 ] && [ -x bin/unpad-train ] && command -v nvidia-smi >/dev/null 2>&1; then
    echo "=== bench_train.sh large,vranks,torch"
    bash bench/bench_train.sh large,vranks,torch "$logdir/train" || failed=$((failed + 1))
    ran=$((ran + 1))
fi
[ "$ran" -gt 0 ] || { echo "no benchmarks found"; exit 1; }
echo "benchmarks: $ran run, $failed failed; logs in $logdir/"
[ "$failed" -eq 0 ]
