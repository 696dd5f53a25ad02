#!/usr/bin/env bash
# unpad-train checks its inputs and outputs on the host before any rank starts or a GPU is looked
# for: each bad command must exit with its code and say its reason once, creating or truncating
# nothing; a valid command must still reach the GPU's start-up. Needs bin/unpad-train and
# bin/unpad-data (make gpu); on a machine without a GPU the valid commands are also checked to stop
# at "no CUDA GPU found", every rank of --nproc 2 saying so.
# usage: scripts/check-train-preflight.sh
set -uo pipefail
cd "$(dirname "$0")/.."
T=${UNPAD_TRAIN_BIN:-bin/unpad-train}
D=${UNPAD_DATA_BIN:-bin/unpad-data}
for b in "$T" "$D"; do
    [ -x "$b" ] || { echo "FAIL: $b is not built (make gpu)"; exit 1; }
done
W=$(mktemp -d /tmp/unpad-preflight-XXXXXX)
trap 'rm -rf "$W"' EXIT
fails=0
"$D" --synthetic --dist short --samples 64 --out "$W/ok.bin" >/dev/null || { echo "FAIL: unpad-data"; exit 1; }
"$D" --synthetic --dist short --samples 64 --max-pred 100 --out "$W/wide.bin" >/dev/null ||
    { echo "FAIL: unpad-data"; exit 1; }
mkdir "$W/out" "$W/empty-run"
echo "keep" >"$W/out/old.jsonl"
BASE=(--model models/bert-tiny.cfg --batch 8 --steps 10)

# expect CODE PATTERN ARGS...: exit code CODE, one message (one "unpad-train:" line, a parse error's
# quoted line may follow) matching PATTERN, nothing new in $W/out and old.jsonl as it was.
expect() {
    local code=$1 pat=$2
    shift 2
    local err rc
    err=$("$T" "$@" 2>&1 >/dev/null)
    rc=$?
    local n
    n=$(grep -c -- "$pat" <<<"$err")
    if [ "$rc" != "$code" ] || [ "$n" != 1 ] || [ "$(grep -c "^unpad-train:" <<<"$err")" != 1 ]; then
        echo "FAIL: unpad-train $* -> exit $rc (want $code), stderr: $err (want one line: $pat)"
        fails=$((fails + 1))
    fi
    if [ "$(ls "$W/out")" != old.jsonl ] || [ "$(cat "$W/out/old.jsonl")" != keep ]; then
        echo "FAIL: unpad-train $* changed $W/out: $(ls "$W/out")"
        fails=$((fails + 1))
        rm -rf "$W/out" && mkdir "$W/out" && echo "keep" >"$W/out/old.jsonl"
    fi
}

L=(--log-file "$W/out/old.jsonl")
expect 1 "^unpad-train: --model nosuch: no such file" --model nosuch --synthetic --batch 8 --steps 10 "${L[@]}"
expect 1 "^unpad-train: --data: $W/ok.bin.x: " "${BASE[@]}" --data "$W/ok.bin.x" "${L[@]}"
expect 1 "^unpad-train: --data: models/bert-tiny.cfg: not an unpad shard" "${BASE[@]}" --data models/bert-tiny.cfg
expect 1 "^unpad-train: --data: $W/wide.bin: shard .*max_pred 100.* does not fit model bert-tiny" \
    "${BASE[@]}" --data "$W/wide.bin" "${L[@]}"
expect 1 "^unpad-train: --eval: $W/wide.bin: shard .* does not fit model" "${BASE[@]}" --data "$W/ok.bin" \
    --eval "$W/wide.bin"
expect 1 "^unpad-train: models/bert-tiny.cfg:2: unknown key 'name'" "${BASE[@]}" --synthetic \
    --plan models/bert-tiny.cfg "${L[@]}"
expect 1 "^unpad-train: nosuch.plan: cannot open" "${BASE[@]}" --synthetic --plan nosuch.plan
expect 1 "^unpad-train: models/bert-tiny.cfg:2: unknown key 'name'" "${BASE[@]}" --synthetic \
    --calib models/bert-tiny.cfg
