#!/usr/bin/env bash
# demo.sh — unpad's main job on the built-in data (no GPU, no network, nothing outside the project):
#   0. the Wikipedia length distribution's statistics;
#   1. predict one BERT-Large training step on an H200 (56 sequences from the Wikipedia lengths),
#      unpadded against padded;
#   2. what-if: the five balancing policies side by side on 8 GPUs x 56, equal and free counts;
#   3. what-if sweep over GPU counts and batch sizes (for the imbalance plot);
#   4. a plan file for 8 x 56, and for a global batch of 4,096 sequences on 8, 16 and 32 GPUs (the
#      fastest micro-batch x gradient accumulation that fits), with the hours to train 256M samples;
#   5. the pictures (PNG + SVG, gnuplot): length histogram, per-GPU load per policy, imbalance
#      against GPUs and batch, FMHA grouping timeline;
#   6. the cost model against the measured held-out BERT-Large traces (traces/heldout-bert-large-*.csv),
#      with its plot.
# Everything goes into one folder (default out/demo), named at the end: each step's text
# (NAME.txt), CSV and, beside it, the same as JSON (docs/json.md). Long steps show a progress
# line on the terminal (stderr), not in the text files.
# Usage: scripts/demo.sh [OUTDIR]      (`make demo` installs what is missing and builds first)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/demo}
mkdir -p "$out" || { echo "demo: cannot create $out"; exit 1; }
export UNPAD_HOME=$PWD
U=bin/unpad
if [ ! -x "$U" ]; then
    echo "demo: $U is not built: run 'make' first"
    exit 1
fi
failed=()
step() { printf '\n== %s\n' "$*"; }
run() { # run NAME CMD...: runs, keeps its standard output in $out/NAME.txt, notes a failure
    local name=$1; shift
    "$@" | tee "$out/$name.txt"   # stderr (progress, errors) stays on the terminal
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || failed+=("$name (exit $rc)")
}

step "0. stats: the Wikipedia length distribution"
run stats "$U" stats --json "$out/stats.json"

step "1. predict: one BERT-Large step on one H200, 56 sequences, unpadded against padded"
if "$U" --help | grep -q '^  predict '; then
    run predict "$U" predict --batch 56 --padded --csv "$out/predict.csv" --json "$out/predict.json"
else
    echo "(unpad predict is not in this build; enable this step when sim/cli/cmd_predict.c lands)"
fi

step "2. whatif: the five policies on 8 GPUs x 56 sequences (2,000 sampled steps each)"
run whatif-8x56 "$U" whatif --gpus 8 --batch 56 --policy none,sort-deal,lpt,kk,ffd-tokens \
    --count equal,free --steps 2000 --csv "$out/whatif-8x56.csv" --json "$out/whatif-8x56.json"

step "3. whatif sweep: 8..512 GPUs x 16..64 sequences per GPU, equal counts (100 steps each)"
run whatif-sweep "$U" whatif --gpus 8,16,32,64,128,256,512 --batch 16,32,48,56,64 \
    --count equal --steps 100 --attn-steps 0 --csv "$out/whatif-sweep.csv" \
    --json "$out/whatif-sweep.json" >/dev/null
echo "(table in $out/whatif-sweep.txt; batch 56 per GPU at 8 and 512 GPUs:)"
grep -E '^ +gpus' "$out/whatif-sweep.txt"
grep -E '^ +(8|512) +56 ' "$out/whatif-sweep.txt" | sort -n -k1,1 -s

step "4. plan: the best policy and FMHA grouping for 8 x 56"
run plan "$U" plan --gpus 8 --batch 56 --out "$out/plan.cfg" --json "$out/plan.json"

step "4b. plan: a global batch of 4,096 on 8, 16 and 32 GPUs, and the time to train 256M samples"
run plan-global "$U" plan --gpus 8,16,32 --global-batch 4096 --steps 200 --train-samples 256M \
    --out "$out/plan-global.cfg" --json "$out/plan-global.json" >/dev/null
grep -E '^[0-9]+ GPUs x .*global batch|chosen:|to train' "$out/plan-global.txt"

step "5. plots"
if command -v gnuplot >/dev/null 2>&1 || [ -n "${UNPAD_GNUPLOT:-}" ]; then
    run plot-hist "$U" plot hist --out "$out/hist"
    run plot-load "$U" plot load --gpus 8 --batch 56 --out "$out/load"
    run plot-imbalance "$U" plot imbalance --csv "$out/whatif-sweep.csv" --batch 56 --gpus 8 \
        --out "$out/imbalance"
    run plot-groups "$U" plot groups --batch 56 --out "$out/groups"
    run plot-load-64 "$U" plot load --gpus 64 --batch 56 --out "$out/load-64"
else
    echo "gnuplot is missing: no pictures. Install it with: sudo apt-get install gnuplot-nox"
    failed+=("plots (gnuplot missing)")
fi

step "6. validate: the cost model against the measured held-out traces (H200)"
shopt -s nullglob
held=(traces/heldout-bert-large-*.csv)   # the Wikipedia-length BERT-Large runs
shopt -u nullglob
if [ ${#held[@]} -eq 0 ]; then
    echo "(no traces/heldout-bert-large-*.csv: nothing to validate)"
elif command -v gnuplot >/dev/null 2>&1; then
    run validate "$U" validate --traces "${held[@]}" --csv "$out/validate.csv" \
        --json "$out/validate.json" --plot "$out/validate.png" >/dev/null
    grep -A4 '^targets' "$out/validate.txt"
else
    run validate "$U" validate --traces "${held[@]}" --csv "$out/validate.csv" \
        --json "$out/validate.json" >/dev/null
fi

printf '\n== demo output: %s\n' "$(cd "$out" && pwd)"
ls -1 "$out" | sed 's/^/   /'
if [ ${#failed[@]} -gt 0 ]; then
    printf 'demo: FAILED: %s\n' "${failed[@]}"
    exit 1
fi
echo "demo: done"
