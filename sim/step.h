/* step.h — the step model: one GPU's training step, per operator, from a few sums over its batch.
 *
 * It is the model every reported step time comes from: `unpad predict`, `whatif`, `plan`,
 * `plot load` and the trainer's predicted per-rank load. It times the same operators with the same
 * coefficients as cost_predict_step (cost.h) on the whole batch, so the effects of the batch's
 * shape are kept: a GEMM's efficiency at its row count, the FMHA's waves over the multiprocessors,
 * the longest sequence's tail. What makes it cheap: every operator's FLOPs and bytes are affine in
 * the batch's sums (ops_count), so step_model_init computes once per configuration the
 * microseconds per unit of each sum, and an evaluation is two short dot products and a max per
 * operator.
 *
 * The FMHA is the one term that is not affine. Its tile simulation (cost_fmha_us: one tile per
 * sequence, head and 64-row tile, dispatched to sms x ctas_per_sm slots, each direction its own
 * coefficients: calib_fmha) is replaced by a
 * closed form on the tiles' sums, fitted to the simulation averaged over random launch orders
 * (fit_fmha_us, the order the calibration assumes):
 *   W     = heads x (tiles x attn_cta_us + a x sum over tiles of rows64 x keys64)   all tiles' time
 *   p     = the longest tile (64 rows against the longest keys)
 *   time  = p                                           when every tile has a slot of its own
 *         = max(p x ceil(top / slots), W / slots + STEP_FMHA_TAIL x p)   otherwise
 * plus, in the backward, its per-token passes (cost_fmha_passes_us), exact.
 * where top counts the tiles as long as p (waves of them cannot be shortened) and the second term
 * is the work spread over the slots plus the mean tail of a random order. docs/cost-model.md
 * gives its error against the simulation; tests/check_step.c bounds it. */
#ifndef UNPAD_STEP_H
#define UNPAD_STEP_H

#include <stdint.h>

#include "balance.h"
#include "calib.h"
#include "cost.h"
#include "ops.h"

/* The tail of a random launch order, in units of the longest tile (fitted to fit_fmha_us under
 * models/calib/h200-sxm.cfg, forward 3 and backward 2 tiles per SM, on Wikipedia-like, uniform,
 * short-heavy and bimodal batches of 16..256 sequences, bert-base and bert-large: bias within
 * 0.6% from 32 sequences up, +2.5% at 16; docs/cost-model.md). */
#define STEP_FMHA_TAIL 0.45

/* The sums of one GPU's batch the step model needs (step_batch_add, one sequence at a time). */
typedef struct {
    ops_shape shape;   /* sequences, GEMM tokens, attention tokens and squares, predictions, ... */
    double tiles;      /* FMHA tiles per head: sum of ceil(attention length / 64) */
    double tile_work;  /* per head, sum over tiles of rows x keys rounded to 64: sum of ceil64(len)^2 */
    int top_k64;       /* keys of the longest attention length, rounded up to 64 */
    double top_tiles;  /* per head, tiles as long as the longest (those of its keys class) */
    double real_len2;  /* sum of squared real lengths: the useful attention work (model FLOPs) */
} step_batch;

typedef struct step_len step_len;

/* Per-configuration coefficients (step_model_init; step_model_free). Read-only once made: share
 * it between threads. */
/* step_model_init's flags */
#define STEP_FUSED 1      /* the fused kernels (else every intermediate through memory) */
#define STEP_LAST_HEADS 2 /* the last layer after its attention on the heads' rows (ops_shape.last_heads) */

typedef struct {
    int layers, heads, max_len, max_pred;
    int fused;
    int last_heads;
    /* Non-FMHA operators: time = max(flop . x + small_m, mem . x) + launch, x = step_feat(). */
    double flop[OP_COUNT][6], mem[OP_COUNT][6];
    /* The same per step (x instances) for the operators of step_batch_us, compacted. */
    int nrun, run_op[OP_COUNT];
    double run_flop[OP_COUNT][6], run_mem[OP_COUNT][6], run_small[OP_COUNT];
    double run_launch;        /* every launch of the batch's operators */
    double small_m[OP_COUNT]; /* the GEMM small-M penalty: constant microseconds */
    double launch[OP_COUNT];  /* launches x launch_us */
    int instances[OP_COUNT];
    /* FMHA (index 0 forward, 1 backward): tile time attn_cta_us + tile_a x rows64 x keys64 */
    double tile_a[2], cta_us[2], slots[2];
    /* the launch's load term (calib attn_load): tile_a x (1 + load_ge[d] ln(waves / 10)) */
    double load_ge[2], load_tiles_max;
    /* the backward's passes over its dQ accumulator, per attention token (cost_fmha_passes_us) */
    double pass_us[2];
    double lamb_us;           /* the optimizer step (LAMB over every parameter) */
    double overhead_us;       /* per step: host work, synchronisation (calibration) */
    double host_launch_us;    /* the host's time to enqueue one forward kernel (calibration; 0: none) */
    double launches[OP_COUNT]; /* kernel launches of one instance */
    double param_bytes;       /* fp32 gradients all-reduced */
    int calib_fitted;
    step_len *per_len;        /* (max_len + 1) */
} step_model;

