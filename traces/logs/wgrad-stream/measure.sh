#!/bin/bash
# The measurement of wgrad-stream.patch on a GPU, in order of priority, printed as it goes; stops
# starting stages BUDGET seconds (default 300) in. Prepare it on the build machine:
#   git apply traces/logs/wgrad-stream/wgrad-stream.patch
#   make DEPS=$PWD/.deps bin/unpad-train bin/unpad-data bin/test_gemm
#   mkdir -p .try && tar cJf .try/preb.tar.xz bin/unpad-train bin/unpad-data bin/test_gemm .deps
# then run it on the device from the repository root, .try carried, with OUT set:
#   BUDGET=300 bash traces/logs/wgrad-stream/measure.sh
start=$(date +%s); left() { echo $((${BUDGET:-300} - ($(date +%s) - start))); }
tar xJf .try/preb.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
T=bin/unpad-train
losses() { grep -E '^step' $1 | awk '{print $2, $5}'; }
run() { tag=$1; shift; env "$@" timeout 60 $T --model models/bert-large.cfg --synthetic --batch 56 --steps 40 --log-every 10 --seed 1 $EXTRA > $OUT/l-$tag.log 2>&1; echo "$tag rc=$? $(grep '^summary' $OUT/l-$tag.log | grep -oE '[0-9.]+ samples/s[^|]*' | head -1) | $(grep -oE 'whole run [0-9.]+' $OUT/l-$tag.log) | $(grep -oE 'device memory in use [0-9.]+ GiB' $OUT/l-$tag.log)"; }
EXTRA=""
for k in 1 2; do run off$k UNPAD_WGRAD_STREAM=0; run on$k UNPAD_WGRAD_STREAM=1; run sm116-$k UNPAD_WGRAD_STREAM=1 UNPAD_WGRAD_SMS=116; done
[ $(left) -gt 30 ] && { timeout 40 bin/test_gemm > $OUT/test_gemm.log 2>&1; echo "test_gemm rc=$? $(tail -1 $OUT/test_gemm.log)"; grep 'side stream' $OUT/test_gemm.log; }
for v in "a --batch 16" "vr --batch 4 --virtual-ranks 4" "gr --batch 16 --graphs on"; do [ $(left) -gt 15 ] || break; set -- $v; tag=$1; shift
  for w in 0 1; do UNPAD_WGRAD_STREAM=$w timeout 30 $T --model models/bert-tiny.cfg --synthetic --steps 12 --log-every 1 --seed 5 "$@" > $OUT/tiny-$tag-$w.log 2>&1; done
  if cmp -s <(losses $OUT/tiny-$tag-0.log) <(losses $OUT/tiny-$tag-1.log) && [ -n "$(losses $OUT/tiny-$tag-1.log)" ]; then echo "tiny $tag: identical losses ($(losses $OUT/tiny-$tag-1.log | tail -1))"; else echo "tiny $tag: DIFFERENT"; paste <(losses $OUT/tiny-$tag-0.log) <(losses $OUT/tiny-$tag-1.log) | tail -3; tail -3 $OUT/tiny-$tag-1.log; fi
done
EXTRA="--fp8 on"; [ $(left) -gt 30 ] && { run fp8off UNPAD_WGRAD_STREAM=0; run fp8on UNPAD_WGRAD_STREAM=1; }
EXTRA="--graphs on"; [ $(left) -gt 30 ] && { run groff UNPAD_WGRAD_STREAM=0; run gron UNPAD_WGRAD_STREAM=1; }
EXTRA=""; [ $(left) -gt 30 ] && { run onhi UNPAD_WGRAD_STREAM=1 UNPAD_WGRAD_PRIO=-5; run sm100 UNPAD_WGRAD_STREAM=1 UNPAD_WGRAD_SMS=100; }
[ $(left) -gt 45 ] && { UNPAD_WGRAD_STREAM=1 timeout 45 compute-sanitizer --tool memcheck $T --model models/bert-tiny.cfg --synthetic --steps 3 --batch 16 --seed 5 > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $OUT/memcheck.log)"; }
[ $(left) -gt 50 ] && { timeout 50 bash bench/bench_train.sh nonfinite $OUT/nf > $OUT/nf.log 2>&1; cat $OUT/nf/summary.txt; }
[ $(left) -gt 60 ] && { UNPAD_WGRAD_STREAM=1 timeout $(left) bash bench/bench_train.sh peer $OUT/peer > /dev/null 2>&1; echo "peer with the side stream:"; cat $OUT/peer/summary.txt; }
echo "done at $(( $(date +%s) - start )) s"
