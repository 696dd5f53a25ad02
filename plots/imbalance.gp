# imbalance.gp — imbalance (slowest / mean predicted GPU step time) against GPU count and batch
# size, one line per balancing policy and count constraint.
# Variables: data_gpus, data_batch (CSV: x, then per series "<series> mean" and "<series> p99";
# empty where a series has no point), titles (legend per series, '|'-separated),
# colors (policy colour index per series), counts (0 equal, 1 free per series), nseries,
# fixed_batch, fixed_gpus, logx (1: GPU axis in powers of two), title, both_counts (1: equal and
# free both present).
load plotdir.'common.gp'
col(i) = int(word(colors, i + 1))
dash(i) = int(word(counts, i + 1)) ? 4 : 1
# the i-th (1-based) '|'-separated field of s
field(s, i) = i <= 1 ? (strstrt(s, '|') ? s[1 : strstrt(s, '|') - 1] : s) : field(s[strstrt(s, '|') + 1 :], i - 1)
name(i) = field(titles, i + 1)
# Two panels side by side, then the legend as a third, empty plot across the bottom (a key
# inside one panel would be only as wide as that panel).
set multiplot title title font ',12'
# The balancers differ by orders of magnitude (none ~20%, sort-deal ~1%, lpt ~0.02%, kk less), so
# the axis is the excess of the slowest GPU over the mean, in %, on a log scale; what is below
# the floor (near-perfect balance) sits on the bottom edge.
floor = 1e-3
ex(v) = (v - 1) * 100 < floor ? floor : (v - 1) * 100
set ylabel "slowest GPU's excess over the mean GPU (%, log scale)"
set logscale y
set yrange [floor : 100]
set format y '%g%%'
set tmargin at screen 0.83
set bmargin at screen 0.30
unset key
set lmargin at screen 0.07
set rmargin at screen 0.48
set title sprintf('against GPU count (batch %d per GPU)', fixed_batch)
set xlabel 'GPUs'
if (logx) { set logscale x 2 }
# one point on an axis: a range around it with whole-number tics, not 7.9..8.08 GPUs
stats data_gpus using 1 nooutput
if (STATS_min == STATS_max) { \
    if (logx) { set xrange [STATS_min / 2 : STATS_max * 2] } \
    else { set xrange [STATS_min - 1 : STATS_max + 1]; set xtics 1 } }
plot for [i=0:nseries-1] data_gpus using 1:(ex(column(2 + 2 * i))) with linespoints lt col(i) dt dash(i), \
     for [i=0:nseries-1] data_gpus using 1:(ex(column(3 + 2 * i))) with lines lt col(i) dt 3 lw 1
unset logscale x
set autoscale x
set xtics autofreq
stats data_batch using 1 nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min - 1 : STATS_max + 1]; set xtics 1 }
set lmargin at screen 0.575
set rmargin at screen 0.98
set title sprintf('against batch size (%d GPUs)', fixed_gpus)
set xlabel 'sequences per GPU'
plot for [i=0:nseries-1] data_batch using 1:(ex(column(2 + 2 * i))) with linespoints lt col(i) dt dash(i), \
     for [i=0:nseries-1] data_batch using 1:(ex(column(3 + 2 * i))) with lines lt col(i) dt 3 lw 1
legend = "NaN with linespoints lc rgb 'black' pt 7 lw 2 title 'thick, marked: mean over the steps', \
    NaN with lines lc rgb 'black' dt 3 lw 1 title 'thin dotted, same colour: 99th percentile of the steps'"
if (both_counts) {
    legend = legend . ", NaN with lines lc rgb 'black' dt 4 lw 2 title 'dashed: free counts (solid: equal)'"
}
unset title; unset xlabel; unset ylabel; unset border; unset tics; unset grid; unset logscale
set lmargin at screen 0.02
set rmargin at screen 0.98
set tmargin at screen 0.19
set bmargin at screen 0.01
set xrange [0 : 1]
set yrange [0 : 1]
set key center center horizontal maxrows 5 font ',10' box
plot for [i=0:nseries-1] NaN with linespoints lt col(i) dt dash(i) title name(i), @legend
unset multiplot
