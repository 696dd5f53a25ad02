/* kernels.h — the C-callable launchers of the unpadded encoder's memory-bound kernels:
 * embedding, bias + dropout + residual + LayerNorm (and plain LayerNorm), bias + GELU / tanh,
 * bias gradients, masked-LM and next-sentence losses and accuracy, row gather/scatter, the fused
 * LAMB step, parameter initialisation, and the bf16 -> FP8 casts of FP8 GEMM operands.
 * (The FMHA and the cuBLASLt wrapper have their own headers.)
 *
 * Conventions shared by every launcher here:
 * - Unpadded layout: activations (T, H) row-major floatX, T = tokens of all sequences packed one
 *   after another; `cu_seqlens` (n + 1) int32 on the device, cu_seqlens[0] = 0, cu_seqlens[n] = T.
 * - All pointers are device pointers unless named *_host. floatX is the storage type of common.h
 *   (bf16; fp32 in the fp32 build).
 * - Statistics and accumulation in fp32. LayerNorm forward saves mean and rstd (T) fp32.
 * - Weight / bias / LayerNorm-parameter gradients are fp32 in the caller's (flat) gradient buffer.
 *   Launchers with an `accumulate` argument ADD (+=) to them when it is 1 (the later micro-batches
 *   and virtual ranks of a step) and WRITE them (=) when it is 0 (the first micro-batch of a step:
 *   no zeroing pass over the buffer needed); embedding_bwd always adds (see there).
 *   Activation gradients are floatX and are OVERWRITTEN (unless a name says _add).
 * - Column reductions (dgamma, dbeta, dbias, token-type grads) are deterministic: each block writes
 *   fp32 partials into `scratch`, a fixed-order pass adds them up; the number of blocks depends only
 *   on the shape. No float atomics, except in embedding_bwd's word table (see there).
 *   `scratch` (fp32, device) must hold the bytes the matching *_scratch_bytes() returns; launchers
 *   running concurrently on different streams need different scratch buffers.
 * - Dropout: mask bits come from dropout_keep(seed, stream_id, row * width + col, p) in dropout.h,
 *   regenerated in backward, never stored; kept elements are scaled by 1 / (1 - p); p = 0 disables.
 * - Limits (asserted by the launchers, which stop with file:line on violation): H % 8 == 0,
 *   H <= 4096 for row kernels; element-wise widths N % 8 == 0.
 * - Each launcher computes its grid, launches on `stream` and checks cudaGetLastError().
 *
 * This header compiles as C11 without the CUDA headers: cudaStream_t is declared the way
 * driver_types.h declares it (a repeated identical typedef is valid C11 and C++). */
#ifndef UNPAD_KERNELS_H
#define UNPAD_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct CUstream_st *cudaStream_t;

/* ---- scratch sizes ----------------------------------------------------------------------------- */
/* Fixed block count of every column-reduction kernel (the partials' first dimension). */
#define UNPAD_COLSUM_BLOCKS 528

UNPAD_EXTERN_C
size_t layernorm_bwd_scratch_bytes(int H);                 /* both LayerNorm backwards */
UNPAD_EXTERN_C
size_t bias_bwd_scratch_bytes(int N);                      /* bias_bwd, bias_gelu_bwd, bias_tanh_bwd */
UNPAD_EXTERN_C
size_t embedding_bwd_scratch_bytes(int T, int H, int type_vocab);
UNPAD_EXTERN_C
size_t lamb_scratch_bytes(int n_chunks);

/* ---- embedding (kernels/embedding.cu) ---------------------------------------------------------- */
/* out = dropout(LayerNorm(word[ids] + pos[position] + type[types]) * gamma + beta).
 * Position ids restart at 0 in every sequence and are derived from cu_seqlens (a binary search
 * per row), so no position array is needed; every length must be <= the position table's rows. */
