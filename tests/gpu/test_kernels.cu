/* test_kernels.cu — every launcher of kernels/kernels.h against its plain-C reference
 * (kernels/ref/ref.h) on fresh random inputs. The token batch is unpadded and ragged: lengths
 * 1, 2, 63, 64, 65, 127, 128, 129, 511, 512 in one batch (T = 1602), described by cu_seqlens.
 * Outputs are poisoned (all bits set: NaN in bf16 and fp32) before each run, so an element the
 * kernel fails to write fails the check; accumulated (+=) gradients start from random values, and
 * the same gradients written (accumulate 0, a step's first micro-batch) start poisoned.
 * Each output must satisfy |got - ref| <= atol + rtol |ref| element-wise, bounds stated per row.
 * Also checked: determinism (two runs bitwise equal) of the column reductions and of LAMB.
 * The accuracy, loss-total, tanh-GELU-backward and initialisation kernels are checked the same way.
 * Activations and weights are floatX (kernels/common.h): bf16 in bin/test_kernels, fp32 in
 * bin/test_kernels-fp32, with the same inputs drawn and bounds of that precision (TOL below).
 * Prints one table row per kernel output and exits nonzero on any FAIL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "dropout.h"
#include "ref/gemm_ref.h"
#include "ref/ref.h"

/* The atol, rtol pair of a check whose output depends on floatX: TOL(bf16 atol, bf16 rtol, fp32 atol,
 * fp32 rtol) is the first pair in the bf16 build, the second in the fp32 build. bf16 bounds allow
 * a few bf16 roundings (up to 2^-9 relative each). fp32 bounds allow fp32 arithmetic only (rsqrtf,
 * __expf, sums in another order): 1e-5 relative (2e-6 for mean and rstd), absolute floors from
 * the size of the values or sums (column sums: 1e-4; 2e-4 over 14000 rows; 4e-4 in the embedding,
 * whose reference adds its gradients in float). Each held with 5x margin or more on the H200
 * (CUDA 13.0, 2026-12-03); one bf16 rounding fails any of them. Outputs computed in fp32 alike in
 * both builds (losses, sums, LAMB state) keep one bound, written plainly. */
#ifdef UNPAD_FP32
#define TOL(bf16_atol, bf16_rtol, fp32_atol, fp32_rtol) (fp32_atol), (fp32_rtol)
#else
#define TOL(bf16_atol, bf16_rtol, fp32_atol, fp32_rtol) (bf16_atol), (bf16_rtol)
#endif

static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;
static float urand(void) /* uniform in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}
static int irand(int n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((rng_state >> 33) % (unsigned long long)n);
}

static float *hmalloc(size_t n)
{
    float *p = (float *)malloc((n ? n : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    return p;
}

/* The value a floatX store keeps: rounded to bf16, or f itself in the fp32 build. */
static float floatX_round(float f)
{
    return floatX_to_float(float_to_floatX(f));
}

