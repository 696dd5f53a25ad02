#!/bin/bash
# the dQ accumulator zeroed beside the stream by a memset kernel (1), a copy from pinned host zeros
# on a copy engine (2), a device-to-device copy (3), against the prep pass (0); then the peer probe
set -u
# libs and the experiment binaries in one archive
tar xJf .try/z.tar.xz          # the experiment's binaries over them
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
pack() { (cd $OUT && tar czf all.tgz w); cp $S $OUT/summary.txt; }
nvidia-smi --query-gpu=name,serial,clocks.sm,power.limit --format=csv,noheader | tee -a $S
T0=$SECONDS
for b in test_fmha test_fmha-fp32; do
  timeout 120 bin/$b > $W/$b.log 2>&1; say "$b rc=$? $(tail -1 $W/$b.log)"
done
T="bin/unpad-train --model models/bert-large.cfg --synthetic --batch 56 --log-every 10 --seed 1"
for k in 1 2; do for e in 0 2 3; do
  UNPAD_DQ_ZERO_SIDE=$e timeout 60 $T --steps 40 --trace $W/tr-$e-$k.csv --trace-steps 30:32 > $W/tr-$e-$k.log 2>&1
  say "train side=$e rc=$? $(grep '^summary' $W/tr-$e-$k.log | grep -oE '[0-9.]+ samples/s' | head -1) $(grep '^summary' $W/tr-$e-$k.log | grep -oE 'loss [0-9.]+ -> [0-9.]+') | fmha_bwd us/step: $(awk -F, '$6=="fmha_bwd" {s+=$NF; n++} END {if (n) printf "%.0f (%d rows)", s/3, n}' $W/tr-$e-$k.csv)"
  rm -f $W/tr-$e-$k.csv
done; done
for e in 0 2 3; do
  UNPAD_DQ_ZERO_SIDE=$e timeout 60 $T --steps 30 --fp8 on > $W/f-$e.log 2>&1
  say "train fp8 side=$e rc=$? $(grep '^summary' $W/f-$e.log | grep -oE '[0-9.]+ samples/s' | head -1)"
  UNPAD_DQ_ZERO_SIDE=$e timeout 60 bin/unpad-train --model models/bert-base.cfg --synthetic --batch 48 \
    --dist models/dists/short.csv --log-every 10 --seed 1 --steps 60 > $W/bs-$e.log 2>&1
  say "train base b48 short side=$e rc=$? $(grep '^summary' $W/bs-$e.log | grep -oE '[0-9.]+ samples/s' | head -1)"
done
say "A/B done at $((SECONDS-T0)) s"
pack
for e in 2; do
  UNPAD_DQ_ZERO_SIDE=$e timeout $((185 - SECONDS + T0)) bash bench/bench_train.sh graphs $W/bt-$e > $W/bt-$e.log 2>&1
  say "bench_train graphs side=$e rc=$? at $((SECONDS-T0)) s"
  sed -n '/^---- summary/,$p' $W/bt-$e.log | cut -c1-180 >> $S
done
pack
timeout $((250 - SECONDS + T0)) python3 bench/peer_torch.py --model models/bert-large.cfg --batch 56 --steps 20 \
  --warmup 5 --variants unpad-compile:ad,unpad-eager:ad > $W/peers.log 2>&1
say "peers rc=$? at $((SECONDS-T0)) s"
grep -A6 '^peer (' $W/peers.log | cut -c1-200 >> $S
pack
echo ====; cat $OUT/summary.txt
