/* ref.h — plain-C references of the launchers in kernels/kernels.h: the same names plus _ref, the
 * same arguments in the same order less the scratch buffer and the stream, float where the
 * launcher has bf16. They accumulate in double and define what the CUDA kernels must compute;
 * gradients accumulate (+=) exactly as the launchers do. */
#ifndef UNPAD_KERNELS_REF_H
#define UNPAD_KERNELS_REF_H

#include <stdint.h>

#include "kernels.h" /* lamb_tensor, lamb_hparams, fp8_format; compiles without the CUDA headers */

#ifdef __cplusplus
extern "C" {
#endif

/* embedding_ref.c */
void embedding_fwd_ref(float *out, float *mean, float *rstd, const int32_t *ids,
                       const int32_t *types, const int32_t *cu_seqlens, int n, const float *word,
                       const float *pos, const float *type, const float *gamma, const float *beta,
                       int T, int H, float eps, float p_drop, uint64_t seed, uint64_t stream_id);
void embedding_bwd_ref(float *dword, float *dpos, float *dtype, float *dgamma, float *dbeta,
                       const float *dout, const float *dout_add, const int32_t *ids,
                       const int32_t *types, const int32_t *cu_seqlens, int n, int max_len,
                       const float *word, const float *pos, const float *type, const float *gamma,
                       const float *mean, const float *rstd, int T, int H, int type_vocab,
                       float p_drop, uint64_t seed, uint64_t stream_id);

/* layernorm_ref.c */
void layernorm_fwd_ref(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                       const float *beta, int T, int H, float eps);
void layernorm_bwd_ref(float *dx, float *dgamma, float *dbeta, const float *dout, const float *x,
                       const float *mean, const float *rstd, const float *gamma, int T, int H);
void bias_dropout_residual_layernorm_fwd_ref(float *out, float *ln_in, float *mean, float *rstd,
                                             const float *x, const float *bias,
                                             const float *residual, const float *gamma,
                                             const float *beta, int T, int H, float eps,
                                             float p_drop, uint64_t seed, uint64_t stream_id);
void bias_dropout_residual_layernorm_bwd_ref(float *dx, float *dresidual, float *dbias,
                                             float *dgamma, float *dbeta, const float *dout,
                                             const float *dout_add, const float *ln_in,
                                             const float *mean, const float *rstd,
                                             const float *gamma, int T, int H, float p_drop,
                                             uint64_t seed, uint64_t stream_id);

/* gelu_ref.c (erf GELU) */
double gelu_erf_ref(double z);
double gelu_erf_grad_ref(double z);
void bias_gelu_fwd_ref(float *out, const float *x, const float *bias, int T, int N);
void bias_gelu_bwd_ref(float *dx, float *dbias, const float *dout, const float *x,
                       const float *bias, int T, int N);
void bias_tanh_fwd_ref(float *out, const float *x, const float *bias, int T, int N);
void bias_tanh_bwd_ref(float *dx, float *dbias, const float *dout, const float *out, int T, int N);
void bias_bwd_ref(float *dbias, const float *dout, int T, int N);
void gelu_tanh_bwd_ref(float *dx, const float *dout, const float *x, int64_t n);

/* loss_ref.c */
void rows_gather_ref(float *out, const float *in, const int32_t *rows, int P, int H);
void rows_scatter_add_ref(float *dst, const float *src, const int32_t *rows, int P, int H);
void mlm_xent_fwd_ref(float *loss, float *lse, const float *logits, const int32_t *labels, int P,
                      int V, int Vpad);
void mlm_xent_bwd_ref(float *dlogits, const float *logits, const float *lse,
                      const int32_t *labels, float scale, int P, int V, int Vpad);
void nsp_xent_fwd_bwd_ref(float *loss, float *dlogits, const float *logits, const int32_t *labels,
                          float scale, int n);
void reduce_sum_f32_ref(float *out, const float *in, int n);
void mlm_correct_ref(float *correct, const float *logits, const int32_t *labels, int P, int V, int Vpad);
void nsp_correct_ref(float *correct, const float *logits, const int32_t *labels, int n);
void stats_accumulate_ref(float *acc, const float *mlm_loss, const float *mlm_correct, int P,
                          const float *nsp_loss, const float *nsp_correct, int n);

/* init_ref.c. ambiguous (n, or NULL) receives 1 where a draw came within 1e-4 of the truncation
 * bound, so float rounding on the device may decide it otherwise (the test skips those). */
void init_trunc_normal_ref(float *w, int64_t n, float std, uint64_t seed, uint64_t id,
                           unsigned char *ambiguous);
void fill_f32_ref(float *w, int64_t n, float v);

/* lamb_ref.c: tensors is a host table (chunk_begin unused); no working copy (it is bf16(master)). */
void lamb_update_ref(float *master, float *m, float *v, const float *grad,
                     const lamb_tensor *tensors, int n_tensors, lamb_hparams hp, float *grad_norm,
                     const float *guard, int n_guard);

/* fp8_ref.c: one value's conversion (round to nearest even, saturated to the largest finite; NaN
 * gives the positive NaN 0x7f) and back (exact), then the casts: scale is a host pointer here. */
uint8_t fp8_from_float_ref(float x, fp8_format fmt);
float fp8_to_float_ref(uint8_t q, fp8_format fmt);
void cast_fp8_ref(uint8_t *out, float *amax, const float *in, const float *scale, int rows, int cols,
                  fp8_format fmt);
void cast_transpose_fp8_ref(uint8_t *out, uint8_t *out_t, int ld_t, float *amax, const float *in,
                            const float *scale, int rows, int cols, fp8_format fmt);
void fp8_scales_update_ref(float *amax, float *history, float *scale, float *inv, const uint8_t *fmt, int n,
                           int len, int pos, int init);

#ifdef __cplusplus
}
#endif

#endif
