#!/usr/bin/env bash
# report.sh — the calibration report in one command:
#   1. calibrate on traces/calib-*.csv   -> models/calib/h200-sxm.cfg (coefficients +- s.e., residuals),
#      the step overhead on the untraced steps of traces/workloads-calib.csv
#   2. validate on traces/heldout-*.csv  -> per-operator / per-rank / per-step error tables, CSV, plot
#   3. cross-hardware: the H200 calibration carried to the A100 80GB spec, 8 x A100 BERT-Large
#      (batch 56 per GPU, unpadded, Wikipedia lengths) beside the MLPerf Training v2.0 runs;
#      kept as models/calib/a100-sxm4-80g.cfg (an estimate, labelled so wherever it is used)
#   4. the H100: calibrate on traces/h100-3/, h100-4/, h100-6/ and h100-9/ (four starts; the dists/ of
#      h100-6/ and h100-9/: other length distributions; h100-9/: the current trainer) calib-w-*.csv
#      -> models/calib/h100-sxm.cfg, validated on the untraced steps of each start's held-out workloads
#      (h100-5/, h100-7/, h100-8/, h100-10/, h100-11/ and h100-12/: starts the fit saw nothing of;
#      h100-12/ ran the last layer on the heads' rows, as its logs say); with the
#      untraced steps of h100-8/graphs/'s runs with --graphs on, its graph coefficients, validated on
#      that start's held-out workloads with --graphs on
# usage: scripts/report.sh [--synthetic] [OUTDIR]        (OUTDIR default build/report)
#   --synthetic  the same pipeline on tests/data/synthetic-*.csv, made from known coefficients:
#                it shows the pipeline and measures nothing; its calibration goes to OUTDIR only.
set -euo pipefail
cd "$(dirname "$0")/.."

synthetic=0
out=build/report
for a in "$@"; do
    case "$a" in
    --synthetic) synthetic=1 ;;
    -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) echo "report.sh: unknown option $a (see --help)" >&2; exit 2 ;;
    *) out=$a ;;
    esac
done

hw=models/hw/h200-sxm.cfg
a100=models/hw/a100-sxm4-80g.cfg  # the MLPerf system's part
h100=models/hw/h100-sxm.cfg
shopt -s nullglob
if [ "$synthetic" = 1 ]; then
    calib=(tests/data/synthetic-calib-*.csv)
    workloads=()
    held=(tests/data/synthetic-heldout-*.csv)
    cfg=$out/h200-sxm.synthetic.cfg
    label="SYNTHETIC traces from tests/data (known coefficients): a demonstration, not a measurement"
else
    calib=(traces/calib-*.csv)
    workloads=(--workloads traces/workloads-calib.csv)
    held=(traces/heldout-*.csv)
    cfg=models/calib/h200-sxm.cfg
    label="measured traces from traces/"
