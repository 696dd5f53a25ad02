/* memory.h — predicted device memory of one training process (unpad-train) per GPU, and whether it
 * fits the hardware spec's memory.
 *
 * What the trainer allocates (exec/gpu/bert.c, gemm.c, dp.c), all at start, so the peak is the sum:
 *   parameters      fp32 master weights, 4 bytes each, in the trainer's table (every tensor starts at
 *                   a multiple of 64 elements; the word embeddings have the vocabulary padded to 64)
 *   working copy    bf16 (fp32 in the fp32 build) of the weights the kernels read
 *   gradients       fp32
 *   optimizer       LAMB m and v, fp32
 *   activations     one arena sized for a micro-batch of T tokens, n sequences and P predictions:
 *                   every layer's saved tensors (QKV, attention output and its log-sum-exp, both
 *                   LayerNorms' inputs and statistics, FFN pre-activation and output), the gradient
 *                   buffers, the MLM and NSP heads, the uploaded batch (256-byte aligned pieces)
 *   workspaces      the FMHA backward's fp32 accumulators (in the arena), the kernels' column-sum
 *                   scratch (in the arena), cuBLASLt's 32 MiB
 *   context         hw->context_gib (CUDA context, cuBLASLt handle), and hw->nccl_gib when several
 *                   processes talk through NCCL
 *   FP8 (--fp8 on)  the encoder's Linear weights in E4M3 and their transposed copies, one operand
 *                   buffer of T x max(3H, F) bytes, each scaled tensor's maximum, history, scale,
 *                   inverse and format, the weight casts' table; FFN1's output h in E4M3 only, one
 *                   byte an element instead of two (the trainer's default; UNPAD_FP8_GELU_OUT=0: two).
 * The trainer sizes its arena from the lengths it will see (memory_arena_tokens) and makes it again,
 * larger, for a micro-batch that does not fit. */
#ifndef UNPAD_MEMORY_H
#define UNPAD_MEMORY_H

#include "dist.h"
#include "model.h"

typedef struct {
    long tokens;     /* activation rows of a micro-batch (the trainer: B x max_len) */
    long seqs;       /* sequences of a micro-batch (the trainer: B, more with free counts) */
    long preds;      /* masked predictions of a micro-batch */
    int nccl;        /* 1: several processes (NCCL communicator buffers) */
    int fp32;        /* 1: the fp32 build (fp32 working copy and activations) */
    int fp8;         /* MEMORY_FP8_*: the bf16 trainer's --fp8 on (FP8 weight copies, operand buffer,
                      * scaling state; FFN1's output kept in E4M3 only), or with UNPAD_FP8_GELU_OUT=0
                      * (that output in bf16) */
    int last_heads;  /* 1: --last-layer heads (the default): the heads' rows' buffers of the last layer */
} memory_setup;

enum { MEMORY_FP8_OFF = 0, MEMORY_FP8_ON = 1, MEMORY_FP8_H16 }; /* OFF / ON: --fp8 off|on's 0 / 1 */

typedef struct {
    long params;           /* elements of the trainer's parameter table (aligned, padded) */
    double master_gib, work_gib, grad_gib, optim_gib;
    double acts_gib;       /* the activation arena, workspaces in it included */
    double fp8_gib;        /* --fp8 on: the FP8 weight copies, operand buffer and scaling state */
    double workspace_gib;  /* cuBLASLt and the other buffers outside the arena */
    double context_gib;    /* CUDA context (+ NCCL) */
    double total_gib;      /* what cudaMemGetInfo would count in use */
    double trainer_gib;    /* what unpad-train prints as its own ("device memory: ... GiB"):
                            * weights, gradients, optimizer, the arena and fp8_gib */
} memory_use;

/* The trainer's first activation size for micro-batches of n sequences whose lengths (at most
 * max_len) have this mean and standard deviation: n mean + 5 sqrt(n) sd tokens (a sum of n
 * lengths exceeds it about once in millions of batches), rounded up to a multiple of 256, at most
 * n x max_len (a padded layout: sd 0, mean max_len, gives n x max_len). */
long memory_arena_tokens(int n, int max_len, double mean, double sd);
/* The same for lengths drawn from d, each clamped to [lo, hi] (the synthetic loader: [8, max_len];
 * a capped layout: [1, cap]); at most n x the longest of them. */
long memory_dist_tokens(int n, int lo, int hi, const unpad_dist *d);

/* The trainer's allocation for per-GPU batch B with an arena of `tokens` tokens: seq_cap sequences
 * (B with equal counts; free counts: min(4B, ranks x B)), B x max_predictions + (seq_cap - B)
 * predictions. */
void memory_trainer_setup(const model_cfg *m, int batch, long tokens, int seq_cap, int nccl, memory_setup *out);
void memory_predict(const model_cfg *m, const hw_spec *hw, const memory_setup *s, memory_use *out);

/* 1 when u fits hw's memory; why (may be NULL) gets "needs 45.2 GiB of 39.6 GiB (a100-sxm4-40g)". */
int memory_fits(const memory_use *u, const hw_spec *hw, char *why, size_t n);

/* 1 when u fits hw's memory with less than MEMORY_TIGHT of it to spare: the model is within 0.4%
 * of the trainer's measured use, but another process, a driver or a larger batch than the arena's
 * may take the rest. */
#define MEMORY_TIGHT 0.01
int memory_tight(const memory_use *u, const hw_spec *hw);

#endif
