/* plan.h — the plan file: how a training run balances its steps and groups its FMHA, and what the
 * simulator predicted for it. `unpad plan` writes it; `unpad-train --plan` reads it and, at every
 * step, calls balance_assign with the plan's policy, count and weights (plan_seq_cost) and groups
 * each GPU's attention with the plan's boundaries (or group_plan_auto when `fmha_groups = auto`).
 *
 *   policy = kk                 # a balancing policy of balance_policy_types (balance.h)
 *   count = equal               # equal | free
 *   weights = cost              # cost: c0 + c1 len + c2 len^2 (below) | tokens
 *   gpus = 8
 *   batch = 56                  # sequences per GPU; the global batch is gpus x batch
 *   fmha_groups = 128,384       # ascending upper lengths of every group but the longest | auto | none
 *   fmha_granularity = 1        # auto: cut only between lengths in different bins this wide
 *   streams = 2                 # CUDA streams for the FMHA groups
 *   seed = 1
 *   cost_c0 = ... cost_c1 = ... cost_c2 = ...   # per-sequence cost, microseconds
 *   model = ..., hw = ..., dist = ...           # what the plan was made for (informational)
 *   calib = calibrated (models/calib/h200-sxm.cfg)   # what the predictions' coefficients are:
 *                               # calibrated, uncalibrated defaults, or an estimate (transferred)
 *   steps = 1000                # Monte Carlo steps behind the predictions
 *   pred_step_us, pred_samples_per_s, pred_imbalance, pred_imbalance_p99, pred_idle,
 *   none_step_us, none_imbalance, pred_attn_us, pred_attn_grouped_us   # predictions
 */
#ifndef UNPAD_PLAN_H
#define UNPAD_PLAN_H

#include "balance.h"
#include "cfg.h"
#include "group.h"
#include "whatif.h"

typedef struct {
    balance_policy policy;
    balance_count count;
    int weights_tokens;         /* 1: balance tokens; 0: the per-sequence cost below */
    int gpus, batch;
    int fmha_nb;                /* -1: auto (plan each step), 0: one launch, else boundaries */
    int fmha_bounds[GROUP_MAX]; /* (fmha_nb) ascending */
    int fmha_granularity;
    int streams;                /* 1..GROUP_MAX_STREAMS */
    long seed;
    seq_cost cost;              /* per-sequence cost the balancer uses (weights = cost) */
    char model[CFG_STR_LEN], hw[CFG_STR_LEN], dist[CFG_STR_LEN];
    char calib[CFG_STR_LEN];    /* what the predictions' coefficients are (cli_calib_label) */
    int steps;
    double pred_step_us, pred_samples_per_s, pred_imbalance, pred_imbalance_p99, pred_idle;
    double none_step_us, none_imbalance;
    double pred_attn_us, pred_attn_grouped_us;
    char provenance[4096];      /* "# key: value" lines plan_write puts above the keys (what made
                                 * the plan: version, command, calibration); not read back */
} unpad_plan;

void plan_default(unpad_plan *p);

/* Reads and checks a plan file; errors name the file, the line and what was expected. */
int plan_load(const char *path, unpad_plan *p, unpad_err *err);
/* The same from text[0..len) in memory; name stands for the file in messages. */
int plan_parse(const char *name, const char *text, size_t len, unpad_plan *p, unpad_err *err);
int plan_write(const char *path, const unpad_plan *p, unpad_err *err);

/* The per-sequence cost to balance with (NULL when the plan balances tokens). */
const seq_cost *plan_seq_cost(const unpad_plan *p);

/* Makes a plan: runs the what-if for `policy` (or every policy when policy < 0: "auto", choosing
 * the lowest predicted step time, ties to the simpler policy) under `count`, with the `none`
 * baseline, and plans the FMHA grouping on the distribution's typical batch. rows (>= 6) receive
 * the what-if rows run (*nrows of them, the baseline first). accum > 1: each GPU accumulates
 * that many micro-batches of `batch` a step (unpad-train --virtual-ranks accum); the memory is
 * one micro-batch's. A batch that does not fit is refused (UNPAD_ERANGE) with the largest that
 * fits and the accumulation that would train as many sequences. */
int plan_make(const whatif_setup *s, int gpus, int batch, int accum, int policy, balance_count count,
              unpad_plan *out, whatif_row *rows, int *nrows, unpad_err *err);

/* UNPAD_OK when micro-batches of `batch` sequences (accum of them a GPU) fit the trainer's
 * memory on s->hw; else UNPAD_ERANGE with what they need, the largest batch that fits and the
 * accumulation that would train as many sequences (plan_make's refusal, checked before any work). */
int plan_check_fit(const whatif_setup *s, int gpus, int batch, int accum, balance_count count, unpad_err *err);

/* batch when micro-batches of `batch` sequences fit the trainer's memory on s->hw (accum of them
 * a GPU, counts `count`), else the largest that fits (0: none); tokens (may be NULL): the arena's
 * tokens for `batch`; why (n bytes): the memory's account for `batch`. */
int plan_batch_fits(const whatif_setup *s, int gpus, int accum, balance_count count, int batch, long *tokens,
                    char *why, size_t n);

/* The ways to train per_gpu sequences per GPU a step as K equal micro-batches that fit the memory
 * (K = 1, 2, ... from the fewest that fit; at most max of them, K <= WHATIF_ACCUM_MAX), each run
 * as a what-if under `policy` (kk when < 0) and `count` into rows[0..*n), the highest samples/s
 * first. Refused (UNPAD_ERANGE) when there is none. */
int plan_split(const whatif_setup *s, int gpus, int per_gpu, int policy, balance_count count, whatif_row *rows,
               int max, int *n, unpad_err *err);

#endif
