/* gelu_ref.c — reference bias + GELU (erf form), bias + tanh and bias gradients
 * (kernels/gelu.cu), and the tanh-GELU backward. Column sums in double. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "ref.h"

double gelu_erf_ref(double z)
{
    return 0.5 * z * (1.0 + erf(z * M_SQRT1_2));
}

double gelu_erf_grad_ref(double z)
{
    /* d/dz [z Phi(z)] = Phi(z) + z phi(z) */
    return 0.5 * (1.0 + erf(z * M_SQRT1_2)) + z * exp(-0.5 * z * z) * (0.5 * M_2_SQRTPI * M_SQRT1_2);
}

void bias_gelu_fwd_ref(float *out, const float *x, const float *bias, int T, int N)
{
    for (size_t i = 0; i < (size_t)T * N; i++)
        out[i] = (float)gelu_erf_ref((double)x[i] + bias[i % N]);
}

/* Adds the column sums of d (T, N) held in double to dbias (N). */
static void colsum_add(float *dbias, const double *d, int T, int N)
{
    for (int c = 0; c < N; c++) {
        double s = 0;
        for (int t = 0; t < T; t++)
            s += d[(size_t)t * N + c];
        dbias[c] += (float)s;
    }
}

void bias_gelu_bwd_ref(float *dx, float *dbias, const float *dout, const float *x,
                       const float *bias, int T, int N)
{
    double *d = malloc((size_t)T * N * sizeof *d);
    for (size_t i = 0; i < (size_t)T * N; i++) {
        d[i] = dout[i] * gelu_erf_grad_ref((double)x[i] + bias[i % N]);
        dx[i] = (float)d[i];
    }
    if (dbias)
        colsum_add(dbias, d, T, N);
    free(d);
}

void bias_tanh_fwd_ref(float *out, const float *x, const float *bias, int T, int N)
{
    for (size_t i = 0; i < (size_t)T * N; i++)
        out[i] = (float)tanh((double)x[i] + bias[i % N]);
}

void bias_tanh_bwd_ref(float *dx, float *dbias, const float *dout, const float *out, int T, int N)
{
    double *d = malloc((size_t)T * N * sizeof *d);
    for (size_t i = 0; i < (size_t)T * N; i++) {
        d[i] = dout[i] * (1.0 - (double)out[i] * out[i]);
        dx[i] = (float)d[i];
    }
    if (dbias)
        colsum_add(dbias, d, T, N);
    free(d);
}

void bias_bwd_ref(float *dbias, const float *dout, int T, int N)
{
    for (int c = 0; c < N; c++) {
        double s = 0;
        for (int t = 0; t < T; t++)
            s += dout[(size_t)t * N + c];
        dbias[c] += (float)s;
    }
}

void gelu_tanh_bwd_ref(float *dx, const float *dout, const float *x, int64_t n)
{
    const double c = sqrt(2.0 / M_PI), a = 0.044715;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i], th = tanh(c * (v + a * v * v * v));
        double g = 0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * c * (1.0 + 3.0 * a * v * v);
        dx[i] = (float)(dout[i] * g);
    }
}
