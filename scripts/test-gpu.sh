#!/usr/bin/env bash
# test-gpu.sh — runs every GPU test: each bin/test_* binary (every kernel against its C reference;
# bin/test_*-fp32 are the same tests in the fp32 build, with fp32 bounds),
# then the trainer's checks, which need python3 with torch and transformers: the loss and every
# gradient against Hugging Face BertForPreTraining (bf16, and the fp32 build with tight bounds),
# virtual ranks = one micro-batch, activations made again mid-run = the same losses, CUDA graphs =
# the same losses, exact resume after SIGKILL and refused bad checkpoints, a SIGTERM
# that stops cleanly and resumes exactly, a forced non-finite loss that stops (or is skipped), 300
# steps against BertForPreTraining with a LAMB written from the paper (bench/bench_train.sh
# peer,vgrad,grow,graphs,resume,signal,nonfinite,steps), and grouped attention / bucketed all-reduce = one
# launch / one all-reduce (scripts/gpu-dp.sh vgrad).
# Output of each goes to the terminal and to build/test-gpu/<name>.log.
# Ends with a summary table; exits nonzero if anything failed. Run from the project root
# (`make test-gpu` builds the binaries first).
set -u
cd "$(dirname "$0")/.."
logdir=build/test-gpu
mkdir -p "$logdir"

names=() results=() times=()
run() { # name, command...
    local name=$1; shift
    echo "=== $name"
    local t0=$SECONDS
    "$@" 2>&1 | tee "$logdir/$name.log"
    local rc=${PIPESTATUS[0]}
    names+=("$name") times+=("$((SECONDS - t0))")
    if [ "$rc" -eq 0 ]; then results+=("PASS"); else results+=("FAIL (exit $rc)"); fi
}

for b in bin/test_*; do
    [ -x "$b" ] || continue
    run "$(basename "$b")" "./$b"
done
if [ -x bin/unpad-train ]; then
    run trainer-peer-resume bash bench/bench_train.sh peer,vgrad,grow,graphs,resume,signal,nonfinite,steps "$logdir/train"
    run trainer-groups-buckets bash scripts/gpu-dp.sh vgrad "$logdir/dp"
fi

echo
printf '%-32s %8s  %s\n' "GPU test" "seconds" "result"
failed=0
for i in "${!names[@]}"; do
    printf '%-32s %8s  %s\n' "${names[$i]}" "${times[$i]}" "${results[$i]}"
    [ "${results[$i]}" = PASS ] || failed=$((failed + 1))
done
if [ "${#names[@]}" -eq 0 ]; then
    echo "no GPU tests found (bin/test_* or tests/gpu/*.py): run 'make gpu' first"
    exit 1
fi
echo "logs in $logdir/; $failed of ${#names[@]} failed"
[ "$failed" -eq 0 ]
