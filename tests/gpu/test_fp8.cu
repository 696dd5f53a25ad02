/* test_fp8.cu — the bf16 -> FP8 casts (kernels/fp8.cu) against their plain-C reference
 * (kernels/ref/fp8_ref.c), and FP8 products through cuBLASLt (exec/gpu/gemm_fp8.h) against a
 * host product of the dequantized operands.
 *
 * Casts: every bf16 bit pattern (a 512 x 128 tensor) at four scales, then ragged shapes (rows 1, 2,
 * 63, 64, 65, 127, 128, 129, 511, 512, 12900 x cols 64, 768, 1024, 4096 and 1001, odd: the kernels'
 * element-at-a-time path), in E4M3 and E5M2, with values from 2^-16 to 2^10 times the scale (some
 * saturate, some underflow). Outputs poisoned (0xff, a NaN in both formats) before each call; the
 * FP8 bytes must equal the reference's exactly (where the input is NaN, both must be NaNs) and so
 * must amax; the transposed copy's padding columns (ld_t > rows) must stay poisoned. Also: amax is
 * a running maximum, amax NULL, pointers not 16-byte aligned.
 *
 * Products: D = sa sb A B^T of FP8 operands cast on the device, as BERT's forward (E4M3 x E4M3, bias
 * or GELU epilogue, fast accumulation), data gradient (E5M2 x E4M3, beta 1, DGELU) and weight
 * gradient (transposed copies from cast_transpose_fp8, K = tokens in rows padded to 16, fp32 D).
 * Reference: gemm_ref in double over the dequantized operands (exact products of FP8 values and
 * scales). Bound per element: rtol |ref| + c S + g |AB|, S = sum_k |a_k b_k|: rtol one bf16
 * rounding with margin (2^-8) for bf16 D, 1e-6 for fp32 D; c the accumulation: 2^-11 without fast
 * accumulation (Hopper's FP8 tensor cores keep about 14 bits in their partial sums between the
 * promotions to fp32, as DeepSeek-V3's report measured; K 2^-24 would be fp32's alone) and 2^-7 with
 * it (no promotions); a wrong scale or a swapped operand is off by about |ref| ~ S / sqrt(K), K = 256:
 * S / 16; g = 1e-3 for the GELU epilogues (cuBLASLt's tanh-GELU and its derivative in fp32, allowing
 * for an approximate tanh), and 2^-8 more with beta 1 into bf16: without that term the beta-1 data
 * gradient exceeded its bound on an H100 (cuBLAS 13.1) by 2.6% (worst 1.026). A bf16 rounding of AB
 * before C is added (a presumed cause) errs by up to 2^-9 |AB|, which rtol |ref| misses where AB and
 * C nearly cancel; the term allows it twice. With it the test has not run on a GPU yet.
 * A weight gradient with K not a multiple of 16 is tried and reported;
 * the bench pads K to 16 where cuBLASLt refuses it.
 * An epilogue cuBLASLt refuses in FP8 is reported and the product checked without it.
 * The same products through the trainer's path (gemm.h gemm_linear_fwd_fp8 / _bwd_data_fp8: one
 * gemm_ctx, plans cached per shape bucket and run at the exact token count, odd ones included),
 * with the same bounds.
 *
 * Delayed scaling: fp8_scales_update against fp8_scales_update_ref over 20 updates of random maxima
 * (zeros, infinities, NaNs, tiny and huge values among them): history, scales and inverse scales
 * bit for bit.
 * Prints one line per check and exits nonzero on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gemm.h"
#include "gpu/gemm_fp8.h"
#include "kernels.h"
#include "ref/gemm_ref.h"
#include "ref/ref.h"

/* xorshift64* (the draws need only be fixed and well spread) */
static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_draw(void)
{
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dull;
}
static float urand(void) { return (float)(next_draw() >> 40) / 8388608.0f - 1.0f; } /* [-1, 1) */
static int irand(int n) { return (int)(next_draw() % (uint64_t)n); }

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    return p;
}

static int failures, checks;

/* One line of the report: "ok" or "FAIL", then what was checked. */
static void result(int ok, const char *line)
{
    checks++;
    failures += !ok;
    printf("%-4s %s\n", ok ? "ok" : "FAIL", line);
}

static const char *fmt_name(fp8_format f) { return f == FP8_E4M3 ? "e4m3" : "e5m2"; }
static int is_nan_code(uint8_t q, fp8_format f) { return f == FP8_E4M3 ? (q & 0x7f) == 0x7f : (q & 0x7f) > 0x7c; }

/* Bytes that differ (a NaN code matches any NaN code); the first at *first. */
static size_t bytes_differ(const uint8_t *got, const uint8_t *want, size_t n, fp8_format f, size_t *first)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && !(is_nan_code(want[i], f) && is_nan_code(got[i], f)))
            if (!bad++)
                *first = i;
    return bad;
}

/* ---- casts ----------------------------------------------------------------------------------------- */
typedef struct {
    int rows, cols, ld_t;
    fp8_format f;
    float scale;
    const float *h;   /* (rows, cols) input, bf16 values */
    const bf16 *d;    /* its device copy */
} cast_case;

