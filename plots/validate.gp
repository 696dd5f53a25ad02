# validate.gp — predicted against measured times, from the CSV of `unpad validate --csv`.
# usage: gnuplot -e "csv='validate.csv'; out='validate.png'" plots/validate.gp
# term: 'png' (the default), 'svg' or 'pdf' (pdfcairo), the format of out.
# Left: every operator row (log-log). Right: the error of rank loads and step times, +-2% band.
if (!exists("csv")) csv = 'validate.csv'
if (!exists("out")) out = 'validate.png'
if (!exists("title")) title = "unpad validate: predicted against measured (".csv.")"
if (!exists("term")) term = 'png'
if (term eq 'svg') {
    set terminal svg size 1400,620 dynamic font ",10" background rgb 'white'
} else {
    if (term eq 'pdf') {
        set terminal pdfcairo size 11in,4.9in font ",9"
    } else {
        if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
            set terminal pngcairo size 1400,620 font ",10"
        } else {
            set terminal png size 1400,620
        }
    }
}
set output out
set datafile separator ","
set multiplot layout 1,2 title title
set grid
set key top left

set title "operator rows (one operator, layer, step and rank each)"
set logscale xy
set xlabel "measured (us)"
set ylabel "predicted (us)"
plot csv using (strcol(1) eq "op" ? $9 : NaN):10 with points pt 7 ps 0.3 lc rgb "#1f77b4" title "operator row", \
     x with lines lc rgb "black" title "y = x"

set title "rank loads (compute time of one rank in a step) and step times: error"
unset logscale
set xlabel "measured (ms)"
set ylabel "prediction error: (predicted - measured) / measured (%)"
set yrange [-1000 < * < -3 : 3 < * < 1000]
set ytics 1
set key top right
plot csv using (strcol(1) eq "rank" ? $9/1e3 : NaN):11 with points pt 6 ps 0.8 lc rgb "#2ca02c" title "rank load", \
     csv using (strcol(1) eq "step" ? $9/1e3 : NaN):11 with points pt 7 ps 0.9 lc rgb "#d62728" title "step time", \
     0 with lines lc rgb "black" title "exact", \
     2 with lines dt 2 lc rgb "gray" title "within 2%", \
     -2 with lines dt 2 lc rgb "gray" notitle
unset multiplot
