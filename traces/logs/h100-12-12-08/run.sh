#!/bin/bash
# the last layer on the heads' rows: build, correctness (Hugging Face, heads against all, sanitizers),
# speed (BERT-Large b56/b96, bf16 and --fp8 on, heads and all interleaved), a trace
set -u
tar xJf .try/e.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
pack() { (cd $OUT && tar czf all.tgz w); cp $S $OUT/summary.txt; }
nvidia-smi --query-gpu=name,serial,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee -a $S
T0=$SECONDS
make DEPS=$PWD/.deps -j16 bin/unpad-train > $W/build.log 2>&1 && make DEPS=$PWD/.deps PRECISION=fp32 -j16 bin/unpad-train-fp32 >> $W/build.log 2>&1
rc=$?; say "build rc=$rc at $((SECONDS-T0)) s"
if [ $rc != 0 ]; then tail -30 $W/build.log; pack; exit 1; fi
sps() { grep '^summary' $1 | grep -oE '[0-9.]+ samples/s|whole run [0-9.]+|in use [0-9.]+ GiB' | tr '\n' ' '; }
A="--model models/bert-large.cfg --synthetic --log-every 10 --seed 1 --steps 40"
for r in "56 off heads" "56 off all" "56 off heads" "56 off all" "56 on heads" "56 on all" "96 off heads" "96 off all"; do
  set -- $r
  L=$W/hl-b$1-fp8$2-$3-$SECONDS.log
  timeout 60 bin/unpad-train $A --batch $1 --fp8 $2 --last-layer $3 > $L 2>&1
  say "headline b$1 fp8 $2 last $3 rc=$? $(sps $L)"
done
pack
bash bench/bench_train.sh peer $W/peer > $W/peer.log 2>&1; say "peer (heads) rc=$?"; cat $W/peer/summary.txt >> $S
base=$W/peer/bert-base2.cfg
sed -e 's/^layers *=.*/layers = 2/' -e 's/^name *=.*/name = bert-large-2layers/' models/bert-large.cfg > $W/large2.cfg
for m in $base $W/large2.cfg; do for f in off on; do
  for l in heads all; do
    timeout 120 bin/unpad-train --model $m --synthetic --batch 16 --steps 1 --no-dropout --seed 7 --fp8 $f \
      --last-layer $l --dump-grads $W/g-$l.bin > $W/g-$(basename $m)-$f-$l.log 2>&1 || say "grads $m $f $l rc=$?"
  done
  timeout 120 python3 tests/gpu/compare_hf.py --grads $W/g-heads.bin --against $W/g-all.bin --grad-bound 0.02 \
    > $W/cmp-$(basename $m)-$f.log 2>&1
  say "heads against all, $(basename $m) fp8 $f: rc=$? $(tail -1 $W/cmp-$(basename $m)-$f.log)"
  for l in heads all; do grep -E "^step" $W/g-$(basename $m)-$f-$l.log | head -1 | cut -c1-60 >> $S; done
done; done
rm -f $W/g-*.bin
pack
TT="--model models/bert-tiny.cfg --synthetic --batch 8 --seed 5"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 bin/unpad-train $TT --steps 3 > $W/memcheck.log 2>&1
say "memcheck rc=$? $(grep 'ERROR SUMMARY' $W/memcheck.log | tail -1)"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 bin/unpad-train $TT --steps 3 --fp8 on --graphs on \
  > $W/memcheck-fp8-graphs.log 2>&1
say "memcheck fp8 graphs rc=$? $(grep 'ERROR SUMMARY' $W/memcheck-fp8-graphs.log | tail -1)"
timeout 60 bin/unpad-train $A --batch 56 --steps 30 --trace $W/trace.csv --trace-steps 21:25 > $W/trace.log 2>&1
say "trace rc=$? $(sps $W/trace.log)"
gzip -f $W/trace.csv
pack
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) HWN=h200-sxm ;; *) HWN=h100-sxm ;; esac
left=$(( 585 - (SECONDS - T0) ))
say "heldout: $left s left"
if [ $left -gt 60 ]; then
  DEADLINE_AT=$(( $(date +%s) + left - 30 )) TRACE_LATE=1 HW=$HWN STEPS=120 bash scripts/gpu-heldout.sh $W/ho > $W/ho.log 2>&1
  say "heldout rc=$? at $((SECONDS-T0)) s: $(grep -c rc=0 $W/ho.log) ok, $(grep -c skipped $W/ho.log) skipped"
fi
pack
echo ====; cat $OUT/summary.txt
