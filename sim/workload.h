/* workload.h — measured workloads against the step model: for each row of a workload table
 * (traces/workloads-heldout.csv, written by scripts/gpu-heldout.sh), the measured steady-state wall
 * step time, what `predict` gives for the very batches the trainer ran, and what `whatif` gives as
 * the mean over sampled steps, with the errors; and the predicted device memory against the
 * measured.
 *
 * The table, one header line then one row per workload:
 *   workload,model,batch,vranks,policy,dist,steps,step_ms_median,step_ms_mean,mem_gib,trace
 * model names models/<model>.cfg, dist models/dists/<dist>.csv; steps counts the steady-state steps
 * measured (9, 10, ...: untraced, after the warm-up), step_ms_median and step_ms_mean the median
 * and the mean of their wall times; mem_gib cudaMemGetInfo's total - free at the end of the run.
 * Measurement and predictions are compared as means: what the what-if reports is the expected step
 * time, and the mean of the measured steps is its estimate (the median of skewed step times is not).
 *
 * The trainer's batches are reproduced: `unpad-train --synthetic --seed S` draws the sample at
 * stream position p from the distribution with a generator seeded S x 1000003 + p + 1, clamped to
 * [8, the longest length] (exec/gpu/source.c); step s of R = vranks x 1 ranks x B takes positions
 * [(s-1) R B, s R B). With vranks > 1 the trainer balances them with the policy on the calibration's
 * per-sequence cost and runs the virtual ranks one after another on its GPU. */
#ifndef UNPAD_WORKLOAD_H
#define UNPAD_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>

#include "calib.h"
#include "model.h"

/* What the first line of an unpad-train log says of a run with --fp8 on (exec/gpu/train_report.c
 * prints it; the workload validation reads it to match the log's products to the calibration's). */
#define WORKLOAD_LOG_FP8 "the encoder's Linear forwards and data gradients in FP8"
/* The start-up line of a run with --graphs on (exec/gpu/train_report.c); "(not used: " on it says
 * the graphs were not used (the all-reduce buckets of several processes). */
#define WORKLOAD_LOG_GRAPHS "  CUDA graphs: each micro-batch's forward and backward launched as one graph"
/* unpad-train's start-up line when the last layer after its attention runs on the heads' rows only
 * (the default); logs without it (older runs, --last-layer all) ran every layer on all tokens */
#define WORKLOAD_LOG_LAST_HEADS "  last layer after its attention: on the heads' rows only"

#define WORKLOAD_FIRST_STEP 9 /* the first steady-state step the measurement counts */
#define WORKLOAD_BAND_RUNS 100 /* simulated runs behind band_lo_ms, band_hi_ms */
#define WORKLOAD_SEED 21 /* the trainer's --seed in scripts/gpu-heldout.sh and gpu-calib.sh */

/* One measured step against the step model (workload_setup.keep_steps): the step's batch (every
 * rank's sequences together), the model's time for it and the trainer log's wall time. */
typedef struct {
    int step, seqs, tokens, max_len;
    double sum_len2, pred_ms, meas_ms;
} workload_step;

typedef struct {
    char name[128], model[64], policy[32], dist[64], trace[128]; /* trace: its traced steps' file */
    int batch, vranks, steps;  /* steps: measured steps 9 .. 9 + steps - 1 */
    double meas_ms, meas_median_ms, meas_gib; /* measured: mean and median wall step, memory in use */
    long act_tokens;                          /* the trainer's activations at the end, in tokens (0: B x
                                               * the longest length, the trainer before they grew) */
    /* predicted */
    double predict_ms;   /* the step model on the trainer's own batches: mean over the steps */
    double whatif_ms;    /* the what-if's mean step time over sampled steps */
    /* What a measurement of `steps` steps can show: the 5th and 95th percentiles of the mean of
     * that many steps, over WORKLOAD_BAND_RUNS runs of batches of the same distribution, size and
     * clamp under other seeds, under the step model (the spread of the batches alone, no timing
     * noise). */
    double band_lo_ms, band_hi_ms;
    /* Step by step, where the trainer's log is there (logs/<workload>.log beside the table: its
     * `step N/M | ... | X ms/step` lines): the median over the measured steps of (predicted -
     * measured) / measured for each step, and the steps slower than 1.15 x predicted (stalls);
     * NaN and 0 without a log. */
    double step_err;
    int stalls;
    workload_step *per_step; /* keep_steps: the logged steps, in step order (free: workload_free_steps) */
    int nper_step;
    int graphs;          /* the trainer's log says its passes ran as CUDA graphs (workload_log_graphs):
                          * predicted under calib_graphs, whose calib_coef.graphs this is; else 0 */
    int last_heads;      /* the trainer's log says its last layer after the attention ran on the heads'
                          * rows only (workload_log_last_heads): predicted with STEP_LAST_HEADS; else 0 */
    double mem_gib;      /* memory.h */
    double predict_err, whatif_err, mem_err; /* (predicted - measured) / measured */
} workload_row;

