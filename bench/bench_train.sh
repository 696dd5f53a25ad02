#!/usr/bin/env bash
# bench_train.sh — the trainer's checks and measurements on a machine with an NVIDIA GPU.
#   bench/bench_train.sh [STAGES] [OUTDIR]
# STAGES: comma-separated from
#   gemm     bin/test_gemm (cuBLASLt wrapper vs its C reference)
#   peer     tests/gpu/compare_hf.py: loss and every gradient vs transformers' BertForPreTraining
#            (bert-tiny, and bert-base shapes with 2 layers), the bf16 trainer with bf16 bounds and
#            the fp32 build (--precision fp32) with fp32 bounds (FP32_GRAD_BOUND, FP32_LOSS_BOUND)
#   vgrad    gradients of 4 virtual ranks x 4 sequences = those of one micro-batch of 16
#   heads    the last layer on the heads' rows (--last-layer heads, the default) against every row
#            (--last-layer all): the loss and every gradient of one step without dropout, 2-layer
#            bert-base and BERT-Large shapes, bf16 and --fp8 on, within 2e-2 (HEADS_GRAD_BOUND;
#            the products of other row counts round differently); then BERT-Large at 56 Wikipedia
#            lengths, heads and all interleaved twice: steady-state samples/s of each
#   sanitize the trainer (bert-tiny, 2 steps, the default path and --fp8 on --graphs on with 2 virtual
#            ranks) under compute-sanitizer memcheck, racecheck (shared-memory hazards) and synccheck
#            (barrier misuse): each must report 0 errors (not in the default list: slow)
#   grow     activations made again mid-run (--act-tokens 256: every micro-batch larger than the
#            first size): bert-tiny alone, with 4 virtual ranks (the regrowth between the micro-batches
#            of a step carries the loss sums over) and with --fp8 on (bert-base, 2 layers), each against
#            the same run with the default size: the losses of every step within 2e-4 (5e-3 for the
#            FP8 run: float atomics), the summary's `activations:` line saying it grew; then the tiny
#            regrowing run under compute-sanitizer memcheck
#   graphs   --graphs on (each micro-batch's forward and backward as one CUDA graph, captured while the
#            step before computes) against the same run with --graphs off: bert-tiny with an
#            evaluation every 4 steps (its uploads drop the pass captured ahead), with 4 virtual
#            ranks, with activations made again mid-run (--act-tokens 256), and 2-layer bert-base
#            with the attention in length groups on 3 streams and with --fp8 on: the losses of every
#            step identical (within 5e-3 for bert-base: the float atomics of the FMHA's dQ),
#            the summary's `graphs:` line (no step run as a graph fails); the tiny graph run under
#            compute-sanitizer memcheck
#            (GRAPHS_MEMCHECK=0: not)
#   graphspeed  steady-state samples/s with --graphs off and on, interleaved (off, on, off, on):
#            BERT-Base and BERT-Large at 24 short sequences, BERT-Large at 56 Wikipedia lengths
#   learn    bert-tiny on WikiText-2 shards (OUTDIR/../wt2 or WT2=dir): loss falls, MLM accuracy rises
#   resume   a run SIGKILLed after a checkpoint and resumed gives the losses of an uninterrupted run
#   signal   a run SIGTERMed mid-run stops after its step with a checkpoint, exit 0, a valid trace and
#            summary; resumed, it gives the losses and weights of the uninterrupted run
#   nonfinite  a forced NaN loss at step 8 stops the run (exit 3) naming the step and the last good
#            checkpoint; with --skip-nonfinite the step is skipped, counted, and the run completes;
#            the stop with --graphs on and --fp8 on (2-layer bert-base) discards the pass captured
#            ahead: its summary's fp8: line is that of the same run with --graphs off
#   poison   --grad-write on with UNPAD_POISON_GRADS=1 (the gradients NaN before every step): bert-tiny
#            (16 sequences, and 4 virtual ranks x 4), bert-base x 8 and BERT-Large x 56 complete
#            (a gradient left unwritten makes the norm NaN: exit 3) with the losses of the
#            unpoisoned run, and those of --grad-write off: within 2e-4 for bert-tiny, within 5e-3
#            for the larger models, whose float reductions (the FMHA's dQ) make runs differ by
#            about 1e-3 from step 2 on (a second unpoisoned run shows the spread of the same command)
#   steps    300 steps (fp32 build, bert-tiny, dropout off) against transformers' BertForPreTraining
#            driven by a LAMB written from the paper (tests/gpu/compare_steps.py): the loss and lr of
#            every step, and the final weights
#   large    BERT-Large, synthetic tokens with Wikipedia lengths, batch 56 and 96, bf16 (off), with
#            --fp8 on (on), and with --fp8 on and UNPAD_FP8_GELU_OUT=0 (h16: FFN1's output in bf16
#            and cast):
#            samples/s, TFLOP/s, memory, a trace of one step; batch 56 against its targets
#            (1,000 samples/s, 28.4 GiB), printed as met or MISSED (a miss does not fail the script)
#   fp8      --fp8 on (and h16) against the bf16 trainer: the gradients of one step (2-layer
#            bert-base and BERT-Large shapes, relative L2 within FP8_GRAD_BOUND, default 0.25: E4M3 /
#            E5M2 round to 2^-4 / 2^-3), and BERT-Large (--fp8 on) from scratch on the WikiText-2
#            shards (WT2, 400 steps of 64): the loss every 25 steps and the eval MLM loss, within 2% of the bf16 run's
#   vranks   BERT-Large, 8 virtual ranks x 56: per-rank time max/mean (loader order, no balancing)
#   torch    unpad-train with attention dropout 0.1 and 0, bf16 and --fp8 on, beside bench/peer_torch.py's
#            peers of the same attention dropout (HF padded; unpadded eager, per-layer and
#            whole-model compiled, each compiled one also with FP8 products through
#            torch._scaled_mm; TORCH_VARIANTS overrides the list); each of ours against the fastest
#            peer of its attention dropout, whatever the peer's products, which the table names
#            (target 1.4x, met or MISSED); a peer's rate is its 20 steps after 5 warm-up steps, with
#            its median step on the GPU, its host time a step and any compilation inside the window
# Default: all. Logs go to OUTDIR (default out/bench); a short table is printed last. TRAIN_ARGS adds
# arguments to every unpad-train run (TRAIN_ARGS="--gemm-tune on").
set -u
STAGES=${1:-gemm,peer,heads,grow,graphs,learn,resume,signal,nonfinite,steps,fp8,large,graphspeed,torch}
OUT=${2:-out/bench}
has() { case ",$STAGES," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
# the programs the chosen stages run, checked before any stage starts (`make gpu` builds them all)
missing=""
need() { # need STAGE PROGRAM...
    local s=$1 p
    shift
    has "$s" || return 0
    for p in "$@"; do [ -x "$p" ] || missing="$missing $s:$p"; done
}
for s in ${STAGES//,/ }; do # every stage but gemm runs the trainer
    [ "$s" = gemm ] || need "$s" bin/unpad-train
done
need gemm bin/test_gemm
need graphs bin/unpad-data
need peer bin/unpad-train-fp32
need steps bin/unpad-train-fp32
if [ -n "$missing" ]; then
    for m in $missing; do echo "bench_train.sh: stage ${m%%:*} needs ${m#*:}, which is not built" >&2; done
    echo "bench_train.sh: build them first (make gpu); nothing was run" >&2
    exit 2
fi
mkdir -p "$OUT"
export UNPAD_HOME=$PWD
if [ -d .deps/usr/lib/x86_64-linux-gnu ]; then
    export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
T="bin/unpad-train ${TRAIN_ARGS:-}"
cb="--master ${RESUME_MASTER_BOUND:-2e-5} --moments ${RESUME_MOMENT_BOUND:-1e-2}"
# same_losses A.log B.log K [TOL]: the losses of the steps after K in two logs: identical, within
# TOL (default 2e-4: float atomics change the last printed digit), or DIFFERENT; the largest
# difference follows in parentheses
same_losses() {
    local tol=${4:-2e-4} d
    grep -E '^step' "$1" | awk -v k="$3" '$2 + 0 > k {print $2 + 0, $5}' >"$1.losses"
    grep -E '^step' "$2" | awk -v k="$3" '$2 + 0 > k {print $2 + 0, $5}' >"$2.losses"
    d=$(paste "$1.losses" "$2.losses" | awk '{x = $2 - $4; if (x < 0) x = -x; if (x > m) m = x} END {printf "%.1e", m}')
    if [ -s "$1.losses" ] && cmp -s "$1.losses" "$2.losses"; then echo identical
    elif [ -s "$1.losses" ] && [ "$(wc -l <"$1.losses")" = "$(wc -l <"$2.losses")" ] &&
        paste "$1.losses" "$2.losses" | awk -v t="$tol" '$1 != $3 || ($2 - $4) > t + 0 || ($4 - $2) > t + 0 {bad = 1} END {exit bad}'; then
        echo "within $tol (float atomics; max $d)"
    else echo "DIFFERENT (max $d)"; fi
}
# base2_cfg: BERT-Base with 2 layers (the larger model's shapes at a test's cost) as $OUT/bert-base2.cfg
base2_cfg() {
    sed -e 's/^layers *=.*/layers = 2/' -e 's/^name *=.*/name = bert-base-2layers/' models/bert-base.cfg \
        >"$OUT/bert-base2.cfg"
}
json_ok() { python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null && echo valid || echo INVALID; }

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
            base2_cfg
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

if has heads; then
    base2_cfg
    sed -e 's/^layers *=.*/layers = 2/' -e 's/^name *=.*/name = bert-large-2layers/' models/bert-large.cfg \
        >"$OUT/bert-large2.cfg"
    for m in base2 large2; do
        for f in off on; do
            for l in heads all; do
                timeout 120 $T --model "$OUT/bert-$m.cfg" --synthetic --batch 16 --steps 1 --no-dropout --seed 7 \
                    --fp8 $f --last-layer $l --dump-grads "$OUT/hg-$l.bin" >"$OUT/heads-$m-$f-$l.log" 2>&1 ||
                    say "heads    $m fp8 $f $l rc=$?"
            done
            timeout 120 python3 tests/gpu/compare_hf.py --grads "$OUT/hg-heads.bin" --against "$OUT/hg-all.bin" \
                --grad-bound "${HEADS_GRAD_BOUND:-2e-2}" >"$OUT/heads-$m-$f-cmp.log" 2>&1
            say "heads    $m fp8 $f, heads against all rc=$? $(tail -1 "$OUT/heads-$m-$f-cmp.log")"
            rm -f "$OUT/hg-heads.bin" "$OUT/hg-all.bin"
        done
    done
    for l in heads all heads all; do
        timeout 120 $T --model models/bert-large.cfg --synthetic --batch 56 --steps 40 --log-every 10 --seed 1 \
            --last-layer $l >"$OUT/heads-speed-$l-$SECONDS.log" 2>&1
        say "heads    BERT-Large b56 --last-layer $l rc=$? $(grep '^summary' "$(ls -t "$OUT"/heads-speed-$l-*.log |
            head -1)" | grep -oE '[0-9.]+ samples/s|whole run [0-9.]+ samples/s' | tr '\n' ' ')"
    done
fi

if has sanitize; then
    for tool in memcheck racecheck synccheck; do
        for mode in "default" "fp8-graphs --fp8 on --graphs on --virtual-ranks 2"; do
            set -- $mode
            tag=$1
            shift
            timeout 600 compute-sanitizer --tool $tool --error-exitcode 9 $T --model models/bert-tiny.cfg \
                --synthetic --steps 2 --batch 8 --seed 5 "$@" >"$OUT/sanitize-$tool-$tag.log" 2>&1
            say "sanitize $tool $tag rc=$? $(grep -E '(ERROR|RACECHECK) SUMMARY' "$OUT/sanitize-$tool-$tag.log" |
                tail -1)"
        done
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

# pair_runs STAGE EXTRA RE RUN...: each RUN is "TAG TOL ARGS...": unpad-train 12 steps with ARGS
# (bert-tiny, or 2-layer bert-base for tags base2*), then the same with EXTRA; the losses of every
# step compared (same_losses, within TOL), the eval MLM losses of both where there are any, and the
# second run's summary line matching RE
pair_runs() {
    local stage=$1 extra=$2 re=$3 run tag tol cfg g r0 r1 line ev
    shift 3
    base2_cfg
    for run in "$@"; do
        set -- $run
        tag=$1 tol=$2
        shift 2
        cfg=models/bert-tiny.cfg
        case $tag in base2*) cfg=$OUT/bert-base2.cfg ;; esac
        g="--model $cfg --synthetic --steps 12 --log-every 1 --seed 5 $*"
        timeout 120 $T $g >"$OUT/$stage-$tag-0.log" 2>&1
        r0=$?
        timeout 120 $T $g $extra >"$OUT/$stage-$tag-1.log" 2>&1
        r1=$?
        line=$(grep -E "$re" "$OUT/$stage-$tag-1.log" | cut -c1-150)
        ev=$(paste <(grep -E '^eval' "$OUT/$stage-$tag-0.log" | awk '{print $6}') \
            <(grep -E '^eval' "$OUT/$stage-$tag-1.log" | awk '{print $6}') | tr '\t\n' '/ ')
        say "$stage $tag rc=$r0,$r1 losses $(same_losses "$OUT/$stage-$tag-0.log" "$OUT/$stage-$tag-1.log" 0 \
            "$tol")${ev:+ | eval ${ev% }} | $line"
    done
}

