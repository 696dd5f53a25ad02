#!/usr/bin/env bash
# fmha-dev.sh — the FMHA's checks and measurements in one call on a machine with an H100/H200: builds
# only what they need, then (in this order, each given what time is left of DEADLINE seconds)
#   test      bin/test_fmha: every shape against the C reference, ragged lengths, poisoned outputs
#   bench     bin/bench_fmha (56 Wikipedia lengths, 16 heads) and bench/fmha_peer.py beside it
#   train     unpad-train BERT-Large batch 56, attention dropout 0.1 and 0 (samples/s)
#   sanitize  compute-sanitizer memcheck and racecheck on bin/test_fmha --small
#   fp32      bin/test_fmha-fp32 (the fp32 build's FMHA with the same mask)
#   torch     bench/peer_torch.py (TORCH_VARIANTS) beside the two trainer runs
#   scripts/fmha-dev.sh [STAGES]      (default test,bench,train,sanitize,fp32,torch)
# $OUT (default out/fmha-dev) gets summary.txt and logs.tgz (every log); a short table is printed last.
# DEPS=dir is passed to make (unpacked GSL and Check where the machine has none).
set -u
STAGES=${1:-test,bench,train,sanitize,fp32,torch}
OUT=${OUT:-out/fmha-dev}
DEADLINE=${DEADLINE:-285}
TORCH_VARIANTS=${TORCH_VARIANTS:-unpad-eager,unpad-compile}
L=$OUT/logs
mkdir -p "$L"
trap 'tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"' EXIT
export UNPAD_HOME=$PWD PYTHONUNBUFFERED=1
[ -n "${DEPS:-}" ] && export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
T0=$SECONDS
left() { echo $((DEADLINE - (SECONDS - T0))); }
has() { case ",$STAGES," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
SUM=$OUT/summary.txt
: >"$SUM"
say() { echo "$*" | tee -a "$SUM"; }
mk=(make -j"$(nproc)" ${DEPS:+DEPS=$DEPS})

# ---- build: bf16 test, bench and trainer; the fp32 test in the background
fp32_pid=
if has fp32; then
    "${mk[@]}" PRECISION=fp32 bin/test_fmha-fp32 >"$L/build-fp32.log" 2>&1 &
    fp32_pid=$!
fi
targets="bin/test_fmha bin/bench_fmha"
has train || has torch && targets="$targets bin/unpad-train"
if ! "${mk[@]}" $targets >"$L/build.log" 2>&1; then
    say "build    FAILED after $((SECONDS - T0)) s"
    tail -30 "$L/build.log"
    exit 1
fi
say "build    ok in $((SECONDS - T0)) s"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader | tee -a "$SUM"

if has test; then
    timeout $(($(left) - 10)) bin/test_fmha >"$L/test_fmha.log" 2>&1
    say "test     rc=$? $(tail -1 "$L/test_fmha.log")"
    grep -E 'FAIL' "$L/test_fmha.log" | head -20 | tee -a "$SUM"
    sort -k4 -g -r <(grep PASS "$L/test_fmha.log" | awk '{print $(NF-1), $0}') | head -3 | cut -c1-110 | tee -a "$SUM"
fi

if has bench && [ "$(left)" -gt 40 ]; then
    timeout $(($(left) - 10)) bin/bench_fmha --lengths "$L/fmha_lengths.txt" --result "$L/fmha_result.csv" \
        >"$L/bench.log" 2>&1
    say "bench    rc=$?"
    cat "$L/bench.log" | tee -a "$SUM"
    timeout $(($(left) - 10)) python3 bench/fmha_peer.py --lengths "$L/fmha_lengths.txt" \
        --ours "$L/fmha_result.csv" >"$L/peer.log" 2>&1
    say "peer     rc=$?"
    grep -v '^fmha_peer: varlen_attn(' "$L/peer.log" | tee -a "$SUM"
fi

train_logs=()
if (has train || has torch) && [ "$(left)" -gt 60 ]; then
    for ad in 0.1 0; do
        timeout $(($(left) - 5)) bin/unpad-train --model models/bert-large.cfg --synthetic --batch 56 --steps 20 \
            --log-every 10 --seed 1 --attn-dropout $ad >"$L/train-ad$ad.log" 2>&1
        say "train    attention dropout $ad rc=$? $(grep -E '^step' "$L/train-ad$ad.log" | tail -1 | cut -c1-150)"
        train_logs+=("unpad-train attn-dropout $ad=$L/train-ad$ad.log")
    done
fi

if has sanitize && [ "$(left)" -gt 50 ]; then
    for tool in memcheck racecheck; do
        timeout $(( $(left) > 100 ? 45 : $(left) / 2 )) compute-sanitizer --tool $tool --error-exitcode 3 \
            bin/test_fmha --small >"$L/sanitize-$tool.log" 2>&1
        say "sanitize $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|checks passed' "$L/sanitize-$tool.log" | tr '\n' ' ' | cut -c1-160)"
    done
fi

if has fp32; then
    if [ "$(left)" -gt 20 ] && wait $fp32_pid; then
        timeout $(($(left) - 5)) bin/test_fmha-fp32 >"$L/test_fmha_fp32.log" 2>&1
        say "fp32     rc=$? $(tail -1 "$L/test_fmha_fp32.log")"
    else
        say "fp32     not run (build rc=$? or no time: $(tail -2 "$L/build-fp32.log" | tr '\n' ' ' | cut -c1-120))"
        kill "$fp32_pid" 2>/dev/null
    fi
fi

if has torch && [ "$(left)" -gt 80 ]; then
    ours=$(IFS=,; echo "${train_logs[*]}")
    timeout $(($(left) - 3)) python3 bench/peer_torch.py --model models/bert-large.cfg --batch 56 --steps 8 \
        --warmup 3 --variants "$TORCH_VARIANTS" --compile-limit $(($(left) - 60)) --ours "$ours" \
        >"$L/torch.log" 2>&1
    say "torch    rc=$?"
    grep -A30 '^peer (' "$L/torch.log" | grep -v '^PEERS' | tee -a "$SUM"
fi

echo "---- summary ($((SECONDS - T0)) s)"
cat "$SUM"
