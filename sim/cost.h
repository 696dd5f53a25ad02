/* cost.h — predicted time of each operator, of one GPU's step, and of one sequence.
 *
 * time = max(tensor FLOPs / (peak x eff) + other FLOPs / fp32 peak, bytes / (bandwidth x eff))
 *        + launches x launch overhead,
 * with the efficiencies of calib.h. The FMHA is timed by simulating its tiles (one CTA per
 * sequence, head and 64-row tile) over the multiprocessors, so wave quantization and the
 * tail of long sequences show. Collectives use a ring model over the link bandwidth. */
#ifndef UNPAD_COST_H
#define UNPAD_COST_H

#include "calib.h"
#include "ops.h"

typedef struct cost_step {
    op_cost ops[OP_COUNT];
    double time_us[OP_COUNT];  /* per instance */
    double step_us;            /* sum of instances x time, plus the step overhead and the host wait */
    double host_wait_us;       /* the GPU's wait for the host at the step's start (step_host_wait_us) */
    double compute_us;         /* step without all-reduce and exchange */
    double model_flops;        /* useful FLOPs (unpadded tokens) */
} cost_step;

/* Predicts every operator of one GPU's step. */
int cost_predict_step(const model_cfg *m, const hw_spec *hw, const calib_coef *c, const op_batch *b,
                      cost_step *out, unpad_err *err);

/* Efficiencies of calib.h for one operator: a GEMM's fraction of bf16 peak at `rows` rows M
 * (1/eff = 1/eff_op + gemm_m_half / (gemm_eff M), eff_op = op_eff[op] or gemm_eff), and a
 * memory-bound operator's fraction of bandwidth (op_eff[op], else bw_eff; optim_bw_eff for LAMB). */
double cost_gemm_eff(const calib_coef *c, op_id op, double rows, double width);
double cost_bw_eff(const calib_coef *c, op_id op, double width);

/* Microseconds per tensor FLOP that ops.h counts for operator op, at efficiency 1: 1 / bf16 peak,
 * except with the trainer's FP8 products (fp8: an FP8 calibration's c->fp8). Those run the
 * encoder's four Linear forwards and their data gradients in FP8 and the weight gradients in bf16,
 * and move FFN2's weight gradient to after the GELU backward pass (traced under ffn1_bwd, as
 * unpad-train --fp8 on with the tanh GELU does by default): ffn2_bwd then does half the FLOPs
 * ops.h counts for it, all FP8, and ffn1_bwd 1.5 times its own, a third FP8. */
double cost_tensor_us(const hw_spec *hw, int fp8, op_id op);
/* The share of an operator's tensor FLOPs (as it runs them) that --fp8 on runs in FP8: the Linear
 * forwards and ffn2_bwd 1, qkv_bwd and attn_out_bwd 0.5, ffn1_bwd 1/3, every other operator 0. */
double cost_fp8_share(op_id op);
/* 1 where an operator is timed by its FLOPs alone: the FP8 calibration's Linear products (their
 * operands take one byte an element, which the bf16 byte counts of ops.h do not say; their fitted
 * efficiencies take in the epilogues' writes). */
int cost_flops_only(const calib_coef *c, op_id op);

/* Predicted time of one operator instance. */
double cost_op_us(const hw_spec *hw, const calib_coef *c, const op_cost *oc);

/* Rows per FMHA tile (one CTA per sequence, head and tile), as the kernels launch them in training:
 * the forward with dropout takes 64 query rows a CTA (fmha.cu "fwd q64 w4"), the backward 64 keys a
 * CTA against every query ("bwd k64 q32 w4"); either is 64 x the sequence's length of work. */
#define COST_FMHA_TILE 64

/* The 64-row tiles of sequences len[0..n) (one head). */
double cost_fmha_tiles(const int *len, int n);
/* c with the FMHA's width terms (calib_fmha_heads) and load terms (calib_fmha_tiles) applied for
 * one layer's launches of a model of `heads` heads: G groups, group g's sequences len[g][0..n[g]),
 * their tiles together (a layer's groups share the GPU). c itself when it has neither, else *tmp. */
const calib_coef *cost_fmha_coef(const hw_spec *hw, const calib_coef *c, int heads, const int *const *len,
                                 const int *n, int G, calib_coef *tmp);

/* FMHA time over sequences len[0..n) launched together, by tile simulation (dir 0 fwd, 1 bwd):
 * tiles go in launch order to the multiprocessor slot that frees first. */
double cost_fmha_us(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n, int dir);
/* The same simulation, also giving the end time of every prefix: end_after[i] is the time of
 * len[0..i] launched alone (the launch order is sequence-major, so a prefix's run is the run's
 * start), its tiles under the load term of all n. One pass serves every group that starts at
 * len[0]. */
double cost_fmha_prefix_us(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n,
                           int dir, double *end_after);

/* G groups launched in order g = 0..G-1, group g's sequences len[g][0..n[g]) on stream stream[g]
 * (dir 0 fwd, 1 bwd): a group starts when the previous group on its stream has ended; a free
 * slot takes the next tile of the earliest-launched group that has started (the block scheduler
 * drains kernels in launch order and fills idle slots from later ones). Returns when the last
 * group ends; group_end (may be NULL) receives each group's end. One group is cost_fmha_us. */
double cost_fmha_streams_us(const hw_spec *hw, const calib_coef *c, int heads, const int *const *len,
                            const int *n, const int *stream, int G, int dir, double *group_end);

/* The FMHA backward's two passes over its fp32 dQ accumulator, which run before and after its
 * tiles (kernels/fmha.cu: the prep pass reads dO and O and zeroes the accumulator, the convert pass
 * reads it and writes dQ in bf16): COST_FMHA_PASS_BYTES per token and hidden unit of `tokens`
 * tokens (every sequence's, launched together), streamed at the streaming kernels' fraction of the
 * bandwidth (optim_bw_eff, LAMB's). They are per token, where the tiles are per 64 rows: a short
 * sequence takes a whole tile but only its own tokens' share of the passes. 0 for the forward. */
#define COST_FMHA_PASS_BYTES 14.0
double cost_fmha_passes_us(const hw_spec *hw, const calib_coef *c, int heads, double tokens, int dir);
/* The sum of len[0..n). */
double cost_fmha_tokens(const int *len, int n);

/* Time of one FMHA tile (CTA) with q_rows query rows against kv_len keys, dir 0 fwd / 1 bwd. */
double cost_fmha_cta_us(const hw_spec *hw, const calib_coef *c, int q_rows, int kv_len, int dir);

/* The per-sequence cost balancers use: cost(len) = c0 + c1 len + c2 len^2 (microseconds of one
 * training step's compute on one GPU), fitted to cost_predict_step on single-length batches. */
typedef struct {
    double c0, c1, c2;
} seq_cost;

int cost_seq_model(const model_cfg *m, const hw_spec *hw, const calib_coef *c, seq_cost *out,
                   unpad_err *err);
static inline double seq_cost_us(const seq_cost *s, int len)
{
    return s->c0 + s->c1 * len + s->c2 * (double)len * len;
}

/* All-reduce of `bytes` over `gpus` GPUs (ring), microseconds; 0 for one GPU. */
double cost_allreduce_us(const hw_spec *hw, const calib_coef *c, double bytes, int gpus);

#endif
