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
 *   bench_gemm [--tokens 12900,14300] [--cands 16] [--reps 7]
 *
 * --sweep LO:HI:STEP: the encoder's products at every token count from LO to HI, each the
 * algorithm the trainer runs, as CSV (hidden, product, M, N, K, beta, tokens, us); --hidden H the
 * model's width (F = 4 H; default 1024, BERT-Large).
 *
 * --fp8: what FP8 GEMMs would save per step, the casts they need included (the trainer does not run
 * them). Each of the encoder's 12 products per layer as the trainer issues it in bf16 (gemm_run,
 * the heuristic's first choice, with its epilogue) beside the same product in FP8 (gemm_fp8.h:
 * E4M3 activations and weights, E5M2 gradients, per-tensor scales, fp32 accumulation; the forward
 * with fast accumulation as TransformerEngine; bf16 D, fp32 D for the weight gradients; an epilogue
 * cuBLASLt refuses in FP8 is timed as the product without it plus the separate bf16 pass the
 * trainer would then run), --reps runs each interleaved, medians. Then every cast_transpose_fp8 a
 * layer needs (each activation and gradient once, both copies from one pass; each weight and its
 * transpose once per step) beside a device copy of the same bf16 tensor, and the sums per step.
 * --power-seconds S (default 3, 0: off) then runs the layer's products back to back, bf16 and FP8
 * (with its casts) in turn, S seconds each, twice, and reads the GPU's power, SM clock and energy
 * counter through NVML (libnvidia-ml, opened at run time; without it only the times are printed).
 * A token count cuBLASLt refuses in FP8 is padded to 16 (its rows zero). --fp8-epilogues off runs
 * every FP8 product without its epilogue plus the epilogue's separate bf16 pass (the plain bias has
 * no kernel of its own: bias_gelu_fwd, the same bytes, stands in); no-dgelu only the DGELU's.
 *   bench_gemm --fp8 [--tokens 12900,14300] [--reps 15] [--power-seconds 3]
 *              [--fp8-epilogues on|off|no-dgelu] */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <functional>

#include "bench_util.h"
#include "gpu/gemm.h"
#include "gpu/gemm_fp8.h"
#include "kernels.h"

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

/* The model's widths: BERT-Large by default, --hidden H for another (F = 4 H, as BERT). */
static int H = 1024, F = 4096;
enum { V = 30528, L = 24 };

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

/* ---- --fp8 ----------------------------------------------------------------------------------------- */

typedef std::function<void()> launch_fn;

/* Median microseconds of each of the n launches, run reps times interleaved after one warm-up each. */
static void time_interleaved(const launch_fn *f, int n, int reps, float *us)
{
    for (int i = 0; i < n; i++)
        f[i]();
    int ne = 2 * n * reps;
    cudaEvent_t *ev = (cudaEvent_t *)malloc(ne * sizeof *ev);
    float *t = (float *)malloc(reps * sizeof *t);
    if (!ev || !t) {
        fprintf(stderr, "bench_gemm: out of host memory\n");
        exit(1);
    }
    for (int e = 0; e < ne; e++)
        cudaCheck(cudaEventCreate(&ev[e]));
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++) {
            cudaCheck(cudaEventRecord(ev[2 * (r * n + i)], 0));
            f[i]();
            cudaCheck(cudaEventRecord(ev[2 * (r * n + i) + 1], 0));
        }
    cudaCheck(cudaEventSynchronize(ev[ne - 1]));
    for (int i = 0; i < n; i++) {
        for (int r = 0; r < reps; r++)
            cudaCheck(cudaEventElapsedTime(&t[r], ev[2 * (r * n + i)], ev[2 * (r * n + i) + 1]));
        qsort(t, reps, sizeof *t, bench_cmp_float);
        us[i] = 1e3f * (reps % 2 ? t[reps / 2] : 0.5f * (t[reps / 2 - 1] + t[reps / 2]));
    }
    for (int e = 0; e < ne; e++)
        cudaCheck(cudaEventDestroy(ev[e]));
    free(ev);
    free(t);
}