/* Random values rounded to floatX: host mirror h (float) and a device copy. */
static floatX *dev_floatX_rand(float *h, size_t n, float scale, float offset)
{
    floatX *b = (floatX *)malloc((n ? n : 1) * sizeof(floatX)), *d;
    for (size_t i = 0; i < n; i++) {
        b[i] = float_to_floatX(offset + urand() * scale);
        h[i] = floatX_to_float(b[i]);
    }
    cudaCheck(cudaMalloc(&d, (n ? n : 1) * sizeof(floatX)));
    cudaCheck(cudaMemcpy(d, b, n * sizeof(floatX), cudaMemcpyHostToDevice));
    free(b);
    return d;
}
static floatX *dev_floatX_from(const float *h, size_t n) /* h must already hold floatX values */
{
    floatX *b = (floatX *)malloc((n ? n : 1) * sizeof(floatX)), *d;
    for (size_t i = 0; i < n; i++)
        b[i] = float_to_floatX(h[i]);
    cudaCheck(cudaMalloc(&d, (n ? n : 1) * sizeof(floatX)));
    cudaCheck(cudaMemcpy(d, b, n * sizeof(floatX), cudaMemcpyHostToDevice));
    free(b);
    return d;
}
static float *dev_f32_from(const float *h, size_t n)
{
    float *d;
    cudaCheck(cudaMalloc(&d, (n ? n : 1) * 4));
    cudaCheck(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
    return d;
}
static float *dev_f32_rand(float *h, size_t n, float scale, float offset)
{
    for (size_t i = 0; i < n; i++)
        h[i] = offset + urand() * scale;
    return dev_f32_from(h, n);
}
static int32_t *dev_i32_from(const int32_t *h, size_t n)
{
    int32_t *d;
    cudaCheck(cudaMalloc(&d, (n ? n : 1) * 4));
    cudaCheck(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
    return d;
}
static void *dev_poisoned(size_t bytes)
{
    void *d;
    cudaCheck(cudaMalloc(&d, bytes ? bytes : 1));
    cudaCheck(cudaMemset(d, 0xff, bytes));
    return d;
}
static void dfree(void *d)
{
    cudaCheck(cudaFree(d));
}
static floatX *dev_floatX_poisoned(size_t n)
{
    return (floatX *)dev_poisoned(n * sizeof(floatX));
}
static void get_floatX(float *h, const floatX *d, size_t n)
{
    floatX *b = (floatX *)malloc((n ? n : 1) * sizeof(floatX));
    cudaCheck(cudaMemcpy(b, d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        h[i] = floatX_to_float(b[i]);
    free(b);
}
static void get_f32(float *h, const float *d, size_t n)
{
    cudaCheck(cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost));
}

static int failures, rows_printed;

/* One table row: element-wise |got - ref| <= atol + rtol |ref|; NaN (e.g. poison) fails. */
static void check(const char *name, const float *got, const float *ref, size_t n, double atol,
                  double rtol)
{
    double max_abs = 0, max_rel = 0, worst = 0;
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        double bound = atol + rtol * fabs(ref[i]);
        if (!(e <= bound)) { /* also NaN */
            if (!bad)
                first_bad = i;
            bad++;
        }
        if (e == e) {
            max_abs = e > max_abs ? e : max_abs;
            if (fabs(ref[i]) > atol && e / fabs(ref[i]) > max_rel)
                max_rel = e / fabs(ref[i]);
            worst = e / bound > worst ? e / bound : worst;
        }
    }
    int ok = bad == 0;
    failures += !ok;
    if (rows_printed++ % 40 == 0)
        printf("%-34s %9s %11s %11s %20s %s\n", "kernel: output", "elements", "max abs err",
               "max rel err", "bound atol+rtol|ref|", "result");
    char bound[48];
    snprintf(bound, sizeof bound, "%.0e + %.0e|ref|", atol, rtol);
    printf("%-34s %9zu %11.3e %11.3e %20s %s", name, n, max_abs, max_rel, bound, ok ? "PASS" : "FAIL");
    if (!ok)
        printf("  (%zu bad, first [%zu] got %g ref %g)", bad, first_bad, got[first_bad], ref[first_bad]);
    printf("\n");
}

/* Bitwise equality of two runs (deterministic reductions). */
static void check_same(const char *name, const float *a, const float *b, size_t n)
{
    int ok = memcmp(a, b, n * sizeof(float)) == 0;
    failures += !ok;
    printf("%-34s %9zu %11s %11s %20s %s\n", name, n, "-", "-", "bitwise equal", ok ? "PASS" : "FAIL");
    rows_printed++;
}

/* ---- the ragged batch ---------------------------------------------------------------------------- */
static const int LENS[] = {129, 1, 512, 63, 2, 128, 65, 511, 64, 127};
enum { NSEQ = sizeof LENS / sizeof *LENS, MAXPOS = 512, TYPES = 2, VOCAB = 1000 };

typedef struct {
    int n, T;
    int32_t cu[NSEQ + 1], *ids, *types;
    int32_t *d_cu, *d_ids, *d_types;
} batch;

static void batch_make(batch *b)
{
    b->n = NSEQ;
    b->cu[0] = 0;
    for (int s = 0; s < NSEQ; s++)
        b->cu[s + 1] = b->cu[s] + LENS[s];
    b->T = b->cu[NSEQ];
    b->ids = (int32_t *)malloc(b->T * 4);
    b->types = (int32_t *)malloc(b->T * 4);
    for (int t = 0; t < b->T; t++) {
        b->ids[t] = irand(8) == 0 ? 3 : irand(VOCAB); /* a frequent id, like [MASK] */
        b->types[t] = irand(TYPES);
    }
    b->d_cu = dev_i32_from(b->cu, NSEQ + 1);
    b->d_ids = dev_i32_from(b->ids, b->T);
    b->d_types = dev_i32_from(b->types, b->T);
}

/* ---- embedding ----------------------------------------------------------------------------------- */
static void test_embedding(const batch *b, int H, float p)
{
    int T = b->T;
    const uint64_t seed = 0xabcdef12ull, sid = 7;
    float *hw = hmalloc((size_t)VOCAB * H), *hp = hmalloc((size_t)MAXPOS * H), *hy = hmalloc(TYPES * H);
    float *hg = hmalloc(H), *hb = hmalloc(H);
    floatX *w = dev_floatX_rand(hw, (size_t)VOCAB * H, 0.5f, 0);
    floatX *ps = dev_floatX_rand(hp, (size_t)MAXPOS * H, 0.5f, 0);
    floatX *ty = dev_floatX_rand(hy, TYPES * H, 0.5f, 0);
    floatX *g = dev_floatX_rand(hg, H, 0.5f, 1.0f), *be = dev_floatX_rand(hb, H, 0.5f, 0);
    size_t TH = (size_t)T * H;
    floatX *out = dev_floatX_poisoned(TH);
    float *mean = (float *)dev_poisoned(T * 4), *rstd = (float *)dev_poisoned(T * 4);
    embedding_fwd(out, mean, rstd, b->d_ids, b->d_types, b->d_cu, b->n, w, ps, ty, g, be, T, H,
                  1e-12f, p, seed, sid, 0);
    cudaCheck(cudaDeviceSynchronize());
    float *rout = hmalloc(TH), *rmean = hmalloc(T), *rrstd = hmalloc(T), *got = hmalloc(TH);
    embedding_fwd_ref(rout, rmean, rrstd, b->ids, b->types, b->cu, b->n, hw, hp, hy, hg, hb, T, H,
                      1e-12f, p, seed, sid);
    char name[64];
    get_floatX(got, out, TH);
    snprintf(name, sizeof name, "embedding_fwd H%d: out", H);
    check(name, got, rout, TH, TOL(1e-2, 1e-2, 1e-5, 1e-5));
    float *gmean = hmalloc(T), *grstd = hmalloc(T);
    get_f32(gmean, mean, T);
    get_f32(grstd, rstd, T);
    snprintf(name, sizeof name, "embedding_fwd H%d: mean", H);
    check(name, gmean, rmean, T, TOL(1e-6, 1e-4, 1e-6, 2e-6));
    snprintf(name, sizeof name, "embedding_fwd H%d: rstd", H);
    check(name, grstd, rrstd, T, TOL(1e-6, 1e-4, 1e-6, 2e-6));

    /* backward: accumulate into random gradients; the reference uses the GPU's statistics */
    float *hdo = hmalloc(TH), *hda = hmalloc(TH);
    floatX *dout = dev_floatX_rand(hdo, TH, 1.0f, 0), *dadd = dev_floatX_rand(hda, TH, 1.0f, 0);
    size_t nw = (size_t)VOCAB * H, np = (size_t)MAXPOS * H, nt = (size_t)TYPES * H;
    float *rdw = hmalloc(nw), *rdp = hmalloc(np), *rdt = hmalloc(nt), *rdg = hmalloc(H), *rdb = hmalloc(H);
    float *dw = dev_f32_rand(rdw, nw, 1, 0), *dp = dev_f32_rand(rdp, np, 1, 0), *dt = dev_f32_rand(rdt, nt, 1, 0);
    float *dg = dev_f32_rand(rdg, H, 1, 0), *db = dev_f32_rand(rdb, H, 1, 0);
    float *scratch;
    cudaCheck(cudaMalloc(&scratch, embedding_bwd_scratch_bytes(T, H, TYPES)));
    /* run twice from the same start to check determinism of dpos / dtype / dgamma / dbeta */
    float *run1[4];
    float *dsts[4] = {dp, dt, dg, db};
    size_t ns[4] = {np, nt, (size_t)H, (size_t)H};
    float *starts[4] = {rdp, rdt, rdg, rdb};
    for (int rep = 0; rep < 2; rep++) {
        for (int k = 0; k < 4; k++)
            cudaCheck(cudaMemcpy(dsts[k], starts[k], ns[k] * 4, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(dw, rdw, nw * 4, cudaMemcpyHostToDevice));
        embedding_bwd(dw, dp, dt, dg, db, dout, dadd, b->d_ids, b->d_types, b->d_cu, b->n, MAXPOS,
                      w, ps, ty, g, mean, rstd, T, H, TYPES, p, seed, sid, scratch, 0);
        cudaCheck(cudaDeviceSynchronize());
        if (rep == 0)
            for (int k = 0; k < 4; k++) {
                run1[k] = hmalloc(ns[k]);
                get_f32(run1[k], dsts[k], ns[k]);
            }
    }
    embedding_bwd_ref(rdw, rdp, rdt, rdg, rdb, hdo, hda, b->ids, b->types, b->cu, b->n, MAXPOS, hw,
                      hp, hy, hg, gmean, grstd, T, H, TYPES, p, seed, sid);
    const char *names[5] = {"dword", "dpos", "dtype", "dgamma", "dbeta"};
    float *devs[5] = {dw, dp, dt, dg, db}, *refs[5] = {rdw, rdp, rdt, rdg, rdb};
    size_t cnt[5] = {nw, np, nt, (size_t)H, (size_t)H};
    for (int k = 0; k < 5; k++) {
        float *h = hmalloc(cnt[k]);
        get_f32(h, devs[k], cnt[k]);
        snprintf(name, sizeof name, "embedding_bwd H%d: %s", H, names[k]);
        check(name, h, refs[k], cnt[k], TOL(2e-3, 1e-3, 4e-4, 1e-5));
        if (k >= 1) {
            snprintf(name, sizeof name, "embedding_bwd H%d: %s rerun", H, names[k]);
            check_same(name, h, run1[k - 1], cnt[k]);
            free(run1[k - 1]);
        }
        free(h);
    }
    dfree(w), dfree(ps), dfree(ty), dfree(g);
    dfree(be), dfree(out), dfree(mean), dfree(rstd);
    dfree(dout), dfree(dadd), dfree(dw), dfree(dp);
    dfree(dt), dfree(dg), dfree(db), dfree(scratch);
    free(hw), free(hp), free(hy), free(hg), free(hb), free(rout), free(rmean), free(rrstd), free(got);
    free(gmean), free(grstd), free(hdo), free(hda), free(rdw), free(rdp), free(rdt), free(rdg), free(rdb);
}

/* ---- LayerNorm, plain and fused ------------------------------------------------------------------ */
static void test_layernorm(int T, int H, int fused, float p)
{
    const uint64_t seed = 4242, sid = 13;
    size_t TH = (size_t)T * H;
    float *hx = hmalloc(TH), *hbias = hmalloc(H), *hres = hmalloc(TH), *hg = hmalloc(H), *hb = hmalloc(H);
    floatX *x = dev_floatX_rand(hx, TH, 2.0f, 0.3f), *bias = dev_floatX_rand(hbias, H, 0.5f, 0);
    floatX *res = dev_floatX_rand(hres, TH, 1.0f, 0);
    floatX *g = dev_floatX_rand(hg, H, 0.5f, 1.0f), *be = dev_floatX_rand(hb, H, 0.5f, 0);
    floatX *out = dev_floatX_poisoned(TH), *lnin = dev_floatX_poisoned(TH);
    float *mean = (float *)dev_poisoned(T * 4), *rstd = (float *)dev_poisoned(T * 4);
    float *rout = hmalloc(TH), *rln = hmalloc(TH), *rmean = hmalloc(T), *rrstd = hmalloc(T);
    float *got = hmalloc(TH), *gmean = hmalloc(T), *grstd = hmalloc(T), *gln = hmalloc(TH);
    const char *kn = fused ? "bias_dropout_residual_layernorm" : "layernorm";
    char name[96];
    if (fused) {
        bias_dropout_residual_layernorm_fwd(out, lnin, mean, rstd, x, bias, res, g, be, T, H, 1e-12f,
                                            p, seed, sid, 0);
        bias_dropout_residual_layernorm_fwd_ref(rout, rln, rmean, rrstd, hx, hbias, hres, hg, hb, T,
                                                H, 1e-12f, p, seed, sid);
        /* the kernel normalizes r rounded to floatX (what it saves in ln_in): so does the check */
        for (size_t i = 0; i < TH; i++)
            rln[i] = floatX_round(rln[i]);
        layernorm_fwd_ref(rout, rmean, rrstd, rln, hg, hb, T, H, 1e-12f);
    } else {
        layernorm_fwd(out, mean, rstd, x, g, be, T, H, 1e-12f, 0);
        layernorm_fwd_ref(rout, rmean, rrstd, hx, hg, hb, T, H, 1e-12f);
    }
    cudaCheck(cudaDeviceSynchronize());
    get_floatX(got, out, TH);
    get_f32(gmean, mean, T);
    get_f32(grstd, rstd, T);
    snprintf(name, sizeof name, "%s_fwd T%d H%d: out", fused ? "bdr_layernorm" : kn, T, H);
    check(name, got, rout, TH, TOL(2e-2, 1e-2, 1e-5, 1e-5));
    snprintf(name, sizeof name, "%s_fwd T%d H%d: mean", fused ? "bdr_layernorm" : kn, T, H);
    check(name, gmean, rmean, T, TOL(1e-4, 1e-4, 1e-6, 2e-6));
    snprintf(name, sizeof name, "%s_fwd T%d H%d: rstd", fused ? "bdr_layernorm" : kn, T, H);
    check(name, grstd, rrstd, T, TOL(1e-5, fused ? 1e-3 : 1e-4, 1e-6, 2e-6));
    if (fused) {
        get_floatX(gln, lnin, TH);
        snprintf(name, sizeof name, "bdr_layernorm_fwd T%d H%d: ln_in", T, H);
        check(name, gln, rln, TH, TOL(1e-2, 8e-3, 1e-6, 1e-6));
    } else {
        memcpy(gln, hx, TH * 4);
    }

    /* backward from the GPU's saved tensors */
    float *hdo = hmalloc(TH), *hda = hmalloc(TH);
    floatX *dout = dev_floatX_rand(hdo, TH, 1.0f, 0), *dadd = dev_floatX_rand(hda, TH, 1.0f, 0);
    floatX *dx = dev_floatX_poisoned(TH), *dres = dev_floatX_poisoned(TH);
    float *rdg = hmalloc(H), *rdb = hmalloc(H), *rdbias = hmalloc(H);
    float *dg = dev_f32_rand(rdg, H, 1, 0), *db = dev_f32_rand(rdb, H, 1, 0);
    float *dbias = dev_f32_rand(rdbias, H, 1, 0);
    float *start[3] = {hmalloc(H), hmalloc(H), hmalloc(H)};
    memcpy(start[0], rdg, H * 4), memcpy(start[1], rdb, H * 4), memcpy(start[2], rdbias, H * 4);
    float *scratch;
    cudaCheck(cudaMalloc(&scratch, layernorm_bwd_scratch_bytes(H)));
    float *run1[3] = {hmalloc(H), hmalloc(H), hmalloc(H)};
    float *devs[3] = {dg, db, dbias};
    for (int rep = 0; rep < 2; rep++) {
        for (int k = 0; k < 3; k++)
            cudaCheck(cudaMemcpy(devs[k], start[k], H * 4, cudaMemcpyHostToDevice));
        if (fused)
            bias_dropout_residual_layernorm_bwd(dx, dres, dbias, dg, db, dout, dadd, lnin, mean, rstd,
                                                g, T, H, p, seed, sid, scratch, 1, 0);
        else
            layernorm_bwd(dres, dg, db, dout, x, mean, rstd, g, T, H, scratch, 1, 0);
        cudaCheck(cudaDeviceSynchronize());
        if (rep == 0)
            for (int k = 0; k < 3; k++)
                get_f32(run1[k], devs[k], H);
    }
    /* write mode (accumulate 0) into poisoned gradients: the column sums alone */
    float *wg = (float *)dev_poisoned(H * 4), *wb = (float *)dev_poisoned(H * 4), *wbias = (float *)dev_poisoned(H * 4);
    if (fused)
        bias_dropout_residual_layernorm_bwd(dx, dres, wbias, wg, wb, dout, dadd, lnin, mean, rstd, g, T, H, p,
                                            seed, sid, scratch, 0, 0);
    else
        layernorm_bwd(dres, wg, wb, dout, x, mean, rstd, g, T, H, scratch, 0, 0);
    cudaCheck(cudaDeviceSynchronize());
    float *zdg = hmalloc(H), *zdb = hmalloc(H), *zdbias = hmalloc(H);
    memset(zdg, 0, H * 4), memset(zdb, 0, H * 4), memset(zdbias, 0, H * 4);
    float *rdx = hmalloc(TH), *rdres = hmalloc(TH);
    if (fused) {
        bias_dropout_residual_layernorm_bwd_ref(rdx, rdres, zdbias, zdg, zdb, hdo, hda, gln, gmean,
                                                grstd, hg, T, H, p, seed, sid);
        bias_dropout_residual_layernorm_bwd_ref(rdx, rdres, rdbias, rdg, rdb, hdo, hda, gln, gmean,
                                                grstd, hg, T, H, p, seed, sid);
    } else {
        layernorm_bwd_ref(rdres, zdg, zdb, hdo, gln, gmean, grstd, hg, T, H);
        layernorm_bwd_ref(rdres, rdg, rdb, hdo, gln, gmean, grstd, hg, T, H);
    }
    const char *pre = fused ? "bdr_layernorm_bwd" : "layernorm_bwd";
    get_floatX(got, dres, TH);
    snprintf(name, sizeof name, "%s T%d H%d: %s", pre, T, H, fused ? "dresidual" : "dx");
    check(name, got, rdres, TH, TOL(1e-2, 1e-2, 1e-5, 1e-5));
    if (fused) {
        get_floatX(got, dx, TH);
        snprintf(name, sizeof name, "%s T%d H%d: dx", pre, T, H);
        check(name, got, rdx, TH, TOL(1e-2, 1e-2, 1e-5, 1e-5));
    }
    const char *pn[3] = {"dgamma", "dbeta", "dbias"};
    float *prefs[3] = {rdg, rdb, rdbias};
    for (int k = 0; k < (fused ? 3 : 2); k++) {
        float *h = hmalloc(H);
        get_f32(h, devs[k], H);
        snprintf(name, sizeof name, "%s T%d H%d: %s", pre, T, H, pn[k]);
        check(name, h, prefs[k], H, TOL(2e-3, 1e-3, 2e-4, 1e-5));
        snprintf(name, sizeof name, "%s T%d H%d: %s rerun", pre, T, H, pn[k]);
        check_same(name, h, run1[k], H);
        float *wdev[3] = {wg, wb, wbias}, *wref[3] = {zdg, zdb, zdbias};
        get_f32(h, wdev[k], H);
        snprintf(name, sizeof name, "%s T%d H%d: %s written", pre, T, H, pn[k]);
        check(name, h, wref[k], H, TOL(2e-3, 1e-3, 2e-4, 1e-5));
        free(h);
    }
    dfree(wg), dfree(wb), dfree(wbias);
    free(zdg), free(zdb), free(zdbias);
    dfree(x), dfree(bias), dfree(res), dfree(g);
    dfree(be), dfree(out), dfree(lnin), dfree(mean);
    dfree(rstd), dfree(dout), dfree(dadd), dfree(dx);
    dfree(dres), dfree(dg), dfree(db), dfree(dbias);
    dfree(scratch);
    free(hx), free(hbias), free(hres), free(hg), free(hb), free(rout), free(rln), free(rmean), free(rrstd);
    free(got), free(gmean), free(grstd), free(gln), free(hdo), free(hda), free(rdg), free(rdb), free(rdbias);
    free(rdx), free(rdres);
    for (int k = 0; k < 3; k++)
        free(start[k]), free(run1[k]);
}

/* ---- bias + activation --------------------------------------------------------------------------- */
static void test_activation(int T, int N, int tanh_act)
{
    size_t TN = (size_t)T * N;
    float *hx = hmalloc(TN), *hb = hmalloc(N), *hdo = hmalloc(TN);
    floatX *x = dev_floatX_rand(hx, TN, 3.0f, 0), *bias = dev_floatX_rand(hb, N, 0.5f, 0);
    floatX *dout = dev_floatX_rand(hdo, TN, 1.0f, 0);
    floatX *out = dev_floatX_poisoned(TN), *dx = dev_floatX_poisoned(TN);
    float *rout = hmalloc(TN), *rdx = hmalloc(TN), *got = hmalloc(TN), *rdb = hmalloc(N), *gdb = hmalloc(N);
    float *db = dev_f32_rand(rdb, N, 1, 0);
    float *scratch;
    cudaCheck(cudaMalloc(&scratch, bias_bwd_scratch_bytes(N)));
    const char *kn = tanh_act ? "bias_tanh" : "bias_gelu";
    char name[96];
    if (tanh_act) {
        bias_tanh_fwd(out, x, bias, T, N, 0);
        bias_tanh_fwd_ref(rout, hx, hb, T, N);
    } else {
        bias_gelu_fwd(out, x, bias, T, N, 0);
        bias_gelu_fwd_ref(rout, hx, hb, T, N);
    }
    cudaCheck(cudaDeviceSynchronize());
    get_floatX(got, out, TN);
    snprintf(name, sizeof name, "%s_fwd T%d N%d: out", kn, T, N);
    check(name, got, rout, TN, TOL(1e-3, 8e-3, 2e-6, 1e-5));
    float *hout = hmalloc(TN);
    memcpy(hout, got, TN * 4); /* tanh backward reads the GPU's floatX output */
    /* accumulate into random values, then write into poisoned ones (dx alike both times) */
    float *wdb = (float *)dev_poisoned(N * 4), *zdb = hmalloc(N);
    memset(zdb, 0, N * 4);
    if (tanh_act) {
        bias_tanh_bwd(dx, db, dout, out, T, N, scratch, 1, 0);
        bias_tanh_bwd(dx, wdb, dout, out, T, N, scratch, 0, 0);
        bias_tanh_bwd_ref(rdx, rdb, hdo, hout, T, N);
        bias_tanh_bwd_ref(rdx, zdb, hdo, hout, T, N);
    } else {
        bias_gelu_bwd(dx, db, dout, x, bias, T, N, scratch, 1, 0);
        bias_gelu_bwd(dx, wdb, dout, x, bias, T, N, scratch, 0, 0);
        bias_gelu_bwd_ref(rdx, rdb, hdo, hx, hb, T, N);
        bias_gelu_bwd_ref(rdx, zdb, hdo, hx, hb, T, N);
    }
    cudaCheck(cudaDeviceSynchronize());
    get_floatX(got, dx, TN);
    snprintf(name, sizeof name, "%s_bwd T%d N%d: dx", kn, T, N);
    check(name, got, rdx, TN, TOL(1e-3, 8e-3, 2e-6, 1e-5));
    get_f32(gdb, db, N);
    snprintf(name, sizeof name, "%s_bwd T%d N%d: dbias", kn, T, N);
    check(name, gdb, rdb, N, TOL(2e-3, 1e-3, 1e-4, 1e-5));
    get_f32(gdb, wdb, N);
    snprintf(name, sizeof name, "%s_bwd T%d N%d: dbias written", kn, T, N);
    check(name, gdb, zdb, N, TOL(2e-3, 1e-3, 1e-4, 1e-5));
    dfree(wdb), free(zdb);
    dfree(x), dfree(bias), dfree(dout), dfree(out);
    dfree(dx), dfree(db), dfree(scratch);
    free(hx), free(hb), free(hdo), free(rout), free(rdx), free(got), free(rdb), free(gdb), free(hout);
}

#ifndef UNPAD_FP32
static void check_fp8_copy(const char *name, const uint8_t *d_q, const float *d_amax, const float *got, size_t n,
                           float s, fp8_format f);
#endif

static void test_bias_bwd(int T, int N)
{
    size_t TN = (size_t)T * N;
    float *hdo = hmalloc(TN), *rdb = hmalloc(N), *gdb = hmalloc(N), *run1 = hmalloc(N), *start = hmalloc(N);
    floatX *dout = dev_floatX_rand(hdo, TN, 1.0f, 0);
    float *db = dev_f32_rand(rdb, N, 1, 0);
    memcpy(start, rdb, N * 4);
    float *scratch;
    cudaCheck(cudaMalloc(&scratch, bias_bwd_scratch_bytes(N)));
    for (int rep = 0; rep < 2; rep++) {
        cudaCheck(cudaMemcpy(db, start, N * 4, cudaMemcpyHostToDevice));
        bias_bwd(db, dout, T, N, scratch, 1, 0);
        cudaCheck(cudaDeviceSynchronize());
        get_f32(rep ? gdb : run1, db, N);
    }
    bias_bwd_ref(rdb, hdo, T, N);
    char name[96];
    snprintf(name, sizeof name, "bias_bwd T%d N%d: dbias", T, N);
    check(name, gdb, rdb, N, TOL(2e-3, 1e-3, 1e-4, 1e-5));
    snprintf(name, sizeof name, "bias_bwd T%d N%d: dbias rerun", T, N);
    check_same(name, gdb, run1, N);
    /* write mode into poisoned values: the column sums alone */
    float *wdb = (float *)dev_poisoned(N * 4);
    bias_bwd(wdb, dout, T, N, scratch, 0, 0);
    cudaCheck(cudaDeviceSynchronize());
    get_f32(gdb, wdb, N);
    memset(start, 0, N * 4);
    bias_bwd_ref(start, hdo, T, N);
    snprintf(name, sizeof name, "bias_bwd T%d N%d: dbias written", T, N);
    check(name, gdb, start, N, TOL(2e-3, 1e-3, 1e-4, 1e-5));
    dfree(wdb);
    dfree(dout), dfree(db), dfree(scratch);
    free(hdo), free(rdb), free(gdb), free(run1), free(start);
}

/* The QKV bias gradient (bias_bwd_qkv): the query's and the value's column sums against the reference,
 * the key's written 0 or left as it was, bit for bit; twice the same; with the FP8 copy, dout's E5M2
 * bytes too. dout (T, 3H). */
static void test_bias_bwd_qkv(int T, int H)
{
    size_t N = (size_t)3 * H, TN = (size_t)T * N;
    float *hdo = hmalloc(TN), *ref = hmalloc(N), *want = hmalloc(N), *start = hmalloc(N), *got = hmalloc(N),
          *run1 = hmalloc(N);
    floatX *dout = dev_floatX_rand(hdo, TN, 1.0f, 0);
    float *db = dev_f32_rand(start, N, 1, 0), *scratch;
    cudaCheck(cudaMalloc(&scratch, bias_bwd_scratch_bytes((int)N)));
    memset(ref, 0, N * 4);
    bias_bwd_ref(ref, hdo, T, (int)N);
    char name[96];
    for (int f8 = 0; f8 < 2; f8++) {
        uint8_t *q = NULL;
        float *amax = NULL, *scale = NULL;
#ifdef UNPAD_FP32
        if (f8)
            break;
#else
        const float s8 = 1024.0f, zero = 0.0f;
        if (f8) {
            q = (uint8_t *)dev_poisoned(TN);
            cudaCheck(cudaMalloc(&amax, 4));
            cudaCheck(cudaMalloc(&scale, 4));
            cudaCheck(cudaMemcpy(amax, &zero, 4, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(scale, &s8, 4, cudaMemcpyHostToDevice));
        }
#endif
        const char *k = f8 ? "bias_bwd_qkv fp8" : "bias_bwd_qkv";
        /* accumulate, twice: start + sums; the key's third as it was */
        for (int rep = 0; rep < 2; rep++) {
            cudaCheck(cudaMemcpy(db, start, N * 4, cudaMemcpyHostToDevice));
            bias_bwd_qkv(db, q, amax, scale, dout, T, H, scratch, 1, 0);
            cudaCheck(cudaDeviceSynchronize());
            get_f32(rep ? got : run1, db, N);
        }
        for (size_t c = 0; c < N; c++)
            want[c] = c >= (size_t)H && c < (size_t)2 * H ? start[c] : start[c] + ref[c];
        snprintf(name, sizeof name, "%s T%d H%d: dq, dv added", k, T, H);
        check(name, got, want, H, TOL(2e-3, 1e-3, 1e-4, 1e-5));
        check(name, got + 2 * H, want + 2 * H, H, TOL(2e-3, 1e-3, 1e-4, 1e-5));
        snprintf(name, sizeof name, "%s T%d H%d: dk kept", k, T, H);
        check_same(name, got + H, start + H, H);
        snprintf(name, sizeof name, "%s T%d H%d: rerun", k, T, H);
        check_same(name, got, run1, N);
        /* write mode into poisoned values: the sums, and zeros for the key */
        float *wdb = (float *)dev_poisoned(N * 4);
        bias_bwd_qkv(wdb, q, amax, scale, dout, T, H, scratch, 0, 0);
        cudaCheck(cudaDeviceSynchronize());
        get_f32(got, wdb, N);
        for (size_t c = 0; c < N; c++)
            want[c] = c >= (size_t)H && c < (size_t)2 * H ? 0.0f : ref[c];
        snprintf(name, sizeof name, "%s T%d H%d: dq, dv written", k, T, H);
        check(name, got, want, H, TOL(2e-3, 1e-3, 1e-4, 1e-5));
        check(name, got + 2 * H, want + 2 * H, H, TOL(2e-3, 1e-3, 1e-4, 1e-5));
        snprintf(name, sizeof name, "%s T%d H%d: dk written 0", k, T, H);
        check_same(name, got + H, want + H, H);
#ifndef UNPAD_FP32
        if (f8) {
            snprintf(name, sizeof name, "%s T%d H%d: dout", k, T, H);
            check_fp8_copy(name, q, amax, hdo, TN, s8, FP8_E5M2);
            dfree(q), dfree(amax), dfree(scale);
        }
#endif
        dfree(wdb);
    }
    /* no rows: written zero */
    float *zdb = (float *)dev_poisoned(N * 4);
    bias_bwd_qkv(zdb, NULL, NULL, NULL, dout, 0, H, scratch, 0, 0);
    cudaCheck(cudaDeviceSynchronize());
    get_f32(got, zdb, N);
    memset(want, 0, N * 4);
    snprintf(name, sizeof name, "bias_bwd_qkv T0 H%d: written 0", H);
    check_same(name, got, want, N);
    dfree(zdb);
    dfree(dout), dfree(db), dfree(scratch);
    free(hdo), free(ref), free(want), free(start), free(got), free(run1);
}

/* ---- gather / scatter, losses -------------------------------------------------------------------- */
static void test_rows(const batch *b, int H)
{
    int T = b->T;
    int32_t *rows = (int32_t *)malloc(T * 4);
    int P = 0;
    for (int t = 0; t < T; t++) /* about 15% of the tokens, each at most once, in order */
        if (irand(100) < 15)
            rows[P++] = t;
    rows[P++] = T - 1;
    size_t TH = (size_t)T * H, PH = (size_t)P * H;
    float *hin = hmalloc(TH), *hdst = hmalloc(TH), *ref = hmalloc(PH > TH ? PH : TH), *got = hmalloc(TH);
    floatX *in = dev_floatX_rand(hin, TH, 2.0f, 0), *dst = dev_floatX_rand(hdst, TH, 2.0f, 0);
    floatX *out = dev_floatX_poisoned(PH);
    int32_t *drows = dev_i32_from(rows, P);
    rows_gather(out, in, drows, P, H, 0);
    rows_scatter_add(dst, in, drows, P, H, 0); /* src: the first P rows of `in` */
    cudaCheck(cudaDeviceSynchronize());
    rows_gather_ref(ref, hin, rows, P, H);
    get_floatX(got, out, PH);
    char name[96];
    snprintf(name, sizeof name, "rows_gather P%d H%d: out", P, H);
    check(name, got, ref, PH, 0, 0);
    rows_scatter_add_ref(hdst, hin, rows, P, H);
    get_floatX(got, dst, TH);
    snprintf(name, sizeof name, "rows_scatter_add P%d H%d: dst", P, H);
    /* bf16: one rounding of the sum; fp32: the reference's own fp32 add, bit for bit */
    check(name, got, hdst, TH, TOL(1e-6, 4e-3, 0, 0));
    dfree(in), dfree(dst), dfree(out), dfree(drows);
    free(rows), free(hin), free(hdst), free(ref), free(got);
}

static void test_mlm_xent(int P, int V, int Vpad)
{
    size_t PV = (size_t)P * Vpad;
    float *hz = hmalloc(PV);
    for (size_t i = 0; i < PV; i++) {
        int c = (int)(i % Vpad);
        hz[i] = floatX_round(c < V ? 4.0f * urand() : 1000.0f); /* padded: huge */
    }
    int32_t *labels = (int32_t *)malloc(P * 4);
    for (int i = 0; i < P; i++)
        labels[i] = i % 17 == 5 ? -1 : (i == 0 ? V - 1 : irand(V));
    floatX *z = dev_floatX_from(hz, PV);
    int32_t *dl = dev_i32_from(labels, P);
    float *loss = (float *)dev_poisoned(P * 4), *lse = (float *)dev_poisoned(P * 4);
    floatX *dz = dev_floatX_poisoned(PV);
    const float scale = 1.0f / 1234.0f;
    mlm_xent_fwd(loss, lse, z, dl, P, V, Vpad, 0);
    mlm_xent_bwd(dz, z, lse, dl, scale, P, V, Vpad, 0);
    cudaCheck(cudaDeviceSynchronize());
    float *rloss = hmalloc(P), *rlse = hmalloc(P), *gl = hmalloc(P), *rdz = hmalloc(PV), *got = hmalloc(PV);
    mlm_xent_fwd_ref(rloss, rlse, hz, labels, P, V, Vpad);
    char name[96];
    get_f32(gl, loss, P);
    snprintf(name, sizeof name, "mlm_xent_fwd P%d V%d: loss", P, V);
    check(name, gl, rloss, P, 1e-4, 1e-5);
    get_f32(gl, lse, P);
    snprintf(name, sizeof name, "mlm_xent_fwd P%d V%d: lse", P, V);
    check(name, gl, rlse, P, 1e-4, 1e-5);
    mlm_xent_bwd_ref(rdz, hz, gl, labels, scale, P, V, Vpad); /* from the GPU's lse */
    get_floatX(got, dz, PV);
    snprintf(name, sizeof name, "mlm_xent_bwd P%d V%d: dlogits", P, V);
    check(name, got, rdz, PV, TOL(1e-10, 8e-3, 1e-10, 1e-5));
    /* in place: dlogits written over the logits */
    mlm_xent_bwd(z, z, lse, dl, scale, P, V, Vpad, 0);
    cudaCheck(cudaDeviceSynchronize());
    get_floatX(got, z, PV);
    snprintf(name, sizeof name, "mlm_xent_bwd P%d V%d: in place", P, V);
    check(name, got, rdz, PV, TOL(1e-10, 8e-3, 1e-10, 1e-5));
    dfree(z), dfree(dl), dfree(loss), dfree(lse);
    dfree(dz);
    free(hz), free(labels), free(rloss), free(rlse), free(gl), free(rdz), free(got);
}

static void test_nsp_and_sum(int n)
{
    float *hz = hmalloc(2 * n);
    int32_t *labels = (int32_t *)malloc(n * 4);
    for (int i = 0; i < n; i++)
        labels[i] = irand(2);
    floatX *z = dev_floatX_rand(hz, 2 * n, 5.0f, 0);
    int32_t *dl = dev_i32_from(labels, n);
    float *loss = (float *)dev_poisoned(n * 4);
    floatX *dz = dev_floatX_poisoned(2 * (size_t)n);
    nsp_xent_fwd_bwd(loss, dz, z, dl, 1.0f / n, n, 0);
    cudaCheck(cudaDeviceSynchronize());
    float *rl = hmalloc(n), *rd = hmalloc(2 * n), *gl = hmalloc(n), *gd = hmalloc(2 * n);
    nsp_xent_fwd_bwd_ref(rl, rd, hz, labels, 1.0f / n, n);
    get_f32(gl, loss, n);
    get_floatX(gd, dz, 2 * n);
    char name[96];
    snprintf(name, sizeof name, "nsp_xent n%d: loss", n);
    check(name, gl, rl, n, 1e-5, 1e-5);
    snprintf(name, sizeof name, "nsp_xent n%d: dlogits", n);
    check(name, gd, rd, 2 * n, TOL(1e-7, 8e-3, 1e-7, 1e-5));

    const int m = 100003;
    float *hs = hmalloc(m), ref, got;
    float *ds = dev_f32_rand(hs, m, 1.0f, 0.5f), *dout = (float *)dev_poisoned(4);
    reduce_sum_f32(dout, ds, m, 0);
    cudaCheck(cudaDeviceSynchronize());
    get_f32(&got, dout, 1);
    reduce_sum_f32_ref(&ref, hs, m);
    check("reduce_sum_f32 n100003: sum", &got, &ref, 1, 1e-3, 1e-6);
    dfree(z), dfree(dl), dfree(loss), dfree(dz);
    dfree(ds), dfree(dout);
    free(hz), free(labels), free(rl), free(rd), free(gl), free(gd), free(hs);
}

/* A non-finite step (a NaN gradient, or a guard value: the trainer passes its loss sums) must
 * change nothing: master, m, v and the working copy stay bit for bit. */
static void test_lamb_skip(int nan_in_guard)
{
    lamb_tensor t[3] = {{0, 5000, 1, 0}, {5000, 700, 0, 0}, {5700, 16390, 1, 0}};
    int nchunks = lamb_tensors_chunk(t, 3);
    size_t N = 5700 + 16390;
    float *hw = hmalloc(N), *hm = hmalloc(N), *hv = hmalloc(N), *hg = hmalloc(N), hguard[2] = {3.5f, 1.0f};
    for (size_t i = 0; i < N; i++) {
        hw[i] = urand() * 0.05f;
        hm[i] = urand() * 1e-3f;
        hv[i] = (urand() + 1.0f) * 1e-6f;
        hg[i] = urand() * 1e-3f;
    }
    if (nan_in_guard)
        hguard[1] = NAN;
    else
        hg[5123] = NAN;
    lamb_hparams hp = {.lr = 4e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f,
                       .weight_decay = 0.01f, .max_grad_norm = 1.0f, .step = 3};
    lamb_tensor *dt;
    cudaCheck(cudaMalloc(&dt, sizeof t));
    cudaCheck(cudaMemcpy(dt, t, sizeof t, cudaMemcpyHostToDevice));
    float *w = dev_f32_from(hw, N), *m = dev_f32_from(hm, N), *v = dev_f32_from(hv, N), *g = dev_f32_from(hg, N);
    float *guard = dev_f32_from(hguard, 2), *norm = (float *)dev_poisoned(4), *scratch;
    floatX *work = dev_floatX_from(hw, N); /* hw is not floatX-rounded: any rewrite shows */
    float *start_work = hmalloc(N);
    get_floatX(start_work, work, N);
    cudaCheck(cudaMalloc(&scratch, lamb_scratch_bytes(nchunks)));
    lamb_update(w, work, m, v, g, dt, 3, nchunks, hp, norm, guard, 2, scratch, 0);
    cudaCheck(cudaDeviceSynchronize());
    float *gw = hmalloc(N), *gm = hmalloc(N), *gv = hmalloc(N), *gwork = hmalloc(N), rnorm, gnorm;
    get_f32(gw, w, N);
    get_f32(gm, m, N);
    get_f32(gv, v, N);
    get_floatX(gwork, work, N);
    get_f32(&gnorm, norm, 1);
    float *rw = hmalloc(N);
    memcpy(rw, hw, N * 4);
    lamb_update_ref(rw, hm, hv, hg, t, 3, hp, &rnorm, hguard, 2);
    const char *why = nan_in_guard ? "NaN guard" : "NaN gradient";
    char name[96];
    snprintf(name, sizeof name, "lamb_update %s: master kept", why);
    check_same(name, gw, hw, N);
    check_same(name, gw, rw, N); /* the reference skips too */
    snprintf(name, sizeof name, "lamb_update %s: m, v kept", why);
    check_same(name, gm, hm, N);
    check_same(name, gv, hv, N);
    snprintf(name, sizeof name, "lamb_update %s: work kept", why);
    check_same(name, gwork, start_work, N);
    int norm_ok = nan_in_guard ? fabsf(gnorm - rnorm) <= 1e-5f * rnorm : isnan(gnorm);
    printf("%-34s %9d %11s %11s %20s %s\n", "lamb_update skip: grad norm written", 1, "-", "-",
           nan_in_guard ? "finite norm" : "NaN norm", norm_ok ? "PASS" : "FAIL");
    rows_printed++;
    failures += !norm_ok;
    dfree(dt), dfree(w), dfree(m), dfree(v);
    dfree(g), dfree(guard), dfree(norm), dfree(scratch);
    dfree(work);
    free(hw), free(hm), free(hv), free(hg), free(start_work), free(gw), free(gm), free(gv), free(gwork), free(rw);
}

/* ---- initialisation ------------------------------------------------------------------------------ */
static void test_init(int64_t n, float std, uint64_t id)
{
    const uint64_t seed = 0x5eedull;
    float *w = (float *)dev_poisoned((size_t)n * 4);
    init_trunc_normal(w, n, std, seed, id, 0);
    cudaCheck(cudaDeviceSynchronize());
    float *got = hmalloc((size_t)n), *ref = hmalloc((size_t)n);
    unsigned char *amb = (unsigned char *)malloc((size_t)n + 1);
    get_f32(got, w, (size_t)n);
    init_trunc_normal_ref(ref, n, std, seed, id, amb);
    int64_t skipped = 0, beyond = 0;
    for (int64_t i = 0; i < n; i++) {
        if (amb[i]) { /* float rounding may accept or reject this draw: not compared */
            ref[i] = got[i];
            skipped++;
        }
        beyond += !(fabsf(got[i]) <= 2.0f * std); /* also NaN */
    }
    char name[96];
    snprintf(name, sizeof name, "init_trunc_normal n%lld std%g: w", (long long)n, std);
    check(name, got, ref, (size_t)n, 1e-6 * std, 1e-5);
    if (skipped || beyond)
        printf("  (%lld draws within 1e-4 of the bound not compared; %lld beyond 2 std)\n",
               (long long)skipped, (long long)beyond);
    failures += beyond > 0;
    fill_f32(w, n, 1.0f, 0);
    cudaCheck(cudaDeviceSynchronize());
    get_f32(got, w, (size_t)n);
    fill_f32_ref(ref, n, 1.0f);
    snprintf(name, sizeof name, "fill_f32 n%lld: w", (long long)n);
    check(name, got, ref, (size_t)n, 0, 0);
    dfree(w);
    free(got), free(ref), free(amb);
}

/* ---- accuracy and loss totals -------------------------------------------------------------------- */
static void test_accuracy(int P, int V, int Vpad, int n)
{
    size_t PV = (size_t)P * Vpad;
    float *hz = hmalloc(PV);
    for (size_t i = 0; i < PV; i++) /* few distinct values: ties in the argmax are common */
        hz[i] = floatX_round((float)irand(64) / 8.0f);
    int32_t *labels = (int32_t *)malloc((size_t)P * 4), *nl = (int32_t *)malloc((size_t)n * 4);
    for (int i = 0; i < P; i++) { /* every third label the argmax: some rows correct */
        const float *row = hz + (size_t)i * Vpad;
        int arg = 0;
        for (int j = 1; j < V; j++)
            arg = row[j] > row[arg] ? j : arg;
        labels[i] = i % 11 == 4 ? -1 : i % 3 == 0 ? arg : irand(V);
    }
    for (int i = 0; i < n; i++)
        nl[i] = irand(2);
    floatX *z = dev_floatX_from(hz, PV);
    float *hn = hmalloc(2 * (size_t)n);
    floatX *zn = dev_floatX_rand(hn, 2 * (size_t)n, 3.0f, 0);
    int32_t *dl = dev_i32_from(labels, (size_t)P), *dnl = dev_i32_from(nl, (size_t)n);
    float *mc = (float *)dev_poisoned((size_t)P * 4), *nc = (float *)dev_poisoned((size_t)n * 4);
    mlm_correct(mc, z, dl, P, V, Vpad, 0);
    nsp_correct(nc, zn, dnl, n, 0);
    cudaCheck(cudaDeviceSynchronize());
    float *gm = hmalloc((size_t)P), *rm = hmalloc((size_t)P), *gn = hmalloc((size_t)n), *rn = hmalloc((size_t)n);
    get_f32(gm, mc, (size_t)P);
    get_f32(gn, nc, (size_t)n);
    mlm_correct_ref(rm, hz, labels, P, V, Vpad);
    nsp_correct_ref(rn, hn, nl, n);
    char name[96];
    snprintf(name, sizeof name, "mlm_correct P%d V%d: correct", P, V);
    check(name, gm, rm, (size_t)P, 0, 0);
    snprintf(name, sizeof name, "nsp_correct n%d: correct", n);
    check(name, gn, rn, (size_t)n, 0, 0);

    /* totals accumulate onto a random start; losses random, the correct flags from above */
    float *hml = hmalloc((size_t)P), *hnl = hmalloc((size_t)n), hacc[4], got[4];
    float *ml = dev_f32_rand(hml, (size_t)P, 2.0f, 3.0f), *nls = dev_f32_rand(hnl, (size_t)n, 0.5f, 0.7f);
    float *acc = dev_f32_rand(hacc, 4, 10.0f, 0);
    stats_accumulate(acc, ml, mc, P, nls, nc, n, 0);
    cudaCheck(cudaDeviceSynchronize());
    get_f32(got, acc, 4);
    stats_accumulate_ref(hacc, hml, rm, P, hnl, rn, n);
    snprintf(name, sizeof name, "stats_accumulate P%d n%d: acc", P, n);
    check(name, got, hacc, 4, 1e-4, 1e-5);
    dfree(z), dfree(zn), dfree(dl), dfree(dnl);
    dfree(mc), dfree(nc), dfree(ml), dfree(nls);
    dfree(acc);
    free(hz), free(labels), free(nl), free(hn), free(gm), free(rm), free(gn), free(rn), free(hml), free(hnl);
}

static void test_gelu_tanh_bwd(int64_t n)
{
    float *hx = hmalloc((size_t)n), *hdo = hmalloc((size_t)n), *got = hmalloc((size_t)n), *ref = hmalloc((size_t)n);
    floatX *x = dev_floatX_rand(hx, (size_t)n, 4.0f, 0), *dout = dev_floatX_rand(hdo, (size_t)n, 1.0f, 0);
    floatX *dx = dev_floatX_poisoned((size_t)n);
    gelu_tanh_bwd(dx, dout, x, n, 0);
    cudaCheck(cudaDeviceSynchronize());
    get_floatX(got, dx, (size_t)n);
    gelu_tanh_bwd_ref(ref, hdo, hx, n);
    char name[96];
    snprintf(name, sizeof name, "gelu_tanh_bwd n%lld: dx", (long long)n);
    check(name, got, ref, (size_t)n, TOL(1e-3, 8e-3, 2e-6, 1e-5));
    gelu_tanh_bwd(dout, dout, x, n, 0); /* in place */
    cudaCheck(cudaDeviceSynchronize());
    get_floatX(got, dout, (size_t)n);
    snprintf(name, sizeof name, "gelu_tanh_bwd n%lld: in place", (long long)n);
    check(name, got, ref, (size_t)n, TOL(1e-3, 8e-3, 2e-6, 1e-5));
    dfree(x), dfree(dout), dfree(dx);
    free(hx), free(hdo), free(got), free(ref);
}

#ifndef UNPAD_FP32 /* the FP8 trainer's kernels: the bf16 build's */
/* FP8 bytes on the device against cast_fp8_ref of the floatX tensor got (as the kernel stored it), and
 * the maximum; one table row. */
static void check_fp8_copy(const char *name, const uint8_t *d_q, const float *d_amax, const float *got, size_t n,
                           float s, fp8_format f)
{
    uint8_t *hq = (uint8_t *)malloc(n), *rq = (uint8_t *)malloc(n);
    float ramax = 0.0f, gamax;
    cast_fp8_ref(rq, &ramax, got, &s, 1, (int)n, f);
    cudaCheck(cudaMemcpy(hq, d_q, n, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(&gamax, d_amax, 4, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += hq[i] != rq[i];
    int ok = bad == 0 && gamax == ramax;
    failures += !ok;
    rows_printed++;
    printf("%s: %s bytes as cast_fp8_ref: %zu differ, amax %g (ref %g) %s\n", name, f == FP8_E4M3 ? "E4M3" : "E5M2",
           bad, (double)gamax, (double)ramax, ok ? "PASS" : "FAIL");
    free(hq), free(rq);
}

/* The FFN1 tanh GELU's backward of the FP8 trainer: dx and the bias gradient against the references,
 * and its E5M2 bytes and maximum exactly as cast_fp8_ref makes them from the dx it wrote (poisoned
 * before; in place into dout the second time, accumulating the bias gradient), and the GELU's
 * output h (into its own buffer, then over x, as the FP8 trainer writes it over FFN1's pre). */
static void test_bias_gelu_tanh_bwd(int T, int N)
{
    size_t TN = (size_t)T * N;
    float *hx = hmalloc(TN), *hdo = hmalloc(TN), *got = hmalloc(TN), *ref = hmalloc(TN);
    float *rdb = hmalloc(N), *gdb = hmalloc(N), *db2 = hmalloc(N);
    floatX *x = dev_floatX_rand(hx, TN, 4.0f, 0), *dout = dev_floatX_rand(hdo, TN, 1e-3f, 0);
    floatX *dx = (floatX *)dev_poisoned(TN * sizeof(floatX));
    float *db = (float *)dev_poisoned((size_t)N * 4), *scratch, *amax, *scale;
    uint8_t *q = (uint8_t *)dev_poisoned(TN);
    const float s = 4096.0f, zero = 0.0f;
    cudaCheck(cudaMalloc(&scratch, bias_bwd_scratch_bytes(N)));
    cudaCheck(cudaMalloc(&amax, 4));
    cudaCheck(cudaMalloc(&scale, 4));
    cudaCheck(cudaMemcpy(amax, &zero, 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(scale, &s, 4, cudaMemcpyHostToDevice));
    gelu_tanh_bwd_ref(ref, hdo, hx, (int64_t)TN);
    memset(rdb, 0, (size_t)N * 4); /* bias_bwd_ref adds */
    bias_bwd_ref(rdb, ref, T, N);
    char name[96];
    floatX *hg = (floatX *)dev_poisoned(TN * sizeof(floatX));
    for (int pass = 0; pass < 2; pass++) { /* 0: into dx, bias gradient written; 1: in place, added */
        floatX *out = pass ? dout : dx, *h = pass ? x : hg;
        bias_gelu_tanh_bwd(out, db, q, amax, scale, h, dout, x, T, N, scratch, pass, 0);
        cudaCheck(cudaDeviceSynchronize());
        get_floatX(got, out, TN);
        snprintf(name, sizeof name, "bias_gelu_tanh_bwd T%d N%d%s: dx", T, N, pass ? " (in place)" : "");
        check(name, got, ref, TN, TOL(1e-6, 8e-3, 1e-9, 1e-5));
        get_f32(gdb, db, N);
        for (int i = 0; i < N; i++)
            db2[i] = (pass + 1) * rdb[i];
        snprintf(name, sizeof name, "bias_gelu_tanh_bwd T%d N%d%s: dbias", T, N, pass ? " (+=)" : "");
        check(name, gdb, db2, N, TOL(1e-5, 1e-3, 1e-7, 1e-5));
        snprintf(name, sizeof name, "bias_gelu_tanh_bwd T%d N%d%s: dx", T, N, pass ? " (in place)" : "");
        check_fp8_copy(name, q, amax, got, TN, s, FP8_E5M2);
        cudaCheck(cudaMemcpy(amax, &zero, 4, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemset(q, 0xff, TN));
        /* the GELU's output again, for the FP8 trainer's FFN2 weight gradient */
        get_floatX(got, h, TN);
        for (size_t i = 0; i < TN; i++)
            ref[i] = (float)gelu_tanh_ref(hx[i]);
        snprintf(name, sizeof name, "bias_gelu_tanh_bwd T%d N%d%s: h", T, N, pass ? " (over x)" : "");
        check(name, got, ref, TN, TOL(1e-6, 8e-3, 1e-6, 1e-5));
        gelu_tanh_bwd_ref(ref, hdo, hx, (int64_t)TN);
    }
    dfree(hg);
    dfree(x), dfree(dout), dfree(dx), dfree(db), dfree(scratch), dfree(amax), dfree(scale), dfree(q);
    free(hx), free(hdo), free(got), free(ref), free(rdb), free(gdb), free(db2);
}

/* The fused LayerNorm's FP8 variants: every floatX and fp32 output bit for bit as the plain kernels',
 * and the FP8 copy (E4M3 forward, E5M2 backward dx) as cast_fp8_ref makes it from the stored output. */
static void test_layernorm_fp8(int T, int H, float p)
{
    const uint64_t seed = 99, sid = 5;
    const float s = 8.0f, zero = 0.0f;
    size_t TH = (size_t)T * H;
    float *h = hmalloc(TH), *hv = hmalloc(H), *got = hmalloc(TH), *got2 = hmalloc(TH), *st = hmalloc(T);
    floatX *x = dev_floatX_rand(h, TH, 2.0f, 0.3f), *res = dev_floatX_rand(h, TH, 1.0f, 0);
    floatX *bias = dev_floatX_rand(hv, H, 0.5f, 0), *g = dev_floatX_rand(hv, H, 0.5f, 1.0f);
    floatX *be = dev_floatX_rand(hv, H, 0.5f, 0);
    floatX *out[2], *lnin[2];
    float *mean[2], *rstd[2], *amax, *scale, *scratch;
    uint8_t *q = (uint8_t *)dev_poisoned(TH);
    cudaCheck(cudaMalloc(&amax, 4));
    cudaCheck(cudaMalloc(&scale, 4));
    cudaCheck(cudaMalloc(&scratch, layernorm_bwd_scratch_bytes(H)));
    cudaCheck(cudaMemcpy(amax, &zero, 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(scale, &s, 4, cudaMemcpyHostToDevice));
    for (int k = 0; k < 2; k++) {
        out[k] = dev_floatX_poisoned(TH), lnin[k] = dev_floatX_poisoned(TH);
        mean[k] = (float *)dev_poisoned(T * 4), rstd[k] = (float *)dev_poisoned(T * 4);
    }
    bias_dropout_residual_layernorm_fwd(out[0], lnin[0], mean[0], rstd[0], x, bias, res, g, be, T, H, 1e-12f, p, seed,
                                        sid, 0);
    bias_dropout_residual_layernorm_fwd_fp8(out[1], lnin[1], mean[1], rstd[1], x, bias, res, g, be, T, H, 1e-12f, p,
                                            seed, sid, q, amax, scale, 0);
    cudaCheck(cudaDeviceSynchronize());
    char name[96];
    get_floatX(got, out[0], TH), get_floatX(got2, out[1], TH);
    snprintf(name, sizeof name, "bdr_layernorm_fwd_fp8 T%d H%d: out", T, H);
    check_same(name, got2, got, TH);
    get_floatX(got, lnin[0], TH), get_floatX(h, lnin[1], TH);
    snprintf(name, sizeof name, "bdr_layernorm_fwd_fp8 T%d H%d: ln_in", T, H);
    check_same(name, h, got, TH);
    float *stats[2][2] = {{mean[0], mean[1]}, {rstd[0], rstd[1]}};
    for (int k = 0; k < 2; k++) {
        get_f32(st, stats[k][0], T), get_f32(h, stats[k][1], T);
        snprintf(name, sizeof name, "bdr_layernorm_fwd_fp8 T%d H%d: %s", T, H, k ? "rstd" : "mean");
        check_same(name, h, st, T);
    }
    snprintf(name, sizeof name, "bdr_layernorm_fwd_fp8 T%d H%d", T, H);
    check_fp8_copy(name, q, amax, got2, TH, s, FP8_E4M3);

    floatX *dout = dev_floatX_rand(h, TH, 1.0f, 0), *dx[2], *dres[2];
    float *dg[2], *db[2], *dbias[2];
    for (int k = 0; k < 2; k++) {
        dx[k] = dev_floatX_poisoned(TH), dres[k] = dev_floatX_poisoned(TH);
        dg[k] = (float *)dev_poisoned(H * 4), db[k] = (float *)dev_poisoned(H * 4);
        dbias[k] = (float *)dev_poisoned(H * 4);
    }
    cudaCheck(cudaMemcpy(amax, &zero, 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(q, 0xff, TH));
    bias_dropout_residual_layernorm_bwd(dx[0], dres[0], dbias[0], dg[0], db[0], dout, NULL, lnin[0], mean[0], rstd[0],
                                        g, T, H, p, seed, sid, scratch, 0, 0);
    bias_dropout_residual_layernorm_bwd_fp8(dx[1], dres[1], dbias[1], dg[1], db[1], dout, NULL, lnin[0], mean[0],
                                            rstd[0], g, T, H, p, seed, sid, scratch, 0, q, amax, scale, 0);
    cudaCheck(cudaDeviceSynchronize());
    floatX *pairs[2][2] = {{dx[0], dx[1]}, {dres[0], dres[1]}};
    const char *pn[2] = {"dx", "dresidual"};
    for (int k = 0; k < 2; k++) {
        get_floatX(got, pairs[k][0], TH), get_floatX(got2, pairs[k][1], TH);
        snprintf(name, sizeof name, "bdr_layernorm_bwd_fp8 T%d H%d: %s", T, H, pn[k]);
        check_same(name, got2, got, TH);
    }
    float *vp[3][2] = {{dg[0], dg[1]}, {db[0], db[1]}, {dbias[0], dbias[1]}};
    const char *vn[3] = {"dgamma", "dbeta", "dbias"};
    for (int k = 0; k < 3; k++) {
        get_f32(got, vp[k][0], H), get_f32(got2, vp[k][1], H);
        snprintf(name, sizeof name, "bdr_layernorm_bwd_fp8 T%d H%d: %s", T, H, vn[k]);
        check_same(name, got2, got, H);
    }
    get_floatX(got, dx[1], TH);
    snprintf(name, sizeof name, "bdr_layernorm_bwd_fp8 T%d H%d: dx", T, H);
    check_fp8_copy(name, q, amax, got, TH, s, FP8_E5M2);
    for (int k = 0; k < 2; k++) {
        dfree(out[k]), dfree(lnin[k]), dfree(mean[k]), dfree(rstd[k]), dfree(dx[k]), dfree(dres[k]);
        dfree(dg[k]), dfree(db[k]), dfree(dbias[k]);
    }
    dfree(x), dfree(res), dfree(bias), dfree(g), dfree(be), dfree(q), dfree(amax), dfree(scale), dfree(scratch);
    dfree(dout);
    free(h), free(hv), free(got), free(got2), free(st);
}

#endif

/* ---- LAMB ---------------------------------------------------------------------------------------- */
static void test_lamb(float grad_scale, int step)
{
    const int64_t sizes[] = {1, 2, 7, 16384, 16385, 40000, 1024, 100003, 0, 33};
    const int n = sizeof sizes / sizeof *sizes;
    lamb_tensor t[sizeof sizes / sizeof *sizes];
    int64_t off = 3; /* gaps between tensors that must stay untouched; even tensors start 16-byte
                        aligned (the kernels' float4 path), odd ones where they fall */
    for (int i = 0; i < n; i++) {
        if (i % 2 == 0)
            off = (off + 3) / 4 * 4;
        t[i].offset = off;
        t[i].size = sizes[i];
        t[i].weight_decay = i % 3 != 1;
        off += sizes[i] + (i % 2);
    }
    int nchunks = lamb_tensors_chunk(t, n);
    size_t N = (size_t)off + 5;
    float *hw = hmalloc(N), *hm = hmalloc(N), *hv = hmalloc(N), *hg = hmalloc(N);
    for (size_t i = 0; i < N; i++) {
        hw[i] = urand() * 0.05f;
        hm[i] = urand() * 1e-3f;
        hv[i] = (urand() + 1.0f) * 1e-6f;
        hg[i] = urand() * grad_scale;
    }
    for (int64_t i = 0; i < sizes[6]; i++) /* a tensor of zero weights: trust ratio 1 */
        hw[t[6].offset + i] = 0.0f;
    lamb_hparams hp = {.lr = 4e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f,
                       .weight_decay = 0.01f, .max_grad_norm = 1.0f, .step = step};
    lamb_tensor *dt;
    cudaCheck(cudaMalloc(&dt, sizeof t));
    cudaCheck(cudaMemcpy(dt, t, sizeof t, cudaMemcpyHostToDevice));
    float *w = dev_f32_from(hw, N), *m = dev_f32_from(hm, N), *v = dev_f32_from(hv, N), *g = dev_f32_from(hg, N);
    floatX *work = dev_floatX_poisoned(N);
    float *norm = (float *)dev_poisoned(4), *scratch;
    cudaCheck(cudaMalloc(&scratch, lamb_scratch_bytes(nchunks)));
    float *run1 = hmalloc(N), *gw = hmalloc(N), *gm = hmalloc(N), *gv = hmalloc(N), *gwork = hmalloc(N);
    for (int rep = 0; rep < 2; rep++) {
        cudaCheck(cudaMemcpy(w, hw, N * 4, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(m, hm, N * 4, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(v, hv, N * 4, cudaMemcpyHostToDevice));
        lamb_update(w, work, m, v, g, dt, n, nchunks, hp, norm, NULL, 0, scratch, 0);
        cudaCheck(cudaDeviceSynchronize());
        get_f32(rep ? gw : run1, w, N);
    }
    get_f32(gm, m, N);
    get_f32(gv, v, N);
    get_floatX(gwork, work, N);
    float gnorm, rnorm;
    get_f32(&gnorm, norm, 1);
    lamb_update_ref(hw, hm, hv, hg, t, n, hp, &rnorm, NULL, 0);
    char name[96];
    snprintf(name, sizeof name, "lamb_update step%d |g|~%.0e: master", step, grad_scale);
    check(name, gw, hw, N, 1e-7, 1e-5);
    snprintf(name, sizeof name, "lamb_update step%d: m", step);
    check(name, gm, hm, N, 1e-9, 1e-5);
    snprintf(name, sizeof name, "lamb_update step%d: v", step);
    check(name, gv, hv, N, 1e-12, 1e-5);
    snprintf(name, sizeof name, "lamb_update step%d: grad norm %.3g", step, rnorm);
    check(name, &gnorm, &rnorm, 1, 1e-6, 1e-5);
    /* the working copy is floatX(master) wherever a tensor lives (gaps: never written) */
    float *want = hmalloc(N);
    size_t k = 0;
    for (int i = 0; i < n; i++)
        for (int64_t j = 0; j < t[i].size; j++, k++) {
            want[k] = floatX_round(gw[t[i].offset + j]);
            gwork[k] = gwork[t[i].offset + j];
        }
    snprintf(name, sizeof name, "lamb_update step%d: work=" UNPAD_PRECISION "(w)", step);
    check(name, gwork, want, k, 0, 0);
    snprintf(name, sizeof name, "lamb_update step%d: master rerun", step);
    check_same(name, gw, run1, N);

    /* convert_f32_to_floatX on the same buffer */
    floatX *cb = dev_floatX_poisoned(N);
    convert_f32_to_floatX(cb, w, (int64_t)N, 0);
    cudaCheck(cudaDeviceSynchronize());
    get_floatX(gwork, cb, N);
    for (size_t i = 0; i < N; i++)
        want[i] = floatX_round(gw[i]);
    snprintf(name, sizeof name, "convert_f32_to_floatX n%zu: out", N);
    check(name, gwork, want, N, 0, 0);
    dfree(dt), dfree(w), dfree(m), dfree(v);
    dfree(g), dfree(work), dfree(norm), dfree(scratch);
    dfree(cb);
    free(hw), free(hm), free(hv), free(hg), free(run1), free(gw), free(gm), free(gv), free(gwork), free(want);
}

int main(void)
{
    int dev;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    batch b;
    batch_make(&b);
    printf("test_kernels (floatX = " UNPAD_PRECISION ") on %s: ragged batch of %d sequences, T = %d "
           "tokens (lengths", prop.name, b.n, b.T);
    for (int s = 0; s < b.n; s++)
        printf(" %d", LENS[s]);
    printf(")\n");

    /* row groups (kernels/rowops.cuh): H <= 256 one warp per row, <= 512 two, <= 1024 four
     * (768: a partial group), wider rows 2 or 4 vectors per thread; T = 14,000 makes every group
     * of the persistent grids take several batches of rows */
    test_embedding(&b, 1024, 0.1f);
    test_embedding(&b, 768, 0.1f);
    test_embedding(&b, 200, 0.0f);
    test_layernorm(b.T, 1024, 0, 0.0f);
    test_layernorm(b.T, 1024, 1, 0.1f);
    test_layernorm(14000, 1024, 0, 0.0f);
    test_layernorm(14000, 1024, 1, 0.1f);
    test_layernorm(b.T, 768, 1, 0.1f);
    test_layernorm(b.T, 512, 1, 0.1f);
    test_layernorm(b.T, 200, 0, 0.0f);
    test_layernorm(300, 2048, 0, 0.0f);
    test_layernorm(65, 4096, 1, 0.25f);
    test_layernorm(1, 64, 1, 0.1f);
    test_activation(b.T, 4096, 0);
    test_activation(129, 72, 0);
    test_activation(b.n, 1024, 1);
    test_bias_bwd(b.T, 1024);
    test_bias_bwd(b.T, 3072);
    test_bias_bwd_qkv(b.T, 1024); /* the QKV bias */
    test_bias_bwd_qkv(b.T, 768);
    test_bias_bwd_qkv(37, 64);
    test_bias_bwd(b.n, 2);
    test_bias_bwd(300, 30528);
    test_rows(&b, 1024);
    test_mlm_xent(241, 30522, 30528);
    test_mlm_xent(3, 61, 64);
    test_mlm_xent(5, 64, 64); /* V = Vpad: no partial vector */
    test_nsp_and_sum(b.n);
    test_lamb(1e-2f, 1);  /* global norm > 1: clipped */
    test_lamb(1e-5f, 7);  /* norm < 1: not clipped */
    test_lamb_skip(0);
    test_lamb_skip(1);
    test_init(100003, 0.02f, 5);
    test_init(1, 1.0f, 0);
    test_accuracy(241, 30522, 30528, b.n);
    test_accuracy(1, 61, 64, 1);
    test_accuracy(65, 64, 64, 63);
    /* the MLM head's (P, H) of the ragged batch's 15% predictions */
    test_gelu_tanh_bwd((int64_t)241 * 1024);
    test_gelu_tanh_bwd(63);
#ifndef UNPAD_FP32
    /* the FP8 trainer's FFN1 backward (bf16 build only) */
    test_bias_gelu_tanh_bwd(b.T, 4096);
    test_bias_gelu_tanh_bwd(77, 1024);
    test_bias_gelu_tanh_bwd(1, 8);
    test_layernorm_fp8(b.T, 1024, 0.1f);
    test_layernorm_fp8(77, 768, 0.0f);
    test_layernorm_fp8(3, 4096, 0.1f);
#endif

    printf("test_kernels: %d checks, %d failed\n", rows_printed, failures);
    return failures ? 1 : 0;
}
