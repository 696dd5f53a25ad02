/* bert.h — BERT pre-training on one GPU in the unpadded layout: parameters, activations, forward,
 * backward and the LAMB step. (Named bert.h, not model.h, so it never shadows sim/model.h.)
 *
 * Parameters live in ONE flat buffer per kind — fp32 master, floatX working copy (bf16;
 * fp32 in the fp32 build), fp32 gradient,
 * fp32 LAMB m and v — all with the same offsets, described by a table of named tensors whose names
 * are Hugging Face BertForPreTraining's state_dict names. Our fused QKV weight (3H, H) is three
 * consecutive table entries (query, key, value): the GEMM reads them as one matrix, LAMB and the
 * peer comparison see them as three. The MLM decoder weight is the word embedding (tied), padded
 * to vocab_pad rows that stay zero; the decoder bias is cls.predictions.bias (vocab_pad).
 *
 * A step over a global batch that may be split into micro-batches (virtual ranks, or one rank of
 * several GPUs): per micro-batch bert_batch_upload, bert_forward, bert_backward with the loss
 * scales of the GLOBAL batch (1 / total predictions for MLM, 1 / total sequences for NSP), the
 * first one writing the gradients and the others adding to them, then bert_lamb_step. */
#ifndef UNPAD_BERT_H
#define UNPAD_BERT_H

#include <stdint.h>

#include "gpu/gemm.h"
#include "kernels.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char name[96];      /* Hugging Face state_dict name */
    int64_t offset;     /* first element in the flat buffers (a multiple of 64) */
    int64_t size;       /* elements */
    int rows, cols;     /* shape (rows, cols); cols = 1 for vectors */
    int weight_decay;   /* 1 for matrices and embeddings, 0 for biases and LayerNorm */
    int hf_rows;        /* rows the peer's tensor has (vocab for the padded vocab tensors) */
} bert_tensor;

/* One micro-batch, on the host: the packed tokens of n sequences. */
typedef struct {
    int n;                 /* sequences */
    int T;                 /* tokens: sum of lengths */
    int P;                 /* masked positions (MLM predictions) */
    int max_len;           /* longest sequence */
    const int32_t *ids;        /* (T) token ids */
    const int32_t *types;      /* (T) segment ids 0/1 */
    const int32_t *cu_seqlens; /* (n + 1) */
    const int32_t *mlm_rows;   /* (P) token rows (in 0..T) of the masked positions */
    const int32_t *mlm_labels; /* (P) original token ids */
    const int32_t *nsp_labels; /* (n) 1: the second segment is random (HF's label convention) */
} bert_batch;

typedef struct {
    int gelu_erf;          /* 1: exact erf GELU (kernels); 0: tanh form in the GEMM epilogue */
    int dropout;           /* 0: no dropout anywhere (the peer comparison) */
    uint64_t seed;         /* initialisation and dropout masks */
    int max_tokens;        /* activations sized for this many tokens per micro-batch at first */
    int grow_tokens;       /* a micro-batch of more tokens (up to this many) regrows them; 0: none */
    int max_seqs;          /* ... sequences */
    int max_preds;         /* ... masked positions */
    int fp8;               /* 1: the encoder's Linear forwards and data gradients as FP8 products (bf16
                              build only): E4M3 activations and weights, E5M2 gradients, per-tensor
                              delayed scaling (kernels.h fp8_scales_update); weight gradients stay bf16 */
    int last_heads;        /* 1: the last layer after its attention (output projection, FFN, LayerNorms)
                              on the rows the heads read only: the masked positions, then each
                              sequence's first token (P + n rows, when fewer than T); 0: every row */
} bert_options;

/* Timing hook: the trainer's tracer; called around every operator when set (else no-op). */
typedef struct {
    void (*begin)(void *ctx, int op, int layer, cudaStream_t s);
    void (*end)(void *ctx, int op, int layer, cudaStream_t s);
    void *ctx;
} bert_hooks;

/* FMHA length groups of the uploaded micro-batch: group g runs the attention of sequences
 * [seq_begin[g], seq_end[g]) (all at most max_len[g] long) as its own launch on stream stream[g]
 * (0: the step's stream; 1..BERT_MAX_STREAMS-1: the model's side streams, forked from and joined
 * back into the step's stream around each layer's attention). Groups partition 0..n; the mask
 * bits do not depend on the grouping, so any grouping computes the same values. */