if has grow; then
    pair_runs grow "--act-tokens 256" '^activations:' "tiny 2e-4 --batch 16" \
        "tiny-vr4 2e-4 --batch 8 --virtual-ranks 4" "base2-fp8 5e-3 --batch 16 --fp8 on"
    if [ "${GROW_MEMCHECK:-1}" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
        timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $T --model models/bert-tiny.cfg --synthetic \
            --steps 3 --batch 8 --virtual-ranks 2 --seed 5 --act-tokens 256 >"$OUT/grow-memcheck.log" 2>&1
        say "grow memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/grow-memcheck.log" | tail -1)"
    fi
fi

if has graphs; then
    bin/unpad-data --synthetic --dist wiki512 --samples 256 --seed 3 --out "$OUT/graphs-eval.bin" --force \
        >"$OUT/graphs-eval-data.log" 2>&1
    pair_runs graphs "--graphs on" '^graphs:' \
        "tiny-eval 2e-4 --batch 16 --eval $OUT/graphs-eval.bin --eval-every 4 --eval-batches 2" \
        "tiny-vr4 2e-4 --batch 8 --virtual-ranks 4" "tiny-grow 2e-4 --batch 16 --act-tokens 256" \
        "base2-groups 5e-3 --batch 16 --fmha-groups 128,256,384 --streams 3" "base2-fp8 5e-3 --batch 16 --fp8 on"
    # equal losses prove nothing if no step ran as a graph
    for f in "$OUT"/graphs-*-1.log; do
        t=${f##*/graphs-}
        grep -qE '^graphs: [1-9][0-9]* of' "$f" || say "graphs ${t%-1.log}: NONE of its steps ran as graphs"
    done
    if [ "${GRAPHS_MEMCHECK:-1}" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
        timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $T --model models/bert-tiny.cfg --synthetic \
            --steps 5 --batch 8 --virtual-ranks 2 --seed 5 --graphs on >"$OUT/graphs-memcheck.log" 2>&1
        say "graphs memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/graphs-memcheck.log" | tail -1)"
    fi
fi

if has graphspeed; then
    for run in "base-b24-short 120 --model models/bert-base.cfg --dist models/dists/short.csv --batch 24" \
        "large-b24-short 80 --model models/bert-large.cfg --dist models/dists/short.csv --batch 24" \
        "large-b56 40 --model models/bert-large.cfg --batch 56"; do
        set -- $run
        tag=$1 n=$2
        shift 2
        line="graphs speed $tag:"
        for k in 0 1 2 3; do
            gr=off
            [ $((k % 2)) = 1 ] && gr=on
            timeout 200 $T "$@" --synthetic --steps "$n" --log-every 20 --seed 21 --graphs $gr \
                >"$OUT/graphs-speed-$tag-$k.log" 2>&1
            sps=$(grep -E '^summary' "$OUT/graphs-speed-$tag-$k.log" | grep -oE '[0-9.]+ samples/s' | head -1)
            line="$line $gr ${sps:-FAILED}"
        done
        say "$line"
    done
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
    for _ in $(seq 600); do grep -q '^step     23/' "$R/killed.log" && break; sleep 0.05; done
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    timeout 60 $T $args --save "$R/ck" --save-every 10 --resume "$R/ck" >"$R/resumed.log" 2>&1
    v=$(same_losses "$R/full.log" "$R/resumed.log" 20)
    last_killed=$(grep -E '^step' "$R/killed.log" | tail -1 | awk '{print $2+0}')
    ck=$(python3 tests/gpu/compare_ckpt.py "$R/ck/step-000030/ckpt.bin" "$R/full/step-000030/ckpt.bin" $cb 2>&1); ckrc=$?
    ctl=$(python3 tests/gpu/compare_ckpt.py "$R/control/step-000030/ckpt.bin" "$R/full/step-000030/ckpt.bin" $cb 2>&1); ctlrc=$?
    [ $ckrc -ne 0 ] && v="$v, checkpoints DIFFERENT"
    [ $ctlrc -eq 0 ] && v="$v, CONTROL NOT DETECTED"
    mkdir -p "$R/bad"
    head -c -1000 "$R/ck/step-000030/ckpt.bin" >"$R/bad/ckpt.bin"
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

if has signal; then
    # SIGTERM after step 13: the run ends its step, saves (step-000013), writes its summary and a
    # closed trace, exits 0; resumed from there it must continue as the uninterrupted run.
    S=$OUT/signal
    rm -rf "$S" && mkdir -p "$S"
    args="--model models/bert-tiny.cfg --synthetic --batch 16 --steps 30 --log-every 1 --seed 5"
    timeout 60 $T $args --save "$S/full" >"$S/full.log" 2>&1
    $T $args --save "$S/ck" --save-every 10 --log-file "$S/killed.jsonl" --trace-json "$S/killed-trace.json" \
        >"$S/killed.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do grep -q '^step     13/' "$S/killed.log" && break; sleep 0.05; done
    kill -TERM $pid 2>/dev/null
    wait $pid
    krc=$?
    stopped=$(grep -o 'stopped by a signal after step [0-9]*' "$S/killed.log" | awk '{print $NF}')
    outcome=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["outcome"])' "$S/killed.summary.json" 2>&1)
    say "signal   SIGTERM: rc=$krc, stopped after step ${stopped:-NONE}, checkpoint $(ls "$S/ck" | tr '\n' ' '), summary '$outcome', trace $(json_ok "$S/killed-trace.json")"
    [ "$outcome" = "stopped by signal" ] || say "signal   SUMMARY outcome DIFFERENT: $outcome"
    timeout 60 $T $args --save "$S/ck" --save-every 10 --resume "$S/ck" >"$S/resumed.log" 2>&1
    rrc=$?
    v=$(same_losses "$S/full.log" "$S/resumed.log" "${stopped:-0}")
    ck=$(python3 tests/gpu/compare_ckpt.py "$S/ck/step-000030/ckpt.bin" "$S/full/step-000030/ckpt.bin" $cb 2>&1)
    say "signal   resumed rc=$rrc $(grep -o 'at step [0-9]*' "$S/resumed.log" | head -1): losses after step $stopped $v; $ck"
