/* gemm_fp8.c — the FP8 products of gemm_fp8.h: one cuBLASLt plan per shape (no cache: the bench
 * and the test make each plan once). Row-major D (M, N) = A (M, K) B (N, K)^T is run as the
 * column-major D^T (N, M) = B (K x N, transposed) ^T A (K x M), so cuBLASLt's A is our B and its B
 * our A, as in gemm.c. */
#include <string.h>

#include "gpu/gemm_fp8.h"

struct gemm_fp8 {
    cublasLtHandle_t lt;
    gemm_fp8_shape s;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld; /* cuBLASLt's A (our B), B (our A), C = D */
    cublasLtMatmulAlgo_t algo;
    void *workspace;
    size_t ws_bytes;
};

static cudaDataType_t fp8_type(fp8_format f) { return f == FP8_E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

static void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v, size_t n)
{
    cublasCheck(cublasLtMatmulDescSetAttribute(d, a, v, n));
}

void gemm_fp8_free(gemm_fp8 *p)
{
    if (!p)
        return;
    cublasLtMatrixLayoutDestroy(p->la);
    cublasLtMatrixLayoutDestroy(p->lb);
    cublasLtMatrixLayoutDestroy(p->ld);
    cublasLtMatmulDescDestroy(p->desc);
    free(p);
}

gemm_fp8 *gemm_fp8_create(cublasLtHandle_t lt, const gemm_fp8_shape *s, const float *sa, const float *sb,
                          const void *bias, void *aux, void *workspace, size_t ws_bytes, char *why, size_t nwhy)
{
    if (s->epi != GEMM_EPI_NONE && s->epi != GEMM_EPI_BIAS && s->epi != GEMM_EPI_GELU_BIAS &&
        s->epi != GEMM_EPI_DGELU) {
        snprintf(why, nwhy, "epilogue %d is not one of none, bias, gelu+bias, dgelu", (int)s->epi);
        return NULL;
    }
    if (((uintptr_t)sa | (uintptr_t)sb) & 15) {
        snprintf(why, nwhy, "the scale pointers must be 16-byte aligned");
        return NULL;
    }
    gemm_fp8 *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(why, nwhy, "out of host memory");
        return NULL;
    }
    p->lt = lt;
    p->s = *s;
    p->workspace = workspace;
    p->ws_bytes = ws_bytes;
    int64_t lda = s->lda ? s->lda : s->K, ldb = s->ldb ? s->ldb : s->K;
    cublasCheck(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n);
    /* cuBLASLt's A is our B: its scale is sb */
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof sb);
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof sa);
    int8_t fast = s->fast_accum ? 1 : 0;
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast);
    cublasLtEpilogue_t epi = gemm_lt_epilogue(s->epi);
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    const int32_t bf16_type = CUDA_R_16BF;
    if (s->epi == GEMM_EPI_BIAS || s->epi == GEMM_EPI_GELU_BIAS) {
        set_attr(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bf16_type, sizeof bf16_type);
        set_attr(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    }
    if (s->epi == GEMM_EPI_GELU_BIAS || s->epi == GEMM_EPI_DGELU) {
        int64_t ld_aux = s->N; /* aux (M, N) row-major: N rows of the column-major D */
        set_attr(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
        set_attr(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof ld_aux);
        /* in FP8 products aux has a type of its own (by default D's) */
        set_attr(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &bf16_type, sizeof bf16_type);
    }
    cudaDataType_t td = s->d_type == GEMM_F32 ? CUDA_R_32F : CUDA_R_16BF;
    cublasCheck(cublasLtMatrixLayoutCreate(&p->la, fp8_type(s->b_fmt), s->K, s->N, ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->lb, fp8_type(s->a_fmt), s->K, s->M, lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->ld, td, s->N, s->M, s->N));

    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = ws_bytes;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                     sizeof ws));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->la, p->lb, p->ld, p->ld, pref, 1, &res,
                                                       &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
        snprintf(why, nwhy, "no FP8 algorithm (heuristic status %d: %s)", (int)st, cublasGetStatusString(st));
        gemm_fp8_free(p);
        return NULL;
    }
    p->algo = res.algo;
    return p;
}

int gemm_fp8_run(gemm_fp8 *p, const uint8_t *A, const uint8_t *B, void *D, float alpha, float beta,
                 cudaStream_t stream)
{
    return (int)cublasLtMatmul(p->lt, p->desc, &alpha, B, p->la, A, p->lb, &beta, D, p->ld, D, p->ld, &p->algo,
                               p->workspace, p->ws_bytes, stream);
}