UNPAD_EXTERN_C
void embedding_fwd(floatX *out,                 /* (T, H) */
                   float *mean, float *rstd,  /* (T) saved for backward */
                   const int32_t *ids,        /* (T) token ids, < vocab rows */
                   const int32_t *types,      /* (T) token-type ids, < type_vocab */
                   const int32_t *cu_seqlens, /* (n + 1) */
                   int n,                     /* sequences */
                   const floatX *word,          /* (V, H) */
                   const floatX *pos,           /* (max_position, H) */
                   const floatX *type,          /* (type_vocab, H) */
                   const floatX *gamma, const floatX *beta, /* (H) */
                   int T, int H, float eps, float p_drop, uint64_t seed, uint64_t stream_id,
                   cudaStream_t stream);

/* Backward of embedding_fwd. dy = dout (+ dout_add) is the gradient of `out`.
 * dword += (scatter by ids; 16-byte fp32 atomicAdd, so dword must be 16-byte aligned;
 *   NOT bitwise deterministic run to run),
 * dpos += and dtype += (deterministic: fixed-order sums over sequences / row blocks),
 * dgamma += and dbeta += (deterministic). The sum is recomputed from the tables.
 * Always adds: it touches only the rows of the batch's ids and positions, so a caller that writes
 * the step's first gradients zeroes these tables first (or, for dword, writes it another way: the
 * tied MLM decoder's weight-gradient product). */
UNPAD_EXTERN_C
void embedding_bwd(float *dword,              /* (V, H) += */
                   float *dpos,               /* (max_position, H) += */
                   float *dtype,              /* (type_vocab, H) += */
                   float *dgamma, float *dbeta, /* (H) += */
                   const floatX *dout,          /* (T, H) */
                   const floatX *dout_add,      /* (T, H) or NULL: a second gradient of `out` */
                   const int32_t *ids, const int32_t *types, /* (T) */
                   const int32_t *cu_seqlens, int n, int max_len, /* (n + 1); max_len >= every length */
                   const floatX *word, const floatX *pos, const floatX *type, const floatX *gamma,
                   const float *mean, const float *rstd, /* (T) from embedding_fwd */
                   int T, int H, int type_vocab, float p_drop, uint64_t seed, uint64_t stream_id,
                   float *scratch, cudaStream_t stream);

/* ---- LayerNorm (kernels/layernorm.cu) ---------------------------------------------------------- */
/* out = LayerNorm(x) * gamma + beta (the MLM head transform). */
UNPAD_EXTERN_C
void layernorm_fwd(floatX *out,                 /* (T, H) */
                   float *mean, float *rstd,  /* (T) */
                   const floatX *x,             /* (T, H) */
                   const floatX *gamma, const floatX *beta, /* (H) */
                   int T, int H, float eps, cudaStream_t stream);

/* dx = LayerNorm backward of dout (overwritten); dgamma (+)= ; dbeta (+)= (accumulate: 1 adds,
 * 0 writes). */
UNPAD_EXTERN_C
void layernorm_bwd(floatX *dx,                  /* (T, H) */
                   float *dgamma, float *dbeta, /* (H) (+)= */
                   const floatX *dout,          /* (T, H) */
                   const floatX *x,             /* (T, H) the forward input */
                   const float *mean, const float *rstd, /* (T) */
                   const floatX *gamma,         /* (H) */
                   int T, int H, float *scratch, int accumulate, cudaStream_t stream);

/* r = dropout(x + bias) + residual;  out = LayerNorm(r) * gamma + beta.
 * ln_in receives r (floatX) for the backward. bias may be NULL (no bias). */
UNPAD_EXTERN_C
void bias_dropout_residual_layernorm_fwd(
    floatX *out,                 /* (T, H) */
    floatX *ln_in,               /* (T, H) r, saved for backward */
    float *mean, float *rstd,  /* (T) */
    const floatX *x,             /* (T, H) GEMM output without its bias */
    const floatX *bias,          /* (H) or NULL */
    const floatX *residual,      /* (T, H) */
    const floatX *gamma, const floatX *beta, /* (H) */
    int T, int H, float eps, float p_drop, uint64_t seed, uint64_t stream_id, cudaStream_t stream);