fi

if has nonfinite; then
    # --debug-nonfinite-step 8 makes step 8's loss and gradient NaN: the run stops with exit 3,
    # naming the step and the last good checkpoint (step-000005); with --skip-nonfinite it goes on.
    N=$OUT/nonfinite
    rm -rf "$N" && mkdir -p "$N"
    args="--model models/bert-tiny.cfg --synthetic --batch 16 --steps 12 --log-every 1 --seed 5 --debug-nonfinite-step 8"
    timeout 60 $T $args --save "$N/ck" --save-every 5 --trace-json "$N/trace.json" >"$N/stop.log" 2>&1
    src=$?
    msg=$(grep 'unpad-train: step 8' "$N/stop.log" | cut -c1-220)
    if [ $src -eq 3 ] && grep -q 'not finite' "$N/stop.log" && grep -q 'step-000005' "$N/stop.log" &&
        [ ! -d "$N/ck/step-000010" ]; then v="stops (exit 3)"; else v="NOT STOPPED as described (exit $src)"; fi
    say "nonfinite $v, trace $(json_ok "$N/trace.json"): $msg"
    timeout 60 $T $args --skip-nonfinite --log-file "$N/skip.jsonl" >"$N/skip.log" 2>&1
    krc=$?
    skipped=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["skipped_nonfinite"])' "$N/skip.summary.json" 2>&1)
    final=$(grep -E '^step +12/' "$N/skip.log" | awk '{print $5}')
    if [ $krc -eq 0 ] && [ "$skipped" = 1 ] && grep -q 'step 8 skipped' "$N/skip.log" && [ "$final" != nan ] &&
        [ -n "$final" ]; then v="skipped and counted"; else v="SKIP DIFFERENT (exit $krc, skipped $skipped, loss $final)"; fi
    say "nonfinite --skip-nonfinite: $v; final loss $final"
    # The same stop with --graphs on and --fp8 on (2-layer bert-base): step 9's pass, captured at the
    # end of step 8 before its statistics were read, is discarded, so the summary's fp8: line counts
    # the products of the passes that ran, as the run without graphs does.
    base2_cfg
    args="--model $OUT/bert-base2.cfg --synthetic --batch 16 --steps 12 --log-every 1 --seed 5 --fp8 on"
    args="$args --debug-nonfinite-step 8"
    timeout 120 $T $args --graphs off >"$N/graphs-off.log" 2>&1
    r0=$?
    timeout 120 $T $args --graphs on >"$N/graphs-on.log" 2>&1
    r1=$?
    f0=$(grep -E '^fp8:' "$N/graphs-off.log" | cut -c1-90)
    f1=$(grep -E '^fp8:' "$N/graphs-on.log" | cut -c1-90)
    g1=$(grep -oE '^graphs: [0-9]+ of [0-9]+ steps' "$N/graphs-on.log")
    if [ $r0 -eq 3 ] && [ $r1 -eq 3 ] && [ -n "$f0" ] && [ "$f0" = "$f1" ] && [ -n "$g1" ] &&
        [ "$(echo "$g1" | awk '{print $2}')" -gt 0 ]; then
        v="both stop (exit 3), the same fp8: line"
    else
        v="GRAPHS STOP DIFFERENT (exit $r0, $r1; '$f0' against '$f1'; '${g1:-no graphs: line}')"
    fi
    say "nonfinite --graphs on: $v | $g1 | $f1"
