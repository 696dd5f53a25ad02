#!/usr/bin/env bash
# gpu-dp.sh — balanced data parallelism and calibration traces on a machine with an NVIDIA GPU.
#   scripts/gpu-dp.sh [OUTDIR]
# 1. BERT-Large, synthetic tokens with Wikipedia lengths, 8 virtual ranks x 56: per-rank measured
#    max/mean for none, sort-deal, lpt, kk beside the predicted, with traces (traces/vr8x56-*.csv).
# 2. The multi-process path with one rank (--nproc 1: a real NCCL communicator).
# 3. Gradients of 4 balanced virtual ranks (kk) = those of one micro-batch of the same 16 samples.
# 4. Calibration and held-out traces: BERT-Large at batch 16 and BERT-Base at 56 (calibration),
#    BERT-Large at 96 (held out); the 8 x 56 traces of step 1 serve both.
# Logs and traces go to OUTDIR (default out/gpu-dp); a short table is printed last.
set -u
OUT=${1:-out/gpu-dp}
mkdir -p "$OUT"
export UNPAD_HOME=$PWD
T=bin/unpad-train
SUM=$OUT/summary.txt
: >"$SUM"
say() { echo "$*" | tee -a "$SUM"; }
L=models/bert-large.cfg

# 1. imbalance per policy (step 1 warms up and is left out of the averages)
for p in none sort-deal lpt kk; do
    timeout 120 $T --model $L --synthetic --batch 56 --virtual-ranks 8 --steps 5 --policy $p \
        --seed 11 --log-every 1 --trace "$OUT/vr8x56-$p.csv" --trace-steps 2:3 >"$OUT/vr8x56-$p.log" 2>&1
    say "vr8x56 $p rc=$? $(grep '^balance:' "$OUT/vr8x56-$p.log" | head -1)"
done

# 2. one rank through NCCL
timeout 90 $T --model models/bert-tiny.cfg --synthetic --batch 16 --virtual-ranks 2 --steps 20 \
    --policy kk --nproc 1 --log-every 10 >"$OUT/nproc1.log" 2>&1
say "nproc1 rc=$? $(grep '^summary' "$OUT/nproc1.log" | cut -c1-120)"

# 3. balanced virtual ranks train on the same global batch as one micro-batch
base="--model models/bert-tiny.cfg --synthetic --steps 1 --no-dropout --seed 9"
timeout 60 $T $base --batch 16 --dump-grads "$OUT/g1.bin" >"$OUT/vgrad-kk.log" 2>&1
timeout 60 $T $base --batch 4 --virtual-ranks 4 --policy kk --dump-grads "$OUT/g4.bin" >>"$OUT/vgrad-kk.log" 2>&1
timeout 60 python3 tests/gpu/compare_hf.py --grads "$OUT/g4.bin" --against "$OUT/g1.bin" \
    --grad-bound 1e-2 >>"$OUT/vgrad-kk.log" 2>&1
say "vgrad kk 4x4 vs 1x16 rc=$? $(tail -1 "$OUT/vgrad-kk.log")"
rm -f "$OUT/g1.bin" "$OUT/g4.bin"

# 4. traces for calibration (even batch sizes) and held out (the others)
for spec in large:16:calib base:56:calib large:96:heldout; do
    IFS=: read -r m bsz set <<<"$spec"
    timeout 90 $T --model models/bert-$m.cfg --synthetic --batch $bsz --steps 4 --seed 3 --log-every 4 \
        --trace "$OUT/$set-bert-$m-b$bsz.csv" --trace-steps 2:3 >"$OUT/$set-bert-$m-b$bsz.log" 2>&1
    say "trace $set bert-$m b$bsz rc=$? $(grep '^summary' "$OUT/$set-bert-$m-b$bsz.log" | cut -c1-110)"
done
echo
cat "$SUM"
