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
set datafile separator ','
set grid ytics lc rgb '#dddddd'
set border lc rgb '#444444'
