/* layernorm_ref.c — reference LayerNorm forward/backward, plain and fused with bias, dropout and
 * the residual add (see kernels/layernorm.cu). Row-wise statistics in double. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "dropout.h"
#include "ref.h"

/* Normalizes one row r (H) into out; stores its mean and 1 / sqrt(var + eps). */
static void ln_row(float *out, float *mean, float *rstd, const float *r, const float *gamma,
                   const float *beta, int H, float eps)
{
    double s = 0, s2 = 0;
    for (int c = 0; c < H; c++)
        s += r[c];
    double mu = s / H;
    for (int c = 0; c < H; c++)
        s2 += (r[c] - mu) * (r[c] - mu);
    double rs = 1.0 / sqrt(s2 / H + eps);
    for (int c = 0; c < H; c++)
        out[c] = (float)((r[c] - mu) * rs * gamma[c] + beta[c]);
    *mean = (float)mu;
    *rstd = (float)rs;
}

/* LayerNorm backward of one row: dr (H) from dy (H); accumulates dgamma, dbeta (H) in double. */
static void ln_row_bwd(double *dr, double *dgamma, double *dbeta, const double *dy, const float *x,
                       float mean, float rstd, const float *gamma, int H)
{
    double a = 0, b = 0; /* sums of dy*gamma and dy*gamma*xhat */
    for (int c = 0; c < H; c++) {
        double xh = (x[c] - (double)mean) * rstd;
        a += dy[c] * gamma[c];
        b += dy[c] * gamma[c] * xh;
        dgamma[c] += dy[c] * xh;
        dbeta[c] += dy[c];
    }
    a /= H;
    b /= H;
    for (int c = 0; c < H; c++) {
        double xh = (x[c] - (double)mean) * rstd;
        dr[c] = rstd * (dy[c] * gamma[c] - a - xh * b);
    }
}

void layernorm_fwd_ref(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                       const float *beta, int T, int H, float eps)
{
    for (int t = 0; t < T; t++)
        ln_row(out + (size_t)t * H, mean + t, rstd + t, x + (size_t)t * H, gamma, beta, H, eps);
}

void layernorm_bwd_ref(float *dx, float *dgamma, float *dbeta, const float *dout, const float *x,
                       const float *mean, const float *rstd, const float *gamma, int T, int H)
{
    double *w = calloc((size_t)H * 4, sizeof *w), *dy = w, *dr = w + H, *dg = w + 2 * H,
           *db = w + 3 * H;
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < H; c++)
            dy[c] = dout[(size_t)t * H + c];
        ln_row_bwd(dr, dg, db, dy, x + (size_t)t * H, mean[t], rstd[t], gamma, H);
        for (int c = 0; c < H; c++)
            dx[(size_t)t * H + c] = (float)dr[c];
    }
    for (int c = 0; c < H; c++) {
        dgamma[c] += (float)dg[c];
        dbeta[c] += (float)db[c];
    }
    free(w);
}

void bias_dropout_residual_layernorm_fwd_ref(float *out, float *ln_in, float *mean, float *rstd,
                                             const float *x, const float *bias,
                                             const float *residual, const float *gamma,
                                             const float *beta, int T, int H, float eps,
                                             float p_drop, uint64_t seed, uint64_t stream_id)
{
    float scale = 1.0f / (1.0f - p_drop);
    for (int t = 0; t < T; t++) {
        float *r = ln_in + (size_t)t * H;
        for (int c = 0; c < H; c++) {
            size_t i = (size_t)t * H + c;
            float z = x[i] + (bias ? bias[c] : 0.0f);
            r[c] = (dropout_keep(seed, stream_id, i, p_drop) ? z * scale : 0.0f) + residual[i];
        }
        ln_row(out + (size_t)t * H, mean + t, rstd + t, r, gamma, beta, H, eps);
    }
}

void bias_dropout_residual_layernorm_bwd_ref(float *dx, float *dresidual, float *dbias,
                                             float *dgamma, float *dbeta, const float *dout,
                                             const float *dout_add, const float *ln_in,
                                             const float *mean, const float *rstd,
                                             const float *gamma, int T, int H, float p_drop,
                                             uint64_t seed, uint64_t stream_id)
{
    double *w = calloc((size_t)H * 5, sizeof *w), *dy = w, *dr = w + H, *dg = w + 2 * H,
           *db = w + 3 * H, *dbi = w + 4 * H;
    double scale = 1.0 / (1.0 - (double)p_drop);
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < H; c++)
            dy[c] = (double)dout[(size_t)t * H + c] + (dout_add ? dout_add[(size_t)t * H + c] : 0.0);
        ln_row_bwd(dr, dg, db, dy, ln_in + (size_t)t * H, mean[t], rstd[t], gamma, H);
        for (int c = 0; c < H; c++) {
            size_t i = (size_t)t * H + c;
            double d = dropout_keep(seed, stream_id, i, p_drop) ? dr[c] * scale : 0.0;
            if (dresidual)
                dresidual[i] = (float)dr[c];
            if (dx)
                dx[i] = (float)d;
            dbi[c] += d;
        }
    }
    for (int c = 0; c < H; c++) {
        dgamma[c] += (float)dg[c];
        dbeta[c] += (float)db[c];
        if (dbias)
            dbias[c] += (float)dbi[c];
    }
    free(w);
}
