/* plot.h — pictures with gnuplot: each kind writes its data as plain CSV (a header line, one row
 * per record, `#` comment lines first saying what made it) next to the images, then runs the
 * `gnuplot` program on plots/<kind>.gp twice (PNG, then SVG). The scripts read the CSV directly
 * (`set datafile separator ','`), so a person can re-render or restyle them without unpad.
 *
 *   hist       length histogram of a distribution, with its mean, median, the share at the
 *              maximum length and the padding share when padded to it
 *   load       predicted time of every GPU on one sampled step under each policy: per policy the
 *              mean GPU (bar), the wait for the slowest (idle), and each GPU (dots up to 16 GPUs,
 *              a box of quartiles and whiskers to min/max beyond)
 *   imbalance  imbalance (mean and 99th percentile over the steps) against GPU count and against
 *              batch size, from a what-if CSV
 *   groups     FMHA grouping of one GPU's batch as a timeline over streams: one launch in loader
 *              order, the fixed 128/256/384/512 buckets, and the plan
 *
 * Outputs: <out>.png, <out>.svg and <out>.csv; load also <out>-gpus.csv (one row per GPU and
 * policy); imbalance <out>-gpus.csv and <out>-batch.csv instead of <out>.csv. Each file is
 * written under a temporary name and renamed when complete. `prov` (may be NULL) is a block of
 * `# ` comment lines (each ending in a newline) written at the top of every CSV. */
#ifndef UNPAD_PLOT_H
#define UNPAD_PLOT_H

#include "balance.h"
#include "calib.h"
#include "dist.h"
#include "model.h"

/* The gnuplot program: $UNPAD_GNUPLOT, else `gnuplot` on the PATH. UNPAD_EIO with the install
 * command when it cannot be run. */
int plot_gnuplot_find(char *path, size_t n, unpad_err *err);

/* Runs plots/<kind>.gp (found in plot_dir) with `vars` (gnuplot assignments, `;`-separated) for
 * PNG and SVG, writing <out>.png and <out>.svg; checks both exist and are not empty. */
int plot_render(const char *plot_dir, const char *kind, const char *vars, const char *out,
                unpad_err *err);

/* The image format its extension gives path (.png, .svg, .pdf in any case): "png", "svg" or "pdf"
 * (a gnuplot script's `term`), NULL for none of those. */
const char *plot_image_format(const char *path);
/* Refuses (UNPAD_EINVAL, naming flag and path) an image whose extension gives no format this
 * gnuplot can draw: not .png, .svg or .pdf, or .pdf without the pdfcairo terminal; *fmt as
 * plot_image_format. Runs gnuplot for .pdf only. */
int plot_image_check(const char *flag, const char *path, const char **fmt, unpad_err *err);

/* Quotes s as a gnuplot single-quoted string into buf. */
void plot_quote(const char *s, char *buf, size_t n);

int plot_hist(const char *plot_dir, const unpad_dist *d, const char *prov, const char *out,
              unpad_err *err);

typedef struct {
    const unpad_dist *dist;
    const model_cfg *model;
    const hw_spec *hw;
    const calib_coef *calib;
    int gpus, batch;
    balance_count count;
    uint64_t seed;
    int weights_tokens;
    const char *prov;
    const char *hw_set;  /* the hardware what-if (--hw-set) applied to hw, for the title; NULL: none */
    int last_heads;      /* 1: the last layer after its attention on the heads' rows (step.h
                          * STEP_LAST_HEADS, the trainer's default); 0: every layer on all tokens */
} plot_load_setup;

int plot_load(const char *plot_dir, const plot_load_setup *s, const char *out, unpad_err *err);

/* batch / gpus: the fixed value of each panel (0: the value with the most points). The title
 * names the model, hardware, distribution and steps from the what-if CSV's comment lines
 * ("# model: ...", see cmd_whatif) when it has them, and says when the CSV is partial (no
 * "# complete" line: an interrupted sweep). A CSV that sweeps length layouts or gradient
 * accumulation has several rows per point: layout (NULL) and accum (0) choose its rows, and when
 * they are not given and the CSV holds more than one value the plot is refused, naming them. */
int plot_imbalance(const char *plot_dir, const char *whatif_csv, int batch, int gpus, const char *layout,
                   int accum, const char *prov, const char *out, unpad_err *err);

typedef struct {
    const model_cfg *model;
    const hw_spec *hw;
    const calib_coef *calib;
    const int *len;     /* (n) one GPU's lengths */
    int n;
    int max_streams;
    int granularity;
    const char *what;   /* where the lengths came from, for the title */
    const char *prov;
    const char *hw_set; /* as plot_load_setup's */
} plot_groups_setup;

int plot_groups(const char *plot_dir, const plot_groups_setup *s, const char *out, unpad_err *err);

#endif