/* The same, also writing out8 (T, H): the E4M3 bytes cast_fp8 makes of out as stored, times
 * *scale8, max |out| folded into *amax8 (the FP8 operand of the next product; out8 8-byte aligned). */
UNPAD_EXTERN_C
void bias_dropout_residual_layernorm_fwd_fp8(floatX *out, floatX *ln_in, float *mean, float *rstd, const floatX *x,
                                             const floatX *bias, const floatX *residual, const floatX *gamma,
                                             const floatX *beta, int T, int H, float eps, float p_drop, uint64_t seed,
                                             uint64_t stream_id, uint8_t *out8, float *amax8, const float *scale8,
                                             cudaStream_t stream);

/* Backward: dy = dout (+ dout_add) is the gradient of `out` (e.g. dout from the next GEMM's input
 * gradient, dout_add the next residual branch's dresidual). dr = LayerNorm backward of dy;
 * dresidual = dr; dx = dr * keep / (1 - p) (the gradient of the GEMM output);
 * dbias (+)= colsum(dx) (if dbias), dgamma (+)= , dbeta (+)= (accumulate: 1 adds, 0 writes).
 * Any of dresidual / dx may be NULL. */
UNPAD_EXTERN_C
void bias_dropout_residual_layernorm_bwd(
    floatX *dx,                  /* (T, H) or NULL */
    floatX *dresidual,           /* (T, H) or NULL */
    float *dbias,              /* (H) (+)= or NULL */
    float *dgamma, float *dbeta, /* (H) (+)= */
    const floatX *dout,          /* (T, H) */
    const floatX *dout_add,      /* (T, H) or NULL */
    const floatX *ln_in,         /* (T, H) from the forward */
    const float *mean, const float *rstd, /* (T) */
    const floatX *gamma,         /* (H) */
    int T, int H, float p_drop, uint64_t seed, uint64_t stream_id,
    float *scratch, int accumulate, cudaStream_t stream);
/* The same, also writing dx8 (T, H): the E5M2 bytes cast_fp8 makes of dx as stored (dx not NULL). */
UNPAD_EXTERN_C
void bias_dropout_residual_layernorm_bwd_fp8(floatX *dx, floatX *dresidual, float *dbias, float *dgamma, float *dbeta,
                                             const floatX *dout, const floatX *dout_add, const floatX *ln_in,
                                             const float *mean, const float *rstd, const floatX *gamma, int T, int H,
                                             float p_drop, uint64_t seed, uint64_t stream_id, float *scratch,
                                             int accumulate, uint8_t *dx8, float *amax8, const float *scale8,
                                             cudaStream_t stream);

/* ---- bias + activation (kernels/gelu.cu) ------------------------------------------------------- */
/* GELU is the exact erf form used by BERT: gelu(z) = z * 0.5 * (1 + erf(z / sqrt 2)). */
UNPAD_EXTERN_C
void bias_gelu_fwd(floatX *out,                 /* (T, N) gelu(x + bias) */
                   const floatX *x,             /* (T, N) GEMM output without bias */
                   const floatX *bias,          /* (N) */
                   int T, int N, cudaStream_t stream);
/* dx = dout * gelu'(x + bias) (dx may alias dout); dbias (+)= colsum(dx) if dbias (accumulate: 1
 * adds, 0 writes). */
UNPAD_EXTERN_C
void bias_gelu_bwd(floatX *dx,                  /* (T, N) */
                   float *dbias,              /* (N) (+)= or NULL */
                   const floatX *dout,          /* (T, N) */
                   const floatX *x, const floatX *bias, /* as given to bias_gelu_fwd */
                   int T, int N, float *scratch, int accumulate, cudaStream_t stream);
/* The NSP pooler: out = tanh(x + bias). */
UNPAD_EXTERN_C
void bias_tanh_fwd(floatX *out, const floatX *x, const floatX *bias, /* (T, N), (T, N), (N) */
                   int T, int N, cudaStream_t stream);
/* dx = dout * (1 - out^2) (may alias dout); dbias (+)= colsum(dx) if dbias (accumulate: 1 adds,
 * 0 writes). */