/* Runs both kernels on case c into poisoned outputs and compares them with the reference. */
static void check_casts(const cast_case *c, const char *what, float amax_start)
{
    size_t n = (size_t)c->rows * c->cols, nt = (size_t)c->cols * c->ld_t;
    uint8_t *want = (uint8_t *)xmalloc(n), *want_t = (uint8_t *)xmalloc(nt);
    uint8_t *got = (uint8_t *)xmalloc(n), *got_t = (uint8_t *)xmalloc(nt);
    memset(want_t, 0xff, nt); /* the padding stays as poisoned */
    float ref_amax = amax_start;
    cast_transpose_fp8_ref(want, want_t, c->ld_t, &ref_amax, c->h, &c->scale, c->rows, c->cols, c->f);
    uint8_t *out, *out_t;
    float *d_scale, *d_amax, got_amax;
    cudaCheck(cudaMalloc(&out, n));
    cudaCheck(cudaMalloc(&out_t, nt));
    cudaCheck(cudaMalloc(&d_scale, 4));
    cudaCheck(cudaMalloc(&d_amax, 4));
    cudaCheck(cudaMemcpy(d_scale, &c->scale, 4, cudaMemcpyHostToDevice));
    for (int k = 0; k < 2; k++) {
        cudaCheck(cudaMemset(out, 0xff, n));
        cudaCheck(cudaMemset(out_t, 0xff, nt));
        cudaCheck(cudaMemcpy(d_amax, &amax_start, 4, cudaMemcpyHostToDevice));
        if (k == 0)
            cast_fp8(out, d_amax, c->d, d_scale, c->rows, c->cols, c->f, 0);
        else
            cast_transpose_fp8(out, out_t, c->ld_t, d_amax, c->d, d_scale, c->rows, c->cols, c->f, 0);
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaMemcpy(got, out, n, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(&got_amax, d_amax, 4, cudaMemcpyDeviceToHost));
        size_t first = 0, bad = bytes_differ(got, want, n, c->f, &first), first_t = 0, bad_t = 0;
        if (k == 1) {
            cudaCheck(cudaMemcpy(got_t, out_t, nt, cudaMemcpyDeviceToHost));
            bad_t = bytes_differ(got_t, want_t, nt, c->f, &first_t);
        }
        int ok = bad == 0 && bad_t == 0 && !memcmp(&got_amax, &ref_amax, 4);
        char detail[160] = "";
        if (bad)
            snprintf(detail, sizeof detail, "  (out: %zu bad, first [%zu] x %a -> got 0x%02x want 0x%02x)", bad, first,
                     (double)c->h[first], got[first], want[first]);
        else if (bad_t)
            snprintf(detail, sizeof detail, "  (out_t: %zu bad, first [%zu] got 0x%02x want 0x%02x)", bad_t, first_t,
                     got_t[first_t], want_t[first_t]);
        char line[400];
        snprintf(line, sizeof line, "%-18s %s %-5s rows %5d cols %4d ld_t %5d scale %-9g amax %g (ref %g)%s",
                 k ? "cast_transpose_fp8" : "cast_fp8", what, fmt_name(c->f), c->rows, c->cols, k ? c->ld_t : 0,
                 (double)c->scale, (double)got_amax, (double)ref_amax, detail);
        result(ok, line);
    }
    cudaCheck(cudaFree(out));
    cudaCheck(cudaFree(out_t));
    cudaCheck(cudaFree(d_scale));
    cudaCheck(cudaFree(d_amax));
    free(want), free(want_t), free(got), free(got_t);
}

static bf16 *to_device(const bf16 *h, size_t n)
{
    bf16 *d;
    cudaCheck(cudaMalloc(&d, n * 2 + 16));
    cudaCheck(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    return d;
}

/* Every bf16 bit pattern, specials included, at scales that move the saturation and underflow
 * boundaries across the whole range. */
static void test_every_bf16(void)
{
    const int rows = 512, cols = 128;
    bf16 *b = (bf16 *)xmalloc((size_t)rows * cols * 2);
    float *h = (float *)xmalloc((size_t)rows * cols * 4);
    for (int i = 0; i < rows * cols; i++) {
        b[i] = (bf16)i;
        h[i] = bf16_to_float(b[i]);
    }
    bf16 *d = to_device(b, (size_t)rows * cols);
    const float scales[] = {1.0f, 1.3f, 0x1p-20f, 0x1.4p+21f};
    for (int f = 0; f < 2; f++)
        for (size_t s = 0; s < sizeof scales / sizeof *scales; s++) {
            cast_case c = {rows, cols, rows, (fp8_format)f, scales[s], h, d};
            check_casts(&c, "every bf16", 0.0f);
        }
    cudaCheck(cudaFree(d));
    free(b), free(h);
}

/* Random values x 2^(-16 .. 9), bf16. */
static void fill_wide(bf16 *b, float *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        b[i] = float_to_bf16(ldexpf(urand(), irand(26) - 16));
        h[i] = bf16_to_float(b[i]);
    }
}

static void test_shapes(void)
{
    static const int rows[] = {1, 2, 63, 64, 65, 127, 128, 129, 511, 512, 12900};
    static const int cols[] = {64, 768, 1024, 4096, 1001};
    size_t nmax = (size_t)12900 * 4096;
    bf16 *b = (bf16 *)xmalloc(nmax * 2);
    float *h = (float *)xmalloc(nmax * 4);
    for (size_t ci = 0; ci < sizeof cols / sizeof *cols; ci++)
        for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++) {
            int R = rows[ri], C = cols[ci];
            size_t n = (size_t)R * C;
            fill_wide(b, h, n);
            bf16 *d = to_device(b, n);
            /* ld_t: the rows exactly, or (every other row count) padded to 16 as the weight
             * gradient's K is */
            int ld_t = ri % 2 == 0 ? (R + 15) / 16 * 16 : R;
            cast_case c4 = {R, C, ld_t, FP8_E4M3, 1.37f, h, d}, c5 = {R, C, ld_t, FP8_E5M2, 175.0f, h, d};
            check_casts(&c4, "random", 0.0f);
            check_casts(&c5, "random", 0.0f);
            cudaCheck(cudaFree(d));
        }
    free(b), free(h);
}