/* The device buffers of the FP8 side: operands (A: E4M3 activations and E5M2 gradients, B: E4M3
 * weights and transposed activations), the dequantization scales, a cast's scale and amax, a
 * cast's two outputs. */
typedef struct {
    cublasLtHandle_t lt;
    void *ws;
    uint8_t *x8, *g8, *w8, *c_out, *c_out_t;
    float *sinv, *scale, *amax; /* sinv: A's dequantization scale, B's at sinv + 4 (16-byte aligned) */
} fp8_bufs;

/* One product's FP8 plan: the bf16 product q of a step of T tokens as gemm_fp8.h maps it. */
typedef struct {
    gemm_fp8_shape s;
    const uint8_t *A, *B;
    gemm_fp8 *p;
    int epi_refused; /* the epilogue ran as a separate bf16 pass (extra) */
    int padded;      /* the exact token count was refused: it is rounded up to 16 (M, or K of a weight grad) */
    int fast_refused; /* a forward refused with fast accumulation runs without it */
    char why[200];
} fp8_product;

static int is_wgrad(const product *q) { return q->d == GEMM_F32; }

/* --fp8-epilogues: on (1); off (0): every FP8 product without its epilogue, followed by the bf16 pass
 * the epilogue would have done (as where cuBLASLt refuses one); no-dgelu (2): only the DGELU so */
static int fp8_epilogues = 1;

static int fp8_leave_out(gemm_epilogue e)
{
    return e != GEMM_EPI_NONE && (fp8_epilogues == 0 || (fp8_epilogues == 2 && e == GEMM_EPI_DGELU));
}

/* Tried in turn until cuBLASLt has an algorithm that runs (once, on D): the exact shape with the
 * epilogue; the token dimension rounded up to 16 (M of a forward or data gradient: zero rows, as a
 * trainer would pad its tokens; K of a weight gradient: zero columns of the transposed copies); both
 * without the epilogue (whose bf16 pass then runs separately); the four again without fast
 * accumulation. The first refusal's reason is kept. */
static void fp8_plan(fp8_bufs *b, const product *q, int T, void *bias, void *aux, void *D, fp8_product *o)
{
    int T16 = (T + 15) / 16 * 16;
    memset(o, 0, sizeof *o);
    gemm_fp8_shape s0;
    if (is_wgrad(q)) { /* dW = dY^T X: both from cast_transpose_fp8, rows T16 apart */
        s0 = gemm_fp8_shape{q->M, q->N, q->K, T16, T16, FP8_E5M2, FP8_E4M3, GEMM_F32, GEMM_EPI_NONE, 0};
        o->A = b->g8, o->B = b->w8;
    } else if (q->tb) { /* forward: X W^T, fast accumulation */
        s0 = gemm_fp8_shape{q->M, q->N, q->K, 0, 0, FP8_E4M3, FP8_E4M3, GEMM_BF16, q->epi, 1};
        o->A = b->x8, o->B = b->w8;
    } else { /* data gradient: dY (W^T)^T */
        s0 = gemm_fp8_shape{q->M, q->N, q->K, 0, 0, FP8_E5M2, FP8_E4M3, GEMM_BF16, q->epi, 0};
        o->A = b->g8, o->B = b->w8;
    }
    if (fp8_leave_out(s0.epi))
        snprintf(o->why, sizeof o->why, "epilogue left out (--fp8-epilogues)");
    for (int t = 0; t < 8 && !o->p; t++) {
        int pad = t % 2, keep_epi = t % 4 < 2, slow = t >= 4;
        if ((!keep_epi && s0.epi == GEMM_EPI_NONE) || (slow && !s0.fast_accum) || (keep_epi && fp8_leave_out(s0.epi)))
            continue;
        o->s = s0;
        if (slow)
            o->s.fast_accum = 0;
        if (pad && is_wgrad(q))
            o->s.K = T16;
        else if (pad)
            o->s.M = (s0.M + 15) / 16 * 16;
        if (pad && o->s.M == s0.M && o->s.K == s0.K)
            continue;
        if (!keep_epi)
            o->s.epi = GEMM_EPI_NONE;
        char why[200];
        o->p = gemm_fp8_create(b->lt, &o->s, b->sinv, b->sinv + 4, bias, aux, b->ws, GEMM_WORKSPACE_BYTES, why,
                               sizeof why);
        int st = o->p ? gemm_fp8_run(o->p, o->A, o->B, D, 1.0f, q->beta, 0) : 0;
        if (st) {
            snprintf(why, sizeof why, "cublasLtMatmul refused the heuristic's algorithm: status %d", st);
            gemm_fp8_free(o->p);
            o->p = NULL;
        }
        if (!o->why[0] && !o->p)
            snprintf(o->why, sizeof o->why, "%s", why);
        o->padded = pad;
        o->epi_refused = !keep_epi;
        o->fast_refused = slow;
    }
}

