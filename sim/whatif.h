/* whatif.h — Monte Carlo what-if sweeps: for each configuration (GPUs, per-GPU batch, policy,
 * count constraint), sample many steps from a length distribution, balance each, and report the
 * predicted step time, throughput, imbalance distribution and FMHA attention time.
 *
 * Model of one step: GPU g's time = sum over its sequences of the per-sequence cost (cost.h,
 * c0 + c1 len + c2 len^2) + the per-step work every GPU does (optimizer, overhead, gradient
 * all-reduce, and for a balancing policy the sample exchange; whatif_fixed_us). The step ends
 * with the slowest GPU. Configurations with the same GPUs and batch share their sampled steps
 * (common random numbers: policy differences are not sampling noise), drawn from a generator
 * seeded by (seed, gpus, batch), so a row does not depend on the other rows or on the threads;
 * each row is a job of its own (it draws its shape's steps again), done and reported alone.
 *
 * Attention: on the first attn_steps steps, the slowest GPU's FMHA (forward + backward, all
 * layers) is timed with one launch in loader order and with the grouping of the configuration's
 * batch size (group boundaries planned once on a typical GPU batch — the distribution's
 * quantiles — replayed on each step's lengths, as a trainer with a plan file would). */
#ifndef UNPAD_WHATIF_H
#define UNPAD_WHATIF_H

#include <stdint.h>
#include <stdio.h>

#include "balance.h"
#include "calib.h"
#include "dist.h"
#include "group.h"
#include "model.h"
#include "progress.h"

struct whatif_row;

typedef struct {
    const unpad_dist *dist;
    const model_cfg *model;
    const hw_spec *hw;
    const calib_coef *calib;
    int steps;           /* Monte Carlo steps per configuration, >= 1 */
    uint64_t seed;
    int threads;         /* worker threads; 0: the online CPUs */
    int weights_tokens;  /* 1: balance tokens instead of the predicted cost */
    int attn_steps;      /* steps whose attention is timed (0: none) */
    int max_streams;     /* FMHA grouping: streams */
    int granularity;     /* FMHA grouping: length bin width for cuts */
    /* Optional: progress (items = rows, work = sampled steps x sequences x rows) and a call as
     * each row is done, from the worker thread that finished it (the callee locks). */
    progress *progress;
    void (*row_done)(void *ctx, const struct whatif_row *row);
    void *row_ctx;
} whatif_setup;

void whatif_setup_default(whatif_setup *s); /* 1000 steps, seed 1, 32 attention steps, 4 streams */

typedef struct whatif_row {
    /* configuration */
    int gpus, batch;
    balance_policy policy;
    balance_count count;
    /* results */
    int steps;
    double step_us;            /* mean predicted step time */
    double samples_per_s;      /* gpus x batch / step time */
    double imbalance_mean, imbalance_p99, imbalance_max;
    double idle_mean, idle_p99; /* straggler idle fraction 1 - mean/max */
    double token_imbalance_mean;
    double fixed_us;           /* per-step part every GPU pays */
    double attn_us;            /* slowest GPU's FMHA per step, one launch (mean over attn steps);
                                * NaN when not timed (attn_steps 0) */
    double attn_grouped_us;    /* the same with the grouping below (NaN when not timed) */
    int groups, streams;       /* the grouping used */
    char bounds[128];          /* its boundaries ("128,384"; "none": a single group) */
} whatif_row;

/* Fixed per-step time of one GPU: optimizer + step overhead + all-reduce over `gpus`, plus the
 * sample exchange when `policy` moves samples (every policy but none). */
int whatif_fixed_us(const model_cfg *m, const hw_spec *hw, const calib_coef *c, double mean_len,
                    int gpus, int batch, balance_policy policy, double *out, unpad_err *err);

/* A typical GPU batch: b lengths at the distribution's quantiles (i + 0.5) / b. */
void whatif_typical_batch(const unpad_dist *d, int b, int *len);

/* Runs every row (configuration fields filled in; results written). */
int whatif_run(const whatif_setup *s, whatif_row *rows, int n, unpad_err *err);

/* CSV with a header line (whatif_csv_header) and one line per row (whatif_csv_row: values not
 * computed are empty cells). */
extern const char whatif_csv_header[];
void whatif_csv_row(FILE *f, const whatif_row *r);
int whatif_write_csv(const char *path, const whatif_row *rows, int n, unpad_err *err);
/* The table: its header line, then a line per row ("-" for what was not computed). */
void whatif_print_header(FILE *f);
void whatif_print_row(FILE *f, const whatif_row *r);
void whatif_print_table(FILE *f, const whatif_row *rows, int n);

#endif