/* amax as a running maximum, amax NULL, and pointers off the 16-byte alignment (element paths). */
static void test_amax_and_alignment(void)
{
    const int R = 65, C = 1024;
    size_t n = (size_t)R * C;
    bf16 *b = (bf16 *)xmalloc(n * 2);
    float *h = (float *)xmalloc(n * 4);
    fill_wide(b, h, n);
    bf16 *d = to_device(b, n);
    cast_case c = {R, C, R, FP8_E4M3, 2.0f, h, d};
    check_casts(&c, "amax from 1e30", 1e30f);
    /* in + 1: 2 bytes past the 16-byte alignment, an odd row (the element paths of both kernels) */
    cast_case off = {1, (int)n - 1, 1, FP8_E5M2, 3.0f, h + 1, d + 1};
    check_casts(&off, "unaligned", 0.0f);
    uint8_t *out_a, *out_b, *out_t;
    uint8_t *want = (uint8_t *)xmalloc(n), *want_t = (uint8_t *)xmalloc(n), *got = (uint8_t *)xmalloc(n);
    float *d_scale, one = 1.0f;
    cudaCheck(cudaMalloc(&out_a, n + 1));
    cudaCheck(cudaMalloc(&out_b, n));
    cudaCheck(cudaMalloc(&out_t, n));
    cudaCheck(cudaMalloc(&d_scale, 4));
    cudaCheck(cudaMemcpy(d_scale, &one, 4, cudaMemcpyHostToDevice));
    cast_fp8(out_a + 1, NULL, d, d_scale, R, C, FP8_E4M3, 0);
    cast_transpose_fp8(out_b, out_t, R, NULL, d, d_scale, R, C, FP8_E4M3, 0);
    cudaCheck(cudaDeviceSynchronize());
    cast_transpose_fp8_ref(want, want_t, R, NULL, h, &one, R, C, FP8_E4M3);
    size_t first = 0, bad = 0;
    cudaCheck(cudaMemcpy(got, out_a + 1, n, cudaMemcpyDeviceToHost));
    bad += bytes_differ(got, want, n, FP8_E4M3, &first);
    cudaCheck(cudaMemcpy(got, out_b, n, cudaMemcpyDeviceToHost));
    bad += bytes_differ(got, want, n, FP8_E4M3, &first);
    cudaCheck(cudaMemcpy(got, out_t, n, cudaMemcpyDeviceToHost));
    bad += bytes_differ(got, want_t, n, FP8_E4M3, &first);
    char line[200];
    snprintf(line, sizeof line, "cast_fp8 (out 1 byte past alignment) and cast_transpose_fp8 with amax NULL, rows %d "
             "cols %d: %zu bytes differ", R, C, bad);
    result(bad == 0, line);
    cudaCheck(cudaFree(out_a));
    cudaCheck(cudaFree(out_b));
    cudaCheck(cudaFree(out_t));
    cudaCheck(cudaFree(d_scale));
    free(want), free(want_t), free(got);
    cudaCheck(cudaFree(d));
    free(b), free(h);
}

/* ---- FP8 products ------------------------------------------------------------------------------------ */
typedef struct {
    cublasLtHandle_t lt;
    void *ws;
} lt_ctx;

/* An operand of `rows` rows of K FP8 values ld bytes apart (the padding [K, ld) zero), cast on the
 * device at scale s from random bf16 in [-1, 1): by cast_fp8 from a (rows, K) tensor, or (transposed)
 * as the transposed copy cast_transpose_fp8 makes of a (K, rows) tensor, as a weight gradient's
 * operands are. deq: the dequantized values (rows, K) dense, on the host. */
static uint8_t *operand(int rows, int K, int ld, int transposed, fp8_format f, float s, float *deq)
{
    size_t n = (size_t)rows * K, nq = (size_t)rows * ld;
    bf16 *b = (bf16 *)xmalloc(n * 2);
    for (size_t i = 0; i < n; i++)
        b[i] = float_to_bf16(urand());
    bf16 *d = to_device(b, n);
    uint8_t *q, *dense, *hq = (uint8_t *)xmalloc(nq);
    float *d_s;
    cudaCheck(cudaMalloc(&q, nq));
    cudaCheck(cudaMalloc(&dense, n));
    cudaCheck(cudaMalloc(&d_s, 4));
    cudaCheck(cudaMemcpy(d_s, &s, 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(q, 0, nq));
    if (transposed) {
        cast_transpose_fp8(dense, q, ld, NULL, d, d_s, K, rows, f, 0);
    } else {
        cast_fp8(dense, NULL, d, d_s, rows, K, f, 0);
        cudaCheck(cudaMemcpy2D(q, ld, dense, K, K, rows, cudaMemcpyDeviceToDevice));
    }
    cudaCheck(cudaMemcpy(hq, q, nq, cudaMemcpyDeviceToHost));
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < K; k++)
            deq[(size_t)r * K + k] = fp8_to_float_ref(hq[(size_t)r * ld + k], f) * (1.0f / s);
    cudaCheck(cudaFree(d));
    cudaCheck(cudaFree(dense));
    cudaCheck(cudaFree(d_s));
    free(b), free(hq);
    return q;
}

static float *device_floats(const float *h, size_t n)
{
    float *d;
    cudaCheck(cudaMalloc(&d, n * 4 + 16));
    cudaCheck(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
    return d;
}

/* Host floats rounded to bf16 (in place), and their device copy. */
static bf16 *bf16_device(float *h, size_t n)
{
    bf16 *b = (bf16 *)xmalloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        b[i] = float_to_bf16(h[i]);
        h[i] = bf16_to_float(b[i]);
    }
    bf16 *d = to_device(b, n);
    free(b);
    return d;
}

