#!/usr/bin/env bash
# bench_train.sh — the trainer's checks and measurements on a machine with an NVIDIA GPU.
#   bench/bench_train.sh [STAGES] [OUTDIR]
# STAGES: comma-separated from
#   gemm     bin/test_gemm (cuBLASLt wrapper vs its C reference)
#   peer     tests/gpu/compare_hf.py: loss and every gradient vs transformers' BertForPreTraining
#            (bert-tiny, and bert-base shapes with 2 layers), the bf16 trainer with bf16 bounds and
#            the fp32 build (--precision fp32) with fp32 bounds (FP32_GRAD_BOUND, FP32_LOSS_BOUND)
#   vgrad    gradients of 4 virtual ranks x 4 sequences = those of one micro-batch of 16
#   learn    bert-tiny on WikiText-2 shards (OUTDIR/../wt2 or WT2=dir): loss falls, MLM accuracy rises
#   resume   a run SIGKILLed after a checkpoint and resumed gives the losses of an uninterrupted run
#   large    BERT-Large, synthetic tokens with Wikipedia lengths, batch 56: samples/s, TFLOP/s, trace
#   vranks   BERT-Large, 8 virtual ranks x 56: per-rank time max/mean (loader order, no balancing)
#   torch    unpad-train with attention dropout 0.1 and 0 beside bench/peer_torch.py's peers of the
#            same attention dropout (HF padded; unpadded eager, per-layer and whole-model compiled;
#            TORCH_VARIANTS overrides the list)
# Default: all. Logs go to OUTDIR (default out/bench); a short table is printed last.
set -u
STAGES=${1:-gemm,peer,learn,resume,large,torch}
OUT=${2:-out/bench}
mkdir -p "$OUT"
export UNPAD_HOME=$PWD
if [ -d .deps/usr/lib/x86_64-linux-gnu ]; then
    export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
