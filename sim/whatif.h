/* whatif.h — Monte Carlo what-if sweeps: for each configuration (GPUs, per-GPU batch, policy,
 * count constraint, length layout), sample many steps from a length distribution, balance each, time
 * every GPU's batch with the step model, and report the step time, throughput, imbalance, tokens
 * computed and padding, the all-reduce, and whether the trainer's memory fits.
 *
 * Model of one step (the same as `unpad predict`, step.h): GPU g's time = its batch's forward and
 * backward per operator (step_batch_us on the batch's sums in the row's layout, layout.h) + the
 * per-step work every GPU does: the optimizer, the step overhead, the gradient all-reduce over the
 * row's GPUs (net.h: a flat ring in one node, hierarchical across nodes) and, for a balancing
 * policy, the sample exchange of the step's samples. The step ends with the slowest GPU. With
 * serial_ranks (unpad-train --virtual-ranks on one GPU) the row's GPUs are virtual ranks run one
 * after another: the step is the sum of their batches plus one optimizer step and the overhead.
 * With accum = K > 1 (gradient accumulation: unpad-train --virtual-ranks K on each GPU) a step's
 * global batch of gpus x K x batch sequences is balanced over gpus x K virtual ranks, GPU g runs
 * virtual ranks gK..gK+K-1 one after another (its time is the sum of their batches), and the
 * optimizer, the all-reduce and the exchange come once a step.
 *
 * Sampling: lengths from the distribution capped at max_len (layout_truncate); a buckets layout
 * draws each step's batch from one bucket. Configurations with the same GPUs, batch and sampling
 * share their sampled steps (common random numbers: policy and layout differences are not
 * sampling noise). Steps are sampled in chunks (whatif_chunk_steps: WHATIF_CHUNK, fewer for large
 * configurations), each chunk from a generator seeded by (seed, gpus, batch, sampling, chunk), and
 * the chunks are the worker threads' jobs; a row is done (and reported, row_done) when the last
 * chunk of its steps is. A row's numbers depend neither on the other rows nor on the thread count.
 * With seq_budget, a large configuration samples fewer steps (whatif_config_steps): one step of
 * thousands of GPUs already holds hundreds of thousands of sequences, and its mean step time and
 * imbalance settle in far fewer steps than a configuration of 8 GPUs needs.
 *
 * Attention (unpadded rows): on the first attn_steps steps, the slowest GPU's FMHA (forward +
 * backward, all layers) is timed by the tile simulation with one launch in loader order and with
 * the grouping of the configuration's batch size (group boundaries planned once on a typical GPU
 * batch — the distribution's quantiles — replayed on each step's lengths, as a trainer with a
 * plan file would). */
#ifndef UNPAD_WHATIF_H
#define UNPAD_WHATIF_H

#include <stdint.h>
#include <stdio.h>

#include "balance.h"
#include "calib.h"
#include "dist.h"
#include "group.h"
#include "layout.h"
#include "model.h"
#include "net.h"
#include "progress.h"

struct whatif_row;

#define WHATIF_CHUNK 250 /* sampled steps a job; part of the definition of the sampled steps */
#define WHATIF_CHUNK_SEQS (1L << 20) /* a job of a large configuration: as many steps as make this many
                                      * sequences (at least one, at most WHATIF_CHUNK) */
#define WHATIF_CHUNK_MAX 40000 /* chunks a configuration at most */
#define WHATIF_AUTO_SEQS (1L << 23) /* the command line's default sampling: this many sequences a
                                     * configuration (seq_budget) */
#define WHATIF_AUTO_MIN_STEPS 100   /* ... in at least this many steps */
#define WHATIF_PROGRESS_SEQS 16384 /* sequences a step from which each step counts on the progress line */
#define WHATIF_ACCUM_MAX 1024 /* most micro-batches per GPU and step */

typedef struct {
    const unpad_dist *dist;
    const model_cfg *model;
    const hw_spec *hw;
    const calib_coef *calib;
    int steps;           /* Monte Carlo steps per configuration, >= 1 */
    long seq_budget;     /* > 0: a configuration of n sequences a step samples fewer steps where
                          * steps x n would exceed it: max(WHATIF_AUTO_MIN_STEPS, ceil(seq_budget / n)),
                          * never more than `steps` (whatif_config_steps); 0: `steps` each */
    uint64_t seed;
    int threads;         /* worker threads; 0: the online CPUs */
    int weights_tokens;  /* 1: balance tokens instead of the predicted cost */
    int attn_steps;      /* steps whose attention is timed (0: none) */
    int max_streams;     /* FMHA grouping: streams */
    int granularity;     /* FMHA grouping: length bin width for cuts */
    int max_len;         /* cap: longer sequences are truncated (0: none) */
    const layout *layouts; /* the rows' layouts (row.layout indexes them); NULL: unpadded only */
    int nlayouts;
    int serial_ranks;    /* 1: a row's GPUs are virtual ranks on one GPU, run one after another */
    int fp8;             /* MEMORY_FP8_OFF or MEMORY_FP8_ON (--fp8 off|on: 0 / 1): the trainer's memory
                          * with --fp8 on (the step times stay bf16's) */
    int last_heads;      /* 1 (whatif_setup_default, the trainer's default): the last layer after its
                          * attention on the heads' rows only (step.h STEP_LAST_HEADS); 0: every
                          * layer on all tokens (unpad-train --last-layer all) */
    double train_samples; /* > 0: the rows' time to train this many samples (whatif_train) */
    double gpu_hour_price; /* > 0 (with train_samples): its cost, this much per GPU-hour */
    /* Optional: progress (items = rows, work = sampled steps x sequences x rows) and a call as
     * each row is done (when the last chunk of its steps is), from the worker thread that
     * finished it (the callee locks). */
    progress *progress;
    void (*row_done)(void *ctx, const struct whatif_row *row);
    void *row_ctx;
} whatif_setup;

