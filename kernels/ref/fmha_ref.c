/* fmha_ref.c — plain-C reference of the variable-length FMHA (head size 64), forward and backward,
 * in double precision with the full [L, L] score matrix of one (sequence, head) at a time. */
#include "fmha_ref.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>

#include "dropout.h"

enum { D = 64 }; /* head size */

/* P (len, len) = softmax(scale Q K^T) of one (sequence, head); lse_row (len) its log-sum-exp. */
static void scores_softmax(double *P, double *lse_row, const float *qkv, int start, int len, int h,
                           int NH)
{
    const double scale = 1.0 / sqrt((double)D);
    const size_t ld = (size_t)3 * NH * D; /* qkv row stride */
    for (int i = 0; i < len; i++) {
        const float *q = qkv + (size_t)(start + i) * ld + (size_t)h * D;
        double mx = -INFINITY;
        for (int j = 0; j < len; j++) {
            const float *k = qkv + (size_t)(start + j) * ld + (size_t)(NH + h) * D;
            double s = 0;
            for (int d = 0; d < D; d++)
                s += (double)q[d] * (double)k[d];
            P[(size_t)i * len + j] = s * scale;
            if (s * scale > mx)
                mx = s * scale;
        }
        double sum = 0;
        for (int j = 0; j < len; j++)
            sum += exp(P[(size_t)i * len + j] - mx);
        for (int j = 0; j < len; j++)
            P[(size_t)i * len + j] = exp(P[(size_t)i * len + j] - mx) / sum;
        lse_row[i] = mx + log(sum);
    }
}

/* Dropout factor of (query row t, head h, key j): keep / (1 - p). */
static double drop_factor(int t, int h, int j, int NH, float p, uint64_t seed, uint64_t stream_id)
{
    if (p <= 0.0f)
        return 1.0;
    return fmha_mask_keep(seed, stream_id, fmha_dropout_row(t, h, NH), j, fmha_mask_threshold(p))
               ? 1.0 / (1.0 - p)
               : 0.0;
}

void fmha_fwd_ref(float *out, float *lse, const float *qkv, const int32_t *cu_seqlens, int T,
                  int NH, int seq_begin, int seq_end, int max_len, float p_drop, uint64_t seed,
                  uint64_t stream_id)
{
    const size_t ld = (size_t)3 * NH * D;
    double *P = malloc(sizeof(double) * (size_t)max_len * max_len);
    double *lse_row = malloc(sizeof(double) * (size_t)max_len);
    assert(P && lse_row);
    for (int s = seq_begin; s < seq_end; s++) {
        const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
        assert(len >= 0 && len <= max_len && start + len <= T);
        for (int h = 0; h < NH; h++) {
            scores_softmax(P, lse_row, qkv, start, len, h, NH);
            for (int i = 0; i < len; i++) {
                double o[D] = {0};
                for (int j = 0; j < len; j++) {
                    const double pd = P[(size_t)i * len + j] *
                                      drop_factor(start + i, h, j, NH, p_drop, seed, stream_id);
                    const float *v = qkv + (size_t)(start + j) * ld + (size_t)(2 * NH + h) * D;
                    for (int d = 0; d < D; d++)
                        o[d] += pd * v[d];
                }
                for (int d = 0; d < D; d++)
                    out[((size_t)(start + i) * NH + h) * D + d] = (float)o[d];
                lse[(size_t)h * T + start + i] = (float)lse_row[i];
            }
        }
    }
    free(P);
    free(lse_row);
}

void fmha_bwd_ref(float *dqkv, const float *dout, const float *out, const float *lse,
                  const float *qkv, const int32_t *cu_seqlens, int T, int NH, int seq_begin,
                  int seq_end, int max_len, float p_drop, uint64_t seed, uint64_t stream_id)
{
    const double scale = 1.0 / sqrt((double)D);
    const size_t ld = (size_t)3 * NH * D;
    double *dS = malloc(sizeof(double) * (size_t)max_len * max_len); /* (len, len) */
    double *Pd = malloc(sizeof(double) * (size_t)max_len * max_len); /* (len, len) dropped P */
    assert(dS && Pd);
    for (int s = seq_begin; s < seq_end; s++) {
        const int start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
        assert(len >= 0 && len <= max_len && start + len <= T);
        for (int h = 0; h < NH; h++) {
            /* P from the saved lse, exactly as the kernel recomputes it. */
            for (int i = 0; i < len; i++) {
                const size_t ti = (size_t)(start + i);
                const float *q = qkv + ti * ld + (size_t)h * D;
                const float *dO = dout + (ti * NH + h) * D;
                const float *o = out + (ti * NH + h) * D;
                double Di = 0; /* rowsum(dout .* out) = sum_j P dP */
                for (int d = 0; d < D; d++)
                    Di += (double)dO[d] * (double)o[d];
                const double lse_i = lse[(size_t)h * T + ti];
                for (int j = 0; j < len; j++) {
                    const size_t tj = (size_t)(start + j);
                    const float *k = qkv + tj * ld + (size_t)(NH + h) * D;
                    const float *v = qkv + tj * ld + (size_t)(2 * NH + h) * D;
                    double sc = 0, dpd = 0;
                    for (int d = 0; d < D; d++) {
                        sc += (double)q[d] * (double)k[d];
                        dpd += (double)dO[d] * (double)v[d];
                    }
                    const double p = exp(sc * scale - lse_i);
                    const double f = drop_factor(start + i, h, j, NH, p_drop, seed, stream_id);
                    Pd[(size_t)i * len + j] = p * f;
                    dS[(size_t)i * len + j] = p * (dpd * f - Di);
                }
            }
            for (int i = 0; i < len; i++) { /* dQ_i = scale sum_j dS_ij k_j */
                double acc[D] = {0};
                for (int j = 0; j < len; j++) {
                    const float *k = qkv + (size_t)(start + j) * ld + (size_t)(NH + h) * D;
                    for (int d = 0; d < D; d++)
                        acc[d] += dS[(size_t)i * len + j] * k[d];
                }
                float *dq = dqkv + (size_t)(start + i) * ld + (size_t)h * D;
                for (int d = 0; d < D; d++)
                    dq[d] = (float)(acc[d] * scale);
            }
            for (int j = 0; j < len; j++) { /* dK_j = scale sum_i dS_ij q_i, dV_j = sum_i Pd_ij dO_i */
                double ak[D] = {0}, av[D] = {0};
                for (int i = 0; i < len; i++) {
                    const size_t ti = (size_t)(start + i);
                    const float *q = qkv + ti * ld + (size_t)h * D;
                    const float *dO = dout + (ti * NH + h) * D;
                    const double ds = dS[(size_t)i * len + j], pd = Pd[(size_t)i * len + j];
                    for (int d = 0; d < D; d++) {
                        ak[d] += ds * q[d];
                        av[d] += pd * dO[d];
                    }
                }
                float *dk = dqkv + (size_t)(start + j) * ld + (size_t)(NH + h) * D;
                float *dv = dqkv + (size_t)(start + j) * ld + (size_t)(2 * NH + h) * D;
                for (int d = 0; d < D; d++) {
                    dk[d] = (float)(ak[d] * scale);
                    dv[d] = (float)av[d];
                }
            }
        }
    }
    free(dS);
    free(Pd);
}