UNPAD_EXTERN_C
void bias_tanh_bwd(floatX *dx, float *dbias,    /* (T, N), (N) (+)= */
                   const floatX *dout, const floatX *out, /* (T, N) */
                   int T, int N, float *scratch, int accumulate, cudaStream_t stream);
/* The QKV bias gradient, dout (T, 3H) = [dQ | dK | dV]: dbias[0, H) and dbias[2H, 3H) (+)= the column
 * sums of dQ and dV (accumulate: 1 adds, 0 writes); dbias[H, 2H), the key bias's, is written 0 (accumulate
 * 0) or left as it is (1). Its gradient is zero in exact arithmetic: q_i . b_k adds one constant to all
 * of query i's scores, which its softmax ignores; summed, dK's columns are rounding noise, which Adam's
 * normalisation would turn into updates. Without dout8 the key columns are not read. With dout8 (FP8)
 * also dout8 = the E5M2 bytes cast_fp8 makes of all of dout (times *scale8, 8-byte aligned) and max |dout|
 * folded into *amax8 (FP8: one read for the bias gradient and dQKV's copy). H % 8 == 0.
 * Reference: bias_bwd_ref over the query and value columns. */
UNPAD_EXTERN_C
void bias_bwd_qkv(float *dbias, uint8_t *dout8, float *amax8, const float *scale8, const floatX *dout, int T,
                  int H, float *scratch, int accumulate, cudaStream_t stream);
/* dx = dout * gelu_tanh'(x), x the tanh GELU's input with its bias (FFN1's, from the product's
 * epilogue), and dbias (+)= colsum(dx) (NULL: none); with dx8 != NULL also the E5M2 bytes cast_fp8
 * makes of dx as stored (times *scale8, 8-byte aligned), max |dx| folded into *amax8: the FP8
 * operand of the next data gradient without reading dx back; with h != NULL also h = gelu_tanh(x),
 * the forward's output again (where the forward kept only its FP8 copy). N % 8 == 0. In place
 * (dx = dout, h = x: each element is read before it is written, by the same thread) is allowed.
 * Reference: gelu_tanh_bwd_ref, gelu_tanh_ref, bias_bwd_ref, cast_fp8_ref. */
UNPAD_EXTERN_C
void bias_gelu_tanh_bwd(floatX *dx, float *dbias, uint8_t *dx8, float *amax8, const float *scale8, floatX *h,
                        const floatX *dout, const floatX *x, int T, int N, float *scratch, int accumulate,
                        cudaStream_t stream);
/* dbias (+)= colsum(dout), for biases whose GEMM epilogue did not produce it (accumulate: 1 adds,
 * 0 writes). Any N >= 1. */
UNPAD_EXTERN_C
void bias_bwd(float *dbias,                   /* (N) (+)= */
              const floatX *dout,               /* (T, N) */
              int T, int N, float *scratch, int accumulate, cudaStream_t stream);

/* dx = dout * gelu_tanh'(x) element-wise, gelu_tanh(z) = z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)));
 * dx may alias dout. (The forward runs in the GEMM epilogue.) */
UNPAD_EXTERN_C
void gelu_tanh_bwd(floatX *dx, const floatX *dout, const floatX *x, /* (n) each */
                   int64_t n, cudaStream_t stream);

/* ---- losses and row gather (kernels/loss.cu) --------------------------------------------------- */
/* out[i] = in[rows[i]] (masked positions -> MLM head, cu_seqlens[0..n-1] -> CLS rows). */
UNPAD_EXTERN_C
void rows_gather(floatX *out,                   /* (P, H) */
                 const floatX *in,              /* (T, H) */
                 const int32_t *rows,         /* (P) global row indices < T */
                 int P, int H, cudaStream_t stream);
/* dst[rows[i]] += src[i] (floatX, fp32 add); rows must be distinct within one call. */
UNPAD_EXTERN_C
void rows_scatter_add(floatX *dst,              /* (T, H) */
                      const floatX *src,        /* (P, H) */
                      const int32_t *rows,    /* (P) */
                      int P, int H, cudaStream_t stream);

