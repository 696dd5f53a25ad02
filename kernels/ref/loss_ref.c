/* loss_ref.c — reference row gather/scatter, masked-LM and next-sentence softmax cross-entropy,
 * the fixed-order sum, MLM / NSP accuracy and the loss totals (kernels/loss.cu). */
#include <math.h>
#include <stddef.h>

#include "ref.h"

void rows_gather_ref(float *out, const float *in, const int32_t *rows, int P, int H)
{
    for (int i = 0; i < P; i++)
        for (int c = 0; c < H; c++)
            out[(size_t)i * H + c] = in[(size_t)rows[i] * H + c];
}

void rows_scatter_add_ref(float *dst, const float *src, const int32_t *rows, int P, int H)
{
    for (int i = 0; i < P; i++)
        for (int c = 0; c < H; c++)
            dst[(size_t)rows[i] * H + c] += src[(size_t)i * H + c];
}

/* log sum_{c<V} exp(z[c]) in double. */
static double row_lse(const float *z, int V)
{
    double mx = -INFINITY, s = 0;
    for (int c = 0; c < V; c++)
        mx = fmax(mx, z[c]);
    for (int c = 0; c < V; c++)
        s += exp(z[c] - mx);
    return mx + log(s);
}

void mlm_xent_fwd_ref(float *loss, float *lse, const float *logits, const int32_t *labels, int P,
                      int V, int Vpad)
{
    for (int i = 0; i < P; i++) {
        const float *z = logits + (size_t)i * Vpad;
        double l = row_lse(z, V);
        lse[i] = (float)l;
        loss[i] = labels[i] < 0 ? 0.0f : (float)(l - z[labels[i]]);
    }
}

void mlm_xent_bwd_ref(float *dlogits, const float *logits, const float *lse,
                      const int32_t *labels, float scale, int P, int V, int Vpad)
{
    for (int i = 0; i < P; i++) {
        const float *z = logits + (size_t)i * Vpad;
        float *d = dlogits + (size_t)i * Vpad;
        for (int c = 0; c < Vpad; c++) {
            if (labels[i] < 0 || c >= V)
                d[c] = 0.0f;
            else
                d[c] = (float)(scale * (exp((double)z[c] - lse[i]) - (c == labels[i])));
        }
    }
}

void nsp_xent_fwd_bwd_ref(float *loss, float *dlogits, const float *logits, const int32_t *labels,
                          float scale, int n)
{
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * 2;
        double l = row_lse(z, 2);
        loss[i] = (float)(l - z[labels[i]]);
        if (dlogits)
            for (int c = 0; c < 2; c++)
                dlogits[i * 2 + c] = (float)(scale * (exp(z[c] - l) - (c == labels[i])));
    }
}

void reduce_sum_f32_ref(float *out, const float *in, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += in[i];
    out[0] = (float)s;
}

void mlm_correct_ref(float *correct, const float *logits, const int32_t *labels, int P, int V, int Vpad)
{
    for (int i = 0; i < P; i++) {
        const float *row = logits + (size_t)i * Vpad;
        int arg = 0;
        for (int j = 1; j < V; j++)
            if (row[j] > row[arg])
                arg = j;
        correct[i] = labels[i] >= 0 && arg == labels[i] ? 1.0f : 0.0f;
    }
}

void nsp_correct_ref(float *correct, const float *logits, const int32_t *labels, int n)
{
    for (int i = 0; i < n; i++)
        correct[i] = (logits[2 * i + 1] > logits[2 * i] ? 1 : 0) == labels[i] ? 1.0f : 0.0f;
}

void stats_accumulate_ref(float *acc, const float *mlm_loss, const float *mlm_correct, int P,
                          const float *nsp_loss, const float *nsp_correct, int n)
{
    const float *v[4] = {mlm_loss, mlm_correct, nsp_loss, nsp_correct};
    int len[4] = {P, P, n, n};
    for (int k = 0; k < 4; k++) {
        double s = 0;
        for (int i = 0; i < len[k]; i++)
            s += v[k][i];
        acc[k] = (float)(acc[k] + s);
    }
}
