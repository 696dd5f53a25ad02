# groups.gp — how one GPU's attention (FMHA) kernels run, as a timeline per layer (forward +
# backward): one box per kernel launch over a group of sequences, one row per CUDA stream, for
# three options: one launch in loader order, the fixed 128/256/384/512 buckets, and the plan.
# Variables: data (CSV row,option,stream,start_us,end_us,min_len,max_len,sequences; option 1 one
# launch, 2 buckets, 3 plan), title, rows, work (time with every multiprocessor busy: a lower
# bound), one, bk, dp (each option's simulated time), bk_streams, dpwhat (the plan in words).
load plotdir.'common.gp'
set title title."\nEach box is one kernel launch over a group of sequences, labelled: shortest-longest length (number of sequences).\nLaunches on one stream run one after another; streams run at the same time and share the GPU." font ',11'
set xlabel 'time per layer, forward + backward (µs, simulated by the cost model)'
set yrange [rows - 0.5 : -0.5]
set xrange [0 : *]
set offsets 0, graph 0.02, 0, 0
set ytics nomirror scale 0
set style fill solid 0.6 border -1
set key outside bottom center vertical maxrows 4 box opaque
set grid xtics lc rgb '#dddddd'
set bmargin 8
col(o) = o == 1 ? 0x9467bd : o == 2 ? 0x17becf : 0xff7f0e
ylab(o, s) = o == 1 ? "one launch" : sprintf("%s, stream %d", o == 2 ? "buckets" : "plan", s)
set arrow 1 from work, graph 0 to work, graph 1 nohead dt 2 lw 2 lc rgb '#d62728' front
plot data using (($4 + $5) / 2):1:(($5 - $4) / 2):(0.35):(col($2)):ytic(ylab($2, $3)) with boxxyerror lc rgb variable notitle, \
     data using (($4 + $5) / 2):1:($6 == $7 ? sprintf('%d (%d)', $6, $8) : sprintf('%d-%d (%d)', $6, $7, $8)) with labels font ',9' notitle, \
     NaN with boxes fs solid 0.6 lc rgb '#9467bd' title sprintf('one launch of every sequence in loader order: %.0f µs', one), \
     NaN with boxes fs solid 0.6 lc rgb '#17becf' title sprintf('fixed buckets 128/256/384/512 on %d stream%s: %.0f µs', bk_streams, bk_streams > 1 ? 's' : '', bk), \
     NaN with boxes fs solid 0.6 lc rgb '#ff7f0e' title sprintf('plan (what unpad plan and --fmha-groups auto choose): %s, %.0f µs', dpwhat, dp), \
     NaN with lines dt 2 lw 2 lc rgb '#d62728' title sprintf('lower bound, every multiprocessor busy: %.0f µs', work)
