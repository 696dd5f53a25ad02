/* glue.h — the trainer's small kernels that belong to no kernel family: parameter initialisation,
 * MLM / NSP accuracy, loss totals, and the tanh-GELU backward of the MLM head transform (the
 * encoder's tanh-GELU runs inside the GEMM epilogues). All launch on `stream` and check the launch. */
#ifndef UNPAD_GLUE_H
#define UNPAD_GLUE_H

#include <stdint.h>

#include "common.h"

typedef struct CUstream_st *cudaStream_t;

#ifdef __cplusplus
extern "C" {
#endif

/* w[i] = std * z_i, z_i standard normal truncated to [-2, 2], a pure function of (seed, id, i). */
void glue_init_trunc_normal(float *w, int64_t n, float std, uint64_t seed, uint64_t id,
                            cudaStream_t stream);
/* w[i] = v */
void glue_fill_f32(float *w, int64_t n, float v, cudaStream_t stream);

/* correct[i] = 1 if argmax over the first V columns of logits[i] equals labels[i] (labels < 0: 0). */
void glue_mlm_correct(float *correct,          /* (P) */
                      const floatX *logits,      /* (P, Vpad) */
                      const int32_t *labels,   /* (P) */
                      int P, int V, int Vpad, cudaStream_t stream);
/* correct[i] = 1 if argmax of logits[i, 0..1] equals labels[i]. */
void glue_nsp_correct(float *correct, const floatX *logits, const int32_t *labels, int n,
                      cudaStream_t stream);

/* acc[k] += sum of vector k, k = 0..3 (MLM loss, MLM correct, NSP loss, NSP correct); one block,
 * fixed order (bitwise reproducible). Any vector may have length 0. */
void glue_stats_accumulate(float *acc,         /* (4) */
                           const float *mlm_loss, const float *mlm_correct, int P,
                           const float *nsp_loss, const float *nsp_correct, int n,
                           cudaStream_t stream);

/* dx = dout * gelu_tanh'(x), element-wise (dx may alias dout). */
void glue_gelu_tanh_bwd(floatX *dx, const floatX *dout, const floatX *x, int64_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