fi

if has steps; then
    S=$OUT/steps
    rm -rf "$S" && mkdir -p "$S"
    sargs="--steps ${STEPS_N:-300} --lr 1e-3 --weight-decay 0.1"
    timeout 300 $T --precision fp32 --gelu tanh --model models/bert-tiny.cfg --synthetic --batch 16 $sargs \
        --warmup-steps 30 --no-dropout --seed 11 --log-every 1 --log-file "$S/log.jsonl" \
        --dump-weights "$S/w.bin" --dump-batches "$S/b.bin" --dump-final "$S/f.bin" >"$S/train.log" 2>&1
    trc=$?
    timeout 600 python3 tests/gpu/compare_steps.py --model models/bert-tiny.cfg --gelu tanh $sargs --warmup 30 \
        --weights "$S/w.bin" --batches "$S/b.bin" --log "$S/log.jsonl" --final "$S/f.bin" >"$S/compare.log" 2>&1
    say "steps    train rc=$trc compare rc=$? $(tail -1 "$S/compare.log" | cut -c1-220)"
    rm -f "$S/w.bin" "$S/b.bin" "$S/f.bin"
fi

if has poison; then
    for run in "tiny 2e-4 --model models/bert-tiny.cfg --batch 16 --steps 30 --seed 5" \
        "tiny-vr4 2e-4 --model models/bert-tiny.cfg --batch 4 --virtual-ranks 4 --steps 30 --seed 5" \
        "base 5e-3 --model models/bert-base.cfg --batch 8 --steps 10 --seed 3" \
        "large 5e-3 --model models/bert-large.cfg --batch 56 --steps 6 --seed 1"; do
        set -- $run
        tag=$1 tol=$2
        shift 2
        P=$OUT/poison-$tag
        timeout 120 $T --synthetic --log-every 1 --grad-write on "$@" >"$P-plain.log" 2>&1
        r1=$?
        UNPAD_POISON_GRADS=1 timeout 120 $T --synthetic --log-every 1 --grad-write on "$@" >"$P-poisoned.log" 2>&1
        r2=$?
        timeout 120 $T --synthetic --log-every 1 --grad-write off "$@" >"$P-off.log" 2>&1
        r3=$?
        timeout 120 $T --synthetic --log-every 1 --grad-write on "$@" >"$P-again.log" 2>&1
        r4=$?
        say "poison   $tag written rc=$r1, poisoned rc=$r2, zeroed rc=$r3, written again rc=$r4: losses \
poisoned vs written $(same_losses "$P-plain.log" "$P-poisoned.log" 0 $tol), written vs zeroed \
$(same_losses "$P-plain.log" "$P-off.log" 0 $tol); the spread, written twice: \
$(same_losses "$P-plain.log" "$P-again.log" 0 $tol)"
    done