static void bf16_host(float *h, const void *d, size_t n)
{
    bf16 *b = (bf16 *)xmalloc(n * 2);
    cudaCheck(cudaMemcpy(b, d, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        h[i] = bf16_to_float(b[i]);
    free(b);
}

typedef struct {
    const char *name;
    int M, N, K, ld; /* ld: the operands' row pitch (0: K); with transposed (weight gradient) copies */
    int transposed;
    fp8_format fa, fb;
    gemm_dtype dt;
    gemm_epilogue epi;
    int fast;
    float beta;
    int optional; /* a shape cuBLASLt may refuse: reported, not a failure */
    int ctx;      /* through the trainer's gemm_ctx (gemm_linear_fwd_fp8 / _bwd_data_fp8): ld 0, fast = (fa E4M3) */
} prod_case;

static gemm_ctx *the_ctx;

/* max over elements of |got - ref| / bound (NaN: infinity) */
static double worst_ratio(const float *got, const float *ref, const double *S, const double *AB, size_t n,
                          double rtol, double c, double g)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]) / (rtol * fabs(ref[i]) + c * S[i] + g * fabs(AB[i]) + 1e-30);
        if (!(e == e))
            return INFINITY;
        w = e > w ? e : w;
    }
    return w;
}

/* The plan of s, run once on these operands: NULL with the reason in why when cuBLASLt has no
 * algorithm for it or refuses it when it runs. sinv: A's dequantization scale, B's at sinv + 4. */
static gemm_fp8 *plan_and_run(lt_ctx *L, const gemm_fp8_shape *s, const float *sinv, void *bias, void *aux,
                              const uint8_t *A, const uint8_t *B, void *D, float beta, char *why, size_t nwhy)
{
    gemm_fp8 *p = gemm_fp8_create(L->lt, s, sinv, sinv + 4, bias, aux, L->ws, GEMM_WORKSPACE_BYTES, why, nwhy);
    int st = p ? gemm_fp8_run(p, A, B, D, 1.0f, beta, 0) : 0;
    if (st) {
        snprintf(why, nwhy, "cublasLtMatmul refused the heuristic's algorithm: status %d, %s", st,
                 cublasGetStatusString((cublasStatus_t)st));
        gemm_fp8_free(p);
        p = NULL;
    }
    return p;
}

/* 0, or -1 when cuBLASLt has no algorithm for a case that may be refused (optional, or M not a
 * multiple of 16: the caller then checks the product at M rounded up, as a trainer would pad its
 * token count). */
