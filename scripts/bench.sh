#!/usr/bin/env bash
# bench.sh — runs the benchmarks: every bin/bench_* (GPU .cu and CPU .c benches alike), or only
# the named ones: `scripts/bench.sh kernels` runs bin/bench_kernels. Each prints its own table;
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
    "./$b" 2>&1 | tee "$logdir/$(basename "$b").log"
    rc=${PIPESTATUS[0]}
    ran=$((ran + 1))
    [ "$rc" -eq 0 ] || { echo "$(basename "$b") failed (exit $rc)"; failed=$((failed + 1)); }
done
[ "$ran" -gt 0 ] || { echo "no benchmarks found"; exit 1; }
echo "benchmarks: $ran run, $failed failed; logs in $logdir/"
[ "$failed" -eq 0 ]