/* 1000 steps, seed 1, 32 attention steps, 4 streams, the last layer on the heads' rows */
void whatif_setup_default(whatif_setup *s);
/* The steps a configuration of n sequences a step (GPUs x micro-batches x batch) samples. */
int whatif_config_steps(const whatif_setup *s, long n);
/* The steps of one job (a chunk) of a configuration of n sequences a step sampling `steps`:
 * WHATIF_CHUNK, or fewer for one of more than WHATIF_CHUNK_SEQS / WHATIF_CHUNK sequences a step, so
 * that the threads share its steps (never so few that it makes more than WHATIF_CHUNK_MAX chunks). */
int whatif_chunk_steps(long n, int steps);
/* The inputs every sweep reads: the lengths, the model, the hardware and its coefficients. */
void whatif_setup_inputs(whatif_setup *s, const unpad_dist *d, const model_cfg *m, const hw_spec *hw,
                         const calib_coef *c);

typedef struct whatif_row {
    /* configuration */
    int gpus, batch;
    int accum;                 /* micro-batches of `batch` per GPU and step (0 or 1: one) */
    balance_policy policy;
    balance_count count;
    int layout;                /* index into whatif_setup.layouts (0 without layouts) */
    /* results */
    int steps;
    double step_us;            /* mean predicted step time */
    double samples_per_s;      /* gpus x accum x batch x steps / total time of the steps */
    double imbalance_mean, imbalance_p99, imbalance_max;
    double idle_mean, idle_p99; /* straggler idle fraction 1 - mean/max */
    double token_imbalance_mean;
    double fixed_us;           /* per-step part every GPU pays, mean over the steps */
    double tokens_per_gpu;     /* GEMM tokens computed per GPU and step (all its micro-batches),
                                * padding included */
    double padding;            /* fraction of them that is padding */
    double allreduce_us;       /* the gradient all-reduce (0 on one GPU) */
    double exchange_us;        /* the sample exchange, mean over the steps */
    net_algo net;              /* how the all-reduce runs */
    int nodes;
    double mem_gib;            /* the trainer's device memory per GPU (memory.h: activations for mem_tokens) */
    long mem_tokens;           /* the trainer's activations per micro-batch (memory_arena_tokens; a padded
                                * layout: B x its length) */
    double mem_budget_gib;     /* the same with an arena sized for the most tokens a micro-batch got */
    int mem_fits;              /* mem_gib within the hardware's memory */
    int mem_tight;             /* fits with under MEMORY_TIGHT of it to spare */
    double attn_us;            /* slowest GPU's FMHA per step, one launch (mean over attn steps);
                                * NaN when not timed (attn_steps 0, or a padded layout) */
    double attn_grouped_us;    /* the same with the grouping below (NaN when not timed) */
    int groups, streams;       /* the grouping used */
    char bounds[128];          /* its boundaries ("128,384"; "none": a single group) */
    char layout_name[64];
    double train_hours;        /* wall hours to train train_samples at samples_per_s (NaN: not asked) */
    double gpu_hours;          /* train_hours x the GPUs held (one with serial_ranks; NaN: not asked) */
    double cost;               /* gpu_hours x gpu_hour_price (NaN: not asked) */
} whatif_row;

/* Fixed per-step time of one GPU: optimizer + step overhead + all-reduce over `gpus`, plus the
 * sample exchange of a batch of mean_len sequences when `policy` moves samples (all but none). */
int whatif_fixed_us(const model_cfg *m, const hw_spec *hw, const calib_coef *c, double mean_len,
                    int gpus, int batch, balance_policy policy, double *out, unpad_err *err);

/* Time and cost of training `samples` samples at `samples_per_s` on `gpus` GPUs held for the
 * whole run, at `price` per GPU-hour: hours of wall time, GPU-hours and cost (NaN where samples or
 * price is not positive). */
void whatif_train(double samples, double samples_per_s, int gpus, double price, double *hours,
                  double *gpu_hours, double *cost);

/* A typical GPU batch: b lengths at the distribution's quantiles (i + 0.5) / b. */
void whatif_typical_batch(const unpad_dist *d, int b, int *len);

/* Runs every row (configuration fields filled in; results written). */
int whatif_run(const whatif_setup *s, whatif_row *rows, int n, unpad_err *err);

/* CSV with a header line (whatif_csv_header) and one line per row (whatif_csv_row: values not
 * computed are empty cells). */
extern const char whatif_csv_header[];
void whatif_csv_row(FILE *f, const whatif_row *r);
int whatif_write_csv(const char *path, const whatif_row *rows, int n, unpad_err *err);
/* The table: its header line, then a line per row ("-" for what was not computed); with train,
 * the time-to-train columns (train_hours, cost) too. */
void whatif_print_header(FILE *f, int train);
void whatif_print_row(FILE *f, const whatif_row *r, int train);
void whatif_print_table(FILE *f, const whatif_row *rows, int n, int train);

#endif