#define BERT_MAX_GROUPS 64
#define BERT_MAX_STREAMS 8
typedef struct {
    int ngroups; /* 0 or 1: one launch over the whole micro-batch */
    int seq_begin[BERT_MAX_GROUPS], seq_end[BERT_MAX_GROUPS], max_len[BERT_MAX_GROUPS];
    int stream[BERT_MAX_GROUPS];
} bert_fmha_groups;

/* Timing hook for one FMHA group launch (grouped attention only; the op's begin/end hooks are
 * then not called for FMHA): begin on the group's stream before its launch, end after it. */
typedef struct {
    void (*begin)(void *ctx, int op, int layer, int group, int stream, int seq_begin, int seq_end,
                  cudaStream_t s);
    void (*end)(void *ctx, int op, int layer, int group, cudaStream_t s);
    void *ctx;
} bert_group_hooks;

/* Called by bert_backward, on stream s, as soon as the gradients of the flat range [begin, end)
 * are complete for this micro-batch (work enqueued on s before the call): the MLM/NSP heads first,
 * then each encoder layer from the last to the first, then the embeddings (which include the tied
 * decoder weight). The ranges come in descending, contiguous order and cover 0..N. */
typedef void (*bert_grads_ready_fn)(void *ctx, int64_t begin, int64_t end, cudaStream_t s);

typedef struct bert bert;

/* Allocates everything on the current device and initialises the weights (truncated normal of
 * std init_range within 2 std, LayerNorm gamma 1 beta 0, biases 0, padded vocab rows 0).
 * Returns NULL with a message in err (e.g. out of device memory, with the sizes). */
bert *bert_create(const model_cfg *cfg, const bert_options *opt, unpad_err *err);
void bert_free(bert *b);

const model_cfg *bert_cfg(const bert *b);
int bert_tensor_count(const bert *b);
const bert_tensor *bert_tensor_at(const bert *b, int i);
int64_t bert_param_count(const bert *b);   /* elements of the flat buffers (with padding) */
size_t bert_device_bytes(const bert *b);   /* parameters + optimizer + activations */
/* Tokens the activations hold now, and how often they were regrown (bert_batch_upload). */
void bert_activations(const bert *b, long *tokens, int *grown);
float *bert_master(bert *b);               /* (N) fp32, device */
float *bert_grad(bert *b);                 /* (N) fp32, device */
floatX *bert_work(bert *b);                /* (N) floatX, device: what the forward uses */
float *bert_lamb_m(bert *b);               /* (N) fp32, device */
float *bert_lamb_v(bert *b);               /* (N) fp32, device */
void bert_set_hooks(bert *b, const bert_hooks *h);
void bert_set_group_hooks(bert *b, const bert_group_hooks *h); /* NULL: none */
/* The FMHA grouping of the uploaded micro-batch (NULL: one launch). EINVAL if the groups do not
 * partition the micro-batch's sequences, a stream is out of range or a group's max_len is below
 * one of its lengths. bert_batch_upload resets it to one launch. */
int bert_set_fmha_groups(bert *b, const bert_fmha_groups *g, unpad_err *err);
/* The gradient-ready callback (NULL: none), for all-reduce buckets overlapped with backward. */
void bert_set_grads_ready(bert *b, bert_grads_ready_fn fn, void *ctx);
/* Dropout on (1, the default when the options ask for it) or off (0: evaluation). */
void bert_set_dropout(bert *b, int on);

/* Makes now the GEMM plans of every shape bucket that token or prediction counts in [lo, hi] reach,
 * from the products run so far, and launches each once on stream s (gemm.h gemm_ctx_warm; the
 * model's feature sizes stay fixed): call it after a first step, on the step's stream, so that
 * later steps never stop to ask cuBLASLt's heuristic or to load a kernel. Activations and
 * gradients hold scratch afterwards. */
int bert_gemm_warm(bert *b, int lo, int hi, cudaStream_t s, int *made, int *ran, unpad_err *err);

/* Times the candidates of the cached GEMM plans whose token or prediction count lies in [lo, hi]
 * and keeps the fastest (gemm.h gemm_ctx_tune; the model's feature sizes stay fixed): call it after
 * bert_gemm_warm, on the step's stream. */
int bert_gemm_tune(bert *b, int lo, int hi, const gemm_tune_opts *o, cudaStream_t s, gemm_tune_stats *st,
                   unpad_err *err);
/* The model's GEMM context (its presets are saved with checkpoints). */
gemm_ctx *bert_gemm(bert *b);