fi

# FP8 variants: off (bf16), on (--fp8 on: FFN1's output in E4M3 only), h16 (--fp8 on with
# UNPAD_FP8_GELU_OUT=0: FFN1's output in bf16 and cast, the path before)
fp8_flag() { [ "$1" = off ] && echo off || echo on; }
fp8_gelu_out() { [ "$1" = h16 ] && echo 0 || echo 1; }
if has fp8; then
    for m in base large; do
        cfg=$OUT/bert-$m-2.cfg
        sed -e 's/^layers *=.*/layers = 2/' -e "s/^name *=.*/name = bert-$m-2layers/" models/bert-$m.cfg >"$cfg"
        for f in off on h16; do
            UNPAD_FP8_GELU_OUT=$(fp8_gelu_out $f) timeout 120 $T --model "$cfg" --synthetic --batch 16 --steps 1 \
                --no-dropout --seed 7 --fp8 $(fp8_flag $f) --dump-grads "$OUT/fp8g-$m-$f.bin" \
                >"$OUT/fp8-grad-$m-$f.log" 2>&1 || say "fp8      $m $f rc=$?"
        done
        for f in on h16; do
            timeout 120 python3 tests/gpu/compare_hf.py --grads "$OUT/fp8g-$m-$f.bin" \
                --against "$OUT/fp8g-$m-off.bin" --grad-bound "${FP8_GRAD_BOUND:-0.25}" \
                >"$OUT/fp8-grad-$m-$f-cmp.log" 2>&1
            say "fp8      gradients $m (2 layers), $f against bf16 rc=$? $(tail -1 "$OUT/fp8-grad-$m-$f-cmp.log")"
        done
        rm -f "$OUT/fp8g-$m-"*.bin
    done
    WT2=${WT2:-out/wt2}
    for f in off on; do
        timeout 300 $T --model models/bert-large.cfg --data "$WT2/train.bin" --eval "$WT2/eval.bin" --batch 64 \
            --steps 400 --lr 2e-4 --warmup-steps 40 --log-every 25 --eval-every 200 --eval-batches 20 --seed 1 \
            --fp8 $f >"$OUT/fp8-learn-$f.log" 2>&1
        say "fp8      learn --fp8 $f rc=$? $(grep '^summary' "$OUT/fp8-learn-$f.log" | cut -c1-120)"
    done
    say "fp8      losses every 25 steps, bf16 / FP8: $(paste <(grep -E '^step' "$OUT/fp8-learn-off.log" | awk '{print $5}') \
<(grep -E '^step' "$OUT/fp8-learn-on.log" | awk '{print $5}') | tr '\t\n' '/ ')"
    e0=$(grep -E '^eval' "$OUT/fp8-learn-off.log" | tail -1 | awk '{print $6}')
    e1=$(grep -E '^eval' "$OUT/fp8-learn-on.log" | tail -1 | awk '{print $6}')
    say "fp8      eval MLM loss after 400 steps: bf16 $e0, FP8 $e1: $(awk -v a="$e0" -v b="$e1" \
'BEGIN {d = (b - a) / a; if (d < 0) d = -d; if (a + 0 > 0 && d <= 0.02) printf "within 2%% (%.2f%%)", 100 * d; else print "DIFFERENT"}')"
fi

