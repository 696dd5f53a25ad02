# the second call, on the same machine as the first (run.sh), its build kept
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu UNPAD_HOME=$PWD
A="--model models/bert-large.cfg --synthetic --log-every 10 --seed 1 --batch 56"
mkdir -p $OUT/t
bin/unpad-train $A --steps 30 --trace $OUT/t/trace.csv --trace-steps 21:25 > $OUT/t/trace.log 2>&1
for l in all heads all heads; do bin/unpad-train $A --steps 40 --last-layer $l > $OUT/t/hl-$l-$SECONDS.log 2>&1; done
gzip $OUT/t/trace.csv