/* The separate bf16 pass an epilogue refused in FP8 leaves to the trainer (NULL: none needed). The
 * plain bias has no kernel of its own: bias_gelu_fwd (the same bytes, one erf more) stands in. */
static launch_fn extra_pass(const fp8_product *o, const product *q, void *D, void *aux, void *bias)
{
    int M = q->M, N = q->N;
    if (!o->epi_refused)
        return nullptr;
    if (q->epi == GEMM_EPI_DGELU)
        return [=] { gelu_tanh_bwd((floatX *)D, (const floatX *)D, (const floatX *)aux, (int64_t)M * N, 0); };
    return [=] { bias_gelu_fwd((floatX *)aux, (const floatX *)D, (const floatX *)bias, M, N, 0); };
}

/* The casts of one layer: each tensor cast_transpose_fp8'd once (rows T, or the weight's). */
typedef struct {
    const char *what;
    int rows, cols;
    fp8_format f;
    int per_layer;
} cast_item;

static int layer_casts(int T, cast_item *c)
{
    int n = 0;
    auto add = [&](const char *what, int r, int k, fp8_format f, int per) { c[n++] = cast_item{what, r, k, f, per}; };
    add("X of qkv, attn_out, ffn1", T, H, FP8_E4M3, 3);
    add("X of ffn2 (the GELU's out)", T, F, FP8_E4M3, 1);
    add("dY of ffn2, attn_out", T, H, FP8_E5M2, 2);
    add("dY of ffn1", T, F, FP8_E5M2, 1);
    add("dY of qkv", T, 3 * H, FP8_E5M2, 1);
    add("W_qkv, once a step", 3 * H, H, FP8_E4M3, 1);
    add("W_attn_out, once a step", H, H, FP8_E4M3, 1);
    add("W_ffn1, once a step", F, H, FP8_E4M3, 1);
    add("W_ffn2, once a step", H, F, FP8_E4M3, 1);
    return n;
}

static void cast_launch(fp8_bufs *b, const cast_item *c, const void *in)
{
    cast_transpose_fp8(b->c_out, b->c_out_t, (c->rows + 15) / 16 * 16, b->amax, (const bf16 *)in, b->scale, c->rows,
                       c->cols, c->f, 0);
}

/* NVML through dlopen (no link-time dependency): power (mW), SM clock (MHz), energy (mJ). */
typedef struct nvml_dev_st *nvml_dev;
typedef struct {
    void *lib;
    nvml_dev dev;
    int (*power)(nvml_dev, unsigned *);
    int (*clock)(nvml_dev, int, unsigned *);
    int (*energy)(nvml_dev, unsigned long long *);
    int (*limit)(nvml_dev, unsigned *);
} nvml_api;

static int nvml_open(nvml_api *n)
{
    memset(n, 0, sizeof *n);
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!n->lib)
        return 0;
    int (*init)(void) = (int (*)(void))dlsym(n->lib, "nvmlInit_v2");
    typedef int (*by_bus_fn)(const char *, nvml_dev *);
    by_bus_fn by_bus = (by_bus_fn)dlsym(n->lib, "nvmlDeviceGetHandleByPciBusId_v2");
    n->power = (int (*)(nvml_dev, unsigned *))dlsym(n->lib, "nvmlDeviceGetPowerUsage");
    n->clock = (int (*)(nvml_dev, int, unsigned *))dlsym(n->lib, "nvmlDeviceGetClockInfo");
    n->energy = (int (*)(nvml_dev, unsigned long long *))dlsym(n->lib, "nvmlDeviceGetTotalEnergyConsumption");
    n->limit = (int (*)(nvml_dev, unsigned *))dlsym(n->lib, "nvmlDeviceGetEnforcedPowerLimit");
    char bus[32];
    int dev;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetPCIBusId(bus, sizeof bus, dev));
    if (!init || !by_bus || !n->power || !n->clock || !n->energy || !n->limit || init() || by_bus(bus, &n->dev))
        return 0;
    return 1;
}