if has large; then
    # batch 56 (traced at step 25) and 96, bf16 and FP8; the summary line gives steady-state and
    # whole-run rates
    for f in off on h16; do
        for bsz in 56 96; do
            tr=()
            [ $bsz = 56 ] && tr=(--trace "$OUT/large-trace-fp8$f.csv" --trace-json "$OUT/large-trace-fp8$f.json"
                --trace-steps 25:25)
            UNPAD_FP8_GELU_OUT=$(fp8_gelu_out $f) timeout 240 $T --model models/bert-large.cfg --synthetic \
                --batch $bsz --steps 30 --log-every 10 "${tr[@]}" --seed 1 --fp8 $(fp8_flag $f) \
                >"$OUT/large-b$bsz-fp8$f.log" 2>&1
            say "large    b$bsz $f rc=$? $(grep '^summary' "$OUT/large-b$bsz-fp8$f.log" | cut -c1-250)"
        done
        # the targets at batch 56 (steady state, one GPU): 1,000 samples/s, no more memory than 28.4 GiB
        sum56=$(grep '^summary' "$OUT/large-b56-fp8$f.log")
        sps=$(echo "$sum56" | grep -oE '[0-9.]+ samples/s' | head -1 | cut -d' ' -f1)
        mem=$(echo "$sum56" | grep -oE 'device memory in use [0-9.]+' | grep -oE '[0-9.]+$')
        if [ -n "$sps" ] && [ -n "$mem" ]; then
            say "large    targets at b56, $f: $sps samples/s (>= 1000: $(awk -v x="$sps" 'BEGIN {print (x + 0 >= 1000 ? "met" : "MISSED")}')), $mem GiB in use (<= 28.4: $(awk -v x="$mem" 'BEGIN {print (x + 0 <= 28.4 ? "met" : "MISSED")}'))"
        fi
    done