/* The trainer's flags: its fused kernels, and its last layer as --last-layer says (1: heads). */
static inline int step_trainer_flags(int last_heads) { return STEP_FUSED | (last_heads ? STEP_LAST_HEADS : 0); }

/* flags: STEP_FUSED, STEP_LAST_HEADS (1 is the fused kernels with every layer on all tokens) */
int step_model_init(step_model *sm, const model_cfg *m, const hw_spec *hw, const calib_coef *c,
                    int flags, unpad_err *err);
void step_model_free(step_model *sm);

void step_batch_clear(step_batch *b);
/* Per length l (0..max_len): what one sequence of that length adds to the batch's sums. */
struct step_len {
    int32_t preds;      /* masked predictions (ops_predictions) */
    int32_t tiles;      /* FMHA tiles per head: ceil(l / 64) */
    int32_t work;       /* rows x keys of its tiles, rounded to 64: ceil64(l)^2 */
    int32_t top;        /* of them, tiles as long as its longest (all: 64-row tiles) */
};

/* One sequence of real length len (its predictions; what the exchange moves), occupying gemm_tokens
 * rows of the GEMMs (its padded length; 0 when the layout counts rows separately, step_batch_rows)
 * and attending over attn_len positions (its padded length, or len); both at most sm->max_len. */
static inline void step_batch_add(const step_model *sm, step_batch *b, int len, int gemm_tokens,
                                  int attn_len)
{
    ops_shape *s = &b->shape;
    const step_len *a = &sm->per_len[attn_len];
    s->seqs += 1;
    s->tokens += gemm_tokens;
    s->attn_tokens += attn_len;
    s->sum_len2 += (double)attn_len * attn_len;
    s->real_tokens += len;
    b->real_len2 += (double)len * len;
    s->preds += sm->per_len[len].preds;
    if (attn_len > s->max_len)
        s->max_len = attn_len;
    int k64 = (attn_len + 63) >> 6;
    b->tiles += a->tiles;
    b->tile_work += a->work;
    if (k64 > b->top_k64) {
        b->top_k64 = k64;
        b->top_tiles = a->top;
    } else if (k64 == b->top_k64) {
        b->top_tiles += a->top;
    }
}
/* Packed layouts: the GEMMs run on `rows` rows of `row_len` tokens, padding within rows included. */
static inline void step_batch_rows(step_batch *b, int rows, int row_len)
{
    b->shape.tokens += (double)rows * row_len;
}
/* The unpadded batch len[0..n); EINVAL when a length is outside 1..max_len. */
int step_batch_of(const step_model *sm, const int *len, int n, step_batch *b, unpad_err *err);

/* Closed-form FMHA time of the batch, one direction (0 forward, 1 backward), per layer. */
double step_fmha_us(const step_model *sm, const step_batch *b, int dir);
/* One operator instance's time on the batch (LAMB, all-reduce and exchange: see below). */
double step_op_us(const step_model *sm, op_id op, const step_batch *b);
/* Forward and backward of every operator over the batch: the part of a GPU's step that depends on
 * its batch (without the optimizer, the step overhead and the collectives). */
double step_batch_us(const step_model *sm, const step_batch *b);
/* How long the GPU waits for the host in a step whose first micro-batch is b: each step ends with
 * a synchronising read, so the next starts with an empty queue, and a kernel cannot start before
 * the host has enqueued it (host_launch_us per launch, in the forward's order: the embedding, then
 * each layer's QKV, FMHA, output projection, LayerNorm, FFN1, FFN2, LayerNorm). Where the first
 * layers' kernels are shorter than their enqueueing the GPU idles; once it is behind the host, it
 * stays behind. Added once per GPU and step (not per micro-batch: after the first, the host is
 * ahead). 0 when the calibration has no host_launch_us. Includes the wait for the first kernel. */
double step_host_wait_us(const step_model *sm, const step_batch *b);
/* The same under each host time hs[0..nh) in place of the calibration's: wait[j] (the forward's
 * kernel times computed once; calibrate's grid, fit_host_untraced). */
void step_host_waits_us(const step_model *sm, const step_batch *b, const double *hs, int nh, double *wait);

/* The batch of rank g of an assignment (lengths clamped to 1..max_len, as the loader's are). */
void step_rank_batch(const step_model *sm, const balance_result *r, const int *len, int g, step_batch *b);
/* Each GPU's batch time (step_batch_us, unpadded) under an assignment: us[g] for the sequences r
 * gives GPU g out of len (the global batch in loader order). The trainer's predicted per-rank
 * load (exec/gpu/dp.c). */
void step_model_rank_us(const step_model *sm, const balance_result *r, const int *len, double *us);

/* The whole step per operator for one GPU's batch, as cost_predict_step reports it (counts from
 * ops_count, times from the step model; all-reduce and exchange from net.h over `gpus`). */
int step_model_predict(const step_model *sm, const model_cfg *m, const hw_spec *hw,
                       const calib_coef *c, const step_batch *b, int gpus, cost_step *out,
                       unpad_err *err);

#endif
