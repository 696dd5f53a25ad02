#!/usr/bin/env bash
# fmha-dev.sh — the FMHA's checks and measurements in one call on a machine with an H100/H200. It
# builds only what they need, then runs, each given what is left of DEADLINE seconds:
#   test      bin/test_fmha per pair of shapes, each in its own process (a kernel that traps takes
#             only its own pair down); the first pair (the defaults) also on 3 streams
#   bench     bin/bench_fmha over the shapes that passed (56 Wikipedia lengths, 16 heads) and
#             bench/fmha_peer.py (PyTorch's variable-length flash attention) beside it
#   train     unpad-train BERT-Large batch 56, attention dropout 0.1 and 0 (if the defaults passed)
#   ncu       Nsight Compute on one launch of each default wgmma kernel (throughput, stalls)
#   torch     bench/peer_torch.py (TORCH_VARIANTS, then the compiled one with foreach LAMB)
#             beside the two trainer runs
#   sanitize  compute-sanitizer memcheck and racecheck on bin/test_fmha --small (first when a
#             default pair failed: it says where)
#   fp32      bin/test_fmha-fp32 (the fp32 build's FMHA with the same mask), built meanwhile
#   scripts/fmha-dev.sh [STAGES]      (default test,bench,train,ncu,torch,sanitize,fp32)
# $OUT (default out/fmha-dev) gets summary.txt and logs.tgz (every log); the summary is printed last.
# DEPS=dir is passed to make (unpacked GSL and Check where the machine has none).
set -u
STAGES=${1:-test,bench,train,ncu,torch,sanitize,fp32}
OUT=${OUT:-out/fmha-dev}
DEADLINE=${DEADLINE:-285}
TORCH_VARIANTS=${TORCH_VARIANTS:-unpad-compile,unpad-compile-model,unpad-compile:ad,unpad-eager,unpad-compile-max}
L=$OUT/logs
mkdir -p "$L"
trap 'tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"' EXIT
export UNPAD_HOME=$PWD PYTHONUNBUFFERED=1
[ -n "${DEPS:-}" ] && export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
T0=$SECONDS
left() { echo $((DEADLINE - (SECONDS - T0))); }
cap() { local l; l=$(left); echo $(($1 < l - 5 ? $1 : l - 5)); } # a timeout of at most $1 s
has() { case ",$STAGES," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
SUM=$OUT/summary.txt
: >"$SUM"
say() { echo "$*" >>"$SUM"; }
mk=(make -j"$(nproc)" ${DEPS:+DEPS=$DEPS})

if ! "${mk[@]}" bin/test_fmha bin/bench_fmha bin/unpad-train >"$L/build.log" 2>&1; then
    say "build    FAILED after $((SECONDS - T0)) s"
    tail -30 "$L/build.log" >>"$SUM"
    cat "$SUM"
    exit 1
fi
say "build    ok in $((SECONDS - T0)) s"
fp32_pid=
if has fp32; then
    "${mk[@]}" PRECISION=fp32 bin/test_fmha-fp32 >"$L/build-fp32.log" 2>&1 &
    fp32_pid=$!
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >>"$SUM"

# ---- correctness, pair by pair; ok[F/B]=1 when the pair passed
declare -A ok
test_pair() { # pairs label
    timeout "$(cap 60)" bin/test_fmha --pairs "$1" >"$L/test-$2.log" 2>&1
    local rc=$?
    [ $rc -eq 0 ] && ok[$1]=1
    say "test $1 rc=$rc $(tail -1 "$L/test-$2.log")"
    grep -E 'FAIL|per sequence' "$L/test-$2.log" | head -12 | cut -c1-400 >>"$SUM"
}
# Every (forward, backward) shape pair of fmha.h, each in its own process, then the defaults.
nf=$(bin/test_fmha --shape-counts | cut -d' ' -f1) nb=$(bin/test_fmha --shape-counts | cut -d' ' -f2)
if has test; then
    for ((k = 0; k < (nf > nb ? nf : nb); k++)); do test_pair $((k % nf))/$((k % nb)) pair$k; done
    [ -z "${ok[0/0]:-}" ] && [ $((nf > nb ? nf : nb)) -gt 1 ] && test_pair 0/0 default
    grep -h PASS "$L"/test-*.log | awk '{print $(NF-1), $0}' | sort -g -r | head -3 | cut -c1-120 |
        sed 's/^/  worst passing: /' >>"$SUM"
fi
fwd_list= bwd_list= def_f=0 def_b=0
for ((f = nf - 1; f >= 0; f--)); do for ((b = 0; b < nb; b++)); do
    if [ -n "${ok[$f/$b]:-}" ]; then fwd_list=$f${fwd_list:+,$fwd_list}; def_f=$f; break; fi; done; done
for ((b = nb - 1; b >= 0; b--)); do for ((f = 0; f < nf; f++)); do
    if [ -n "${ok[$f/$b]:-}" ]; then bwd_list=$b${bwd_list:+,$bwd_list}; def_b=$b; break; fi; done; done
fwd_list=${fwd_list:-0} bwd_list=${bwd_list:-0}
defaults_ok=${ok[0/0]:-}

sanitize() {
    for tool in memcheck racecheck; do
        timeout "$(cap 45)" compute-sanitizer --tool $tool --error-exitcode 3 bin/test_fmha --small \
            >"$L/sanitize-$tool.log" 2>&1
        say "sanitize $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|checks passed' "$L/sanitize-$tool.log" | tr '\n' ' ' | cut -c1-160)"
        grep -E -m6 -A3 'Invalid|Error|Hazard|hazard' "$L/sanitize-$tool.log" | cut -c1-200 >>"$SUM"
    done
}
sanitized=
if has sanitize && [ -z "$defaults_ok" ] && [ "$(left)" -gt 60 ]; then
    sanitize
    sanitized=1
fi

if has bench && [ "$(left)" -gt 40 ]; then
    timeout "$(cap 60)" bin/bench_fmha --lengths "$L/fmha_lengths.txt" --result "$L/fmha_result.csv" \
        --fwd-shapes $fwd_list --bwd-shapes $bwd_list --default $def_f/$def_b >"$L/bench.log" 2>&1
    say "bench    rc=$? (shapes fwd $fwd_list, bwd $bwd_list, default $def_f/$def_b)"
    cat "$L/bench.log" >>"$SUM"
    timeout "$(cap 60)" python3 bench/fmha_peer.py --lengths "$L/fmha_lengths.txt" --ours "$L/fmha_result.csv" \
        >"$L/peer.log" 2>&1
    say "peer     rc=$?"
    grep -v '^fmha_peer: varlen_attn(' "$L/peer.log" >>"$SUM"
fi

train_logs=()
if (has train || has torch) && [ -n "$defaults_ok" ] && [ "$(left)" -gt 50 ]; then
    for ad in 0.1 0; do
        timeout "$(cap 40)" bin/unpad-train --model models/bert-large.cfg --synthetic --batch 56 --steps 20 \
            --log-every 10 --seed 1 --attn-dropout $ad >"$L/train-ad$ad.log" 2>&1
        say "train    attention dropout $ad rc=$? $(grep -E '^step' "$L/train-ad$ad.log" | tail -1 | cut -c1-150)"
        train_logs+=("$ad=$L/train-ad$ad.log")
    done
fi

if has ncu && [ -n "$defaults_ok" ] && [ "$(left)" -gt 60 ]; then
    # one launch of each default kernel: throughput and where the warps stall
    for k in fwd bwd; do
        timeout "$(cap 40)" ncu --clock-control none --kernel-name "regex:fmha_${k}_wgmma" --launch-skip 2 \
            --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy \
            --section LaunchStats bin/bench_fmha --reps 2 --fwd-shapes 0 --bwd-shapes 0 \
            --lengths "$L/ncu_lengths.txt" --result "$L/ncu_result.csv" >"$L/ncu-$k.log" 2>&1
        say "ncu $k rc=$?"
        grep -E 'fmha_|Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slot|Stall|stalled|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|No Eligible|One or More' \
            "$L/ncu-$k.log" | grep -v '^==PROF' | head -24 | cut -c1-160 >>"$SUM"
    done
fi

if has torch && [ "$(left)" -gt 60 ]; then
    ours=$(IFS=,; echo "${train_logs[*]}")
    timeout "$(cap 400)" python3 bench/peer_torch.py --model models/bert-large.cfg --batch 56 --steps 8 \
        --warmup 3 --variants "$TORCH_VARIANTS" --compile-limit 60 --ours "$ours" >"$L/torch.log" 2>&1
    say "torch    rc=$?"
    grep -E '^RESULT|warm-up|Error|error' "$L/torch.log" | cut -c1-300 >>"$SUM"
    grep -A30 '^peer (' "$L/torch.log" | grep -v '^PEERS' >>"$SUM"
    if [ "$(left)" -gt 45 ]; then
        timeout "$(cap 90)" python3 bench/peer_torch.py --model models/bert-large.cfg --batch 56 --steps 8 \
            --warmup 3 --variants unpad-compile --optimizer lamb --compile-limit 40 --ours "$ours" \
            >"$L/torch-lamb.log" 2>&1
        say "torch    foreach LAMB rc=$?"
        grep -A30 '^peer (' "$L/torch-lamb.log" | grep -v '^PEERS' >>"$SUM"
    fi
fi

if has sanitize && [ -z "$sanitized" ] && [ "$(left)" -gt 40 ]; then
    sanitize
fi

if has fp32; then
    if [ "$(left)" -gt 15 ] && wait $fp32_pid; then
        timeout "$(cap 60)" bin/test_fmha-fp32 >"$L/test_fmha_fp32.log" 2>&1
        say "fp32     rc=$? $(tail -1 "$L/test_fmha_fp32.log")"
    else
        say "fp32     not run (no time, or the build failed: $(tail -2 "$L/build-fp32.log" | tr '\n' ' ' | cut -c1-160))"
        kill "$fp32_pid" 2>/dev/null
    fi
fi

echo "---- summary ($((SECONDS - T0)) s)"
cat "$SUM"
