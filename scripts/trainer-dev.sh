#!/usr/bin/env bash
# trainer-dev.sh — the trainer's speed work in one call on a machine with an H100/H200: it builds
# (make gpu), then runs the stages asked for, each given what is left of DEADLINE seconds:
#   test    bin/test_kernels (both builds; the gradients added and written), bin/test_gemm
#   gemm    bin/bench_gemm: cuBLASLt's first choice against the best of its first 16 candidates for
#           each BERT-Large product as the trainer issues it, at 12,900 and 14,300 tokens
#   train   unpad-train BERT-Large, batch 56 with --gemm-tune off / on / off / on (the repeat shows
#           the spread), batch 96 off / on, a traced step of batch 56 (both settings), and batch 56
#           and 96 with --grad-write off (the gradients zeroed by a memset before each step)
#   check   bench/bench_train.sh peer,vgrad,resume, the same with --grad-write off, then the resume
#           check again with every GEMM of bert-tiny tuned (UNPAD_GEMM_TUNE=16,3,2,0 and
#           --gemm-tune on through TRAIN_ARGS), which makes the resumed run read the interrupted
#           run's gemm-algos.txt
#   ln      bin/bench_kernels --only layernorm built with other LN_FWD_ROWS / LN_BWD_ROWS /
#           LN_BWD_ROWS_FUSED / LN_BWD_BLOCKS (kernels/layernorm.cu), one binary per variant
#   scripts/trainer-dev.sh [STAGES]      (default test,gemm,train,check,ln)
# $OUT (default out/trainer-dev) gets summary.txt and logs.tgz; the summary is printed last.
# DEPS=dir is passed to make (unpacked GSL and Check where the machine has none).
set -u
STAGES=${1:-test,gemm,train,check,ln}
OUT=${OUT:-out/trainer-dev}
DEADLINE=${DEADLINE:-540}
L=$OUT/logs
mkdir -p "$L"
trap 'tar czf "$OUT/logs.tgz" -C "$OUT" --exclude="*.bin" logs && rm -rf "$L"' EXIT
export UNPAD_HOME=$PWD PYTHONUNBUFFERED=1
[ -n "${DEPS:-}" ] && export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
T0=$SECONDS
cap() { local l=$((DEADLINE - (SECONDS - T0) - 5)); echo $(($1 < l ? $1 : (l > 1 ? l : 1))); }
has() { case ",$STAGES," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
SUM=$OUT/summary.txt
: >"$SUM"
say() { echo "$*" >>"$SUM"; }
mk=(make -j"$(nproc)" ${DEPS:+DEPS=$DEPS})

if ! "${mk[@]}" gpu >"$L/build.log" 2>&1; then
    say "build    FAILED after $((SECONDS - T0)) s"
    tail -30 "$L/build.log" >>"$SUM"
    cat "$SUM"
    exit 1
fi
say "build    ok in $((SECONDS - T0)) s; $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader)"

# LayerNorm variants: layernorm.cu compiled with other sizes, linked before the kernel library
# (its symbols win), in the background while the other stages run
# name, then rows per batch of the forward, the plain backward and the fused backward, and the
# backward's blocks (base: the shipped sizes)
LN_VARS=("base 2 2 1 264" "f1 1 2 1 264" "f4 4 2 1 264" "b1 2 1 1 264" "fused2 2 2 2 264" "k132 2 2 1 132" "k396 2 2 1 396" "k528 2 2 1 528")
ln_pid=
if has ln; then
    (
        cc=$("${mk[@]}" -B -n build/cu/kernels/layernorm.o 2>/dev/null | grep "kernels/layernorm.cu")
        link=$("${mk[@]}" -n -W bench/bench_kernels.cu bin/bench_kernels 2>/dev/null | tail -1)
        for v in "${LN_VARS[@]}"; do
            set -- $v
            (
                c=$(echo "$cc" | sed "s#-MMD -MP##; s#-c kernels/layernorm.cu -o build/cu/kernels/layernorm.o#-DLN_FWD_ROWS=$2 -DLN_BWD_ROWS=$3 -DLN_BWD_ROWS_FUSED=$4 -DLN_BWD_BLOCKS=$5 -c kernels/layernorm.cu -o $L/ln_$1.o#")
                l=$(echo "$link" | sed "s#build/libunpad_kernels.a#$L/ln_$1.o build/libunpad_kernels.a#; s#-o bin/bench_kernels#-o $L/bk_$1#; s#-MF build/cu/bench/bench_kernels.d#-MF $L/bk_$1.d#")
                eval "$c" && eval "$l" && echo "built $1"
            ) &
        done
        wait
    ) >"$L/ln-build.log" 2>&1 &
    ln_pid=$!
fi

if has test; then
    for t in test_kernels test_kernels-fp32 test_gemm test_gemm-fp32; do
        timeout "$(cap 120)" bin/$t >"$L/$t.log" 2>&1
        say "test     $t rc=$? $(tail -1 "$L/$t.log" | cut -c1-100)"
    done
    grep -h FAIL "$L"/test_*.log | head -10 >>"$SUM"
fi

if has gemm; then
    timeout "$(cap 120)" bin/bench_gemm --cands 16 --reps 7 >"$L/bench_gemm.log" 2>&1
    say "gemm     bench_gemm rc=$?"
    grep -E "^(T =|per step)" "$L/bench_gemm.log" >>"$SUM"
fi

if has train; then
    run() { # tag args...
        local tag=$1
        shift
        timeout "$(cap 120)" bin/unpad-train --model models/bert-large.cfg --synthetic --steps 30 --log-every 10 \
            --seed 1 "$@" >"$L/train-$tag.log" 2>"$L/train-$tag.err"
        say "train    $tag rc=$? $(grep -o '[0-9.]* samples/s | [0-9.]* model TFLOP/s | device memory in use [0-9.]* GiB | whole run [0-9.]* samples/s' "$L/train-$tag.log" | head -1)"
        grep -o "GEMM tuning.*" "$L/train-$tag.log" | cut -c1-240 >>"$SUM"
    }
    run b56-off --batch 56 --gemm-tune off
    UNPAD_GEMM_LOG=1 run b56-on --batch 56 --gemm-tune on
    run b56-off-2 --batch 56 --gemm-tune off
    run b56-on-2 --batch 56 --gemm-tune on
    run b96-off --batch 96 --gemm-tune off
    run b96-on --batch 96 --gemm-tune on
    run b56-off-trace --batch 56 --gemm-tune off --trace "$L/trace-b56-off.csv" --trace-steps 25:25
    run b56-on-trace --batch 56 --gemm-tune on --trace "$L/trace-b56-on.csv" --trace-steps 25:25
    run b56-zeroed --batch 56 --gemm-tune off --grad-write off
    run b96-zeroed --batch 96 --gemm-tune off --grad-write off
fi

if has check; then
    timeout "$(cap 330)" bash bench/bench_train.sh peer,vgrad,resume "$L/bt" >"$L/bt.log" 2>&1
    say "check    peer,vgrad,resume rc=$?"
    cat "$L/bt/summary.txt" >>"$SUM"
    TRAIN_ARGS="--grad-write off" timeout "$(cap 330)" bash bench/bench_train.sh peer,vgrad,resume "$L/bt-zeroed" \
        >"$L/bt-zeroed.log" 2>&1
    say "check    peer,vgrad,resume with --grad-write off rc=$?"
    cat "$L/bt-zeroed/summary.txt" >>"$SUM"
    UNPAD_GEMM_TUNE=16,3,2,0 TRAIN_ARGS="--gemm-tune on" timeout "$(cap 90)" bash bench/bench_train.sh resume \
        "$L/bt-tuned" >"$L/bt-tuned.log" 2>&1
    say "check    resume with every GEMM tuned rc=$?"
    cat "$L/bt-tuned/summary.txt" >>"$SUM"
    grep -hoE "GEMM (tuning|algorithms).*" "$L"/bt-tuned/resume/*.log | sed 's/in [0-9.]* s//' | cut -c1-200 >>"$SUM"
    rm -rf "$L"/bt*/resume/*/step-*
fi

if [ -n "$ln_pid" ]; then
    wait "$ln_pid"
    say "ln       $(grep -c '^built' "$L/ln-build.log") of ${#LN_VARS[@]} variants built"
    for v in "${LN_VARS[@]}"; do
        set -- $v
        [ -x "$L/bk_$1" ] || continue
        timeout "$(cap 60)" "$L/bk_$1" --only layernorm --reps 40 >"$L/ln-$1.log" 2>&1
        say "ln       $1 (fwd rows $2, bwd rows $3, fused bwd rows $4, bwd blocks $5): $(grep -E '^(layernorm|bias_dropout)' "$L/ln-$1.log" |
            awk '{printf "%s %s us  ", $1, $(NF-3)}')"
        rm -f "$L/bk_$1" "$L/ln_$1.o"
    done
fi
say "total    $((SECONDS - T0)) s"
cat "$SUM"
