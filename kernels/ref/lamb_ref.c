/* lamb_ref.c — reference LAMB step over tensors in flat buffers, with global gradient-norm
 * clipping (kernels/lamb.cu states the update), skipped when the norm or a guard value is not
 * finite. Norms in double. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>

#include "ref.h"

void lamb_update_ref(float *master, float *m, float *v, const float *grad,
                     const lamb_tensor *tensors, int n_tensors, lamb_hparams hp, float *grad_norm,
                     const float *guard, int n_guard)
{
    double g2 = 0;
    for (int k = 0; k < n_tensors; k++)
        for (int64_t i = 0; i < tensors[k].size; i++) {
            double g = grad[tensors[k].offset + i];
            g2 += g * g;
        }
    double norm = sqrt(g2);
    if (grad_norm)
        *grad_norm = (float)norm;
    int skip = !isfinite(norm);
    for (int i = 0; i < n_guard; i++)
        skip |= !isfinite(guard[i]);
    if (skip) /* a non-finite step changes nothing */
        return;
    double clip = norm > hp.max_grad_norm ? hp.max_grad_norm / norm : 1.0;
    double bc1 = 1.0 - pow(hp.beta1, hp.step), bc2 = 1.0 - pow(hp.beta2, hp.step);
    for (int k = 0; k < n_tensors; k++) {
        const lamb_tensor *t = &tensors[k];
        double *u = malloc((size_t)(t->size > 0 ? t->size : 1) * sizeof *u);
        if (!u) {
            fprintf(stderr, "lamb_update_ref: out of host memory\n");
            exit(EXIT_FAILURE);
        }
        double w2 = 0, u2 = 0;
        for (int64_t i = 0; i < t->size; i++) {
            int64_t j = t->offset + i;
            double g = grad[j] * clip;
            m[j] = (float)(hp.beta1 * (double)m[j] + (1.0 - hp.beta1) * g);
            v[j] = (float)(hp.beta2 * (double)v[j] + (1.0 - hp.beta2) * g * g);
            u[i] = (m[j] / bc1) / (sqrt(v[j] / bc2) + hp.eps);
            if (t->weight_decay)
                u[i] += hp.weight_decay * (double)master[j];
            w2 += (double)master[j] * master[j];
            u2 += u[i] * u[i];
        }
        double ratio = (w2 > 0 && u2 > 0) ? sqrt(w2) / sqrt(u2) : 1.0;
        for (int64_t i = 0; i < t->size; i++)
            master[t->offset + i] = (float)(master[t->offset + i] - hp.lr * ratio * u[i]);
        free(u);
    }
}
