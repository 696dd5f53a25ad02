# imbalance.gp — imbalance (slowest / mean predicted GPU time) against GPU count and batch size.
# Variables: data_gpus, data_batch (one block per series: x,mean,p99), titles (series names
# "policy/count", space-separated), colors (policy colour index per series), counts (0 equal,
# 1 free per series), nseries, fixed_batch, fixed_gpus, logx (1: GPU axis in powers of two).
load plotdir.'common.gp'
set linetype 1 lc rgb '#7f7f7f' lw 2 pt 7 ps 1.2
set linetype 2 lc rgb '#1f77b4' lw 2 pt 5 ps 1.2
set linetype 3 lc rgb '#2ca02c' lw 2 pt 9 ps 1.4
set linetype 4 lc rgb '#d62728' lw 2 pt 13 ps 1.4
set linetype 5 lc rgb '#ff7f0e' lw 2 pt 11 ps 1.4
set linetype 6 lc rgb '#9467bd' lw 2 pt 7
set linetype 7 lc rgb '#8c564b' lw 2 pt 7
set linetype 8 lc rgb '#e377c2' lw 2 pt 7
col(i) = int(word(colors, i + 1))
dash(i) = int(word(counts, i + 1)) ? 4 : 1
set multiplot layout 1,2 margins 0.07,0.98,0.2,0.9 spacing 0.08 title 'Imbalance: slowest / mean predicted GPU step time (thick: mean over the sampled steps; thin dotted: 99th percentile; solid equal counts, dashed free)'
set ylabel 'imbalance (max / mean GPU time)'
set key at screen 0.5, 0.07 center center horizontal maxrows 2 width 2 font ',10'
set title sprintf('against GPU count (batch %d per GPU)', fixed_batch)
set xlabel 'GPUs'
if (logx) { set logscale x 2 }
plot for [i=0:nseries-1] data_gpus index i using 1:2 with linespoints lt col(i) dt dash(i) title word(titles, i+1), \
     for [i=0:nseries-1] data_gpus index i using 1:3 with lines lt col(i) dt 3 lw 1 notitle
unset logscale x
unset key
set title sprintf('against batch size (%d GPUs)', fixed_gpus)
set xlabel 'sequences per GPU'
plot for [i=0:nseries-1] data_batch index i using 1:2 with linespoints lt col(i) dt dash(i) title word(titles, i+1), \
     for [i=0:nseries-1] data_batch index i using 1:3 with lines lt col(i) dt 3 lw 1 notitle
unset multiplot