/* Masked-LM softmax cross-entropy over the first V of Vpad columns (padded columns ignored).
 * loss[i] = logsumexp(logits[i, :V]) - logits[i, labels[i]]; lse[i] saved for backward.
 * labels[i] < 0 marks an ignored row: loss 0, gradient 0. Vpad % 8 == 0, V <= Vpad. */
UNPAD_EXTERN_C
void mlm_xent_fwd(float *loss,                /* (P) */
                  float *lse,                 /* (P) */
                  const floatX *logits,         /* (P, Vpad) */
                  const int32_t *labels,      /* (P) */
                  int P, int V, int Vpad, cudaStream_t stream);
/* dlogits = scale * (softmax(logits) - onehot(label)), padded columns written 0.
 * scale = 1 / (number of predictions in the GLOBAL batch). dlogits may alias logits. */
UNPAD_EXTERN_C
void mlm_xent_bwd(floatX *dlogits,              /* (P, Vpad) */
                  const floatX *logits,         /* (P, Vpad) */
                  const float *lse,           /* (P) */
                  const int32_t *labels,      /* (P) */
                  float scale, int P, int V, int Vpad, cudaStream_t stream);
/* Next-sentence loss, 2 classes, forward and backward together:
 * loss[i] = lse - logits[i, label];  dlogits = scale * (softmax - onehot) (if dlogits). */
UNPAD_EXTERN_C
void nsp_xent_fwd_bwd(float *loss,            /* (n) */
                      floatX *dlogits,          /* (n, 2) or NULL */
                      const floatX *logits,     /* (n, 2) */
                      const int32_t *labels,  /* (n) 0 or 1 */
                      float scale, int n, cudaStream_t stream);
/* out[0] = sum of in[0..n) in a fixed order (one block): loss totals. */
UNPAD_EXTERN_C
void reduce_sum_f32(float *out,               /* (1) */
                    const float *in,          /* (n) */
                    int n, cudaStream_t stream);

/* correct[i] = 1 if the argmax over the first V columns of logits[i] (the smallest index on ties)
 * equals labels[i], else 0 (labels[i] < 0: 0). V <= Vpad. */
UNPAD_EXTERN_C
void mlm_correct(float *correct,              /* (P) */
                 const floatX *logits,        /* (P, Vpad) */
                 const int32_t *labels,       /* (P) */
                 int P, int V, int Vpad, cudaStream_t stream);
/* correct[i] = 1 if (logits[i, 1] > logits[i, 0]) equals labels[i] (0 or 1), else 0. */
UNPAD_EXTERN_C
void nsp_correct(float *correct,              /* (n) */
                 const floatX *logits,        /* (n, 2) */
                 const int32_t *labels,       /* (n) */
                 int n, cudaStream_t stream);
/* acc[k] += the sum of vector k, k = 0..3 (MLM loss, MLM correct, NSP loss, NSP correct), by one
 * block in a fixed order (bitwise reproducible). P or n may be 0. */
UNPAD_EXTERN_C
void stats_accumulate(float *acc,             /* (4) += */
                      const float *mlm_loss, const float *mlm_correct, /* (P) */
                      int P,
                      const float *nsp_loss, const float *nsp_correct, /* (n) */
                      int n, cudaStream_t stream);

/* ---- LAMB (kernels/lamb.cu) -------------------------------------------------------------------- */
/* Every parameter tensor is a slice of ONE flat buffer per kind: fp32 master, floatX working copy,
 * fp32 gradient, fp32 m and v, all of N elements with the same offsets. */
typedef struct {
    int64_t offset;       /* first element of the tensor in the flat buffers */
    int64_t size;         /* elements */
    int32_t weight_decay; /* 1: decoupled weight decay applies (weights); 0: biases, LayerNorm */
    int32_t chunk_begin;  /* filled by lamb_tensors_chunk(): the tensor's first chunk */
} lamb_tensor;

