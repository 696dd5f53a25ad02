# load.gp — predicted step time of each GPU on one sampled step, one bar per policy.
# Variables: data (CSV gpu,<policy (max/mean x)>... with a header line), title, gpus, npol.
load plotdir.'common.gp'
set title title
set xlabel 'GPU'
set ylabel 'predicted step time (ms)'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside right top vertical title 'policy (slowest / mean GPU)'
# The differences are a few percent of the step: the axis starts below the shortest bar (shown
# on the axis), not at zero.
ymin = 1e30; ymax = 0
do for [i=2:npol+1] {
    stats data skip 1 using i nooutput
    if (STATS_min < ymin) { ymin = STATS_min }
    if (STATS_max > ymax) { ymax = STATS_max }
}
pad = (ymax - ymin) > 0 ? (ymax - ymin) : ymax * 0.05
set yrange [ymin - 0.6 * pad : ymax + 0.15 * pad]
step = gpus > 32 ? int(gpus / 16) : 1
plot for [i=2:npol+1] data using i:xtic(int($0) % step == 0 ? stringcolumn(1) : '') title columnhead(i)