/* The sampler: every 20 ms, power and SM clock into the running phase's sums. */
typedef struct {
    nvml_api *n;
    volatile int phase, stop; /* phase < 0: not sampling */
    double w_sum[8], mhz_sum[8];
    int count[8];
} sampler;

static void *sampler_run(void *arg)
{
    sampler *s = (sampler *)arg;
    while (!s->stop) {
        int ph = s->phase;
        unsigned mw, mhz;
        if (ph >= 0 && ph < 8 && !s->n->power(s->n->dev, &mw) && !s->n->clock(s->n->dev, 1 /* SM */, &mhz)) {
            s->w_sum[ph] += mw / 1e3;
            s->mhz_sum[ph] += mhz;
            s->count[ph]++;
        }
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* The steady load: `step` (a training step's encoder products, all 24 layers) back to back for
 * `seconds`, in phases bf16, FP8, bf16, FP8 after a warm-up; each phase's steps, wall time per step,
 * mean power and SM clock, and energy per step from the GPU's counter. */
static void power_run(const launch_fn step[2], double seconds)
{
    nvml_api n;
    int have = nvml_open(&n);
    sampler smp;
    memset(&smp, 0, sizeof smp);
    smp.n = &n;
    smp.phase = -1;
    pthread_t th;
    if (have && pthread_create(&th, NULL, sampler_run, &smp))
        have = 0;
    unsigned limit = 0;
    if (have)
        n.limit(n.dev, &limit);
    printf("\nsteady load (the step's products back to back, %.1f s a phase; NVML %s, enforced power limit %.0f W)\n",
           seconds, have ? "sampled every 20 ms" : "not found: power not measured", limit / 1e3);
    printf("%-6s %6s %9s %8s %8s %9s\n", "phase", "steps", "ms/step", "W", "SM MHz", "J/step");
    double t0 = wall_s();
    while (wall_s() - t0 < 1.0) { /* warm-up: the clock settles under load */
        step[0]();
        cudaCheck(cudaDeviceSynchronize());
    }
    double ms[2] = {0, 0}, j[2] = {0, 0};
    for (int ph = 0; ph < 4; ph++) {
        int k = ph % 2, steps = 0;
        unsigned long long e0 = 0, e1 = 0;
        cudaCheck(cudaDeviceSynchronize());
        if (have)
            n.energy(n.dev, &e0);
        smp.phase = ph;
        double a = wall_s(), b;
        do {
            step[k]();
            cudaCheck(cudaDeviceSynchronize());
            steps++;
        } while ((b = wall_s()) - a < seconds);
        smp.phase = -1;
        if (have)
            n.energy(n.dev, &e1);
        struct timespec settle = {0, 50000000}; /* a sample under way lands before the sums are read */
        nanosleep(&settle, NULL);
        double per = 1e3 * (b - a) / steps, jps = have ? (e1 - e0) / 1e3 / steps : 0;
        int c = smp.count[ph] ? smp.count[ph] : 1;
        printf("%-6s %6d %9.2f %8.1f %8.0f %9.3f\n", k ? "fp8" : "bf16", steps, per, smp.w_sum[ph] / c,
               smp.mhz_sum[ph] / c, jps);
        ms[k] += per / 2, j[k] += jps / 2;
    }
    printf("means: bf16 %.2f ms/step %.3f J/step, FP8 (casts included) %.2f ms/step %.3f J/step: FP8 %.1f%% less "
           "time, %.1f%% less energy\n", ms[0], j[0], ms[1], j[1], 100.0 * (ms[0] - ms[1]) / ms[0],
           have && j[0] > 0 ? 100.0 * (j[0] - j[1]) / j[0] : 0.0);
    if (have) {
        smp.stop = 1;
        pthread_join(th, NULL);
    }
}

static int fp8_main(const int *tokens, int ntok, int reps, double power_s, void *A, void *B, void *D, void *aux,
                    void *bias, gemm_ctx *g)
{
    /* FP8 operands for the largest token count: T16 x F bytes each (weights and X^T in w8) */
    int tmax = 0;
    for (int i = 0; i < ntok; i++)
        tmax = tokens[i] > tmax ? tokens[i] : tmax;
    size_t n8 = (size_t)((tmax + 15) / 16 * 16) * F;
    fp8_bufs b;
    cublasCheck(cublasLtCreate(&b.lt));
    cudaCheck(cudaMalloc(&b.ws, GEMM_WORKSPACE_BYTES));
    uint8_t **bufs8[] = {&b.x8, &b.g8, &b.w8, &b.c_out, &b.c_out_t};
    for (size_t i = 0; i < sizeof bufs8 / sizeof *bufs8; i++) {
        cudaCheck(cudaMalloc((void **)bufs8[i], n8));
        cudaCheck(cudaMemset(*bufs8[i], 0, n8)); /* the K padding of the transposed copies stays 0 */
    }
    /* the weight gradients' fp32 D of their own, so that no product reads another's fp32 bits as bf16 */
    void *Dw;
    cudaCheck(cudaMalloc(&Dw, (size_t)F * H * 4));
    cudaCheck(cudaMemset(Dw, 0, (size_t)F * H * 4));
    /* scales: the casts' 256 (bench values are below 0.5: E4M3's 448 is not reached), GEMMs' 1/256;
     * each 16 bytes from the next (cuBLASLt wants its scale pointers 16-byte aligned) */
    const float sc[16] = {256.0f, 0, 0, 0, 0.0f, 0, 0, 0, 1.0f / 256, 0, 0, 0, 1.0f / 256};
    float *dev_f;
    cudaCheck(cudaMalloc(&dev_f, sizeof sc));
    cudaCheck(cudaMemcpy(dev_f, sc, sizeof sc, cudaMemcpyHostToDevice));
    b.scale = dev_f, b.amax = dev_f + 4, b.sinv = dev_f + 8;
    /* the operands' bytes: casts of the random bf16 (neither zeros nor a constant); A and B hold at
     * least tmax x F elements (the FFN2 forward's X, the FFN weight gradients' X) */
    cast_fp8(b.x8, b.amax, (const bf16 *)A, b.scale, tmax, F, FP8_E4M3, 0);
    cast_fp8(b.g8, b.amax, (const bf16 *)A, b.scale, tmax, F, FP8_E5M2, 0);
    cast_fp8(b.w8, b.amax, (const bf16 *)B, b.scale, tmax, F, FP8_E4M3, 0);
    cudaCheck(cudaDeviceSynchronize());

    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("bench_gemm --fp8 on %s, cuBLASLt %zu: bf16 products as the trainer issues them (first choice) beside "
           "FP8 (E4M3 x E4M3 forward with fast accumulation; E5M2 x E4M3 gradients), %d interleaved runs each, "
           "median\n", prop.name, cublasLtGetVersion(), reps);
    for (int ti = 0; ti < ntok; ti++) {
        int T = tokens[ti], P = (int)(0.15 * T + 0.5);
        product p[32];
        int np = products(T, P, p);
        printf("\nT = %d tokens (FP8 weight gradients: the transposed copies' rows %d bytes apart)\n", T,
               (T + 15) / 16 * 16);
        printf("%-26s %6s %6s %6s %9s %8s %9s %8s %6s  %s\n", "product", "M", "N", "K", "bf16 us", "TFLOP/s",
               "fp8 us", "TFLOP/s", "ratio", "FP8 notes");
        double sum_bf16 = 0, sum_fp8 = 0, sum_extra = 0;
        launch_fn layer_bf16[16], layer_fp8[48];
        int nb = 0, nf = 0, missing = 0;
        fp8_product fp[32];
        for (int i = 0; i < np; i++) {
            if (p[i].per_step != L)
                continue; /* the encoder's products only: the decoder's stay bf16 */
            product q = p[i];
            gemm_shape s = {.M = q.M, .N = q.N, .K = q.K, .trans_a = q.ta, .trans_b = q.tb, .ab_type = GEMM_BF16,
                            .d_type = q.d, .epi = q.epi, .bias_type = GEMM_BF16};
            fp8_product *o = &fp[i];
            void *Dq = is_wgrad(&q) ? Dw : D;
            fp8_plan(&b, &q, T, bias, aux, Dq, o);
            launch_fn f[3];
            int nfn = 0;
            f[nfn++] = [=] { gemm_run(g, &s, A, B, Dq, 1.0f, q.beta, bias, aux, 0); };
            layer_bf16[nb++] = f[0];
            if (o->p) {
                f[nfn++] = [=] { cublasCheck((cublasStatus_t)gemm_fp8_run(o->p, o->A, o->B, Dq, 1.0f, q.beta, 0)); };
                layer_fp8[nf++] = f[1];
                launch_fn x = extra_pass(o, &q, D, aux, bias);
                if (x) {
                    f[nfn++] = x;
                    layer_fp8[nf++] = x;
                }
            }
            float us[3] = {0, 0, 0};
            time_interleaved(f, nfn, reps, us);
            double flop = 2.0 * q.M * q.N * q.K;
            char note[320] = "";
            if (!o->p) {
                snprintf(note, sizeof note, "no FP8 algorithm: %s", o->why);
                missing++;
            } else if (o->epi_refused || o->padded || o->fast_refused) {
                char extra[80] = "";
                if (o->epi_refused)
                    snprintf(extra, sizeof extra, " without the epilogue, + its bf16 pass %.1f us", us[2]);
                snprintf(note, sizeof note, "%s:%s%s%s", o->why,
                         o->padded ? (is_wgrad(&q) ? " K padded to 16" : " M padded to 16") : "", extra,
                         o->fast_refused ? " without fast accumulation" : "");
            }
            printf("%-26s %6d %6d %6d %9.1f %8.0f %9.1f %8.0f %6.2f  %s\n", q.name, q.M, q.N, q.K, us[0],
                   flop / us[0] / 1e6, us[1], us[1] > 0 ? flop / us[1] / 1e6 : 0.0, us[1] > 0 ? us[1] / us[0] : 0.0,
                   note);
            sum_bf16 += us[0];
            sum_fp8 += us[1];
            sum_extra += us[2];
        }
        /* the casts, each beside a device copy of its bf16 tensor (the same bytes moved: 2 per element
         * read, 1 + 1 written) */
        cast_item c[16];
        int nc = layer_casts(T, c);
        printf("\ncast_transpose_fp8 (bf16 read once; the FP8 copy and its transpose written), beside a copy of "
               "the bf16 tensor\n");
        printf("%-28s %6s %6s %5s %4s %9s %8s %9s %8s\n", "tensor", "rows", "cols", "fmt", "x", "us", "GB/s",
               "copy us", "GB/s");
        double sum_cast = 0;
        for (int k = 0; k < nc; k++) {
            const cast_item *ci = &c[k];
            size_t bytes = (size_t)ci->rows * ci->cols * 2;
            launch_fn f[2] = {[=, &b] { cast_launch(&b, ci, A); },
                              [=] { cudaCheck(cudaMemcpyAsync(D, A, bytes, cudaMemcpyDeviceToDevice, 0)); }};
            float us[2];
            time_interleaved(f, 2, reps, us);
            printf("%-28s %6d %6d %5s %4d %9.1f %8.0f %9.1f %8.0f\n", ci->what, ci->rows, ci->cols,
                   ci->f == FP8_E4M3 ? "e4m3" : "e5m2", ci->per_layer, us[0], 2.0 * bytes / us[0] / 1e3, us[1],
                   2.0 * bytes / us[1] / 1e3);
            sum_cast += ci->per_layer * us[0];
            for (int r = 0; r < ci->per_layer; r++)
                layer_fp8[nf++] = [=, &b] { cast_launch(&b, ci, A); };
        }
        {
            size_t n = (size_t)T * F;
            launch_fn f[2] = {[=, &b] { cast_fp8(b.c_out, b.amax, (const bf16 *)A, b.scale, T, F, FP8_E4M3, 0); },
                              [=] { cudaCheck(cudaMemcpyAsync(D, A, n * 3 / 2, cudaMemcpyDeviceToDevice, 0)); }};
            float us[2];
            time_interleaved(f, 2, reps, us);
            printf("%-28s %6d %6d %5s %4s %9.1f %8.0f %9.1f %8.0f  (cast only, for comparison: not counted)\n",
                   "cast_fp8 (T, F)", T, F, "e4m3", "-", us[0], 3.0 * n / us[0] / 1e3, us[1], 3.0 * n / us[1] / 1e3);
        }
        double bf = L * sum_bf16 / 1e3, f8 = L * sum_fp8 / 1e3, cs = L * (sum_cast + sum_extra) / 1e3;
        printf("\nper step, T = %d (x %d layers): bf16 GEMMs %.2f ms | FP8 GEMMs %.2f ms | casts %.2f ms%s | "
               "FP8 total %.2f ms | saving %.2f ms (%.1f%% of the bf16 GEMMs)%s\n", T, L, bf, f8, cs,
               sum_extra > 0 ? " (with the epilogues' separate passes)" : "", f8 + cs, bf - f8 - cs,
               100.0 * (bf - f8 - cs) / bf, missing ? "; SOME PRODUCTS HAD NO FP8 ALGORITHM" : "");
        if (ti == 0 && power_s > 0 && !missing) {
            launch_fn step[2] = {[&] {
                                     for (int l = 0; l < L; l++)
                                         for (int k = 0; k < nb; k++)
                                             layer_bf16[k]();
                                 },
                                 [&] {
                                     for (int l = 0; l < L; l++)
                                         for (int k = 0; k < nf; k++)
                                             layer_fp8[k]();
                                 }};
            power_run(step, power_s);
        }
        for (int i = 0; i < np; i++)
            if (p[i].per_step == L)
                gemm_fp8_free(fp[i].p);
    }
    for (size_t i = 0; i < sizeof bufs8 / sizeof *bufs8; i++)
        cudaCheck(cudaFree(*bufs8[i]));
    cudaCheck(cudaFree(dev_f));
    cudaCheck(cudaFree(Dw));
    cudaCheck(cudaFree(b.ws));
    cublasCheck(cublasLtDestroy(b.lt));
    return 0;
}

/* ---- --sweep ---------------------------------------------------------------------------------------- */

/* The encoder's twelve products per layer at every token count lo, lo + step, ... hi: the time of
 * the algorithm the trainer runs (the heuristic's first choice for the shape's bucket, gemm.c),
 * median of reps runs. One CSV row per product and token count, for the cost model's GEMM terms. */
static int sweep_main(int lo, int hi, int step, int reps, void *A, void *B, void *D, void *aux, void *bias,
                      size_t d_bytes, gemm_ctx *g)
{
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("# bench_gemm --sweep on %s, cuBLASLt %zu: the trainer's algorithm (first choice of the bucket), "
           "median of %d runs\n", prop.name, cublasLtGetVersion(), reps);
    printf("hidden,product,M,N,K,beta,tokens,us\n");
    for (int T = lo; T <= hi; T += step) {
        product p[32];
        int np = products(T, (int)(0.15 * T + 0.5), p);
        for (int i = 0; i < np; i++) {
            if (p[i].per_step != L)
                continue; /* the encoder's products only */
            gemm_shape s = {.M = p[i].M, .N = p[i].N, .K = p[i].K, .trans_a = p[i].ta, .trans_b = p[i].tb,
                            .ab_type = GEMM_BF16, .d_type = p[i].d, .epi = p[i].epi, .bias_type = GEMM_BF16};
            if (p[i].beta != 0)
                cudaCheck(cudaMemset(D, 0, d_bytes));
            float us[1] = {0};
            int nc = gemm_time_candidates(g, &s, A, B, D, p[i].beta, bias, aux, 1, reps, 0, us);
            char name[64];
            snprintf(name, sizeof name, "%s", p[i].name);
            name[strcspn(name, " ")] = '\0';
            printf("%d,%s,%d,%d,%d,%g,%d,%.2f\n", H, name, p[i].M, p[i].N, p[i].K, p[i].beta, T, nc ? us[0] : -1.0f);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int tokens[8] = {12900, 14300}, ntok = 2, cands = 16, reps = -1, fp8 = 0, sw[3] = {0, 0, 0};
    double power_s = 3.0;
    const char *usage = "usage: bench_gemm [--tokens 12900,14300] [--cands 16] [--reps 7] [--hidden 1024]\n"
                        "       bench_gemm --sweep LO:HI:STEP [--hidden 1024] [--reps 7]\n"
                        "       bench_gemm --fp8 [--tokens 12900,14300] [--reps 15] [--power-seconds 3] "
                        "[--fp8-epilogues on|off|no-dgelu]\n";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--fp8")) {
            fp8 = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s", usage);
            return 2;
        }
        if (!strcmp(argv[i], "--tokens")) {
            ntok = 0;
            for (char *t = strtok(argv[i + 1], ","); t && ntok < 8; t = strtok(NULL, ","))
                tokens[ntok++] = atoi(t);
        } else if (!strcmp(argv[i], "--sweep")) {
            if (sscanf(argv[i + 1], "%d:%d:%d", &sw[0], &sw[1], &sw[2]) != 3 || sw[0] < 64 || sw[1] > 65536 ||
                sw[1] < sw[0] || sw[2] < 1) {
                fprintf(stderr, "bench_gemm: --sweep LO:HI:STEP with 64 <= LO <= HI <= 65536, STEP >= 1\n");
                return 2;
            }
            tokens[0] = sw[1], ntok = 1; /* operands sized for the largest */
        } else if (!strcmp(argv[i], "--hidden")) {
            H = atoi(argv[i + 1]), F = 4 * H;
            if (H < 64 || H > 8192 || H % 64) {
                fprintf(stderr, "bench_gemm: --hidden must be a multiple of 64 in [64, 8192]\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--cands")) {
            cands = atoi(argv[i + 1]);
        } else if (!strcmp(argv[i], "--reps")) {
            reps = atoi(argv[i + 1]);
        } else if (!strcmp(argv[i], "--power-seconds")) {
            power_s = atof(argv[i + 1]);
        } else if (!strcmp(argv[i], "--fp8-epilogues") && (!strcmp(argv[i + 1], "on") || !strcmp(argv[i + 1], "off") ||
                                                            !strcmp(argv[i + 1], "no-dgelu"))) {
            fp8_epilogues = !strcmp(argv[i + 1], "on") ? 1 : !strcmp(argv[i + 1], "off") ? 0 : 2;
        } else {
            fprintf(stderr, "%s", usage);
            return 2;
        }
        i++;
    }
    if (reps < 0)
        reps = fp8 ? 15 : 7;
    for (int i = 0; i < ntok; i++)
        if (tokens[i] < 64 || tokens[i] > 65536) {
            fprintf(stderr, "bench_gemm: --tokens must be in [64, 65536]\n");
            return 2;
        }
    if (cands < 1 || cands > 32 || reps < 1 || reps > (fp8 ? 64 : 16) || !(power_s >= 0 && power_s <= 60)) {
        fprintf(stderr, "bench_gemm: --cands in [1, 32], --reps in [1, 16] (--fp8: [1, 64]), --power-seconds in "
                        "[0, 60]\n");
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
    if (sw[2]) {
        int rc = sweep_main(sw[0], sw[1], sw[2], reps, A, B, D, aux, bias, d_bytes, g);
        gemm_ctx_free(g);
        void *bufs[] = {A, B, D, aux, bias};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
            cudaCheck(cudaFree(bufs[i]));
        return rc;
    }
    if (fp8) {
        int rc = fp8_main(tokens, ntok, reps, power_s, A, B, D, aux, bias, g);
        gemm_ctx_free(g);
        void *bufs[] = {A, B, D, aux, bias};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
            cudaCheck(cudaFree(bufs[i]));
        return rc;
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
