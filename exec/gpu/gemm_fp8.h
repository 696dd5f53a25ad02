/* gemm_fp8.h — FP8 matrix products over cuBLASLt, for measuring what FP8 GEMMs would save
 * (bench_gemm --fp8) and checking them (test_fp8), one plan per shape. The trainer's FP8 products
 * (--fp8 on) go through gemm.h's gemm_run_fp8 and its plan cache instead.
 *
 * On Hopper cuBLASLt runs FP8 products only with both operands K-major (its "TN" layout: in its
 * column-major terms transa = T, transb = N), so in the row-major terms of gemm.h every product here is
 *   D (M, N) = alpha sa sb A (M, K) B (N, K)^T + beta D   (+ epilogue)
 * with A and B stored row-major, K contiguous, rows lda and ldb bytes apart (>= K; cuBLASLt wants
 * multiples of 16), and sa, sb the dequantization scales (device floats: 1 / the scale each
 * operand was cast with, kernels.h cast_fp8), each 16-byte aligned: cuBLASLt's heuristic accepts
 * others and cublasLtMatmul then refuses them (NOT_SUPPORTED), so gemm_fp8_create refuses them first.
 * A BERT Linear layer (W (out, in)) then takes:
 *   forward      Y (T, out)  = X (T, in) W^T           A = X (e4m3),    B = W (e4m3)
 *   data grad    dX (T, in)  = dY (T, out) W           A = dY (e5m2),   B = W^T (in, out) (e4m3):
 *                                                      a transposed copy of the weight
 *   weight grad  dW (out, in) = dY^T X (fp32)          A = dY^T (out, T) (e5m2), B = X^T (in, T)
 *                                                      (e4m3): transposed copies of both, K = T
 * (cast_transpose_fp8 writes both copies of a tensor in one pass; cuBLASLt 13.1 on an H100 has no
 * FP8 algorithm for a K of 12,900, so the bench pads K to 16 with zero columns). Accumulation is fp32
 * (CUBLAS_COMPUTE_32F); D is bf16 (C = D, beta 1 adds) or fp32; the epilogues are gemm.h's, with
 * a bf16 bias and a bf16 aux. fast_accum sets CUBLASLT_MATMUL_DESC_FAST_ACCUM: the tensor cores'
 * partial sums are not promoted to fp32 every few K steps (faster, less accurate; TransformerEngine
 * uses it in the forward only). */
#ifndef UNPAD_GEMM_FP8_H
#define UNPAD_GEMM_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gemm.h"
#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int M, N, K;
    int lda, ldb;            /* row pitches of A and B in elements (0: K) */
    fp8_format a_fmt, b_fmt; /* cuBLASLt refuses E5M2 x E5M2 */
    gemm_dtype d_type;       /* GEMM_BF16 or GEMM_F32 */
    gemm_epilogue epi;       /* GEMM_EPI_NONE, _BIAS, _GELU_BIAS or _DGELU */
    int fast_accum;
} gemm_fp8_shape;

typedef struct gemm_fp8 gemm_fp8;

/* The plan of shape s, its algorithm the heuristic's first choice for these scale, bias and aux
 * pointers (kept in the plan) and a workspace of ws_bytes; NULL with the reason in why when
 * cuBLASLt has none (an epilogue or type it does not run in FP8, say). */
gemm_fp8 *gemm_fp8_create(cublasLtHandle_t lt, const gemm_fp8_shape *s, const float *sa, const float *sb,
                          const void *bias, void *aux, void *workspace, size_t ws_bytes, char *why, size_t nwhy);
/* D = alpha sa sb A B^T + beta D (+ epilogue) on stream; A and B FP8 bytes as the shape says.
 * Returns cuBLASLt's status: it can refuse at run time (CUBLAS_STATUS_NOT_SUPPORTED, nothing written)
 * a product whose plan its heuristic gave, so a caller tries a new plan once and falls back (a token
 * count padded to 16, say) where it is refused. */
int gemm_fp8_run(gemm_fp8 *p, const uint8_t *A, const uint8_t *B, void *D, float alpha, float beta,
                 cudaStream_t stream);
void gemm_fp8_free(gemm_fp8 *p);

#ifdef __cplusplus
}
#endif

#endif
