# workload-steps.gp — every logged step of measured workloads against the step model, from the CSV
# of `unpad validate --workloads F --csv`.
# usage: gnuplot -e "csv='steps.csv'; out='steps.png'" plots/workload-steps.gp
# term: 'png' (the default), 'svg' or 'pdf' (pdfcairo), the format of out.
# Left: each step's error against its batch's tokens, +-2% band, errors within +-10% (BERT-Large and
# the other models apart). Right: predicted against measured step time (log-log).
if (!exists("csv")) csv = 'steps.csv'
if (!exists("out")) out = 'steps.png'
if (!exists("title")) title = "unpad validate --workloads: each logged step against the step model (".csv.")"
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
large(s) = strstrt(s, "bert-large") > 0

set title "step error against the step's tokens (stalls, below -10%, off the scale)"
set logscale x
set xlabel "tokens in the step (every rank)"
set ylabel "(predicted - measured) / measured (%)"
set yrange [-10:10]
set key top right
plot csv using (strcol(1) ne "workload" && !large(strcol(1)) ? $4 : NaN):9 with points pt 7 ps 0.35 lc rgb "#1f77b4" title "other models", \
     csv using (large(strcol(1)) ? $4 : NaN):9 with points pt 7 ps 0.35 lc rgb "#d62728" title "bert-large", \
     0 with lines lc rgb "black" title "exact", \
     2 with lines dt 2 lc rgb "gray" title "within 2%", \
     -2 with lines dt 2 lc rgb "gray" notitle

set title "predicted against measured step time"
set logscale xy
set autoscale y
set xlabel "measured (ms)"
set ylabel "predicted (ms)"
set key top left
plot csv using (strcol(1) ne "workload" && !large(strcol(1)) ? $7 : NaN):8 with points pt 7 ps 0.35 lc rgb "#1f77b4" title "other models", \
     csv using (large(strcol(1)) ? $7 : NaN):8 with points pt 7 ps 0.35 lc rgb "#d62728" title "bert-large", \
     x with lines lc rgb "black" title "y = x"
unset multiplot
