/* gemm_ref.h — plain-C reference of the trainer's matrix products (exec/gpu/gemm.h), in double
 * precision over float arrays, row-major: D (M, N) = alpha op(A) op(B) + beta D with the same
 * epilogues (bias, GELU with its input saved, GELU derivative, bias gradients). GELU is the tanh
 * form (what cuBLASLt's epilogue computes). */
#ifndef UNPAD_GEMM_REF_H
#define UNPAD_GEMM_REF_H

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GEMM_REF_NONE = 0,
    GEMM_REF_BIAS,        /* D = AB + bias (N)                                          */
    GEMM_REF_GELU_BIAS,   /* aux = AB + bias; D = gelu(aux)                              */
    GEMM_REF_DGELU,       /* D = AB * gelu'(aux)                                         */
    GEMM_REF_DGELU_BGRAD, /* as DGELU; bias (N) = sum over rows of D                     */
    GEMM_REF_BGRADB,      /* D = AB; bias (M) = sum over K of op(A)                       */
};

/* trans_a: A stored (K, M); trans_b: B stored (N, K). bias and aux as the epilogue needs them. */
void gemm_ref(int M, int N, int K, int trans_a, int trans_b, const float *A, const float *B,
              float *D, float alpha, float beta, int epi, float *bias, float *aux);

/* gelu(x) in its tanh form and its derivative. */
double gelu_tanh_ref(double x);
double gelu_tanh_grad_ref(double x);

#ifdef __cplusplus
}
#endif

#endif
