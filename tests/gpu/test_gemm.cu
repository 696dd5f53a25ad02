/* test_gemm.cu — the cuBLASLt wrapper (exec/gpu/gemm.h) against its plain-C reference
 * (kernels/ref/gemm_ref.c) on fresh random inputs: every transpose combination, every epilogue,
 * bf16 and fp32 outputs, accumulation with beta = 1, and ragged row counts (M = 1, 2, 63, 64, 65,
 * 511, 512, ...). Outputs are poisoned (NaN) before each run so an unwritten element fails.
 * The trainer's products take A, B and activation outputs in GEMM_X, the type of floatX: bf16 in
 * bin/test_gemm (whose context lets fp32 products use TF32), fp32 in bin/test_gemm-fp32, whose
 * context runs them in true fp32 as the fp32 trainer's does (gemm_ctx_create(1)), checked with
 * fp32 bounds tight enough to fail on TF32 or bf16 rounding. The bf16 build also tunes a fresh
 * context (gemm_ctx_tune), checks the tuned plans against the reference and their presets read
 * back by another context (the same bits).
 * Prints one line per case and exits nonzero on any failure. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/gemm.h"
#include "ref/gemm_ref.h"

/* X: the trainer's storage type (GEMM_X); fp32 products are exact (no TF32) in the fp32 build. */
static const gemm_dtype X = GEMM_X;
#ifdef UNPAD_FP32
#define FP32_EXACT 1
#else
#define FP32_EXACT 0
#endif

static unsigned long long rng_state = 0x1234567ull;
static float urand(void) /* uniform in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

/* Fills host floats rounded to the storage type and copies them to the device. */
static void *dev_random(size_t n, gemm_dtype t, float *host, float scale)
{
    void *d;
    size_t es = t == GEMM_F32 ? 4 : 2;
    cudaCheck(cudaMalloc(&d, n * es + 256));
    if (t == GEMM_F32) {
        for (size_t i = 0; i < n; i++)
            host[i] = urand() * scale;
        cudaCheck(cudaMemcpy(d, host, n * 4, cudaMemcpyHostToDevice));
    } else {
        bf16 *h = (bf16 *)malloc(n * 2);
        for (size_t i = 0; i < n; i++) {
            h[i] = float_to_bf16(urand() * scale);
            host[i] = bf16_to_float(h[i]);
        }
        cudaCheck(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
        free(h);
    }
    return d;
}

static void to_host(float *dst, const void *src, size_t n, gemm_dtype t)
{
    if (t == GEMM_F32) {
        cudaCheck(cudaMemcpy(dst, src, n * 4, cudaMemcpyDeviceToHost));
        return;
    }
    bf16 *h = (bf16 *)malloc(n * 2);
    cudaCheck(cudaMemcpy(h, src, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        dst[i] = bf16_to_float(h[i]);
    free(h);
}

static void poison(void *d, size_t n, gemm_dtype t)
{
    cudaCheck(cudaMemset(d, 0xff, n * (t == GEMM_F32 ? 4 : 2))); /* NaN in both types */
}

/* max over elements of |got - ref| / (atol + rtol |ref|); > 1 fails; NaN fails */
static double worst(const float *got, const float *ref, size_t n, double atol, double rtol)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]) / (atol + rtol * fabs(ref[i]));
        if (!(e == e))
            return INFINITY;
        if (e > w)
            w = e;
    }
    return w;
}

static int failures, cases;

