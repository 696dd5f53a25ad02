# groups.gp — FMHA grouping of one GPU's batch as a timeline: one box per kernel group (its
# length range and sequence count), one row per stream, for one launch, the fixed buckets and
# the plan. Variables: data (CSV row,label,start_us,end_us,group with a header), title,
# subtitle, rows, work (time with every multiprocessor busy).
load plotdir.'common.gp'
set title title."\n".subtitle font ',10'
set xlabel 'time per layer, forward + backward (µs)'
set yrange [rows - 0.5 : -0.5]
set xrange [0:*]
set style fill solid 0.55 border -1
set key bottom right
set grid xtics lc rgb '#dddddd'
set arrow 1 from work, graph 0 to work, graph 1 nohead dt 2 lw 2 lc rgb '#d62728'
plot data skip 1 using (($3+$4)/2):1:(($4-$3)/2):(0.35):($1+1):ytic(2) with boxxyerror lc variable notitle, \
     data skip 1 using (($3+$4)/2):1:5 with labels font ',9' notitle, \
     NaN with lines dt 2 lw 2 lc rgb '#d62728' title 'all multiprocessors busy (lower bound)'
