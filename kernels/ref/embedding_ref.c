/* embedding_ref.c — reference embedding: word + position + token-type rows, LayerNorm, dropout;
 * and its backward into the three tables and the LayerNorm parameters (kernels/embedding.cu). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "dropout.h"
#include "ref.h"

/* Position of row t: its offset inside the sequence that holds it. */
static int position_of(const int32_t *cu_seqlens, int n, int t)
{
    int s = 0;
    while (s + 1 < n && cu_seqlens[s + 1] <= t)
        s++;
    return t - cu_seqlens[s];
}

/* x (H) = word[ids[t]] + pos[position] + type[types[t]]. */
static void embed_row(double *x, const int32_t *ids, const int32_t *types,
                      const int32_t *cu_seqlens, int n, const float *word, const float *pos,
                      const float *type, int t, int H)
{
    const float *w = word + (size_t)ids[t] * H;
    const float *p = pos + (size_t)position_of(cu_seqlens, n, t) * H;
    const float *y = type + (size_t)types[t] * H;
    for (int c = 0; c < H; c++)
        x[c] = (double)w[c] + p[c] + y[c];
}

void embedding_fwd_ref(float *out, float *mean, float *rstd, const int32_t *ids,
                       const int32_t *types, const int32_t *cu_seqlens, int n, const float *word,
                       const float *pos, const float *type, const float *gamma, const float *beta,
                       int T, int H, float eps, float p_drop, uint64_t seed, uint64_t stream_id)
{
    double *x = malloc((size_t)H * sizeof *x);
    double scale = 1.0 / (1.0 - (double)p_drop);
    for (int t = 0; t < T; t++) {
        embed_row(x, ids, types, cu_seqlens, n, word, pos, type, t, H);
        double s = 0, s2 = 0;
        for (int c = 0; c < H; c++)
            s += x[c];
        double mu = s / H;
        for (int c = 0; c < H; c++)
            s2 += (x[c] - mu) * (x[c] - mu);
        double rs = 1.0 / sqrt(s2 / H + eps);
        for (int c = 0; c < H; c++) {
            size_t i = (size_t)t * H + c;
            double y = (x[c] - mu) * rs * gamma[c] + beta[c];
            out[i] = dropout_keep(seed, stream_id, i, p_drop) ? (float)(y * scale) : 0.0f;
        }
        mean[t] = (float)mu;
        rstd[t] = (float)rs;
    }
    free(x);
}

void embedding_bwd_ref(float *dword, float *dpos, float *dtype, float *dgamma, float *dbeta,
                       const float *dout, const float *dout_add, const int32_t *ids,
                       const int32_t *types, const int32_t *cu_seqlens, int n, int max_len,
                       const float *word, const float *pos, const float *type, const float *gamma,
                       const float *mean, const float *rstd, int T, int H, int type_vocab,
                       float p_drop, uint64_t seed, uint64_t stream_id)
{
    double *x = malloc((size_t)H * 2 * sizeof *x), *dy = x + H;
    double scale = 1.0 / (1.0 - (double)p_drop);
    for (int t = 0; t < T; t++) {
        embed_row(x, ids, types, cu_seqlens, n, word, pos, type, t, H);
        double a = 0, b = 0;
        for (int c = 0; c < H; c++) {
            size_t i = (size_t)t * H + c;
            double g = (double)dout[i] + (dout_add ? dout_add[i] : 0.0);
            dy[c] = dropout_keep(seed, stream_id, i, p_drop) ? g * scale : 0.0;
            double xh = (x[c] - mean[t]) * rstd[t];
            a += dy[c] * gamma[c];
            b += dy[c] * gamma[c] * xh;
            dgamma[c] += (float)(dy[c] * xh);
            dbeta[c] += (float)dy[c];
        }
        a /= H;
        b /= H;
        float *dw = dword + (size_t)ids[t] * H;
        float *dp = dpos + (size_t)position_of(cu_seqlens, n, t) * H;
        float *dt = dtype + (size_t)types[t] * H;
        for (int c = 0; c < H; c++) {
            double xh = (x[c] - mean[t]) * rstd[t];
            float d = (float)(rstd[t] * (dy[c] * gamma[c] - a - xh * b));
            dw[c] += d;
            dp[c] += d;
            dt[c] += d;
        }
    }
    free(x);
}
