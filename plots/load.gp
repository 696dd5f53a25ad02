# load.gp — each GPU's predicted time on one sampled step, per balancing policy.
# Variables: data (CSV policy,step_ms,mean_ms,min_ms,p25_ms,median_ms,p75_ms,imbalance,
# idle_percent: a row per policy), data_gpus (CSV policy_index,policy,gpu,ms: a row per GPU and
# policy), title, gpus, npol.
# Per policy: the bar is the mean GPU's time; the light part above it, up to the slowest GPU, is
# the time the mean GPU waits (the step ends with the slowest); dots are the GPUs (a box of
# quartiles with whiskers to min and max when there are more than 16).
load plotdir.'common.gp'
set title title."\n(unpad whatif averages many steps, so its imbalance differs from this one step's)" font ',11'
set ylabel 'predicted time on the step (ms)'
set xrange [-0.6 : npol - 0.4]
set yrange [0 : *]
set offsets 0, 0, graph 0.12, 0
set xtics nomirror scale 0
set key top right box opaque
set bmargin 5
set style fill solid 0.9 border -1
bw = 0.7
label(i) = sprintf("%s\nidle %.1f%%", strcol(1), column(9))
bars = "data using 0:3:(bw):($0 + 1):xtic(label(0)) with boxes lc variable notitle, \
    NaN with boxes fs solid 0.9 lc rgb '#cccccc' title 'mean GPU (bar)', \
    data using 0:(($2 + $3) / 2):($0 - bw / 2):($0 + bw / 2):3:2 with boxxyerror fs pattern 4 border -1 lc rgb '#999999' title 'idle: the mean GPU waits for the slowest (the step ends with it)', \
    data using 0:2:(sprintf('step %.2f ms', column(2))) with labels offset 0, 0.8 font ',10' notitle"
if (gpus <= 16) {
    plot @bars, data_gpus using ($1 - bw * 0.4 + bw * 0.8 * $3 / (gpus > 1 ? gpus - 1 : 1)):4 \
         with points pt 7 ps 0.8 lc rgb 'black' title sprintf('each of the %d GPUs', gpus)
} else {
    plot @bars, data using 0:5:4:2:7:(0.3) with candlesticks whiskerbars 0.5 lc rgb 'black' lw 2 fs empty \
              title sprintf('the %d GPUs: quartiles (box), min to max (whiskers)', gpus), \
         data using 0:6:6:6:6:(0.3) with candlesticks lc rgb 'black' lw 3 title 'median GPU'
}
