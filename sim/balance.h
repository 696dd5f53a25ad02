/* balance.h — assigning one step's global batch of sequences to GPUs, and measuring the imbalance.
 *
 * The same functions run in the simulator (what-if sweeps, plans) and in the trainer at every
 * step, so they are deterministic: they balance integer weights (the per-sequence cost of cost.h
 * rounded to nanoseconds, or tokens), sort with ties broken by sequence index and never depend on
 * the order of floating-point additions. The same inputs give the same assignment on every machine.
 *
 * Policies (balance_policy_types, one row each; `unpad whatif --help` lists them):
 *   none        loader order: GPU g takes sequences [g*b, (g+1)*b) (b = n / gpus, the rest dealt)
 *   sort-deal   sort longest first, deal round-robin (the MLPerf v2.0 submissions)
 *   lpt         longest-processing-time greedy: heaviest first onto the least-loaded GPU
 *               (equal-count: only GPUs with a free slot)
 *   kk          Karmarkar-Karp k-way largest differencing; equal-count: the balanced largest
 *               differencing method (sorted items in k-tuples, one item per GPU per tuple)
 *   ffd-tokens  first-fit-decreasing by tokens into a per-GPU token budget, the budget being the
 *               smallest at which FFD fits the batch (binary search: MULTIFIT). Not sequence
 *               packing, which is a length layout.
 * Counts: equal (each GPU gets floor(n/gpus) or ceil(n/gpus) sequences; none and sort-deal are
 * always equal) or free.
 *
 * Cost: lpt and kk are O(n log n + n log k) for free counts with few GPUs, O(n k) in the worst
 * case of free-count kk with many GPUs; the workspace makes a step allocation-free. */
#ifndef UNPAD_BALANCE_H
#define UNPAD_BALANCE_H

#include <stdint.h>
#include <stdio.h>

#include "cost.h"
#include "unpad.h"

typedef enum { BAL_NONE, BAL_SORT_DEAL, BAL_LPT, BAL_KK, BAL_FFD_TOKENS, BAL_POLICY_COUNT } balance_policy;
typedef enum { BAL_EQUAL, BAL_FREE, BAL_COUNT_COUNT } balance_count;

const char *balance_policy_name(balance_policy p);   /* its table name ("sort-deal"), "?" if bad */
int balance_policy_from_name(const char *s);          /* balance_policy, or -1 */
/* The policy named s; else EINVAL with the names expected (and, for the former 'pack', what it
 * is called now). Callers prefix the flag or file. */
int balance_policy_parse(const char *s, balance_policy *out, unpad_err *err);
/* The names joined by sep ("none | sort-deal | ..."), into buf; returns buf. */
const char *balance_policy_list(char *buf, size_t n, const char *sep);
/* One line per policy, "<indent>name  help", for --help texts. */
void balance_policy_help_print(FILE *f, const char *indent);
const char *balance_count_name(balance_count c);      /* "equal", "free" */
int balance_count_from_name(const char *s);           /* balance_count, or -1 */
int balance_count_parse(const char *s, balance_count *out, unpad_err *err);

/* Weight units: nanoseconds of predicted per-sequence cost, so sums stay exact in 64 bits. */
#define BALANCE_NS_PER_US 1000.0

/* w[i] = round(1000 x seq_cost_us(sc, len[i])), at least 1; sc == NULL: w[i] = len[i] (tokens). */
void balance_weights(const seq_cost *sc, const int *len, int n, int64_t *w);

typedef struct {
    const int *len;       /* (n) sequence lengths in loader order */
    const int64_t *w;     /* (n) weights to balance (balance_weights); NULL: tokens */
    int n;                /* sequences in the global batch */
    int gpus;             /* GPUs, 1 <= gpus <= n */
    balance_policy policy;
    balance_count count;
} balance_input;

