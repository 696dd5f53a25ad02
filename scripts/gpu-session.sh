#!/usr/bin/env bash
# gpu-session.sh — the measurements that feed the planner's calibration and the docs, in one call
# on a machine with an NVIDIA GPU (bin/unpad-train built first: make gpu):
#   calib     scripts/gpu-dp.sh policies,calib: the calibration traces (BERT-Large b16, BERT-Base
#             b56, 8 virtual ranks x 56 in loader order and lpt) and the Wikipedia held-out ones
#   heldout   scripts/gpu-heldout.sh: the held-out workloads of other models, batch sizes and
#             length distributions (STEPS steps each, default 220)
#   torch     bench/bench_train.sh torch: the trainer beside the PyTorch peers (TORCH_VARIANTS)
#   scripts/gpu-session.sh [STAGES] [OUTDIR]
# Each stage's logs and traces are packed into OUTDIR/<stage>.tgz as soon as it ends, so a call cut
# short keeps what finished.
set -u
STAGES=${1:-calib,heldout,torch}
OUT=${2:-out/gpu-session}
mkdir -p "$OUT"
has() { case ",$STAGES," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
T0=$SECONDS
pack() { # stage dir
    tar czf "$OUT/$1.tgz" --exclude='*.bin' --exclude='*.json' -C "$(dirname "$2")" "$(basename "$2")" 2>/dev/null
    echo "$1 done at $((SECONDS - T0)) s"
}
if has calib; then
    bash scripts/gpu-dp.sh policies,calib out/session-dp >"$OUT/calib.log" 2>&1
    echo "calib rc=$?"; tail -9 "$OUT/calib.log" | cut -c1-160
    pack calib out/session-dp
fi
if has heldout; then
    STEPS=${STEPS:-220} bash scripts/gpu-heldout.sh out/session-heldout >"$OUT/heldout.log" 2>&1
    echo "heldout rc=$?"; grep -c 'rc=0' "$OUT/heldout.log"
    pack heldout out/session-heldout
fi
if has torch; then
    bash bench/bench_train.sh torch out/session-torch >"$OUT/torch.log" 2>&1
    echo "torch rc=$?"; sed -n '/---- summary/,$p' "$OUT/torch.log" | cut -c1-200
    pack torch out/session-torch
fi
