# hist.gp — length histogram of a distribution, with what it means for padding.
# Variables: data (CSV length,count,percent), title, mean, p50, maxlen (the longest length),
# spike (% of sequences at maxlen), pad (% of tokens that are padding when padded to maxlen).
load plotdir.'common.gp'
set title title
set xlabel 'sequence length (tokens)'
set ylabel 'share of sequences (%, log scale)'
set style fill solid 0.85 noborder
set xrange [0:maxlen * 1.04]
set logscale y
set yrange [0.005:100]
set format y '%g'
set key at graph 0.02, graph 0.84 left top box opaque
set arrow 1 from mean, graph 0 to mean, graph 0.8 nohead dt 2 lw 2 lc rgb '#d62728'
set arrow 2 from p50, graph 0 to p50, graph 0.8 nohead dt 3 lw 2 lc rgb '#2ca02c'
# The headline: what padding every sequence to maxlen wastes.
set label 1 sprintf("Padded to %d tokens, %.1f%% of all tokens are padding (mean length %.1f of %d)", \
    maxlen, pad, mean, maxlen) at graph 0.5, graph 0.94 center font ',14' boxed front
# The spike at the maximum length: the sequences that were cut there.
set label 2 sprintf("%.1f%% of sequences have\nexactly %d tokens\n(longer text is cut\nat the maximum length)", spike, maxlen) \
    at maxlen - 12, spike right offset 0, -1.5 font ',11' textcolor rgb '#d62728' boxed front
set arrow 3 from maxlen - 11, spike to maxlen - 2, spike head filled lw 1.5 lc rgb '#d62728' front
plot data using 1:($1 == maxlen ? NaN : $3):(1) with boxes lc rgb '#1f77b4' title 'sequences of each length', \
     data using 1:($1 == maxlen ? $3 : NaN):(4) with boxes lc rgb '#d62728' title sprintf('length %d (the maximum)', maxlen), \
     NaN with lines dt 2 lw 2 lc rgb '#d62728' title sprintf('mean %.1f', mean), \
     NaN with lines dt 3 lw 2 lc rgb '#2ca02c' title sprintf('median %d', p50)