fi

if has vranks; then
    timeout 120 $T --model models/bert-large.cfg --synthetic --batch 56 --virtual-ranks 8 --steps 4 \
        --log-every 1 --trace "$OUT/vranks-trace.csv" --trace-steps 2:4 --seed 1 >"$OUT/vranks.log" 2>&1
    say "vranks   rc=$? $(grep -E '^step' "$OUT/vranks.log" | tail -1 | cut -c1-200)"
fi

if has torch; then
    TORCH_DEFAULT=hf-padded,unpad-eager,unpad-compile,unpad-compile:ad,unpad-compile-model
    TORCH_DEFAULT=$TORCH_DEFAULT,unpad-compile:fp8,unpad-compile:ad:fp8,unpad-compile-model:fp8
    # The same attention dropout: the trainer with the model's beside the peers that have it
    # (hf-padded, ':ad'), and with none (--attn-dropout 0) beside the others.
    ours=
    for f in off on; do
        for ad in 0.1 0; do
            L=$OUT/torch-ours-ad$ad-fp8$f.log
            timeout 120 $T --model models/bert-large.cfg --synthetic --batch 56 --steps 30 --log-every 10 --seed 1 \
                --attn-dropout $ad --fp8 $f >"$L" 2>&1
            say "torch    unpad-train attention dropout $ad --fp8 $f rc=$? $(grep -E '^step' "$L" | tail -1 | cut -c1-150)"
            ours=$ours${ours:+,}$ad$([ $f = on ] && echo :fp8)=$L
        done
    done
    timeout 1500 python3 bench/peer_torch.py --model models/bert-large.cfg --batch 56 --steps 20 --warmup 5 \
        --variants ${TORCH_VARIANTS:-$TORCH_DEFAULT} \
        --ours "$ours" >"$OUT/torch.log" 2>&1
    say "torch    rc=$?"
    grep -A40 '^peer (' "$OUT/torch.log" | grep -v '^PEERS' | tee -a "$SUMMARY"
fi
tar czf "$OUT/logs.tgz" -C "$OUT" --exclude='*.bin' --exclude=logs.tgz . 2>/dev/null
echo "---- summary"
cat "$SUMMARY"
# a failed stage (a non-zero exit, a resume that differs, a bad checkpoint accepted) fails the script
if grep -qE 'rc=[1-9]|DIFFERENT|NOT REFUSED|NOT STOPPED|BEYOND|NOT DETECTED|INVALID|NONE|FAILED|headers differ' "$SUMMARY"; then
    echo "bench_train.sh: FAILED (see above)"
    exit 1
fi