fi
shopt -u nullglob
if [ ${#calib[@]} -eq 0 ] || [ ${#held[@]} -eq 0 ]; then
    echo "report.sh: no calibration traces (traces/calib-*.csv) or held-out traces (traces/heldout-*.csv) yet;" >&2
    echo "           the measured traces come from the trainer (unpad-train --trace)." >&2
    echo "           'scripts/report.sh --synthetic' runs the same report on the synthetic traces in tests/data." >&2
    exit 1
fi

make --no-print-directory -s cpu >/dev/null
mkdir -p "$out"
U=bin/unpad
report=$out/report.txt
: >"$report"
say() { echo "$@" | tee -a "$report"; }

say "unpad calibration report — $label"
say "calibration: ${calib[*]}"
say "held out:    ${held[*]}"
say
say "== 1. calibrate ============================================================================"
$U calibrate --traces "${calib[@]}" "${workloads[@]}" --hw "$hw" --out "$cfg" --residuals "$out/residuals.csv" |
    tee -a "$report"
say
say "== 2. validate on the held-out traces ======================================================="
plot_ok=1
if command -v gnuplot >/dev/null 2>&1; then
    $U validate --traces "${held[@]}" --hw "$hw" --calib "$cfg" --csv "$out/validate.csv" \
        --plot "$out/validate.png" | tee -a "$report"
else
    plot_ok=0
    $U validate --traces "${held[@]}" --hw "$hw" --calib "$cfg" --csv "$out/validate.csv" | tee -a "$report"
    say "(no plot: gnuplot is not installed; apt-get install gnuplot-nox, then run this again)"
fi
say
say "== 3. cross-hardware: 8 x A100, MLPerf Training v2.0 BERT ==================================="
a100_cfg=models/calib/a100-sxm4-80g.cfg   # committed: the A100 80GB's estimate, checked here
[ "$synthetic" = 1 ] && a100_cfg=$out/a100-sxm4-80g.from-synthetic.cfg
$U calibrate --transfer "$cfg" --hw "$a100" --out "$a100_cfg" | tee -a "$report"
# the 40 GB part the same way (its own memory and bandwidth), so that --hw a100-sxm4-40g is an
# estimate labelled so rather than the uncalibrated defaults
a100_40_cfg=models/calib/a100-sxm4-40g.cfg
[ "$synthetic" = 1 ] && a100_40_cfg=$out/a100-sxm4-40g.from-synthetic.cfg
$U calibrate --transfer "$cfg" --hw models/hw/a100-sxm4-40g.cfg --out "$a100_40_cfg" | tee -a "$report"
$U predict --hw "$a100" --calib "$a100_cfg" --gpus 8 --batch 56 --steps 500 \
    >"$out/crosshw.txt"
pred=$(awk '/throughput \(samples\/s: samples/ {print $NF}' "$out/crosshw.txt")
step=$(awk '/^step time, the sampled batch/ {print $NF}' "$out/crosshw.txt")
# MLPerf Training v2.0, NVIDIA closed division, system dgxa100_ngc22.04_pytorch (1 node, 8 x
# A100-SXM4-80GB), config_DGXA100_1x8x56x1.sh (batch 56 per GPU, unpadded FMHA): train_samples /
# (run_stop - run_start) of result_0..3.txt in github.com/mlcommons/training_results_v2.0,
# NVIDIA/results/dgxa100_ngc22.04_pytorch/bert/ (evaluations included). See docs/calibration.md.
mlperf="2402.6 2443.3 2409.2 2402.9"
mean=$(echo "$mlperf" | awk '{s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.1f", s / NF}')
say "BERT-Large, 8 GPUs x 56 sequences, unpadded, Wikipedia lengths (models/dists/wiki512.csv)"
say "  predicted on $a100 with the transferred calibration:"
say "      step time of one GPU's sampled batch ${step} ms, ${pred} samples/s (500 batches: samples / time; no imbalance, no evaluation)"
say "  MLPerf Training v2.0, NVIDIA dgxa100_ngc22.04_pytorch (8 x A100-SXM4-80GB), runs 0-3:"
say "      $mlperf samples/s (mean $mean; whole timed run, evaluations included)"
say "  predicted / measured: $(awk -v p="$pred" -v m="$mean" 'BEGIN {printf "%.3f", p / m}')  (docs/calibration.md explains the gap)"
[ "$synthetic" = 1 ] && say "  (SYNTHETIC calibration: this prediction says nothing about the A100; it only exercises the steps)"
say
say "== 4. the H100 SXM: its own traces (traces/h100-3/, h100-4/, h100-6/, h100-9/: four starts; h100-8/graphs/) ===="
h100_cfg=models/calib/h100-sxm.cfg
if [ "$synthetic" = 1 ]; then
    h100_cfg=$out/h100-sxm.from-synthetic.cfg
    $U calibrate --transfer "$cfg" --hw "$h100" --out "$h100_cfg" >/dev/null
    say "wrote $h100_cfg (transferred from the synthetic calibration: says \"estimate\" wherever it is used)"
else
    $U calibrate --traces traces/h100-3/calib-w-*.csv traces/h100-4/calib-w-*.csv traces/h100-6/calib-w-*.csv \
        traces/h100-6/dists/calib-w-*.csv traces/h100-9/calib-w-*.csv traces/h100-9/dists/calib-w-*.csv \
        --workloads traces/h100-3/workloads-calib.csv --workloads traces/h100-4/workloads-calib.csv \
        --workloads traces/h100-6/workloads-calib.csv --workloads traces/h100-6/dists/workloads-calib.csv \
        --workloads traces/h100-9/workloads-calib.csv --workloads traces/h100-9/dists/workloads-calib.csv \
        --workloads traces/h100-8/graphs/workloads-calib-graphs.csv \
        --hw "$h100" --out "$h100_cfg" | tee -a "$report"
    for start in h100-3 h100-4 h100-5 h100-6 h100-7 h100-8 h100-9 h100-10 h100-11 h100-12; do
        $U validate --hw "$h100" --calib "$h100_cfg" --workloads traces/$start/workloads-heldout.csv | tee -a "$report"
    done
    $U validate --hw "$h100" --calib "$h100_cfg" --workloads traces/h100-8/graphs/workloads-heldout-graphs.csv |
        tee -a "$report"
fi
say
say "wrote $report, $cfg, $h100_cfg, $a100_cfg, $out/residuals.csv, $out/validate.csv$([ $plot_ok = 1 ] && echo ", $out/validate.png"), $out/crosshw.txt"
[ "$plot_ok" = 1 ] || exit 3