/* An assignment. Arrays are owned by the result (balance_result_alloc). */
typedef struct {
    int n, gpus;          /* of the last assignment */
    int max_n, max_gpus;  /* capacity */
    int *gpu;             /* (n) GPU of each sequence */
    int *start;           /* (gpus + 1) GPU g holds seq[start[g] .. start[g+1]) */
    int *seq;             /* (n) sequence indices grouped by GPU, ascending within a GPU */
    int64_t *load;        /* (gpus) sum of the balanced weights per GPU */
    int64_t *tokens;      /* (gpus) sum of lengths per GPU */
    int64_t ffd_budget;   /* ffd-tokens: the token budget used; 0 for other policies */
} balance_result;

int balance_result_alloc(int max_n, int max_gpus, balance_result *r, unpad_err *err);
void balance_result_free(balance_result *r);

/* Scratch space for up to max_n sequences on max_gpus GPUs; one per thread. */
typedef struct balance_ws balance_ws;
int balance_ws_alloc(int max_n, int max_gpus, balance_ws **out, unpad_err *err);
void balance_ws_free(balance_ws *ws);

/* Assigns in->n sequences to in->gpus GPUs. UNPAD_EINVAL on bad input (sizes over the
 * workspace's or result's capacity, gpus > n, a bad length or weight). */
int balance_assign(balance_ws *ws, const balance_input *in, balance_result *out, unpad_err *err);

/* A balancing policy, GSL-style: balance_policy_types[p] for every p < BAL_POLICY_COUNT. The
 * functions are the implementation's: call balance_assign, which checks the input first. */
typedef struct {
    const char *name;    /* in plans, flags and outputs */
    /* Assigns a checked input; may use the workspace's shared sort and ws_size bytes of its own. */
    int (*assign)(balance_ws *ws, const balance_input *in, balance_result *out, unpad_err *err);
    size_t (*ws_size)(int max_n, int max_gpus); /* its own workspace bytes; NULL: none */
    const char *help;    /* one line for --help texts */
    int equal_always;    /* 1: every GPU gets an equal count whatever the count asked (free counts
                          * give the equal assignment) */
} balance_policy_type;

extern const balance_policy_type balance_policy_types[BAL_POLICY_COUNT];

/* 0 where the count constraint cannot change p's assignment (its equal_always), else 1. */
int balance_count_matters(balance_policy p);

/* Imbalance of one assignment. A GPU's time is the sum of cost_ns over its sequences (per-sequence
 * predicted cost in nanoseconds, balance_weights with a seq_cost; NULL: the balanced weights
 * r->load) in microseconds, plus `fixed_us`, the per-step part every GPU pays (optimizer,
 * all-reduce, overhead). */
typedef struct {
    double max_us, mean_us;     /* per-GPU predicted time, slowest and mean */
    double imbalance;           /* max / mean (1 = perfect) */
    double idle;                /* straggler idle fraction 1 - mean / max: the GPU time lost waiting */
    int64_t max_tokens;
    double mean_tokens;
    double token_imbalance;     /* max / mean of tokens */
    int straggler;              /* the slowest GPU (lowest index on ties) */
} balance_metrics;

void balance_metrics_compute(const balance_result *r, const int64_t *cost_ns, double fixed_us,
                             balance_metrics *m);

/* Distribution of the metrics over many steps (Monte Carlo). */
typedef struct {
    int steps;
    double step_us_mean;        /* mean of max_us */
    double imbalance_mean, imbalance_p99, imbalance_max;
    double idle_mean, idle_p99;
    double token_imbalance_mean;
} balance_mc;

/* Summarises per-step values (imbalance[i], idle[i], max_us[i], token_imbalance[i], i < steps);
 * sorts copies for the percentiles (p99: the value at rank ceil(0.99 steps)). */
int balance_mc_summarise(const double *imbalance, const double *idle, const double *max_us,
                         const double *token_imbalance, int steps, balance_mc *out, unpad_err *err);

/* The value at rank ceil(q * n) (1-based) of v[0..n) after sorting; v is reordered. */
double balance_quantile(double *v, int n, double q);

#endif
