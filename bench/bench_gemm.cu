/* bench_gemm.cu — cuBLASLt's first-choice algorithm against the best of its first candidates, for
 * BERT-Large's products exactly as exec/gpu/bert.c issues them (gemm.h wrappers: shapes,
 * transposes, epilogues, fp32 weight gradients, the beta of each call), at the token counts given
 * (default 12,900 and 14,300: batch 56 of Wikipedia lengths; predictions 15% of the tokens).
 *
 * For each product: the heuristic's first --cands algorithms for the product's shape bucket (what
 * the trainer's plan asks, gemm.c), each launched --reps times on the exact shape, interleaved,
 * the median per algorithm (gemm_time_candidates). Printed: the first choice's time, the best
 * time and its rank, and per training step (x 24 layers for the encoder's products) the sums.
 * Operands are random bf16 (never zeros), fp32 weight gradients zeroed before the beta = 1 rows.
 *   bench_gemm [--tokens 12900,14300] [--cands 16] [--reps 7] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gemm.h"

static __global__ void fill_kernel(bf16 *p, size_t n, unsigned long long seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
        float u = (float)((z >> 40) & 0xffffff) / 8388608.0f - 1.0f;
        unsigned int f = __float_as_uint(u * 0.5f);
        p[i] = (bf16)((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
    }
}

static void *dev_random(size_t bytes, unsigned long long seed)
{
    void *p;
    cudaCheck(cudaMalloc(&p, bytes));
    fill_kernel<<<1024, 256>>>((bf16 *)p, bytes / 2, seed);
    cudaCheck(cudaGetLastError());
    return p;
}

typedef struct {
    const char *name;
    int M, N, K, ta, tb;
    gemm_dtype d;
    gemm_epilogue epi;
    float beta;
    int per_step; /* launches per training step */
} product;

enum { H = 1024, F = 4096, V = 30528, L = 24 };

/* The products of one step at T tokens and P predictions, as bert.c runs them (gemm.h: forward
 * Y = X W^T (M T, N out, K in, trans_b); data gradient dX = dY W (M T, N in, K out); weight
 * gradient dW = dY^T X (M out, N in, K T, trans_a, fp32)). */
static int products(int T, int P, product *p)
{
    int n = 0;
    auto add = [&](const char *name, int M, int N, int K, int ta, int tb, gemm_dtype d, gemm_epilogue e, float beta,
                   int per) { p[n++] = product{name, M, N, K, ta, tb, d, e, beta, per}; };
    add("qkv_fwd (+bias)", T, 3 * H, H, 0, 1, GEMM_BF16, GEMM_EPI_BIAS, 0, L);
    add("attn_out_fwd", T, H, H, 0, 1, GEMM_BF16, GEMM_EPI_NONE, 0, L);
    add("ffn1_fwd (GELU_AUX_BIAS)", T, F, H, 0, 1, GEMM_BF16, GEMM_EPI_GELU_BIAS, 0, L);
    add("ffn2_fwd", T, H, F, 0, 1, GEMM_BF16, GEMM_EPI_NONE, 0, L);
    add("ffn2_wgrad (fp32)", H, F, T, 1, 0, GEMM_F32, GEMM_EPI_NONE, 0, L);
    add("ffn2_dgrad (DGELU)", T, F, H, 0, 0, GEMM_BF16, GEMM_EPI_DGELU, 0, L);
    add("ffn1_wgrad (fp32)", F, H, T, 1, 0, GEMM_F32, GEMM_EPI_NONE, 0, L);
    add("ffn1_dgrad (beta 1)", T, H, F, 0, 0, GEMM_BF16, GEMM_EPI_NONE, 1, L);
    add("attn_out_wgrad (fp32)", H, H, T, 1, 0, GEMM_F32, GEMM_EPI_NONE, 0, L);
    add("attn_out_dgrad", T, H, H, 0, 0, GEMM_BF16, GEMM_EPI_NONE, 0, L);
    add("qkv_wgrad (fp32)", 3 * H, H, T, 1, 0, GEMM_F32, GEMM_EPI_NONE, 0, L);
    add("qkv_dgrad (beta 1)", T, H, 3 * H, 0, 0, GEMM_BF16, GEMM_EPI_NONE, 1, L);
    add("decoder_fwd (+bias)", P, V, H, 0, 1, GEMM_BF16, GEMM_EPI_BIAS, 0, 1);
    add("decoder_wgrad (fp32)", V, H, P, 1, 0, GEMM_F32, GEMM_EPI_NONE, 0, 1);
    add("decoder_dgrad", P, H, V, 0, 0, GEMM_BF16, GEMM_EPI_NONE, 0, 1);
    /* the weight gradients of a later micro-batch (or of the build before write-mode gradients) */
    add("  ffn1_wgrad, beta 1", F, H, T, 1, 0, GEMM_F32, GEMM_EPI_NONE, 1, 0);
    add("  ffn2_wgrad, beta 1", H, F, T, 1, 0, GEMM_F32, GEMM_EPI_NONE, 1, 0);
    add("  qkv_wgrad, beta 1", 3 * H, H, T, 1, 0, GEMM_F32, GEMM_EPI_NONE, 1, 0);
    return n;
}