static int check_product(lt_ctx *L, const prod_case *pc)
{
    int rc = 0;
    const int M = pc->M, N = pc->N, K = pc->K, ld = pc->ld ? pc->ld : pc->K;
    const float sa = 200.0f, sb = 64.0f, inv[8] = {1.0f / sa, 0, 0, 0, 1.0f / sb}; /* 16 bytes apart */
    size_t nd = (size_t)M * N;
    float *a = (float *)xmalloc((size_t)M * K * 4), *b = (float *)xmalloc((size_t)N * K * 4);
    uint8_t *A = operand(M, K, ld, pc->transposed, pc->fa, sa, a);
    uint8_t *B = operand(N, K, ld, pc->transposed, pc->fb, sb, b);
    float *d_inv = device_floats(inv, 8);
    float *hbias = (float *)xmalloc(N * 4), *haux = (float *)xmalloc(nd * 4), *hd = (float *)xmalloc(nd * 4);
    for (int i = 0; i < N; i++)
        hbias[i] = urand();
    for (size_t i = 0; i < nd; i++)
        haux[i] = 2.0f * urand(), hd[i] = urand();
    bf16 *bias = bf16_device(hbias, N), *aux = bf16_device(haux, nd);
    void *D;
    if (pc->dt == GEMM_F32) {
        D = device_floats(hd, nd);
    } else {
        D = bf16_device(hd, nd);
    }
    if (pc->beta == 0.0f)
        cudaCheck(cudaMemset(D, 0xff, nd * (pc->dt == GEMM_F32 ? 4 : 2)));
    if (pc->epi == GEMM_EPI_GELU_BIAS)
        cudaCheck(cudaMemset(aux, 0xff, nd * 2));
    gemm_fp8_shape s = {M, N, K, ld, ld, pc->fa, pc->fb, pc->dt, pc->epi, pc->fast};
    char why[200], refused[260] = "";
    gemm_fp8 *p = NULL;
    gemm_epilogue epi = pc->epi;
    int ran_ctx = 0;
    if (pc->ctx) { /* stops the program, naming the shape, where cuBLASLt refuses it */
        if (pc->fa == FP8_E4M3)
            gemm_linear_fwd_fp8(the_ctx, M, K, N, A, B, d_inv, d_inv + 4, epi == GEMM_EPI_NONE ? NULL : bias, D, aux,
                                epi == GEMM_EPI_GELU_BIAS, 0);
        else
            gemm_linear_bwd_data_fp8(the_ctx, M, N, K, A, B, d_inv, d_inv + 4, D, pc->beta, 0);
        ran_ctx = 1;
    } else {
        p = plan_and_run(L, &s, d_inv, bias, aux, A, B, D, pc->beta, why, sizeof why);
    }
    if (!p && !pc->ctx && epi != GEMM_EPI_NONE) {
        snprintf(refused, sizeof refused, " [epilogue refused: %s; checked without it]", why);
        s.epi = epi = GEMM_EPI_NONE;
        p = plan_and_run(L, &s, d_inv, bias, aux, A, B, D, pc->beta, why, sizeof why);
    }
    char line[600];
    snprintf(line, sizeof line, "fp8 gemm %-23s M %4d N %4d K %4d ld %4d %s x %s D %s beta %g fast %d%s", pc->name,
             M, N, K, ld, fmt_name(pc->fa), fmt_name(pc->fb), pc->dt == GEMM_F32 ? "fp32" : "bf16", (double)pc->beta,
             pc->fast, pc->ctx ? " (gemm_ctx)" : "");
    if (!p && !ran_ctx && (pc->optional || pc->M % 16)) {
        printf("skip %s: %s\n", line, why);
        rc = -1;
    } else if (!p && !ran_ctx) {
        snprintf(line + strlen(line), sizeof line - strlen(line), ": %s", why);
        result(0, line);
    } else {
        cudaCheck(cudaDeviceSynchronize());
        float *got = (float *)xmalloc(nd * 4), *ref = (float *)xmalloc(nd * 4), *raux = (float *)xmalloc(nd * 4);
        if (pc->dt == GEMM_F32)
            cudaCheck(cudaMemcpy(got, D, nd * 4, cudaMemcpyDeviceToHost));
        else
            bf16_host(got, D, nd);
        /* S = |A| |B|^T and AB, the scales of the bound */
        float *aa = (float *)xmalloc((size_t)M * K * 4), *ab = (float *)xmalloc((size_t)N * K * 4);
        float *fS = (float *)xmalloc(nd * 4), *fAB = (float *)xmalloc(nd * 4);
        double *S = (double *)xmalloc(nd * 8), *AB = (double *)xmalloc(nd * 8);
        for (size_t i = 0; i < (size_t)M * K; i++)
            aa[i] = fabsf(a[i]);
        for (size_t i = 0; i < (size_t)N * K; i++)
            ab[i] = fabsf(b[i]);
        gemm_ref(M, N, K, 0, 1, aa, ab, fS, 1.0f, 0.0f, GEMM_REF_NONE, NULL, NULL);
        gemm_ref(M, N, K, 0, 1, a, b, fAB, 1.0f, 0.0f, GEMM_REF_NONE, NULL, NULL);
        for (size_t i = 0; i < nd; i++)
            S[i] = fS[i], AB[i] = fAB[i];
        memcpy(ref, hd, nd * 4);
        memcpy(raux, haux, nd * 4);
        static const int ref_epi[] = {GEMM_REF_NONE, GEMM_REF_BIAS, GEMM_REF_GELU_BIAS, GEMM_REF_DGELU};
        gemm_ref(M, N, K, 0, 1, a, b, ref, 1.0f, pc->beta, ref_epi[epi], hbias, raux);
        double rtol = pc->dt == GEMM_F32 ? 1e-6 : 0x1p-8, c = pc->fast ? 0x1p-7 : 0x1p-11;
        double g = epi == GEMM_EPI_GELU_BIAS || epi == GEMM_EPI_DGELU ? 1e-3 : 0.0;
        if (pc->beta != 0.0f && pc->dt == GEMM_BF16)
            g += 0x1p-8;
        double w = worst_ratio(got, ref, S, AB, nd, rtol, 1.2 * c, g);
        if (epi == GEMM_EPI_GELU_BIAS) { /* aux = AB + bias, bf16 */
            float *gaux = (float *)xmalloc(nd * 4);
            bf16_host(gaux, aux, nd);
            double wa = worst_ratio(gaux, raux, S, AB, nd, 0x1p-8, c, 0.0);
            w = wa > w ? wa : w;
            free(gaux);
        }
        snprintf(line + strlen(line), sizeof line - strlen(line), ": worst %.3f of the bound%s", w, refused);
        result(w <= 1.0, line);
        free(got), free(ref), free(raux), free(aa), free(ab), free(fS), free(fAB), free(S), free(AB);
        gemm_fp8_free(p);
    }
    cudaCheck(cudaFree(A));
    cudaCheck(cudaFree(B));
    cudaCheck(cudaFree(d_inv));
    cudaCheck(cudaFree(bias));
    cudaCheck(cudaFree(aux));
    cudaCheck(cudaFree(D));
    free(a), free(b), free(hbias), free(haux), free(hd);
    return rc;
}

/* FFN1's forward with its output in E4M3 (gemm_linear_fwd_fp8_out, the trainer's path): the E4M3
 * bytes dequantized against gelu(AB + bias) within E4M3's rounding (2^-4 relative) and the products'
 * bound; aux (AB + bias, bf16) as in check_product; cuBLASLt's amax of D against the reference's
 * max |gelu(AB + bias)| (before the scale: the trainer's scales assume so) within 2%. */
