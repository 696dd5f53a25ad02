#!/usr/bin/env bash
# gpu-heldout.sh — the held-out workloads of the calibration check, measured with unpad-train on a
# machine with an NVIDIA GPU: workloads that differ from the calibration traces in model, per-GPU
# batch size and length distribution (none of them Wikipedia lengths), steady-state steps.
#   scripts/gpu-heldout.sh [OUTDIR]        (bin/unpad-train built first: make gpu)
#   MODELS="bert-base" scripts/gpu-heldout.sh OUTDIR   only those models (a run split over two calls)
#   FP8=on HW=h100-sxm scripts/gpu-heldout.sh    --fp8 on (names -fp8), trace rows named for that GPU
#   GRAPHS=on scripts/gpu-heldout.sh    --graphs on (names -graphs): each pass launched as one CUDA graph
#   SEED=S scripts/gpu-heldout.sh    another draw of batches than seed 21's (all the workloads of one seed
#       share one: docs/calibration.md); then `unpad validate --workloads OUTDIR/workloads-heldout.csv --seed S`
# For each workload: the trainer's log (one `step` line per step, its wall ms/step) and a
# per-operator trace of steps 5-7; then OUTDIR/workloads-heldout.csv: one row per workload with the
# median and mean wall step times of the untraced steady-state steps 9..STEPS (the mean is what
# `unpad validate --workloads` compares) and the device memory in use.
set -u
OUT=${1:-out/gpu-heldout}
STEPS=${STEPS:-220}
mkdir -p "$OUT/logs"
export UNPAD_HOME=$PWD
F8=$([ "${FP8:-off}" = on ] && echo -fp8)$([ "${GRAPHS:-off}" = on ] && echo -graphs)
W=$OUT/workloads-heldout$F8.csv
. "$(dirname "$0")/workload-lib.sh"
workload_table "$W"
run() { workload_run "$W" "$OUT" heldout-w$F8 5:7 "$@"; } # model batch vranks policy dist
for m in ${MODELS:-bert-base bert-large}; do
    for d in short uniform bimodal; do
        for b in 24 48 96; do
            run $m $b 1 none $d
        done
    done
done
case " ${MODELS:-bert-base bert-large} " in *" bert-large "*) run bert-large 32 4 kk uniform ;; esac
case " ${MODELS:-bert-base bert-large} " in *" bert-base "*) run bert-base 48 8 sort-deal short ;; esac
echo
(column -s, -t "$W" 2>/dev/null || cat "$W") | cut -c1-150