typedef struct {
    float lr;             /* this step's learning rate (the caller's schedule) */
    float beta1;          /* 0.9 */
    float beta2;          /* 0.999 */
    float eps;            /* 1e-6 */
    float weight_decay;   /* 0.01 */
    float max_grad_norm;  /* 1.0: gradients scaled by min(1, max_grad_norm / global norm) */
    int step;             /* 1-based step number, for bias correction */
} lamb_hparams;

/* Elements per chunk: each block of the LAMB kernels handles one chunk of one tensor. */
#define UNPAD_LAMB_CHUNK 16384

/* Host: fills t[i].chunk_begin for n tensors and returns the total number of chunks. Copy the
 * table to the device afterwards. */
UNPAD_EXTERN_C
int lamb_tensors_chunk(lamb_tensor *t, int n);

/* One LAMB step over all tensors (NVIDIA/MLPerf form):
 *   g = grad * min(1, max_grad_norm / ||grad||_2 over all tensors)
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   u = (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps) + wd * w   (wd only if flagged)
 *   w -= lr * (||w|| > 0 && ||u|| > 0 ? ||w|| / ||u|| : 1) * u   (norms per tensor)
 *   work = floatX(w).  grad is left untouched (the next step's first micro-batch overwrites it).
 * When the global norm or one of guard[0..n_guard) (device; e.g. the step's loss sums) is not
 * finite, the step is skipped: master, work, m and v stay as they were (grad_norm is still
 * written). All norms are fixed-order reductions (bitwise reproducible). */
UNPAD_EXTERN_C
void lamb_update(float *master,               /* (N) fp32 */
                 floatX *work,                  /* (N) floatX */
                 float *m, float *v,          /* (N) fp32 */
                 const float *grad,           /* (N) fp32 */
                 const lamb_tensor *tensors,  /* (n_tensors) device copy, chunked */
                 int n_tensors, int n_chunks, lamb_hparams hp,
                 float *grad_norm,            /* (1) receives the global norm before clipping, or NULL */
                 const float *guard, int n_guard, /* (n_guard) or NULL, 0 */
                 float *scratch, cudaStream_t stream);

/* out = floatX(in): the initial working copy of the master weights. */
UNPAD_EXTERN_C
void convert_f32_to_floatX(floatX *out, const float *in, int64_t n, cudaStream_t stream);

/* ---- FP8 casts (kernels/fp8.cu) ---------------------------------------------------------------- */
/* The operands of FP8 GEMMs (the trainer's --fp8 on, bench_gemm --fp8). Input bf16 in both builds.
 * Per-tensor scaling: y = sat(x * scale) in fp32 (x * scale rounded to fp32, then to FP8 by round
 * to nearest even; values beyond the format's largest finite, infinities too, become that value
 * with their sign; NaN stays NaN; the sign of a zero is kept). *amax = max(*amax, max |x| over the input), NaNs ignored: the caller zeroes it for
 * this tensor's own maximum (amax NULL: not reduced). Any rows, cols >= 1; the fast paths need
 * 16-byte aligned pointers and (cast_transpose_fp8) cols % 8 == 0 and ld_t % 16 == 0, the rest runs
 * one element at a time. */
typedef enum { FP8_E4M3 = 0, FP8_E5M2 = 1 } fp8_format; /* max finite 448 / 57344 */

/* out (rows, cols) FP8 bytes. */
UNPAD_EXTERN_C
void cast_fp8(uint8_t *out,                   /* (rows, cols) */
              float *amax,                    /* (1) max= , or NULL */
              const bf16 *in,                 /* (rows, cols) */
              const float *scale,             /* (1) device */
              int rows, int cols, fp8_format fmt, cudaStream_t stream);
/* out as cast_fp8, and out_t its transpose: out_t[c * ld_t + r] = out[r * cols + c]; the bytes
 * [rows, ld_t) of each out_t row are not written (a K padded to 16 for the GEMM stays as the caller
 * set it). */