/* GEMM plans cached, products that needed an uncached plan of their exact shape (a stall of a
 * heuristic query each), shapes the warm-up missed (gemm_ctx_late) and plans evicted from the
 * table (gemm_ctx_evicted). */
void bert_gemm_counts(const bert *b, int *plans, int *fallbacks, int *late, int *evicted);
/* opt.fp8: the encoder's Linear products run in FP8 so far, and those run in bf16 while the first
 * forward and backward gathered the maxima the scales start from (0 and 0 without FP8). */
void bert_fp8_counts(const bert *b, long *fp8, long *calib);

/* Refreshes the floatX working copy from the fp32 master (after loading a checkpoint). */
void bert_sync_work(bert *b, cudaStream_t s);

/* Copies a micro-batch to the device (through pinned staging) on stream s. A micro-batch of more
 * tokens than the activations hold, up to opt.grow_tokens, first regrows them (bert_activations
 * says so): the device is drained, the arena freed and made again for max(T, 1.25 x the old
 * capacity) tokens. EINVAL if it exceeds what may be allocated or is malformed. The host waits only for the upload
 * before the previous one (two staging halves), so it can prepare the next micro-batch while the
 * device computes this one. */
int bert_batch_upload(bert *b, const bert_batch *mb, cudaStream_t s, unpad_err *err);

/* Micro-batches uploaded so far (bert_batch_upload): a pass captured into a CUDA graph computes
 * on the upload it followed, so it is launched only while this count is unchanged. */
long bert_uploads(const bert *b);
/* What a pass advances on the host: the pass count, the FP8 product counts, the FP8 start. A pass
 * captured and then not launched is taken back with bert_marks_undo (before: the marks read before
 * the capture, after: those read after it). */
typedef struct {
    long passes, f8_runs, f8_calib;
    int f8_ready;
} bert_marks;
void bert_marks_get(const bert *b, bert_marks *m);
void bert_marks_undo(bert *b, const bert_marks *before, const bert_marks *after);
/* Enqueues on s what the next forward would start with (the FP8 cast of the changed weights), so
 * that a forward captured afterwards holds only the pass itself. */
void bert_forward_prepare(bert *b, cudaStream_t s);

/* Forward of the uploaded micro-batch up to the losses. step seeds the dropout masks. */
void bert_forward(bert *b, uint64_t step, cudaStream_t s);
/* Backward into the gradient buffer: accumulate 0 writes every parameter's gradient (the first
 * micro-batch of a step; no zeroing pass needed), 1 adds to them (the later micro-batches).
 * mlm_scale = 1 / predictions of the global batch, nsp_scale = 1 / sequences of the global batch. */
void bert_backward(bert *b, float mlm_scale, float nsp_scale, int accumulate, cudaStream_t s);

/* Sums over the micro-batches since the last bert_stats_reset, and the global gradient norm of the
 * last bert_lamb_step (before clipping). Read with one copy to pinned memory that synchronises
 * the stream: the step's only wait for the device. */
#define BERT_STATS 5
typedef struct {
    double mlm_loss_sum, nsp_loss_sum, mlm_correct, nsp_correct;
    double grad_norm;
} bert_stats;
void bert_stats_reset(bert *b, cudaStream_t s);
/* Zeroes every parameter gradient (a step's start when micro-batches only accumulate). */
void bert_grad_zero(bert *b, cudaStream_t s);
/* Fills the gradients with NaN: a check that a step with written gradients (--grad-write on)
 * writes every one of them (a gradient left unwritten makes the norm NaN and stops the run). */
void bert_grad_poison(bert *b, cudaStream_t s);
void bert_stats_read(bert *b, bert_stats *out, cudaStream_t s);
/* The device address of the four sums (MLM loss, MLM correct, NSP loss, NSP correct; fp32), which
 * a data-parallel step adds up over its ranks before bert_stats_read. */
float *bert_stats_sums(bert *b);
/* A test hook (unpad-train --debug-nonfinite-step): makes the step's loss sum and its gradient NaN,
 * as a diverged step would; enqueued after the backward, before bert_lamb_step. */
void bert_force_nonfinite(bert *b, cudaStream_t s);

typedef struct {
    double lr, beta1, beta2, eps, weight_decay, max_grad_norm;
    int step; /* 1-based */
} bert_lamb_hparams;

/* One LAMB step over all tensors. The global gradient norm is kept for bert_stats_read. A step
 * whose loss sums or gradient norm are not finite changes no weight nor moment (kernels.h). */
void bert_lamb_step(bert *b, const bert_lamb_hparams *hp, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
