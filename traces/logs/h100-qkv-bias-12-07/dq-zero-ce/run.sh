#!/bin/bash
# second call on a warm machine: the dQ accumulator zeroed by a copy engine (UNPAD_DQ_ZERO_SIDE 2: pinned
# host zeros; 3: device-to-device) against the prep pass (0), in a build of this tree with the patch;
# on an H200 then the calibration runs with three more length distributions
set -u
[ -d .deps/usr/include ] || tar xJf .try/e.tar.xz
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
pack() { (cd $OUT && tar czf all.tgz w); cp $S $OUT/summary.txt; }
nvidia-smi --query-gpu=name,serial,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee -a $S
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
T0=$SECONDS
[ -x bin/unpad-train ] || make DEPS=$PWD/.deps -j16 bin/unpad-train > $W/build.log 2>&1
R=$PWD
rm -rf /tmp/ce && mkdir /tmp/ce && tar --exclude=./build --exclude=./bin --exclude=./.try --exclude=./traces -cf - . |
  tar -xf - -C /tmp/ce && mkdir -p /tmp/ce/traces/logs && cp -a traces/logs/dq-zero-side /tmp/ce/traces/logs/ &&
  (cd /tmp/ce && { patch -p1 -s < traces/logs/dq-zero-side/zero-side-ce.patch ||
                   git apply traces/logs/dq-zero-side/zero-side-ce.patch; } &&
   make DEPS=$R/.deps -j16 bin/unpad-train bin/test_fmha) > $W/build-ce.log 2>&1
rc=$?; say "build ce rc=$rc at $((SECONDS-T0)) s"; [ $rc = 0 ] || tail -20 $W/build-ce.log
if [ $rc = 0 ]; then
  for e in 2 3; do UNPAD_DQ_ZERO_SIDE=$e timeout 100 /tmp/ce/bin/test_fmha > $W/test_fmha-ce-$e.log 2>&1
    say "test_fmha ce side=$e rc=$? $(tail -1 $W/test_fmha-ce-$e.log)"; done
  A="--model models/bert-large.cfg --synthetic --batch 56 --log-every 10 --seed 1 --steps 40"
  for k in 1 2; do for e in 0 2 3; do
    UNPAD_DQ_ZERO_SIDE=$e timeout 90 /tmp/ce/bin/unpad-train $A > $W/ce-$e-$k.log 2>&1
    say "train ce side=$e $k rc=$? $(grep '^summary' $W/ce-$e-$k.log | grep -oE '[0-9.]+ samples/s|whole run [0-9.]+|loss [0-9.]+ -> [0-9.]+' | tr '\n' ' ')"
  done; done
  timeout 90 bin/unpad-train $A > $W/shipped.log 2>&1
  say "train shipped rc=$? $(grep '^summary' $W/shipped.log | grep -oE '[0-9.]+ samples/s|whole run [0-9.]+' | tr '\n' ' ')"
fi
say "ce done at $((SECONDS-T0)) s"; pack
case "$GPU" in
*H200*)
  TRACE_LATE=1 HW=h200-sxm STEPS=100 SETS="mid:16,64,128 ramp384:16,64,128 vshort:64,128,256" \
    timeout $((565 - SECONDS + T0)) bash scripts/gpu-calib.sh $W/h200-7/dists > $W/h200-dists.log 2>&1
  say "h200 dists rc=$? at $((SECONDS-T0)) s: $(grep -c . $W/h200-7/dists/workloads-calib.csv) lines" ;;
esac
pack
echo ====; cat $OUT/summary.txt