static void run_case_bt(gemm_ctx *g, int M, int N, int K, int ta, int tb, gemm_dtype ab, gemm_dtype dt,
                        gemm_epilogue epi, float beta, gemm_dtype bt, int optional)
{
    size_t na = (size_t)M * K, nb = (size_t)K * N, nd = (size_t)M * N;
    int nbias = epi == GEMM_EPI_BGRADB ? M : N;
    float *hA = (float *)malloc(na * 4), *hB = (float *)malloc(nb * 4), *hD = (float *)malloc(nd * 4);
    float *hbias = (float *)malloc(nbias * 4), *haux = (float *)malloc(nd * 4);
    float *rD = (float *)malloc(nd * 4), *rbias = (float *)malloc(nbias * 4), *raux = (float *)malloc(nd * 4);
    float *gD = (float *)malloc(nd * 4), *gbias = (float *)malloc(nbias * 4), *gaux = (float *)malloc(nd * 4);
    void *A = dev_random(na, ab, hA, 1.0f), *B = dev_random(nb, ab, hB, 1.0f);
    void *D = dev_random(nd, dt, hD, 1.0f); /* C for beta = 1 */
    void *bias = dev_random(nbias, bt, hbias, 1.0f);
    void *aux = dev_random(nd, dt, haux, 2.0f); /* GELU input for DGELU */
    if (beta == 0)
        poison(D, nd, dt);
    if (epi == GEMM_EPI_GELU_BIAS)
        poison(aux, nd, dt);
    if (epi == GEMM_EPI_DGELU_BGRAD || epi == GEMM_EPI_BGRADB)
        poison(bias, nbias, bt);

    memcpy(rD, hD, nd * 4);
    memcpy(rbias, hbias, nbias * 4);
    memcpy(raux, haux, nd * 4);
    static const int ref_epi[] = {GEMM_REF_NONE, GEMM_REF_BIAS, GEMM_REF_GELU_BIAS, GEMM_REF_DGELU,
                                  GEMM_REF_DGELU_BGRAD, GEMM_REF_BGRADB};
    gemm_ref(M, N, K, ta, tb, hA, hB, rD, 1.0f, beta, ref_epi[epi], rbias, raux);
    if (dt == GEMM_BF16 && epi == GEMM_EPI_GELU_BIAS) /* the GPU rounds aux before GELU */
        for (size_t i = 0; i < nd; i++)
            raux[i] = bf16_to_float(float_to_bf16(raux[i]));

    gemm_shape s = {M, N, K, ta, tb, ab, dt, epi, bt};
    if (optional && !gemm_supported(g, &s, A, B, D, bias, aux)) {
        printf("skip M %4d N %4d K %4d ta %d tb %d  epilogue %d with bias type %s: not supported\n", M, N,
               K, ta, tb, (int)epi, bt == GEMM_F32 ? "f32" : "bf16");
        goto done;
    }
    {
        gemm_run(g, &s, A, B, D, 1.0f, beta, bias, aux, 0);
        cudaCheck(cudaDeviceSynchronize());
        to_host(gD, D, nd, dt);
        /* Bounds atol + rtol |ref|. bf16 A/B: D bf16, one bf16 rounding of D; D fp32, exact
         * products and fp32 sums. fp32 A/B with TF32 allowed: inputs rounded to 10 bits. True
         * fp32 (fp32 build): exact products, sums of K terms whose partial sums grow as sqrt(K),
         * so atol grows as K (worst 0.1 of this bound on the H200 with CUDA 13.0, 2026-12-03;
         * TF32 exceeds it 20 times and more). cuBLASLt's fp32 gelu' is good to about 1e-5, not to
         * fp32 rounding (8.4e-6 measured), so DGELU adds 4e-5 sqrt(K) = 2.4e-5 |AB| at the largest
         * |AB| here (5 sigma = 1.7 sqrt(K) for inputs uniform in [-1, 1]). */
        double sk = sqrt((double)K);
        double atol = (dt == GEMM_F32 ? 2e-5 : 4e-3) * sk, rtol = dt == GEMM_F32 ? 1e-4 : 1.2e-2;
        if (ab == GEMM_F32 && !FP32_EXACT) {
            atol = 1e-3 * sk, rtol = 2e-3;
        } else if (ab == GEMM_F32) {
            atol = 5e-7 * K, rtol = 1e-5;
            if (epi == GEMM_EPI_DGELU || epi == GEMM_EPI_DGELU_BGRAD)
                atol += 4e-5 * sk;
        }
        double w = worst(gD, rD, nd, atol, rtol);
        if (epi == GEMM_EPI_GELU_BIAS) {
            to_host(gaux, aux, nd, dt);
            double wa = worst(gaux, raux, nd, atol, rtol);
            w = wa > w ? wa : w;
        }
        if (epi == GEMM_EPI_DGELU_BGRAD || epi == GEMM_EPI_BGRADB) {
            to_host(gbias, bias, nbias, bt);
            int rows = epi == GEMM_EPI_BGRADB ? K : M;
            double wb = worst(gbias, rbias, nbias, atol * sqrt((double)rows), rtol * 2);
            w = wb > w ? wb : w;
        }
        cases++;
        int ok = w <= 1.0;
        failures += !ok;
        printf("%-4s M %4d N %4d K %4d ta %d tb %d  A/B %s D %s beta %.0f %-12s worst %.3f\n",
               ok ? "ok" : "FAIL", M, N, K, ta, tb, ab == GEMM_F32 ? "f32 " : "bf16",
               dt == GEMM_F32 ? "f32 " : "bf16", beta,
               (const char *[]){"none", "bias", "gelu+bias", "dgelu", "dgelu+bgrad", "bgradb"}[epi], w);
    }
done:
    cudaCheck(cudaFree(A));
    cudaCheck(cudaFree(B));
    cudaCheck(cudaFree(D));
    cudaCheck(cudaFree(bias));
    cudaCheck(cudaFree(aux));
    free(hA), free(hB), free(hD), free(hbias), free(haux), free(rD), free(rbias), free(raux);
    free(gD), free(gbias), free(gaux);
}