expect 1 "fp8 = true.*pass --fp8 on" "${BASE[@]}" --synthetic --calib h100-sxm-fp8
expect 1 "^unpad-train: --hw nosuch: no such file" "${BASE[@]}" --synthetic --hw nosuch
expect 1 "^unpad-train: --resume: $W/nosuch: cannot open" "${BASE[@]}" --synthetic --resume "$W/nosuch"
expect 1 "^unpad-train: --resume: .*no complete checkpoint" "${BASE[@]}" --synthetic --resume "$W/empty-run"
expect 1 "^unpad-train: --log-file: $W/no/log.jsonl: cannot write: no folder $W/no" "${BASE[@]}" --synthetic \
    --log-file "$W/no/log.jsonl"
expect 1 "^unpad-train: --summary-json: $W/out: cannot write: a folder" "${BASE[@]}" --synthetic \
    --summary-json "$W/out"
expect 1 "^unpad-train: --trace: $W/no/t.csv: cannot write: no folder" "${BASE[@]}" --synthetic --trace "$W/no/t.csv"
expect 1 "^unpad-train: --trace-json: $W/no/t.json: cannot write: no folder" "${BASE[@]}" --synthetic \
    --trace-json "$W/no/t.json"
for f in --dump-weights --dump-grads --dump-final --dump-batches; do
    expect 1 "^unpad-train: $f: $W/no/d.bin: cannot write: no folder" "${BASE[@]}" --synthetic "$f" "$W/no/d.bin"
done
expect 1 "^unpad-train: --dump-final: $W/ok.bin: this output is also an input" "${BASE[@]}" --data "$W/ok.bin" \
    --dump-final "$W/ok.bin"
expect 1 "two outputs of the run are the same file" "${BASE[@]}" --synthetic --trace "$W/out/t" --dump-grads "$W/out/t"
expect 1 "^unpad-train: --save: $W/no/ckpt: cannot make it: no folder $W/no" "${BASE[@]}" --synthetic \
    --save "$W/no/ckpt"
expect 1 "^unpad-train: --save: $W/ok.bin: not a folder" "${BASE[@]}" --synthetic --save "$W/ok.bin"
expect 1 "^unpad-train: --dump-batches writes one process's batches" "${BASE[@]}" --synthetic --nproc 2 \
    --dump-batches "$W/out/b.bin"
expect 1 "^unpad-train: --calibrate-online refits the balanced" "${BASE[@]}" --synthetic --calibrate-online
expect 2 "^unpad-train: --warmup-steps 20 is beyond --steps 10" "${BASE[@]}" --synthetic --warmup-steps 20
expect 2 "^unpad-train: --data and --synthetic exclude each other" "${BASE[@]}" --synthetic --data "$W/ok.bin"
expect 2 "^unpad-train: --virtual-ranks and --accum are the same setting" "${BASE[@]}" --synthetic --accum 2 \
    --virtual-ranks 3
expect 2 "^unpad-train: --no-dropout with --attn-dropout 0.1" "${BASE[@]}" --synthetic --no-dropout \
    --attn-dropout 0.1
# with --nproc the supervisor checks, once, before it starts a rank
expect 1 "^unpad-train: --model nosuch: no such file" --model nosuch --synthetic --batch 8 --steps 10 --nproc 2

# Valid commands pass the checks (the bad ones above differ from them in one flag): on a machine
# without a GPU they stop where the GPU is looked for, every rank saying so.
if ! nvidia-smi -L >/dev/null 2>&1; then
    valid() {
        local out rc
        out=$("$T" "$@" 2>&1)
        rc=$?
        for r in "${RANKS[@]}"; do
            if [ "$rc" = 0 ] || ! grep -q "rank $r: no CUDA GPU found" <<<"$out"; then
                echo "FAIL: unpad-train $* -> exit $rc, rank $r did not reach the GPU's start-up: $out"
                fails=$((fails + 1))
            fi
        done
    }
    RANKS=(0)
    valid "${BASE[@]}" --synthetic
    valid "${BASE[@]}" --data "$W/ok.bin" --eval "$W/ok.bin" --log-file "$W/out/log.jsonl" --save "$W/ckpt" \
        --trace "$W/out/t.csv" --trace-json "$W/out/t.json" --dump-final "$W/out/f.bin" --warmup-steps 10 \
        --no-dropout --attn-dropout 0
    valid "${BASE[@]}" --synthetic --calib h100-sxm --policy lpt --calibrate-online
    RANKS=(0 1)
    valid --model models/bert-tiny.cfg --synthetic --batch 8 --steps 1 --nproc 2
fi
if [ "$fails" != 0 ]; then
    echo "unpad-train preflight: $fails failure(s)"
    exit 1
fi
echo "unpad-train preflight: bad inputs refused before the GPU, valid commands reach it (ok)"
