#!/usr/bin/env bash
# gpu-heldout.sh — the held-out workloads of the calibration check, measured with unpad-train on a
# machine with an NVIDIA GPU: workloads that differ from the calibration traces in model, per-GPU
# batch size and length distribution (none of them Wikipedia lengths), steady-state steps.
#   scripts/gpu-heldout.sh [OUTDIR]        (bin/unpad-train built first: make gpu)
# For each workload: the trainer's log (one `step` line per step, its wall ms/step) and a
# per-operator trace of steps 5-7; then OUTDIR/heldout-workloads.csv: one row per workload with the
# median and mean wall step times of the untraced steady-state steps 9..STEPS (the mean is what
# `unpad validate --workloads` compares) and the device memory in use.
set -u
OUT=${1:-out/gpu-heldout}
STEPS=${STEPS:-220}
mkdir -p "$OUT/logs"
export UNPAD_HOME=$PWD
T=bin/unpad-train
W=$OUT/heldout-workloads.csv
echo "workload,model,batch,vranks,policy,dist,steps,step_ms_median,step_ms_mean,mem_gib,trace" >"$W"
run() { # model batch vranks policy dist
    local m=$1 b=$2 k=$3 p=$4 d=$5
    local name=heldout-w-$m-b$b$([ "$k" -gt 1 ] && echo "-vr$k-$p")-$d
    local extra=""
    [ "$k" -gt 1 ] && extra="--virtual-ranks $k --policy $p"
    timeout 180 $T --model models/$m.cfg --synthetic --dist models/dists/$d.csv --batch $b $extra \
        --steps "$STEPS" --seed 21 --log-every 1 --trace "$OUT/$name.csv" --trace-steps 5:7 \
        >"$OUT/logs/$name.log" 2>&1
    local rc=$?
    # wall ms/step of steps 9..STEPS (untraced, after warm-up)
    local stats
    stats=$(awk '/^step/ { s = $2 + 0; for (i = 1; i <= NF; i++) if ($i == "ms/step") ms = $(i - 1);
                 if (s >= 9) print ms }' "$OUT/logs/$name.log" | sort -g |
            awk '{ v[NR] = $1; t += $1 } END { if (NR) printf "%d,%.3f,%.3f", NR, (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), t / NR; else printf "0,,"}')
    local mem
    mem=$(grep -o 'device memory in use [0-9.]*' "$OUT/logs/$name.log" | awk '{print $5}')
    echo "$name,$m,$b,$k,${p:-none},$d,$stats,${mem:-},$name.csv" >>"$W"
    echo "$name rc=$rc $stats mem=${mem:-?}"
}
for m in bert-base bert-large; do
    for d in short uniform bimodal; do
        for b in 24 48 96; do
            run $m $b 1 none $d
        done
    done
done
run bert-large 32 4 kk uniform
run bert-base 48 8 sort-deal short
echo
(column -s, -t "$W" 2>/dev/null || cat "$W") | cut -c1-150
