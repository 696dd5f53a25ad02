#!/usr/bin/env bash
# gpu-calib.sh — the calibration set, measured with unpad-train on a machine with an NVIDIA GPU:
# BERT-Base and BERT-Large at 16, 64 and 128 sequences per GPU on the Wikipedia lengths at 512
# (models/dists/wiki512.csv) and truncated at 128 (wiki128.csv, BERT's phase 1). None of these
# batch sizes or distributions is a held-out workload (scripts/gpu-heldout.sh: 24, 48, 96; short,
# uniform, bimodal).
#   scripts/gpu-calib.sh [OUTDIR]        (bin/unpad-train built first: make gpu)
#   MODELS="bert-base" scripts/gpu-calib.sh OUTDIR     only those models (a run split over two calls)
#   FP8=on HW=h100-sxm scripts/gpu-calib.sh    --fp8 on (names -fp8), trace rows named for that GPU
#   GRAPHS=on scripts/gpu-calib.sh    --graphs on (names -graphs): each pass launched as one CUDA graph
#   SETS="mid:16,64,128 vshort:64,128,256" scripts/gpu-calib.sh OUTDIR   other distributions (models/dists/
#       NAME.csv) and batch sizes, as DIST:B,B,... (default "wiki512:16,64,128 wiki128:16,64,128"); keep
#       them apart from the held-out set's (24, 48, 96; short, uniform, bimodal)
# For each workload: a per-operator trace of steps 5-8 (OUTDIR/calib-w-*.csv, what `unpad calibrate`
# fits the operators on) and the trainer's log of every step; then OUTDIR/workloads-calib.csv, the
# untraced steady-state steps 9..STEPS as one row per workload (the format of
# traces/workloads-heldout.csv), what `unpad calibrate --workloads` fits the step overhead on.
set -u
if [ "${SEED:-21}" != 21 ]; then # `unpad calibrate --workloads` rebuilds the batches of seed 21
    echo "gpu-calib.sh: SEED=$SEED: the calibration runs use seed 21 (unpad calibrate --workloads reproduces" \
        "their batches from it)" >&2
    exit 2
fi
OUT=${1:-out/gpu-calib}
STEPS=${STEPS:-100}
mkdir -p "$OUT/logs"
export UNPAD_HOME=$PWD
F8=$([ "${FP8:-off}" = on ] && echo -fp8)$([ "${GRAPHS:-off}" = on ] && echo -graphs)
W=$OUT/workloads-calib$F8.csv
. "$(dirname "$0")/workload-lib.sh"
workload_table "$W"
run() { workload_run "$W" "$OUT" calib-w$F8 5:8 "$1" "$2" 1 none "$3"; } # model batch dist
for m in ${MODELS:-bert-base bert-large}; do
    for set in ${SETS:-wiki512:16,64,128 wiki128:16,64,128}; do
        for b in $(echo "${set#*:}" | tr , ' '); do
            run $m "$b" "${set%%:*}"
        done
    done
done
echo
(column -s, -t "$W" 2>/dev/null || cat "$W") | cut -c1-150
