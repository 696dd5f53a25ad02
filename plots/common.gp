# common.gp — terminal and style shared by the unpad plots.
# Variables set by `unpad plot`: term ('png' or 'svg'), out (the image file).
if (term eq 'svg') {
    set terminal svg size 1200,700 dynamic noenhanced font 'DejaVu Sans,12' background rgb 'white'
} else {
    if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
        set terminal pngcairo size 1200,700 noenhanced font 'DejaVu Sans,11' background rgb 'white'
    } else {
        set terminal png size 1200,700 noenhanced
    }
}
set output out
# The data files are plain CSV: `#` comment lines (what made them), a header line, rows.
set datafile separator ','
set datafile columnheaders
set grid ytics lc rgb '#dddddd'
set border lc rgb '#444444'
set style textbox opaque noborder
# One colour per balancing policy in every plot, in the order of `unpad whatif --help`.
set linetype 1 lc rgb '#7f7f7f' lw 2 pt 7 ps 1.2
set linetype 2 lc rgb '#1f77b4' lw 2 pt 5 ps 1.2
set linetype 3 lc rgb '#2ca02c' lw 2 pt 9 ps 1.4
set linetype 4 lc rgb '#d62728' lw 2 pt 13 ps 1.4
set linetype 5 lc rgb '#ff7f0e' lw 2 pt 11 ps 1.4
set linetype 6 lc rgb '#9467bd' lw 2 pt 7
set linetype 7 lc rgb '#8c564b' lw 2 pt 7
set linetype 8 lc rgb '#e377c2' lw 2 pt 7