UNPAD_EXTERN_C
void cast_transpose_fp8(uint8_t *out,         /* (rows, cols) */
                        uint8_t *out_t,       /* (cols, ld_t), ld_t >= rows */
                        int ld_t,
                        float *amax,          /* (1) max= , or NULL */
                        const bf16 *in,       /* (rows, cols) */
                        const float *scale,   /* (1) device */
                        int rows, int cols, fp8_format fmt, cudaStream_t stream);

/* Many cast_transpose_fp8 calls in one launch (the FP8 trainer's weights, once a step): items a
 * device array of n tensors, each cast as cast_transpose_fp8 would (same bytes, same amax), every
 * one of the fast path's shape (fp8_cast_item_ok: cols % 8 == 0, ld_t % 16 == 0, in 16-byte and out
 * 8-byte aligned, out_t 16-byte aligned); max_tiles: the most 128 x 128 tiles of one tensor
 * (ceil(rows / 128) ceil(cols / 128)). */
typedef struct {
    uint8_t *out, *out_t;
    int ld_t;
    float *amax;
    const bf16 *in;
    const float *scale;
    int rows, cols;
} fp8_cast_item;
UNPAD_EXTERN_C
void cast_transpose_fp8_batch(const fp8_cast_item *items, int n, int max_tiles, fp8_format fmt, cudaStream_t stream);
UNPAD_EXTERN_C
int fp8_cast_item_ok(const fp8_cast_item *it);

/* Delayed scaling (TransformerEngine's recipe, with power-of-two scales): tensor i keeps the
 * maxima |x| of its last `len` steps in history (n, len); once a step fp8_scales_update moves amax[i]
 * (what the casts reduced since the last update; a non-finite one counts as 0) into slot pos of
 * its history (into every slot when init: the first maxima seen), zeroes amax[i], and where the
 * history's maximum m is finite and > 0 sets scale[i] = 2^k, the largest k in [-126, 126] with
 * m 2^k <= the format's largest finite (fmt[i]: FP8_E4M3 448, FP8_E5M2 57344), inv[8 i] = 2^-k (the
 * dequantization scale cuBLASLt reads) and inv[8 i + 4] = 2^k (the scale of a product's FP8 output),
 * each 16-byte aligned as cuBLASLt needs; elsewhere all three are left as they are.
 * Power-of-two scales make the scaling itself exact. Reference: fp8_scales_update_ref. */
#define FP8_HISTORY 16
/* amax[i * stride + offset] = max(that, src[i * src_stride]), then that src = 0, for i < n: maxima
 * a product wrote (cuBLASLt's amax of an FP8 output is set, not folded) moved into the running ones. */
UNPAD_EXTERN_C
void fp8_amax_fold(float *amax, int stride, int offset, float *src, int src_stride, int n, cudaStream_t stream);
UNPAD_EXTERN_C
void fp8_scales_update(float *amax, float *history, float *scale, float *inv, const uint8_t *fmt, int n, int len,
                       int pos, int init, cudaStream_t stream);

/* ---- initialisation (kernels/init.cu) ---------------------------------------------------------- */
/* Redraws of the truncated normal before an element is left at 0 (P(all rejected) = 0.05^64). */
#define INIT_TRUNC_DRAWS 64
/* w[i] = std * z_i, z_i a standard normal truncated to [-2, 2] (redrawn outside), a pure function
 * of (seed, id, i): draw k of element i hashes (seed, id * INIT_TRUNC_DRAWS + k, i) into two
 * 24-bit uniforms for Box-Muller. */
UNPAD_EXTERN_C
void init_trunc_normal(float *w,              /* (n) */
                       int64_t n, float std, uint64_t seed, uint64_t id, cudaStream_t stream);
/* w[i] = v. */
UNPAD_EXTERN_C
void fill_f32(float *w, int64_t n, float v, cudaStream_t stream); /* (n) */
/* Keeps the stream busy for ns nanoseconds (one thread on the GPU's timer), so that the host can
 * enqueue the commands behind it before the GPU reaches them (a diagnostic of host-bound steps). */
UNPAD_EXTERN_C
void hold_stream(uint64_t ns, cudaStream_t stream);

#endif