/* Reads a workload table; errors name the file, the line and what was expected. */
int workload_load(const char *path, workload_row **rows, int *n, unpad_err *err);

typedef struct {
    const char *home;        /* project folder: models/ and models/dists/ under it */
    const char *logs;        /* folder of the trainer's logs (<workload>.log), NULL: none */
    const hw_spec *hw;
    const calib_coef *calib;
    uint64_t seed;           /* the trainer's --seed (scripts/gpu-heldout.sh: 21) */
    int whatif_steps;        /* sampled steps of the what-if */
    int threads;
    int keep_steps;          /* fill each row's per_step from its trainer log */
    struct progress *progress; /* one item per workload done (progress.h), may be NULL */
} workload_setup;

/* Whether the trainer's log of row w (s->logs/<name>.log) says its passes ran as CUDA graphs
 * (WORKLOAD_LOG_GRAPHS among the start-up lines, before the first `step` line); 0 without a log. */
int workload_log_graphs(const workload_setup *s, const workload_row *w);
/* Whether that log says the last layer after its attention ran on the heads' rows only
 * (WORKLOAD_LOG_LAST_HEADS among the start-up lines); 0 without a log or without the line: the
 * runs before that feature, and --last-layer all, ran every layer on all tokens. */
int workload_log_last_heads(const workload_setup *s, const workload_row *w);

/* Fills every row's predictions; a row whose log says --graphs on (workload_log_graphs) is
 * predicted under calib_graphs(s->calib); every prediction of a row, and the step gaps below, with
 * the last layer as its log says (workload_log_last_heads). */
int workload_predict(const workload_setup *s, workload_row *rows, int n, unpad_err *err);

/* The lengths of steps[0..nsteps) of row w's run as the trainer drew them, w->batch a step in
 * loader order: step steps[j]'s at len[j x w->batch]; rows of one rank only (virtual ranks are
 * balanced, which this does not redo). */
int workload_batch_lengths(const workload_setup *s, const workload_row *w, const int *steps, int nsteps, int *len,
                           unpad_err *err);

/* Calibration: for each measured step of row w that its trainer log (s->logs/<name>.log) has, the
 * wall time minus the step model's time for that step's batch under s->calib, and the wall time,
 * both in microseconds, appended at gap_us[*n], step_us[*n] (room for w->steps more); a row
 * without its log is an error naming the file. */
int workload_step_gaps(const workload_setup *s, const workload_row *w, double *gap_us, double *step_us,
                       size_t *n, unpad_err *err);
/* The same, and for each step appended the GPU's wait for the host (step_host_wait_us) under each
 * host time hs[0..nh): wait_us[(step index) x nh + j], the steps indexed as in gap_us. */
int workload_step_waits(const workload_setup *s, const workload_row *w, double *gap_us, double *step_us,
                        size_t *n, const double *hs, int nh, double *wait_us, unpad_err *err);

/* What the table says in all (workload_print's last lines, validate --json): within 2% counts the
 * what-if error, |error| <= 0.02. */
typedef struct {
    int n, within, in_band;
    double whatif_max_abs, predict_max_abs, mem_max_abs; /* fractions */
    /* The trainer's draw against the distribution: predict_ms / whatif_ms - 1 (the step model on the
     * batches the trainer drew against its mean over sampled ones), its mean over the rows and the
     * rows where it is above 0. The runs of one seed share a draw (scripts/workload-lib.sh), so a
     * common offset shows here; it is part of every row's what-if error. */
    double draw_mean;
    int draw_above;
    int step_logs, step_within;  /* workloads with a trainer log; their per-step median within 2% */
    double step_max_abs;         /* NaN without logs */
} workload_summary;

/* Whether the measured mean lies inside the row's band. */
int workload_in_band(const workload_row *w);
void workload_summarize(const workload_row *rows, int n, workload_summary *s);
void workload_print(FILE *f, const workload_row *rows, int n);

/* The rows' per_step as CSV (one line per logged step: workload, step, sequences, tokens, sum of
 * len^2, longest, measured and predicted ms, error %), written whole or not at all (outfile.h);
 * comment: lines put before the header (NULL: none). */
int workload_write_steps_csv(const char *path, const workload_row *rows, int n, const char *comment,
                             unpad_err *err);
void workload_free_steps(workload_row *rows, int n);

#endif
