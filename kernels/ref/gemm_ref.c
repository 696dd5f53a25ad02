/* gemm_ref.c — plain-C reference of the trainer's matrix products (see gemm_ref.h). */
#include <math.h>
#include <stdlib.h>

#include "ref/gemm_ref.h"

double gelu_tanh_ref(double x)
{
    const double c = 0.7978845608028654; /* sqrt(2 / pi) */
    return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
}

double gelu_tanh_grad_ref(double x)
{
    const double c = 0.7978845608028654;
    double u = c * (x + 0.044715 * x * x * x);
    double th = tanh(u);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

void gemm_ref(int M, int N, int K, int trans_a, int trans_b, const float *A, const float *B,
              float *D, float alpha, float beta, int epi, float *bias, float *aux)
{
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++) {
                double a = trans_a ? A[(size_t)k * M + i] : A[(size_t)i * K + k];
                double b = trans_b ? B[(size_t)j * K + k] : B[(size_t)k * N + j];
                acc += a * b;
            }
            double v = alpha * acc + (beta != 0 ? beta * D[(size_t)i * N + j] : 0.0);
            size_t o = (size_t)i * N + j;
            switch (epi) {
            case GEMM_REF_BIAS: v += bias[j]; break;
            case GEMM_REF_GELU_BIAS:
                v += bias[j];
                aux[o] = (float)v;
                v = gelu_tanh_ref(v);
                break;
            case GEMM_REF_DGELU:
            case GEMM_REF_DGELU_BGRAD: v *= gelu_tanh_grad_ref(aux[o]); break;
            default: break;
            }
            D[o] = (float)v;
        }
    }
    if (epi == GEMM_REF_DGELU_BGRAD)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int i = 0; i < M; i++)
                s += D[(size_t)i * N + j];
            bias[j] = (float)s;
        }
    if (epi == GEMM_REF_BGRADB)
        for (int i = 0; i < M; i++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += trans_a ? A[(size_t)k * M + i] : A[(size_t)i * K + k];
            bias[i] = (float)s;
        }
}
