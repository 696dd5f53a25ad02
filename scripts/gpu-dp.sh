#!/usr/bin/env bash
# gpu-dp.sh — balanced data parallelism, grouped attention and calibration traces on a machine
# with an NVIDIA GPU.
#   scripts/gpu-dp.sh [STAGES] [OUTDIR]
# STAGES, comma-separated (default all):
#   policies  BERT-Large, synthetic tokens with Wikipedia lengths, 8 virtual ranks x 56: per-rank
#             measured max/mean for none, sort-deal, lpt, kk beside the predicted, with traces.
#   nproc1    the multi-process path with one rank (--nproc 1: a real NCCL communicator).
#   vgrad     gradients of 4 balanced virtual ranks (kk) = those of one micro-batch of the same 16
#             samples; grouped attention (auto, fixed, 3 streams) = one launch; the bucketed,
#             overlapped all-reduce = one all-reduce after backward = no NCCL at all.
#   groups    BERT-Large 8 x 56 (kk): attention time with --fmha-groups none, auto, 384 (two groups),
#             128,256,384.
#   buckets   BERT-Large 2 x 56 under --nproc 1: step time with the all-reduce in buckets
#             overlapped with backward against one all-reduce after it.
#   online    BERT-Large 8 x 56 (lpt, free counts): the balanced cost from the uncalibrated
#             defaults, from the fitted file, and refitted online (--calibrate-online).
#   calib     calibration (BERT-Large b16, BERT-Base b56) and held-out (BERT-Large b96) traces.
# Logs and traces go to OUTDIR (default out/gpu-dp); a short table is printed last.
set -u
STAGES=${1:-policies,nproc1,vgrad,groups,buckets,online,calib}
OUT=${2:-out/gpu-dp}
mkdir -p "$OUT"
export UNPAD_HOME=$PWD
T=bin/unpad-train
SUM=$OUT/summary.txt
: >"$SUM"
say() { echo "$*" | tee -a "$SUM"; }
L=models/bert-large.cfg
has() { case ",$STAGES," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# 1. imbalance per policy (step 1 warms up and is left out of the averages)
has policies && for p in none sort-deal lpt kk; do
    timeout 120 $T --model $L --synthetic --batch 56 --virtual-ranks 8 --steps 6 --policy $p \
        --seed 11 --log-every 1 --trace "$OUT/vr8x56-$p.csv" --trace-steps 3:5 >"$OUT/vr8x56-$p.log" 2>&1
    say "vr8x56 $p rc=$? $(grep '^balance:' "$OUT/vr8x56-$p.log" | head -1)"
done

# 2. one rank through NCCL
has nproc1 && timeout 90 $T --model models/bert-tiny.cfg --synthetic --batch 16 --virtual-ranks 2 --steps 20 \
    --policy kk --nproc 1 --log-every 10 >"$OUT/nproc1.log" 2>&1
has nproc1 && say "nproc1 rc=$? $(grep '^summary' "$OUT/nproc1.log" | cut -c1-120)"

# 3. the same gradients whatever the split, grouping and all-reduce
if has vgrad; then
base="--model models/bert-tiny.cfg --synthetic --steps 1 --no-dropout --seed 9"
cmp() { # name bound a.bin b.bin
    timeout 60 python3 tests/gpu/compare_hf.py --grads "$3" --against "$4" --grad-bound "$2" >>"$OUT/vgrad-$1.log" 2>&1
    say "vgrad $1 rc=$? $(tail -1 "$OUT/vgrad-$1.log")"
}
timeout 60 $T $base --batch 16 --dump-grads "$OUT/g1.bin" >"$OUT/vgrad-kk.log" 2>&1
timeout 60 $T $base --batch 4 --virtual-ranks 4 --policy kk --dump-grads "$OUT/g4.bin" >>"$OUT/vgrad-kk.log" 2>&1
cmp "kk-4x4-vs-1x16" 1e-2 "$OUT/g4.bin" "$OUT/g1.bin"
# grouped attention against one launch over the same micro-batches (longest first in both)
bl="--model models/bert-base.cfg --synthetic --steps 1 --no-dropout --seed 9 --batch 24 --virtual-ranks 2 --policy kk"
timeout 90 $T $bl --fmha-groups none --dump-grads "$OUT/gn.bin" >"$OUT/vgrad-groups.log" 2>&1
timeout 90 $T $bl --fmha-groups auto --streams 3 --dump-grads "$OUT/ga.bin" >>"$OUT/vgrad-groups.log" 2>&1
timeout 90 $T $bl --fmha-groups 64,128,256 --streams 3 --dump-grads "$OUT/gf.bin" >>"$OUT/vgrad-groups.log" 2>&1
timeout 90 $T $bl --fmha-groups none --dump-grads "$OUT/gn2.bin" >>"$OUT/vgrad-groups.log" 2>&1
grep -h 'FMHA groups' "$OUT/vgrad-groups.log" | sort -u | tee -a "$SUM"
# The FMHA backward sums dQ over key tiles with float atomics, so two identical runs differ in the
# attention weights' gradients (2e-3 relative at most on the H200; the heads match exactly): the
# noise floor is measured here and the other comparisons are held to the same 5e-3.
cmp "none-vs-none-run-to-run" 5e-3 "$OUT/gn2.bin" "$OUT/gn.bin"
cmp "groups-auto-vs-none" 5e-3 "$OUT/ga.bin" "$OUT/gn.bin"
cmp "groups-fixed-vs-none" 5e-3 "$OUT/gf.bin" "$OUT/gn.bin"
# all-reduce: buckets overlapped with backward, one call after it, and no communicator at all
timeout 90 $T $bl --nproc 1 --dump-grads "$OUT/gb.bin" >"$OUT/vgrad-buckets.log" 2>&1
timeout 90 $T $bl --nproc 1 --bucket-mb 0 --dump-grads "$OUT/g0.bin" >>"$OUT/vgrad-buckets.log" 2>&1
cmp "buckets-vs-one-allreduce" 5e-3 "$OUT/gb.bin" "$OUT/g0.bin"
cmp "buckets-vs-no-nccl" 5e-3 "$OUT/gb.bin" "$OUT/gn.bin"
rm -f "$OUT"/g*.bin
fi

# grouped attention on BERT-Large: attention time per step for each grouping (steps 3-5 traced)
if has groups; then
for spec in none:2 auto:2 auto:4 384:2 128,256,384:2; do
    IFS=: read -r g st <<<"$spec"
    name=vr8x56-kk-groups-${g//,/-}-s$st
    timeout 150 $T --model $L --synthetic --batch 56 --virtual-ranks 8 --steps 6 --policy kk --seed 11 \
        --fmha-groups $g --streams $st --log-every 1 --trace "$OUT/$name.csv" --trace-steps 3:5 \
        >"$OUT/$name.log" 2>&1
    say "groups $g streams $st rc=$? $(grep '^attention:' "$OUT/$name.log" | cut -c12-80) | $(grep '^step' "$OUT/$name.log" | tail -1 | grep -o '[0-9.]* ms/step')"
done
fi

# the all-reduce in buckets overlapped with backward against one call after it (one rank, NCCL)
if has buckets; then
for mb in 32 0; do
    timeout 150 $T --model $L --synthetic --batch 56 --virtual-ranks 2 --steps 8 --policy kk --seed 11 \
        --nproc 1 --bucket-mb $mb --log-every 4 --trace "$OUT/nproc1-bucket$mb.csv" --trace-steps 6:8 \
        >"$OUT/nproc1-bucket$mb.log" 2>&1
    say "buckets $mb MB rc=$? $(grep '^all-reduce:' "$OUT/nproc1-bucket$mb.log" | cut -c1-80) | $(grep '^step' "$OUT/nproc1-bucket$mb.log" | tail -1 | grep -o '[0-9.]* ms/step')"
done
fi

# online calibration of the balanced per-sequence cost: uncalibrated defaults, the fitted file,
# and the defaults refitted online every step (steps 2-16 in the means)
if has online; then
for mode in default fitted online; do
    case $mode in default) extra="--no-calib" ;; fitted) extra="" ;; online) extra="--no-calib --calibrate-online" ;; esac
    timeout 200 $T --model $L --synthetic --batch 56 --virtual-ranks 8 --steps 16 --policy lpt --count free \
        --seed 13 --log-every 4 $extra >"$OUT/online-$mode.log" 2>&1
    say "online $mode rc=$? $(grep '^balance:' "$OUT/online-$mode.log" | head -1 | cut -c1-150)"
    grep '^online' "$OUT/online-$mode.log" | tail -2 | cut -c1-200 | tee -a "$SUM"
done
fi

# 4. traces for calibration (even batch sizes) and held out (the others)
has calib && for spec in large:16:calib base:56:calib large:96:heldout; do
    IFS=: read -r m bsz set <<<"$spec"
    timeout 90 $T --model models/bert-$m.cfg --synthetic --batch $bsz --steps 6 --seed 3 --log-every 6 \
        --trace "$OUT/$set-bert-$m-b$bsz.csv" --trace-steps 3:5 >"$OUT/$set-bert-$m-b$bsz.log" 2>&1
    say "trace $set bert-$m b$bsz rc=$? $(grep '^summary' "$OUT/$set-bert-$m-b$bsz.log" | cut -c1-110)"
done
echo
cat "$SUM"
if grep -qE 'rc=[1-9]' "$SUM"; then
    echo "gpu-dp.sh: FAILED (see above)"
    exit 1
fi
