#!/usr/bin/env bash
# gpu-multi.sh — data parallelism on several GPUs of one host (bin/unpad-train built first: make gpu):
#   equal     bert-tiny, 2 ranks x 8 sequences, dropout off, kk: `--nproc N` (one process and GPU per
#             rank, NCCL) against `--virtual-ranks N` on one GPU: the losses of 20 steps and the
#             step-20 checkpoints (tests/gpu/compare_ckpt.py)
#   mpirun    the same run launched by `mpirun -np N` (when mpirun is there)
#   scale     BERT-Large, 56 sequences per GPU, Wikipedia lengths, kk: steady-state samples/s on 1
#             and on N GPUs (the trainer's summary line)
#   scripts/gpu-multi.sh [STAGES] [OUTDIR]       N = the number of GPUs (nvidia-smi -L), at least 2
set -u
STAGES=${1:-equal,mpirun,scale}
OUT=${2:-out/gpu-multi}
mkdir -p "$OUT"
export UNPAD_HOME=$PWD
T=bin/unpad-train
N=$(nvidia-smi -L | wc -l)
SUM=$OUT/summary.txt
: >"$SUM"
say() { echo "$*" | tee -a "$SUM"; }
has() { case ",$STAGES," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
[ "$N" -ge 2 ] || { say "gpu-multi.sh: $N GPU(s): needs at least 2"; exit 1; }
losses() { grep -E '^step' "$1" | awk '{print $2 + 0, $5}'; }
tiny="--model models/bert-tiny.cfg --synthetic --batch 8 --steps 20 --no-dropout --policy kk --seed 4 --log-every 1"

if has equal; then
    rm -rf "$OUT/vr" "$OUT/np"
    timeout 120 $T $tiny --virtual-ranks "$N" --save "$OUT/vr" --save-every 20 >"$OUT/equal-vr.log" 2>&1
    say "equal    virtual ranks rc=$? $(grep '^summary' "$OUT/equal-vr.log" | cut -c1-110)"
    timeout 120 $T $tiny --nproc "$N" --save "$OUT/np" --save-every 20 >"$OUT/equal-np.log" 2>&1
    say "equal    --nproc $N rc=$? $(grep '^summary' "$OUT/equal-np.log" | cut -c1-110)"
    paste <(losses "$OUT/equal-vr.log") <(losses "$OUT/equal-np.log") >"$OUT/equal-losses.txt"
    say "equal    losses of $(wc -l <"$OUT/equal-losses.txt") steps: max |difference| $(awk '{d = $2 - $4; if (d < 0) d = -d; if (d > m) m = d} END {printf "%.2e", m}' "$OUT/equal-losses.txt")"
    say "equal    step-20 checkpoints: $(python3 tests/gpu/compare_ckpt.py "$OUT/np/step-000020/ckpt.bin" "$OUT/vr/step-000020/ckpt.bin" 2>&1 | tail -1)"
fi

if has mpirun && command -v mpirun >/dev/null; then
    timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$N" $T $tiny --steps 5 >"$OUT/mpirun.log" 2>&1
    say "mpirun   -np $N rc=$? $(grep '^summary' "$OUT/mpirun.log" | head -1 | cut -c1-110)"
fi

if has scale; then
    large="--model models/bert-large.cfg --synthetic --batch 56 --steps 40 --policy kk --seed 1 --log-every 10"
    for n in 1 "$N"; do
        timeout 180 $T $large --nproc "$n" >"$OUT/scale-$n.log" 2>&1
        say "scale    $n GPU(s) rc=$? $(grep '^summary' "$OUT/scale-$n.log" | head -1 | cut -c1-170)"
    done
fi
echo "---- summary"
cat "$SUM"