static void run_case(gemm_ctx *g, int M, int N, int K, int ta, int tb, gemm_dtype ab, gemm_dtype dt,
                     gemm_epilogue epi, float beta)
{
    run_case_bt(g, M, N, K, ta, tb, ab, dt, epi, beta, dt, 0);
}

static void check_case(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cases++;
    failures += !ok;
    printf("%-4s ", ok ? "ok" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

/* gemm_ctx_tune on a fresh context (every plan timed: no size floor), then: the tuned plans against
 * the reference on fresh inputs, and their choices written as presets, read by a second context and
 * run on the same inputs: bitwise the same outputs. */
static void test_tuning(void)
{
    unpad_err err;
    memset(&err, 0, sizeof err);
    gemm_ctx *g = gemm_ctx_create(FP32_EXACT, &err), *g2 = gemm_ctx_create(FP32_EXACT, &err);
    if (!g || !g2) {
        check_case(0, "tuning: %s", err.msg);
        return;
    }
    /* FFN1 forward (GELU + aux), a data gradient that adds (beta 1), a weight gradient (fp32) */
    const int T = 2000, H = 512, F = 1024;
    run_case(g, T, F, H, 0, 1, X, X, GEMM_EPI_GELU_BIAS, 0);
    run_case(g, T, H, F, 0, 0, X, X, GEMM_EPI_NONE, 1);
    run_case(g, F, H, T, 1, 0, X, GEMM_F32, GEMM_EPI_NONE, 0);
    const int fixed[] = {H, F};
    gemm_tune_opts o = {.candidates = 16, .reps = 3, .budget_s = 30, .min_flop = 0};
    gemm_tune_stats st;
    int rc = gemm_ctx_tune(g, 1, 4096, fixed, 2, &o, 0, &st, &err);
    check_case(rc == UNPAD_OK && st.considered == 3 && st.tuned >= 1 && !st.no_memory,
               "tuning: %d plans considered, %d timed, %d changed: %.1f -> %.1f us (%s)", st.considered, st.tuned,
               st.changed, st.top1_us, st.best_us, rc ? err.msg : "ok");
    /* the tuned plans (same buckets and alignment) against the reference, on fresh inputs */
    run_case(g, T, F, H, 0, 1, X, X, GEMM_EPI_GELU_BIAS, 0);
    run_case(g, T - 7, H, F, 0, 0, X, X, GEMM_EPI_NONE, 1);
    run_case(g, F, H, T - 1, 1, 0, X, GEMM_F32, GEMM_EPI_NONE, 0);
    /* presets: written, read by g2, the same algorithm and so the same bits */
    char path[] = "/tmp/test_gemm_presetsXXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    int written = f ? gemm_ctx_presets_write(g, f) : -1, nread = -9;
    if (f)
        fclose(f);
    rc = gemm_ctx_presets_read(g2, path, &nread, &err);
    check_case(rc == UNPAD_OK && written == st.tuned && nread == written,
               "presets: %d written, %d read (%s)", written, nread, rc ? err.msg : "ok");
    unlink(path);
    size_t nd = (size_t)T * H;
    float *h = (float *)malloc((size_t)T * F * 4), *d1 = (float *)malloc(nd * 4), *d2 = (float *)malloc(nd * 4);
    void *A = dev_random((size_t)T * F, X, h, 1.0f), *B = dev_random((size_t)F * H, X, h, 1.0f);
    void *D1 = dev_random(nd, X, h, 1.0f), *D2;
    cudaCheck(cudaMalloc(&D2, nd * 2 + 256));
    cudaCheck(cudaMemcpy(D2, D1, nd * 2, cudaMemcpyDeviceToDevice));
    gemm_shape s = {T - 3, H, F, 0, 0, X, X, GEMM_EPI_NONE, X};
    gemm_run(g, &s, A, B, D1, 1.0f, 1.0f, NULL, NULL, 0);
    gemm_run(g2, &s, A, B, D2, 1.0f, 1.0f, NULL, NULL, 0);
    cudaCheck(cudaDeviceSynchronize());
    to_host(d1, D1, nd, X);
    to_host(d2, D2, nd, X);
    check_case(!memcmp(d1, d2, (size_t)(T - 3) * H * 4) && gemm_ctx_presets_refused(g2) == 0,
               "presets: a product on the read presets bitwise equal to the tuned context's (%d refused)",
               gemm_ctx_presets_refused(g2));
    cudaCheck(cudaFree(A));
    cudaCheck(cudaFree(B));
    cudaCheck(cudaFree(D1));
    cudaCheck(cudaFree(D2));
    free(h), free(d1), free(d2);
    gemm_ctx_free(g);
    gemm_ctx_free(g2);
}

int main(void)
{
    unpad_err err;
    memset(&err, 0, sizeof err);
    gemm_ctx *g = gemm_ctx_create(FP32_EXACT, &err);
    if (!g) {
        fprintf(stderr, "test_gemm: %s\n", err.msg);
        return 1;
    }
    printf("test_gemm: A/B of the trainer's products in %s, fp32 products %s\n", UNPAD_PRECISION,
           FP32_EXACT ? "exact (no TF32)" : "may use TF32");
    const int Ms[] = {1, 2, 63, 64, 65, 127, 511, 512, 777};
    /* the trainer's three products of a Linear layer on ragged token counts */
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++) {
        int M = Ms[i];
        run_case(g, M, 192, 64, 0, 1, X, X, GEMM_EPI_BIAS, 0);                  /* fwd */
        run_case(g, M, 256, 64, 0, 1, X, X, GEMM_EPI_GELU_BIAS, 0);             /* FFN1 fwd */
        run_case(g, M, 64, 256, 0, 0, X, X, GEMM_EPI_NONE, 0);                  /* bwd data */
        run_case(g, M, 64, 192, 0, 0, X, X, GEMM_EPI_NONE, 1);                  /* bwd data += */
        run_case(g, M, 256, 64, 0, 0, X, X, GEMM_EPI_DGELU, 0);                 /* FFN1 bwd */
        run_case(g, 192, 64, M, 1, 0, X, GEMM_F32, GEMM_EPI_NONE, 1);           /* dW += */
        run_case(g, 192, 64, M, 1, 0, X, GEMM_F32, GEMM_EPI_NONE, 0);           /* dW = */
    }
    /* all transposes, odd sizes, fp32 paths */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            run_case(g, 65, 72, 40, ta, tb, X, X, GEMM_EPI_NONE, 0);
            run_case(g, 33, 24, 88, ta, tb, X, GEMM_F32, GEMM_EPI_NONE, 1);
            run_case(g, 63, 40, 24, ta, tb, GEMM_F32, GEMM_F32, GEMM_EPI_NONE, 0);
        }
    run_case(g, 65, 128, 64, 0, 1, GEMM_F32, GEMM_F32, GEMM_EPI_BIAS, 0);
    run_case(g, 65, 128, 64, 0, 1, GEMM_F32, GEMM_F32, GEMM_EPI_GELU_BIAS, 0);
    run_case(g, 65, 128, 64, 0, 0, GEMM_F32, GEMM_F32, GEMM_EPI_DGELU, 0);
    /* optional epilogues: bias gradients inside the GEMM (the trainer falls back if unsupported),
     * the bias in X and, unless X is fp32 already, in fp32 */
    run_case_bt(g, 129, 256, 64, 0, 0, X, X, GEMM_EPI_DGELU_BGRAD, 0, X, 1);
    if (X != GEMM_F32)
        run_case_bt(g, 129, 256, 64, 0, 0, X, X, GEMM_EPI_DGELU_BGRAD, 0, GEMM_F32, 1);
    run_case_bt(g, 192, 64, 129, 1, 0, X, GEMM_F32, GEMM_EPI_BGRADB, 0, GEMM_F32, 1);
    if (X != GEMM_F32)
        run_case_bt(g, 192, 64, 129, 1, 0, X, X, GEMM_EPI_BGRADB, 0, GEMM_F32, 1);
    /* BERT-Large shapes at a typical token count */
    run_case(g, 1000, 3072, 1024, 0, 1, X, X, GEMM_EPI_BIAS, 0);
    run_case(g, 1024, 4096, 1000, 1, 0, X, GEMM_F32, GEMM_EPI_NONE, 1);
    /* token counts of one bucket share a plan chosen for the bucket's largest shape */
    for (int M = 15000; M <= 16400; M += 350)
        run_case(g, M, 64, 64, 0, 1, X, X, GEMM_EPI_BIAS, 0);
    /* The plan table keeps every plan: BERT-Large's weight-gradient products at the token buckets
     * from 8192 up (multiples of 512 and 1024, whose hashes once shared their low bits and evicted
     * each other every step), twice; the second pass must find every plan and make none. */
    {
        const int T = 28672, H = 1024, F = 4096;
        const size_t xb = X == GEMM_F32 ? 4 : 2;
        void *dY, *Xa, *Y;
        float *dW;
        cudaCheck(cudaMalloc(&dY, (size_t)T * F * xb));
        cudaCheck(cudaMalloc(&Xa, (size_t)T * F * xb));
        cudaCheck(cudaMalloc(&Y, (size_t)T * H * xb));
        cudaCheck(cudaMalloc(&dW, (size_t)H * F * 4));
        int before = 0;
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1)
                before = gemm_ctx_plans(g);
            for (int t = 8192; t <= T; t += 512) {
                gemm_linear_bwd_weight(g, X, t, H, F, dY, Xa, dW, 0.0f, 0); /* (F, H) += dY^T X */
                gemm_linear_bwd_weight(g, X, t, F, H, Xa, dY, dW, 0.0f, 0);
                gemm_linear_fwd(g, X, t, H, H, Xa, dY, NULL, Y, NULL, 0, 0);
            }
        }
        cudaCheck(cudaDeviceSynchronize());
        int ok = gemm_ctx_evicted(g) == 0 && gemm_ctx_plans(g) == before;
        cases++;
        failures += !ok;
        printf("%-4s plan table: %d plans, %d evicted, second pass made %d\n", ok ? "ok" : "FAIL",
               gemm_ctx_plans(g), gemm_ctx_evicted(g), gemm_ctx_plans(g) - before);
        cudaCheck(cudaFree(dY));
        cudaCheck(cudaFree(Xa));
        cudaCheck(cudaFree(Y));
        cudaCheck(cudaFree(dW));
    }
    if (X == GEMM_BF16)
        test_tuning();
    printf("test_gemm: %d/%d cases passed, %d plans cached, %d exact-shape fallbacks\n", cases - failures,
           cases, gemm_ctx_plans(g), gemm_ctx_fallbacks(g));
    gemm_ctx_free(g);
    return failures ? 1 : 0;
}