int main(int argc, char **argv)
{
    int tokens[8] = {12900, 14300}, ntok = 2, cands = 16, reps = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--tokens")) {
            ntok = 0;
            for (char *t = strtok(argv[i + 1], ","); t && ntok < 8; t = strtok(NULL, ","))
                tokens[ntok++] = atoi(t);
        } else if (!strcmp(argv[i], "--cands"))
            cands = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_gemm [--tokens 12900,14300] [--cands 16] [--reps 7]\n");
            return 2;
        }
    }
    for (int i = 0; i < ntok; i++)
        if (tokens[i] < 64 || tokens[i] > 65536) {
            fprintf(stderr, "bench_gemm: --tokens must be in [64, 65536]\n");
            return 2;
        }
    if (cands < 1 || cands > 32 || reps < 1 || reps > 16) {
        fprintf(stderr, "bench_gemm: --cands in [1, 32], --reps in [1, 16]\n");
        return 2;
    }
    /* each operand sized for the largest product of any token count that uses it: A (M, K) and
     * B (N, K) bf16, D and aux (M, N) (fp32 for the weight gradients), bias (N) */
    size_t a_el = 0, b_el = 0, d_bytes = 0, n_max = 0;
    for (int ti = 0; ti < ntok; ti++) {
        product q[32];
        int nq = products(tokens[ti], (int)(0.15 * tokens[ti] + 0.5), q);
        for (int i = 0; i < nq; i++) {
            size_t a = (size_t)q[i].M * q[i].K, b = (size_t)q[i].N * q[i].K;
            size_t d = (size_t)q[i].M * q[i].N * (q[i].d == GEMM_F32 ? 4 : 2);
            a_el = a > a_el ? a : a_el;
            b_el = b > b_el ? b : b_el;
            d_bytes = d > d_bytes ? d : d_bytes;
            n_max = (size_t)q[i].N > n_max ? (size_t)q[i].N : n_max;
        }
    }
    void *A = dev_random(a_el * 2, 1), *B = dev_random(b_el * 2, 2), *D = dev_random(d_bytes, 3);
    void *aux = dev_random(d_bytes, 4), *bias = dev_random(n_max * 2, 5);
    unpad_err err;
    memset(&err, 0, sizeof err);
    gemm_ctx *g = gemm_ctx_create(1, &err);
    if (!g) {
        fprintf(stderr, "bench_gemm: %s\n", err.msg);
        return 1;
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("bench_gemm on %s, cuBLASLt %zu: the heuristic's first %d candidates per product (its bucket), "
           "%d runs each on the exact shape, median\n",
           prop.name, cublasLtGetVersion(), cands, reps);
    for (int ti = 0; ti < ntok; ti++) {
        int T = tokens[ti], P = (int)(0.15 * T + 0.5);
        product p[32];
        int np = products(T, P, p);
        printf("\nT = %d tokens, P = %d predictions\n", T, P);
        printf("%-26s %6s %6s %6s %4s %5s %9s %8s %9s %8s %5s %6s %3s\n", "product", "M", "N", "K", "beta", "cands",
               "first us", "TFLOP/s", "best us", "TFLOP/s", "rank", "gain", "x");
        double step_first = 0, step_best = 0;
        for (int i = 0; i < np; i++) {
            gemm_shape s = {.M = p[i].M, .N = p[i].N, .K = p[i].K, .trans_a = p[i].ta, .trans_b = p[i].tb,
                            .ab_type = GEMM_BF16, .d_type = p[i].d, .epi = p[i].epi, .bias_type = GEMM_BF16};
            if (p[i].beta != 0)
                cudaCheck(cudaMemset(D, 0, d_bytes));
            float us[32];
            int nc = gemm_time_candidates(g, &s, A, B, D, p[i].beta, bias, aux, cands, reps, 0, us);
            cudaCheck(cudaDeviceSynchronize());
            int best = 0;
            for (int c = 1; c < nc; c++)
                if (us[c] > 0 && (us[best] <= 0 || us[c] < us[best]))
                    best = c;
            double flop = 2.0 * p[i].M * p[i].N * p[i].K;
            if (nc == 0 || us[best] <= 0) {
                printf("%-26s %6d %6d %6d %4g   no algorithm ran\n", p[i].name, p[i].M, p[i].N, p[i].K, p[i].beta);
                continue;
            }
            double first = us[0] > 0 ? us[0] : 0;
            printf("%-26s %6d %6d %6d %4g %5d %9.1f %8.0f %9.1f %8.0f %5d %5.1f%% %3d\n", p[i].name, p[i].M, p[i].N,
                   p[i].K, p[i].beta, nc, first, first > 0 ? flop / first / 1e6 : 0, us[best],
                   flop / us[best] / 1e6, best, first > 0 ? 100.0 * (first - us[best]) / first : 0, p[i].per_step);
            step_first += p[i].per_step * first;
            step_best += p[i].per_step * us[best];
        }
        printf("per step (x the launches per step): first choices %.2f ms, best %.2f ms (%.2f ms, %.1f%% less)\n",
               step_first / 1e3, step_best / 1e3, (step_first - step_best) / 1e3,
               100.0 * (step_first - step_best) / step_first);
    }
    gemm_ctx_free(g);
    void *bufs[] = {A, B, D, aux, bias};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        cudaCheck(cudaFree(bufs[i]));
    return 0;
}