static void check_fp8_out(int M, int N, int K)
{
    size_t nd = (size_t)M * N;
    const float sa = 200.0f, sb = 64.0f, sd = 4.0f;
    const float host[12] = {1.0f / sa, 0, 0, 0, 1.0f / sb, 0, 0, 0, sd, 0, 0, 0}; /* 16 bytes apart */
    float *a = (float *)xmalloc((size_t)M * K * 4), *b = (float *)xmalloc((size_t)N * K * 4);
    uint8_t *A = operand(M, K, K, 0, FP8_E4M3, sa, a), *B = operand(N, K, K, 0, FP8_E4M3, sb, b);
    float *d_s = device_floats(host, 12), *d_amax;
    cudaCheck(cudaMalloc(&d_amax, 16));
    cudaCheck(cudaMemset(d_amax, 0xff, 16));
    float *hbias = (float *)xmalloc(N * 4), *haux = (float *)xmalloc(nd * 4);
    for (int i = 0; i < N; i++)
        hbias[i] = urand();
    for (size_t i = 0; i < nd; i++)
        haux[i] = 0.0f;
    bf16 *bias = bf16_device(hbias, N), *aux = bf16_device(haux, nd);
    uint8_t *D;
    cudaCheck(cudaMalloc(&D, nd));
    cudaCheck(cudaMemset(D, 0xff, nd));
    cudaCheck(cudaMemset(aux, 0xff, nd * 2));
    gemm_linear_fwd_fp8_out(the_ctx, M, K, N, A, B, d_s, d_s + 4, bias, D, aux, 1, d_s + 8, d_amax, 0);
    cudaCheck(cudaDeviceSynchronize());
    uint8_t *hq = (uint8_t *)xmalloc(nd);
    float *got = (float *)xmalloc(nd * 4), *ref = (float *)xmalloc(nd * 4), *raux = (float *)xmalloc(nd * 4);
    float *gaux = (float *)xmalloc(nd * 4), *aa = (float *)xmalloc((size_t)M * K * 4);
    float *ab = (float *)xmalloc((size_t)N * K * 4), *fS = (float *)xmalloc(nd * 4), *fAB = (float *)xmalloc(nd * 4);
    double *S = (double *)xmalloc(nd * 8), *AB = (double *)xmalloc(nd * 8);
    float gamax;
    cudaCheck(cudaMemcpy(hq, D, nd, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(&gamax, d_amax, 4, cudaMemcpyDeviceToHost));
    bf16_host(gaux, aux, nd);
    for (size_t i = 0; i < nd; i++)
        got[i] = fp8_to_float_ref(hq[i], FP8_E4M3) / sd;
    for (size_t i = 0; i < (size_t)M * K; i++)
        aa[i] = fabsf(a[i]);
    for (size_t i = 0; i < (size_t)N * K; i++)
        ab[i] = fabsf(b[i]);
    gemm_ref(M, N, K, 0, 1, aa, ab, fS, 1.0f, 0.0f, GEMM_REF_NONE, NULL, NULL);
    gemm_ref(M, N, K, 0, 1, a, b, fAB, 1.0f, 0.0f, GEMM_REF_NONE, NULL, NULL);
    for (size_t i = 0; i < nd; i++)
        S[i] = fS[i], AB[i] = fAB[i], ref[i] = 0.0f;
    memcpy(raux, haux, nd * 4);
    gemm_ref(M, N, K, 0, 1, a, b, ref, 1.0f, 0.0f, GEMM_REF_GELU_BIAS, hbias, raux);
    double ramax = 0;
    for (size_t i = 0; i < nd; i++)
        ramax = fabs(ref[i]) > ramax ? fabs(ref[i]) : ramax;
    double c = 1.2 * 0x1p-7; /* fast accumulation */
    double w = worst_ratio(got, ref, S, AB, nd, 0x1p-4 * 1.1, c, 1e-3);
    double wa = worst_ratio(gaux, raux, S, AB, nd, 0x1p-8, c, 0.0);
    double ea = fabs(gamax - ramax) / ramax;
    char line[300];
    snprintf(line, sizeof line, "fp8 gemm ctx forward, E4M3 out (GELU_AUX) M %4d N %4d K %4d: D worst %.3f, aux worst "
             "%.3f of the bound; amax %g against %g (%.2f%%, bound 2%%)", M, N, K, w, wa, (double)gamax, ramax,
             100 * ea);
    result(w <= 1.0 && wa <= 1.0 && ea <= 0.02, line);
    cudaCheck(cudaFree(A));
    cudaCheck(cudaFree(B));
    cudaCheck(cudaFree(d_s));
    cudaCheck(cudaFree(d_amax));
    cudaCheck(cudaFree(bias));
    cudaCheck(cudaFree(aux));
    cudaCheck(cudaFree(D));
    free(a), free(b), free(hbias), free(haux), free(hq), free(got), free(ref), free(raux), free(gaux), free(aa);
    free(ab), free(fS), free(fAB), free(S), free(AB);
}

static void test_products(void)
{
    lt_ctx L;
    cublasCheck(cublasLtCreate(&L.lt));
    cudaCheck(cudaMalloc(&L.ws, GEMM_WORKSPACE_BYTES));
    const prod_case cases[] = {
        {"forward (+bias)", 129, 192, 256, 0, 0, FP8_E4M3, FP8_E4M3, GEMM_BF16, GEMM_EPI_BIAS, 1, 0.0f, 0, 0},
        {"forward (GELU aux)", 129, 256, 192, 0, 0, FP8_E4M3, FP8_E4M3, GEMM_BF16, GEMM_EPI_GELU_BIAS, 1, 0.0f, 0, 0},
        {"forward, split accum", 129, 192, 1024, 0, 0, FP8_E4M3, FP8_E4M3, GEMM_BF16, GEMM_EPI_NONE, 0, 0.0f, 0, 0},
        {"data grad (beta 1)", 129, 256, 192, 0, 0, FP8_E5M2, FP8_E4M3, GEMM_BF16, GEMM_EPI_NONE, 0, 1.0f, 0, 0},
        {"data grad (DGELU)", 129, 256, 192, 0, 0, FP8_E5M2, FP8_E4M3, GEMM_BF16, GEMM_EPI_DGELU, 0, 0.0f, 0, 0},
        {"weight grad, K 130", 192, 256, 130, 144, 1, FP8_E5M2, FP8_E4M3, GEMM_F32, GEMM_EPI_NONE, 0, 0.0f, 1, 0},
        {"weight grad, K 144", 192, 256, 144, 144, 1, FP8_E5M2, FP8_E4M3, GEMM_F32, GEMM_EPI_NONE, 0, 0.0f, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (check_product(&L, &cases[i]) && cases[i].M % 16) {
            prod_case padded = cases[i];
            padded.M = (padded.M + 15) / 16 * 16;
            check_product(&L, &padded);
        }
    /* the trainer's path: token counts in one bucket and in others, odd and even, one context */
    unpad_err err = {0, ""};
    the_ctx = gemm_ctx_create(1, &err);
    if (!the_ctx) {
        result(0, err.msg);
    } else {
        const prod_case via[] = {
            {"ctx forward (+bias)", 1003, 192, 256, 0, 0, FP8_E4M3, FP8_E4M3, GEMM_BF16, GEMM_EPI_BIAS, 1, 0.0f, 0, 1},
            {"ctx forward (+bias)", 1001, 192, 256, 0, 0, FP8_E4M3, FP8_E4M3, GEMM_BF16, GEMM_EPI_BIAS, 1, 0.0f, 0, 1},
            {"ctx forward (+bias)", 1000, 192, 256, 0, 0, FP8_E4M3, FP8_E4M3, GEMM_BF16, GEMM_EPI_BIAS, 1, 0.0f, 0, 1},
            {"ctx forward (GELU_AUX)", 4097, 256, 192, 0, 0, FP8_E4M3, FP8_E4M3, GEMM_BF16, GEMM_EPI_GELU_BIAS, 1, 0.0f,
             0, 1},
            {"ctx forward", 77, 1024, 4096, 0, 0, FP8_E4M3, FP8_E4M3, GEMM_BF16, GEMM_EPI_NONE, 1, 0.0f, 0, 1},
            {"ctx dgrad (beta 1)", 129, 256, 192, 0, 0, FP8_E5M2, FP8_E4M3, GEMM_BF16, GEMM_EPI_NONE, 0, 1.0f, 0, 1},
            {"ctx data grad", 2001, 192, 256, 0, 0, FP8_E5M2, FP8_E4M3, GEMM_BF16, GEMM_EPI_NONE, 0, 0.0f, 0, 1},
            {"ctx data grad", 2000, 192, 256, 0, 0, FP8_E5M2, FP8_E4M3, GEMM_BF16, GEMM_EPI_NONE, 0, 0.0f, 0, 1},
        };
        for (size_t i = 0; i < sizeof via / sizeof *via; i++)
            check_product(&L, &via[i]);
        check_fp8_out(1003, 256, 192);
        check_fp8_out(77, 4096, 1024);
        char line[160];
        snprintf(line, sizeof line, "gemm_ctx: %d plans for %zu FP8 products, %d fallbacks to an exact-shape plan",
                 gemm_ctx_plans(the_ctx), sizeof via / sizeof *via, gemm_ctx_fallbacks(the_ctx));
        result(gemm_ctx_plans(the_ctx) > 0, line);
        gemm_ctx_free(the_ctx);
    }
    cudaCheck(cudaFree(L.ws));
    cublasCheck(cublasLtDestroy(L.lt));
}

/* cast_transpose_fp8_batch: the bytes and maxima of one cast_transpose_fp8 per tensor, for tensors of
 * BERT's weight shapes and smaller ones in one launch (outputs poisoned; the transposes' padding
 * columns must stay poisoned). */
static void test_batch(void)
{
    enum { n = 6 };
    const int shape[n][3] = {{3072, 1024, 3072}, {1024, 1024, 1040}, {4096, 1024, 4096}, {1024, 4096, 1024},
                             {8, 8, 16}, {200, 136, 208}}; /* rows, cols, ld_t */
    fp8_cast_item h[n];
    uint8_t *ref_out[n], *ref_t[n];
    float *d_amax, *d_scale, scales[n * 4];
    cudaCheck(cudaMalloc(&d_amax, 2 * n * 4));
    cudaCheck(cudaMalloc(&d_scale, n * 4));
    cudaCheck(cudaMemset(d_amax, 0, 2 * n * 4));
    for (int i = 0; i < n; i++)
        scales[i] = (float)(1 << (i + 2));
    cudaCheck(cudaMemcpy(d_scale, scales, n * 4, cudaMemcpyHostToDevice));
    int tiles = 0;
    for (int i = 0; i < n; i++) {
        int R = shape[i][0], C = shape[i][1], ld = shape[i][2];
        size_t e = (size_t)R * C;
        bf16 *hb = (bf16 *)xmalloc(e * 2);
        for (size_t j = 0; j < e; j++)
            hb[j] = float_to_bf16(urand() * 4.0f);
        bf16 *d = to_device(hb, e);
        free(hb);
        uint8_t *o, *ot;
        cudaCheck(cudaMalloc(&o, e));
        cudaCheck(cudaMalloc(&ot, (size_t)C * ld));
        cudaCheck(cudaMalloc(&ref_out[i], e));
        cudaCheck(cudaMalloc(&ref_t[i], (size_t)C * ld));
        cudaCheck(cudaMemset(o, 0xff, e));
        cudaCheck(cudaMemset(ot, 0xff, (size_t)C * ld));
        cudaCheck(cudaMemset(ref_out[i], 0xff, e));
        cudaCheck(cudaMemset(ref_t[i], 0xff, (size_t)C * ld));
        h[i] = fp8_cast_item{o, ot, ld, d_amax + i, d, d_scale + i, R, C};
        cast_transpose_fp8(ref_out[i], ref_t[i], ld, d_amax + n + i, d, d_scale + i, R, C, FP8_E4M3, 0);
        int t = ((R + 127) / 128) * ((C + 127) / 128);
        tiles = t > tiles ? t : tiles;
    }
    fp8_cast_item *d_items;
    cudaCheck(cudaMalloc(&d_items, sizeof h));
    cudaCheck(cudaMemcpy(d_items, h, sizeof h, cudaMemcpyHostToDevice));
    int ok_shapes = 1;
    for (int i = 0; i < n; i++)
        ok_shapes &= fp8_cast_item_ok(&h[i]);
    cast_transpose_fp8_batch(d_items, n, tiles, FP8_E4M3, 0);
    cudaCheck(cudaDeviceSynchronize());
    size_t bad = 0;
    float am[2 * n];
    cudaCheck(cudaMemcpy(am, d_amax, sizeof am, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        size_t e = (size_t)shape[i][0] * shape[i][1], et = (size_t)shape[i][1] * shape[i][2];
        uint8_t *a = (uint8_t *)xmalloc(et), *b = (uint8_t *)xmalloc(et);
        cudaCheck(cudaMemcpy(a, h[i].out, e, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(b, ref_out[i], e, cudaMemcpyDeviceToHost));
        bad += memcmp(a, b, e) != 0;
        cudaCheck(cudaMemcpy(a, h[i].out_t, et, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(b, ref_t[i], et, cudaMemcpyDeviceToHost));
        bad += memcmp(a, b, et) != 0;
        bad += am[i] != am[n + i];
        free(a), free(b);
        cudaCheck(cudaFree(h[i].out));
        cudaCheck(cudaFree(h[i].out_t));
        cudaCheck(cudaFree((void *)h[i].in));
        cudaCheck(cudaFree(ref_out[i]));
        cudaCheck(cudaFree(ref_t[i]));
    }
    char line[200];
    snprintf(line, sizeof line, "cast_transpose_fp8_batch: %d tensors (BERT-Large's weight shapes and two others) as "
             "cast_transpose_fp8 each: %zu of %d outputs or maxima differ%s", n, bad, 3 * n,
             ok_shapes ? "" : " (fp8_cast_item_ok refused a shape)");
    result(bad == 0 && ok_shapes, line);
    cudaCheck(cudaFree(d_items));
    cudaCheck(cudaFree(d_amax));
    cudaCheck(cudaFree(d_scale));
}

/* ---- delayed scaling -------------------------------------------------------------------------------- */
static void test_scales(void)
{
    enum { n = 97, len = FP8_HISTORY, rounds = 20 };
    float amax[n], hist[n * len], scale[n], inv[8 * n], g_hist[n * len], g_scale[n], g_inv[8 * n], g_amax[n];
    uint8_t fmt[n];
    for (int i = 0; i < n; i++) {
        fmt[i] = (uint8_t)(i % 3 == 0 ? FP8_E5M2 : FP8_E4M3);
        scale[i] = 1.0f;
    }
    for (int i = 0; i < 8 * n; i++)
        inv[i] = 1.0f;
    memset(hist, 0, sizeof hist);
    float *d_amax, *d_hist, *d_scale, *d_inv;
    uint8_t *d_fmt;
    cudaCheck(cudaMalloc(&d_amax, sizeof amax));
    cudaCheck(cudaMalloc(&d_hist, sizeof hist));
    cudaCheck(cudaMalloc(&d_scale, sizeof scale));
    cudaCheck(cudaMalloc(&d_inv, sizeof inv));
    cudaCheck(cudaMalloc(&d_fmt, sizeof fmt));
    cudaCheck(cudaMemcpy(d_hist, hist, sizeof hist, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_scale, scale, sizeof scale, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_inv, inv, sizeof inv, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_fmt, fmt, sizeof fmt, cudaMemcpyHostToDevice));
    int bad = 0, pos = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++) {
            int k = irand(10);
            amax[i] = k == 0 ? 0.0f : k == 1 ? INFINITY : k == 2 ? NAN : k == 3 ? 1e-40f : k == 4 ? 3e38f
                    : ldexpf(1.0f + 0.5f * urand(), irand(60) - 30);
        }
        int init = r == 0 || r == 7;
        cudaCheck(cudaMemcpy(d_amax, amax, sizeof amax, cudaMemcpyHostToDevice));
        fp8_scales_update(d_amax, d_hist, d_scale, d_inv, d_fmt, n, len, pos, init, 0);
        fp8_scales_update_ref(amax, hist, scale, inv, fmt, n, len, pos, init);
        if (!init)
            pos = (pos + 1) % len;
        cudaCheck(cudaMemcpy(g_amax, d_amax, sizeof amax, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(g_hist, d_hist, sizeof hist, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(g_scale, d_scale, sizeof scale, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(g_inv, d_inv, sizeof inv, cudaMemcpyDeviceToHost));
        bad += memcmp(g_amax, amax, sizeof amax) != 0 || memcmp(g_hist, hist, sizeof hist) != 0 ||
               memcmp(g_scale, scale, sizeof scale) != 0;
        for (int i = 0; i < n; i++)
            bad += memcmp(&g_inv[8 * i], &inv[8 * i], 4) != 0 || memcmp(&g_inv[8 * i + 4], &inv[8 * i + 4], 4) != 0;
    }
    char line[160];
    snprintf(line, sizeof line, "fp8_scales_update: %d tensors x %d updates, history, scales and inverses as the "
             "reference bit for bit (%d differ)", n, rounds, bad);
    result(bad == 0, line);
    cudaCheck(cudaFree(d_amax));
    cudaCheck(cudaFree(d_hist));
    cudaCheck(cudaFree(d_scale));
    cudaCheck(cudaFree(d_inv));
    cudaCheck(cudaFree(d_fmt));
}

int main(void)
{
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("test_fp8 on %s, cuBLASLt %zu\n", prop.name, cublasLtGetVersion());
    test_every_bf16();
    test_amax_and_alignment();
    test_shapes();
    test_products();
    test_scales();
    test_batch();
    printf("test_fp8: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
