# workload-lib.sh — sourced by scripts/gpu-heldout.sh and scripts/gpu-calib.sh: one measured
# workload, a row of a workload table (sim/workload.h).
#   workload_table TABLE   starts TABLE with the table's header line
#   workload_run TABLE OUTDIR PREFIX TRACE_STEPS MODEL BATCH VRANKS POLICY DIST
# runs bin/unpad-train for $STEPS steps (--seed $SEED, default 21, every step logged, steps TRACE_STEPS traced into
# OUTDIR/NAME.csv, the log in OUTDIR/logs/NAME.log) and appends to TABLE the count, median and mean
# wall ms/step of the untraced steps 9..STEPS, the device memory in use at the end and the tokens the
# activations held then (the summary's `activations:` line). FP8=on adds
# --fp8 on to every run (the trainer's FP8 products; its traces say so in their products line); GRAPHS=on
# adds --graphs on (each micro-batch's pass launched as one CUDA graph; the log's start-up says so, and
# the traced steps launch as usual); HW=NAME
# names the trace rows' GPU (--hw models/hw/NAME.cfg; the trainer's default is h200-sxm);
# DEADLINE_AT=EPOCH_SECONDS: workloads not started by then are skipped (said, no row);
# TRACE_LATE=1: the traced steps come after the measured ones (as many as TRACE_STEPS names, from
# STEPS + 1 on), so that they run on the clock the untraced steps settled to. Where
# nvidia-smi is present, the GPU's SM clock, power draw, temperature and (where the driver names
# the field) the clock's limiting reasons are sampled every 100 ms while the run lasts
# (OUTDIR/logs/NAME.clocks.csv, its first line the fields): whether a workload's untraced steps run on
# another clock than its traced ones is what the step overhead's spread between workloads needs
# (docs/calibration.md, "What is left"). Every run of one seed trains batches made from the same random
# numbers (the synthetic loader's sample p comes from seed x 1000003 + p + 1, whatever the distribution
# or batch), so the workloads of one table share a draw: SEED=S makes another one (then `unpad validate
# --workloads TABLE --seed S`).
workload_table() {
    echo "workload,model,batch,vranks,policy,dist,steps,step_ms_median,step_ms_mean,mem_gib,trace,act_tokens" >"$1"
}
workload_run() {
    local table=$1 out=$2 prefix=$3 tsteps=$4 m=$5 b=$6 k=$7 p=$8 d=$9
    local name=$prefix-$m-b$b$([ "$k" -gt 1 ] && echo "-vr$k-$p")-$d
    local total=$STEPS
    if [ "${TRACE_LATE:-0}" = 1 ]; then
        local nt=$(( ${tsteps#*:} - ${tsteps%%:*} + 1 ))
        tsteps=$(( STEPS + 1 )):$(( STEPS + nt ))
        total=$(( STEPS + nt ))
    fi
    if [ -n "${DEADLINE_AT:-}" ] && [ "$(date +%s)" -ge "$DEADLINE_AT" ]; then
        echo "$name skipped: past DEADLINE_AT"
        return
    fi
    local extra=""
    [ "$k" -gt 1 ] && extra="--virtual-ranks $k --policy $p"
    local smi="" q=timestamp,clocks.sm,power.draw,temperature.gpu
    if command -v nvidia-smi >/dev/null 2>&1; then
        # the reasons field's name changed across drivers: the first one this nvidia-smi knows
        for r in clocks_event_reasons.active clocks_throttle_reasons.active; do
            nvidia-smi --query-gpu="$q,$r" --format=csv,noheader -c 1 >/dev/null 2>&1 && { q="$q,$r"; break; }
        done
        echo "# $q" >"$out/logs/$name.clocks.csv"
        nvidia-smi --query-gpu="$q" --format=csv,noheader -lms 100 >>"$out/logs/$name.clocks.csv" 2>/dev/null &
        smi=$!
    fi
    [ "${FP8:-off}" = on ] && extra="$extra --fp8 on"
    [ "${GRAPHS:-off}" = on ] && extra="$extra --graphs on"
    [ -n "${HW:-}" ] && extra="$extra --hw models/hw/$HW.cfg"
    timeout 180 bin/unpad-train --model models/$m.cfg --synthetic --dist models/dists/$d.csv --batch $b $extra \
        --steps "$total" --seed "${SEED:-21}" --log-every 1 --trace "$out/$name.csv" --trace-steps "$tsteps" \
        >"$out/logs/$name.log" 2>&1
    local rc=$?
    [ -n "$smi" ] && kill "$smi" 2>/dev/null && wait "$smi" 2>/dev/null
    local stats
    stats=$(awk -v last="$STEPS" '/^step/ { s = $2 + 0; for (i = 1; i <= NF; i++) if ($i == "ms/step") ms = $(i - 1);
                 if (s >= 9 && s <= last) print ms }' "$out/logs/$name.log" | sort -g |
            awk '{ v[NR] = $1; t += $1 } END { if (NR) printf "%d,%.3f,%.3f", NR, (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), t / NR; else printf "0,,"}')
    local mem
    mem=$(grep -o 'device memory in use [0-9.]*' "$out/logs/$name.log" | awk '{print $5}')
    local act
    act=$(grep -o '^activations: [0-9]*' "$out/logs/$name.log" | awk '{print $2}')
    echo "$name,$m,$b,$k,${p:-none},$d,$stats,${mem:-},$name.csv,${act:-}" >>"$table"
    echo "$name rc=$rc $stats mem=${mem:-?} act=${act:-?}"
}