has() { case ",$STAGES," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
T=bin/unpad-train

if has gemm; then
    timeout 120 bin/test_gemm >"$OUT/gemm.log" 2>&1
    say "gemm     rc=$? $(tail -1 "$OUT/gemm.log")"
fi

if has peer; then
    # bf16 trainer against the fp32 peer: bf16 bounds (compare_hf.py defaults). The fp32 build
    # (--precision fp32) against the same peer: tight fp32 bounds, with both GELU forms (tanh runs
    # in cuBLASLt's GEMM epilogue, erf in our own kernel).
    for run in "bf16 tiny tanh" "bf16 base2 tanh" "fp32 tiny erf" "fp32 base2 erf" "fp32 tiny tanh" "fp32 base2 tanh"; do
        set -- $run
        prec=$1 m=$2 gelu=$3 tag=$1-$2-$3
        cfg=models/bert-$m.cfg
        if [ $m = base2 ]; then
            cfg=$OUT/bert-base2.cfg
            sed -e 's/^layers *=.*/layers = 2/' -e 's/^name *=.*/name = bert-base-2layers/' models/bert-base.cfg >"$cfg"
        fi
        bounds=()
        [ $prec = fp32 ] && bounds=(--grad-bound "${FP32_GRAD_BOUND:-1e-4}" --loss-bound "${FP32_LOSS_BOUND:-1e-5}")
        timeout 120 $T --precision $prec --gelu $gelu --model "$cfg" --synthetic --batch 8 --steps 1 \
            --no-dropout --seed 7 --dump-weights "$OUT/w-$tag.bin" --dump-grads "$OUT/g-$tag.bin" \
            >"$OUT/peer-$tag-train.log" 2>&1
        rc=$?
        timeout 180 python3 tests/gpu/compare_hf.py --model "$cfg" --gelu $gelu --weights "$OUT/w-$tag.bin" \
            --grads "$OUT/g-$tag.bin" "${bounds[@]}" >"$OUT/peer-$tag.log" 2>&1
        say "peer $tag train rc=$rc compare rc=$? $(tail -1 "$OUT/peer-$tag.log")"
        rm -f "$OUT/w-$tag.bin" "$OUT/g-$tag.bin"
    done
fi

if has vgrad; then
    # one micro-batch of 16 sequences against 4 virtual ranks of 4: the same global batch
    base="--model models/bert-tiny.cfg --synthetic --steps 1 --no-dropout --seed 9"
    timeout 60 $T $base --batch 16 --dump-grads "$OUT/vg1.bin" >"$OUT/vgrad.log" 2>&1
    timeout 60 $T $base --batch 4 --virtual-ranks 4 --dump-grads "$OUT/vg4.bin" >>"$OUT/vgrad.log" 2>&1
    timeout 60 python3 tests/gpu/compare_hf.py --grads "$OUT/vg4.bin" --against "$OUT/vg1.bin" \
        --grad-bound 1e-2 >>"$OUT/vgrad.log" 2>&1
    say "vgrad    rc=$? $(tail -1 "$OUT/vgrad.log")"
    rm -f "$OUT/vg1.bin" "$OUT/vg4.bin"
fi

if has learn; then
    WT2=${WT2:-out/wt2}
    timeout 200 $T --model models/bert-tiny.cfg --data "$WT2/train.bin" --eval "$WT2/eval.bin" \
        --batch 64 --steps ${LEARN_STEPS:-3000} --lr 2e-3 --warmup-steps 300 --log-every 250 \
        --eval-every 1000 --eval-batches 40 --seed 1 >"$OUT/learn.log" 2>&1
    say "learn    rc=$? $(grep -E '^step' "$OUT/learn.log" | head -1 | cut -c1-80)"
    say "         $(grep -E '^eval' "$OUT/learn.log" | tr '\n' ' ' | cut -c1-200)"
    say "         $(tail -1 "$OUT/learn.log" | cut -c1-160)"
fi

if has resume; then
    # The resumed run must continue as the uninterrupted one: the same losses (4 decimals) and the
    # same checkpoint at the end (tests/gpu/compare_ckpt.py). Two kernels add with float atomics,
    # so the runs may differ in the last bits: the losses then within 2e-4, the weights within the
    # bounds below (compare_ckpt.py says how they were set). A control run with a 1% lower
    # learning rate must be told apart.
    R=$OUT/resume
    rm -rf "$R" && mkdir -p "$R"
    args="--model models/bert-tiny.cfg --synthetic --batch 16 --steps 30 --log-every 1 --seed 5"
    timeout 60 $T $args --save "$R/full" >"$R/full.log" 2>&1
    timeout 60 $T $args --lr 4.2075e-4 --save "$R/control" >"$R/control.log" 2>&1
    $T $args --save "$R/ck" --save-every 10 >"$R/killed.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do grep -q '^step     23' "$R/killed.log" && break; sleep 0.05; done
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    timeout 60 $T $args --save "$R/ck" --save-every 10 --resume "$R/ck" >"$R/resumed.log" 2>&1
    grep -E '^step' "$R/full.log" | awk '$2 > 20 {print $2, $5}' >"$R/a.txt"
    grep -E '^step' "$R/resumed.log" | awk '$2 > 20 {print $2, $5}' >"$R/b.txt"
    last_killed=$(grep -E '^step' "$R/killed.log" | tail -1 | awk '{print $2}')
    cb="--master ${RESUME_MASTER_BOUND:-5e-6} --moments ${RESUME_MOMENT_BOUND:-1e-2}"
    ck=$(python3 tests/gpu/compare_ckpt.py "$R/ck/ckpt.bin" "$R/full/ckpt.bin" $cb 2>&1); ckrc=$?
    ctl=$(python3 tests/gpu/compare_ckpt.py "$R/control/ckpt.bin" "$R/full/ckpt.bin" $cb 2>&1); ctlrc=$?
    if [ -s "$R/a.txt" ] && cmp -s "$R/a.txt" "$R/b.txt"; then v=identical
    elif [ -s "$R/a.txt" ] && [ "$(wc -l <"$R/a.txt")" = "$(wc -l <"$R/b.txt")" ] &&
        paste "$R/a.txt" "$R/b.txt" | awk '$1 != $3 || ($2 - $4) > 2e-4 || ($4 - $2) > 2e-4 {bad = 1} END {exit bad}'; then
        v="within 2e-4 (float atomics)"
    else v=DIFFERENT; fi
    [ $ckrc -ne 0 ] && v="$v, checkpoints DIFFERENT"
    [ $ctlrc -eq 0 ] && v="$v, CONTROL NOT DETECTED"
    mkdir -p "$R/bad"
    head -c -1000 "$R/ck/ckpt.bin" >"$R/bad/ckpt.bin"
    refused() { # exit code, log: a refusal must exit non-zero with a message naming the checkpoint
        if [ "$1" -ne 0 ] && [ "$1" -lt 128 ] && grep -q 'ckpt' "$2"; then echo "refused (exit $1)"; else echo "NOT REFUSED (exit $1)"; fi
    }
    $T $args --resume "$R/bad" >"$R/bad.log" 2>&1
    say "badckpt  truncated: $(refused $? "$R/bad.log"): $(grep 'unpad-train:' "$R/bad.log" | tail -1 | cut -c1-200)"
    $T ${args/bert-tiny/bert-base} --resume "$R/ck" >"$R/other.log" 2>&1
    say "badckpt  other model: $(refused $? "$R/other.log"): $(grep 'unpad-train:' "$R/other.log" | tail -1 | cut -c1-260)"
    say "resume   killed after step $last_killed, resumed $(grep -o 'at step [0-9]*' "$R/resumed.log" | head -1): losses of steps 21-30 $v"
    say "resume   checkpoints at step 30, resumed vs uninterrupted: $ck"
    say "resume   control (lr 1% lower) vs uninterrupted: ${ctl/BEYOND bounds/told apart}"
fi

if has large; then
    timeout 240 $T --model models/bert-large.cfg --synthetic --batch 56 --steps 30 --log-every 10 \
        --trace "$OUT/large-trace.csv" --trace-json "$OUT/large-trace.json" --trace-steps 25:25 --seed 1 \
        >"$OUT/large.log" 2>&1
    say "large    rc=$? $(tail -1 "$OUT/large.log" | cut -c1-200)"
fi

if has vranks; then
    timeout 120 $T --model models/bert-large.cfg --synthetic --batch 56 --virtual-ranks 8 --steps 4 \
        --log-every 1 --trace "$OUT/vranks-trace.csv" --trace-steps 2:4 --seed 1 >"$OUT/vranks.log" 2>&1
    say "vranks   rc=$? $(grep -E '^step' "$OUT/vranks.log" | tail -1 | cut -c1-200)"
fi

if has torch; then
    # Equal work: the trainer with the model's attention dropout beside the peers that have it
    # (hf-padded, ':ad'), and with none (--attn-dropout 0) beside the others.
    ours=
    for ad in 0.1 0; do
        timeout 120 $T --model models/bert-large.cfg --synthetic --batch 56 --steps 30 --log-every 10 --seed 1 \
            --attn-dropout $ad >"$OUT/torch-ours-ad$ad.log" 2>&1
        say "torch    unpad-train attention dropout $ad rc=$? $(grep -E '^step' "$OUT/torch-ours-ad$ad.log" | tail -1 | cut -c1-150)"
        ours=$ours${ours:+,}$ad=$OUT/torch-ours-ad$ad.log
    done
    timeout 900 python3 bench/peer_torch.py --model models/bert-large.cfg --batch 56 --steps 8 --warmup 3 \
        --variants ${TORCH_VARIANTS:-hf-padded,unpad-eager,unpad-compile,unpad-compile:ad,unpad-compile-model} \
        --ours "$ours" >"$OUT/torch.log" 2>&1
    say "torch    rc=$?"
    grep -A40 '^peer (' "$OUT/torch.log" | grep -v '^PEERS' | tee -a "$SUMMARY"
fi
tar czf "$OUT/logs.tgz" -C "$OUT" --exclude='*.bin' --exclude=logs.tgz . 2>/dev/null
echo "---- summary"
cat "$SUMMARY"
# a failed stage (a non-zero exit, a resume that differs, a bad checkpoint accepted) fails the script
if grep -qE 'rc=[1-9]|DIFFERENT|NOT REFUSED|BEYOND|NOT DETECTED|headers differ' "$SUMMARY"; then
    echo "bench_train.sh: FAILED (see above)"
    exit 1
fi
