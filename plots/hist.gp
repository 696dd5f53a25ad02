# hist.gp — length histogram of a distribution.
# Variables: data (CSV length,count,percent with a header line), title, mean, p50, p90.
load plotdir.'common.gp'
set title title
set xlabel 'sequence length (tokens)'
set ylabel 'share of sequences (%, log scale)'
set style fill solid 0.85 noborder
set boxwidth 1
set xrange [0:*]
set logscale y
set yrange [0.005:100]
set format y '%g'
set key top left
set arrow 1 from mean, graph 0 to mean, graph 1 nohead dt 2 lw 2 lc rgb '#d62728'
set arrow 2 from p50, graph 0 to p50, graph 1 nohead dt 3 lw 2 lc rgb '#2ca02c'
set arrow 3 from p90, graph 0 to p90, graph 1 nohead dt 4 lw 2 lc rgb '#9467bd'
plot data skip 1 using 1:3 with boxes lc rgb '#1f77b4' title 'sequences of each length', \
     NaN with lines dt 2 lw 2 lc rgb '#d62728' title sprintf('mean %.1f', mean), \
     NaN with lines dt 3 lw 2 lc rgb '#2ca02c' title sprintf('median %d', p50), \
     NaN with lines dt 4 lw 2 lc rgb '#9467bd' title sprintf('90th percentile %d', p90)
