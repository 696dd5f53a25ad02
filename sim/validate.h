/* validate.h — how far the cost model's predictions are from measured traces.
 *
 * Predicted rows are joined to measured rows on (step, rank, op, layer, group, stream) within one
 * run (one trace file); the report has per-operator, per-rank and per-step error tables (median
 * and max |% error|), the imbalance (max / mean of the per-rank compute time) predicted against
 * measured, and a CSV for a predicted-vs-measured plot.
 *
 * Definitions (the same for measured and predicted, so they compare):
 *   rank load   compute time of one rank in one step: the sum over (op, layer) of the rows'
 *               durations without the collectives; rows of one (op, layer) on several streams
 *               count once as their union in time (measured) or as one tile simulation over all
 *               their sequences (predicted, FMHA);
 *   rank time   measured: first start to last end of the rank's rows in the step; predicted: the
 *               sum of its rows (same union rule) plus the step overhead;
 *   step time   the slowest rank's time (ranks synchronise in the all-reduce);
 *   imbalance   max / mean of the rank loads of a step, for steps with every rank present. */
#ifndef UNPAD_VALIDATE_H
#define UNPAD_VALIDATE_H

#include <stdio.h>

#include "fit.h"

/* The group of a pair that stands for a grouped launch as a whole: FMHA groups that ran side by
 * side on several streams, measured as the union of their spans, predicted by
 * fit_rows_fmha_together. Their own rows stay in the CSV (side_by_side = 1, each predicted as if
 * alone) but not in the per-operator statistics. */
#define VALIDATE_GROUPED (-2)

typedef struct {
    int run, step, rank, op, layer, group, stream;
    int side_by_side;              /* a group's row of a launch split over several streams */
    double start_us, meas_us, pred_us;
} validate_pair;

typedef struct {
    long n;
    double median_abs_pct, max_abs_pct, bias_pct; /* bias: mean signed error */
} validate_stat;

typedef struct {
    int run, step, rank;
    double meas_load_us, pred_load_us, meas_time_us, pred_time_us;
} validate_load;

typedef struct {
    int run, step, ranks;
    double meas_us, pred_us;       /* step time */
    double meas_imb, pred_imb;     /* 0 when not every rank is present or one GPU */
} validate_step;

typedef struct {
    char name[256];
    char model[64];
    int gpus;
    double seqs_per_rank;          /* mean sequences per rank and step (comparable runs) */
    unsigned long long batches;    /* hash of every (step, rank) batch: sequences, tokens, sum of
                                    * squared lengths; equal for runs of the same batches */
    validate_stat step_time, rank_load;
    double meas_step_us, pred_step_us; /* means over the run's steps */
    double meas_imb, pred_imb, imb_max_diff;
    long imb_steps;
} validate_run;

/* What the predictions need beyond the rows: multi-stream FMHA sets are simulated together and
 * the step overhead added. NULL in validate_add_run: sets are summed, no overhead. */
typedef struct {
    const model_cfg *models;
    int n_models;
    const hw_spec *hw;
    const calib_coef *calib;
} validate_ctx;

typedef struct {
    validate_pair *pairs;
    size_t npairs, cap_pairs;
    validate_load *loads;
    size_t nloads, cap_loads;
    validate_step *steps;
    size_t nsteps, cap_steps;
    validate_run *runs;
    int nruns, cap_runs;
    size_t unmatched_meas, unmatched_pred;
    /* tables, filled by validate_finish */
    validate_stat op[OP_COUNT];
    validate_stat *rank;           /* (nrank) per rank index, over every run and step */
    int nrank;
    validate_stat all_rows, step_time, rank_load;
    double imb_max_diff, imb_median_diff;
    long imb_steps;
} validate_report;

/* Predicted rows for every measured row, from the row's own batch description (seqs, tokens,
 * sum_len2, max_len, flops, bytes) with coefficients c; same keys, start times laid end to end. */
int validate_predict_set(const trace_set *meas, const model_cfg *models, int n_models,
                         const hw_spec *hw, const calib_coef *c, trace_set *pred, unpad_err *err);

/* Joins one run's predicted and measured rows and adds them to the report. */
int validate_add_run(validate_report *rep, const char *name, const trace_set *pred,
                     const trace_set *meas, const validate_ctx *ctx, unpad_err *err);

/* Computes the tables over every run added. */
int validate_finish(validate_report *rep, unpad_err *err);

void validate_print(FILE *f, const validate_report *rep);

/* level,run,step,rank,op,layer,group,stream,measured_us,predicted_us,err_pct — one line per joined
 * row (level op), per rank and step (level rank: the load), per step (level step: the step time);
 * written atomically, after `comment` (NULL: none: "# " lines saying what made it). */
int validate_write_csv(const char *path, const validate_report *rep, const char *comment,
                       unpad_err *err);

void validate_report_free(validate_report *rep);

#endif
