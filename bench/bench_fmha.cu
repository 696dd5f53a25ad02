/* bench_fmha.cu — times the variable-length FMHA (kernels/fmha.cu) on lengths drawn from the
 * Wikipedia distribution (models/dists/wiki512.csv, fixed seed), 16 heads: median forward,
 * backward and forward+backward times over CUDA events, achieved TFLOP/s (forward counts
 * 4 * sum(len^2) * 64 * NH, backward 2.5x that), for every kernel shape without and with
 * attention dropout 0.1, the default and the fastest shapes, and the batch split into 3 groups
 * on 3 streams, and the default backward timed launch by launch (prep pass, main kernel, convert
 * pass). Writes the lengths (one per line) for bench/fmha_peer.py and a CSV result (the
 * default shapes without and with dropout):
 *   bench_fmha [--n 56] [--heads 16] [--seed 1] [--reps 30] [--lengths FILE] [--result FILE]
 *              [--fwd-shapes LIST] [--bwd-shapes LIST] [--default FWD/BWD] [--order drawn|longest]
 * (only the listed shapes; the rows of the launchers' shapes (the forward's by dropout,
 * fmha_fwd_default_shape; backward 0) taken from --default instead;
 * --order longest puts the sequences longest first, the order the trainer's balanced path
 * launches them in, instead of the order they were drawn in) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "common.h"
#include "fmha.h"

typedef struct {
    int n, T, NH, max_len;
    int32_t *d_cu;
    bf16 *qkv, *dout, *out, *dqkv;
    float *lse;
    void *ws;
    int *len;
} problem;

typedef struct {
    int fwd_shape, bwd_shape, groups; /* groups: 1, or 3 on 3 streams */
    float p;
    unsigned parts; /* the backward's launches (fmha.h FMHA_BWD_*); 0: all of them */
    int stagger;    /* with groups 2: the second half's backward starts when the first's prep pass
                       is done, so that each half's passes run beside the other's main kernel */
} setup;

static cudaStream_t streams[3];
static cudaEvent_t prep_done; /* stagger: the first half's prep pass has run */

static void group_bounds(const problem *P, int groups, int *b)
{
    b[0] = 0;
    for (int g = 1; g < groups; g++)
        b[g] = P->n * g / groups;
    b[groups] = P->n;
}

static int group_max(const problem *P, int s0, int s1)
{
    int m = 1;
    for (int s = s0; s < s1; s++)
        m = P->len[s] > m ? P->len[s] : m;
    return m;
}

static void run(const problem *P, const setup *c, int do_fwd, int do_bwd)
{
    int b[4];
    group_bounds(P, c->groups, b);
    for (int g = 0; g < c->groups; g++) {
        const int ml = c->groups == 1 ? P->max_len : group_max(P, b[g], b[g + 1]);
        cudaStream_t st = streams[g];
        if (do_fwd)
            fmha_fwd_shape(c->fwd_shape, P->out, P->lse, P->qkv, P->d_cu, P->T, P->NH, b[g], b[g + 1],
                           ml, c->p, 1, 2, st);
        if (do_bwd && c->stagger) {
            if (g == 1)
                cudaCheck(cudaStreamWaitEvent(st, prep_done, 0));
            fmha_bwd_parts(c->bwd_shape, FMHA_BWD_PREP, P->dqkv, P->ws, P->dout, P->out, P->lse, P->qkv, P->d_cu,
                           P->T, P->NH, b[g], b[g + 1], ml, c->p, 1, 2, st);
            if (g == 0)
                cudaCheck(cudaEventRecord(prep_done, st));
            fmha_bwd_parts(c->bwd_shape, FMHA_BWD_MAIN | FMHA_BWD_CONVERT, P->dqkv, P->ws, P->dout, P->out, P->lse,
                           P->qkv, P->d_cu, P->T, P->NH, b[g], b[g + 1], ml, c->p, 1, 2, st);
        } else if (do_bwd) {
            fmha_bwd_parts(c->bwd_shape, c->parts ? c->parts : FMHA_BWD_ALL, P->dqkv, P->ws, P->dout, P->out,
                           P->lse, P->qkv, P->d_cu, P->T, P->NH, b[g], b[g + 1], ml, c->p, 1, 2, st);
        }
    }
}

/* Median milliseconds of `reps` timed runs (events on stream 0; other streams joined to it). */
static float time_ms(const problem *P, const setup *c, int do_fwd, int do_bwd, int reps)
{
    cudaEvent_t e0, e1, join[3];
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    for (int g = 0; g < 3; g++)
        cudaCheck(cudaEventCreateWithFlags(&join[g], cudaEventDisableTiming));
    float *t = (float *)malloc(sizeof(float) * reps);
    for (int r = -5; r < reps; r++) {
        cudaCheck(cudaEventRecord(e0, streams[0]));
        for (int g = 1; g < c->groups; g++)
            cudaCheck(cudaStreamWaitEvent(streams[g], e0, 0));
        run(P, c, do_fwd, do_bwd);
        for (int g = 1; g < c->groups; g++) {
            cudaCheck(cudaEventRecord(join[g], streams[g]));
            cudaCheck(cudaStreamWaitEvent(streams[0], join[g], 0));
        }
        cudaCheck(cudaEventRecord(e1, streams[0]));
        cudaCheck(cudaEventSynchronize(e1));
        if (r >= 0)
            cudaCheck(cudaEventElapsedTime(&t[r], e0, e1));
    }
    qsort(t, reps, sizeof(float), bench_cmp_float);
    const float med = t[reps / 2];
    free(t);
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
    for (int g = 0; g < 3; g++)
        cudaCheck(cudaEventDestroy(join[g]));
    return med;
}

static void fill_random_bf16(bf16 *d, size_t n, float scale, unsigned long long seed)
{
    bf16 *h = (bf16 *)malloc(n * sizeof(bf16));
    unsigned long long s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        h[i] = float_to_bf16(scale * ((float)((s >> 40) & 0xffffff) / 8388608.0f - 1.0f));
    }
    cudaCheck(cudaMemcpy(d, h, n * sizeof(bf16), cudaMemcpyHostToDevice));
    free(h);
}

/* 1 if shape k is in the comma-separated list (NULL: every shape). */
static int listed(const char *list, int k)
{
    if (!list)
        return 1;
    for (const char *c = list; *c;) {
        char *end;
        const long v = strtol(c, &end, 10);
        if (end == c)
            return 0;
        if (v == k)
            return 1;
        c = *end == ',' ? end + 1 : end;
    }
    return 0;
}

/* The flags. */
typedef struct {
    int n, NH, reps;
    unsigned long seed;
    const char *len_path, *res_path, *fwd_list, *bwd_list;
    int def_fwd, def_bwd; /* --default; def_fwd -1: the launcher's choice for each dropout */
    int longest_first;    /* --order longest */
} bench_args;

/* The forward shape of the "default" rows at dropout p. */
static int def_fwd_at(const bench_args *a, float p)
{
    return a->def_fwd >= 0 ? a->def_fwd : fmha_fwd_default_shape(p);
}

/* 0 when the run goes on, else the exit code. */
static int args_parse(int argc, char **argv, bench_args *a)
{
    *a = (bench_args){56, 16, 30, 1, "fmha_lengths.txt", "fmha_result.csv", NULL, NULL, -1, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_fmha: %s needs a value\n", argv[i]);
            return 1;
        }
        if (!strcmp(argv[i], "--n"))
            a->n = atoi(v);
        else if (!strcmp(argv[i], "--heads"))
            a->NH = atoi(v);
        else if (!strcmp(argv[i], "--seed"))
            a->seed = strtoul(v, NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            a->reps = atoi(v);
        else if (!strcmp(argv[i], "--lengths"))
            a->len_path = v;
        else if (!strcmp(argv[i], "--result"))
            a->res_path = v;
        else if (!strcmp(argv[i], "--fwd-shapes"))
            a->fwd_list = v;
        else if (!strcmp(argv[i], "--bwd-shapes"))
            a->bwd_list = v;
        else if (!strcmp(argv[i], "--order")) {
            if (strcmp(v, "drawn") && strcmp(v, "longest")) {
                fprintf(stderr, "bench_fmha: --order: '%s' is neither drawn nor longest\n", v);
                return 1;
            }
            a->longest_first = !strcmp(v, "longest");
        }
        else if (!strcmp(argv[i], "--default")) {
            if (sscanf(v, "%d/%d", &a->def_fwd, &a->def_bwd) != 2 || a->def_fwd < 0 ||
                a->def_fwd >= fmha_fwd_shape_count() || a->def_bwd < 0 || a->def_bwd >= fmha_bwd_shape_count()) {
                fprintf(stderr, "bench_fmha: --default: '%s' is not FWD/BWD\n", v);
                return 1;
            }
        }
        else {
            fprintf(stderr, "bench_fmha: unknown flag %s\n", argv[i]);
            return 1;
        }
        i++;
    }
    if (a->n < 1 || a->NH < 1 || a->reps < 1) {
        fprintf(stderr, "bench_fmha: --n, --heads and --reps must be >= 1\n");
        return 1;
    }
    return 0;
}

static int longer_first(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

/* The problem: lengths (written to a->len_path for the peer), their sum of squares, random q, k, v
 * and output gradient on the device. */
static int problem_make(const bench_args *a, problem *P, double *sum_len2)
{
    const int n = a->n, NH = a->NH;
    int32_t *cu;
    memset(P, 0, sizeof *P);
    P->n = n;
    P->NH = NH;
    if (bench_wiki_lengths("bench_fmha", a->seed, n, &P->len, &cu))
        return 1;
    if (a->longest_first) {
        qsort(P->len, (size_t)n, sizeof *P->len, longer_first);
        for (int i = 0; i < n; i++)
            cu[i + 1] = cu[i] + P->len[i];
    }
    *sum_len2 = 0;
    for (int i = 0; i < n; i++) {
        *sum_len2 += (double)P->len[i] * P->len[i];
        P->max_len = P->len[i] > P->max_len ? P->len[i] : P->max_len;
    }
    P->T = cu[n];
    FILE *lf = fopen(a->len_path, "w");
    if (!lf) {
        fprintf(stderr, "bench_fmha: cannot write %s\n", a->len_path);
        return 1;
    }
    fprintf(lf, "# %d lengths from models/dists/wiki512.csv, seed %lu, %s (bench_fmha)\n", n, a->seed,
            a->longest_first ? "longest first" : "in the order drawn");
    for (int i = 0; i < n; i++)
        fprintf(lf, "%d\n", P->len[i]);
    fclose(lf);
    const size_t nqkv = (size_t)P->T * 3 * NH * 64, no = (size_t)P->T * NH * 64;
    cudaCheck(cudaMalloc(&P->d_cu, sizeof(int32_t) * (n + 1)));
    cudaCheck(cudaMemcpy(P->d_cu, cu, sizeof(int32_t) * (n + 1), cudaMemcpyHostToDevice));
    cudaCheck(cudaMalloc(&P->qkv, nqkv * sizeof(bf16)));
    cudaCheck(cudaMalloc(&P->dqkv, nqkv * sizeof(bf16)));
    cudaCheck(cudaMalloc(&P->dout, no * sizeof(bf16)));
    cudaCheck(cudaMalloc(&P->out, no * sizeof(bf16)));
    cudaCheck(cudaMalloc(&P->lse, (size_t)NH * P->T * sizeof(float)));
    cudaCheck(cudaMalloc(&P->ws, fmha_bwd_workspace_bytes(P->T, NH)));
    fill_random_bf16(P->qkv, nqkv, 2.0f, 11);
    fill_random_bf16(P->dout, no, 1.0f, 12);
    free(cu);
    return 0;
}

/* Every forward shape with the default backward shape, then every backward shape with the
 * default forward shape, each without and with attention dropout 0.1; the fastest of each into
 * best_f, best_b (per dropout). */
static void shape_sweep(const bench_args *a, const problem *P, double fwd_flop, double bwd_flop, int *best_f,
                        int *best_b)
{
    const float ps[2] = {0.0f, 0.1f};
    float best_ft[2] = {1e30f, 1e30f}, best_bt[2] = {1e30f, 1e30f};
    best_f[0] = def_fwd_at(a, ps[0]);
    best_f[1] = def_fwd_at(a, ps[1]);
    best_b[0] = best_b[1] = a->def_bwd;
    for (int pi = 0; pi < 2; pi++)
        for (int f = 0; f < fmha_fwd_shape_count(); f++) {
            if (!listed(a->fwd_list, f))
                continue;
            setup c = {f, a->def_bwd, 1, ps[pi], 0, 0};
            const float tf = time_ms(P, &c, 1, 0, a->reps);
            char label[96];
            snprintf(label, sizeof label, "%s p=%.1f", fmha_fwd_shape_name(f), ps[pi]);
            printf("%-36s %9.4f %9s %9s %8.1f\n", label, tf, "-", "-", fwd_flop / tf * 1e-9);
            if (tf < best_ft[pi]) {
                best_ft[pi] = tf;
                best_f[pi] = f;
            }
        }
    for (int pi = 0; pi < 2; pi++)
        for (int b = 0; b < fmha_bwd_shape_count(); b++) {
            if (!listed(a->bwd_list, b))
                continue;
            setup c = {def_fwd_at(a, ps[pi]), b, 1, ps[pi], 0, 0};
            run(P, &c, 1, 0); /* the forward outputs this backward reads */
            const float tb = time_ms(P, &c, 0, 1, a->reps);
            char label[96];
            snprintf(label, sizeof label, "%s p=%.1f", fmha_bwd_shape_name(b), ps[pi]);
            printf("%-36s %9s %9.4f %9s %8s %8.1f\n", label, "-", tb, "-", "-", bwd_flop / tb * 1e-9);
            if (tb < best_bt[pi]) {
                best_bt[pi] = tb;
                best_b[pi] = b;
            }
        }
}

/* The summary rows (defaults, with dropout, the fastest shapes, 3 groups on 3 streams) and the
 * result CSV of the first two; 1 when the CSV cannot be written. */
static int summary_rows(const bench_args *a, const problem *P, double sum_len2, double fwd_flop,
                        double bwd_flop, const int *best_f, const int *best_b)
{
    const int def_f0 = def_fwd_at(a, 0.0f), def_f1 = def_fwd_at(a, 0.1f), def_bwd = a->def_bwd, reps = a->reps;
    const setup rows[] = {
        {def_f0, def_bwd, 1, 0.0f, 0, 0},  /* the launchers' defaults (or --default) */
        {def_f1, def_bwd, 1, 0.1f, 0, 0},  /* the same with attention dropout 0.1 */
        {best_f[0], best_b[0], 1, 0.0f, 0, 0}, /* the fastest shapes of this run */
        {best_f[1], best_b[1], 1, 0.1f, 0, 0},
        {def_f0, def_bwd, 3, 0.0f, 0, 0},  /* defaults, 3 groups on 3 streams */
    };
    const char *labels[] = {"default", "default, dropout 0.1", "best shapes", "best shapes, dropout 0.1",
                            "default, 3 groups/3 streams"};
    const int nrows = (int)(sizeof rows / sizeof rows[0]);
    float tf[5], tb[5], tt[5];
    for (int r = 0; r < nrows; r++) {
        run(P, &rows[r], 1, 0);
        tf[r] = time_ms(P, &rows[r], 1, 0, reps);
        tb[r] = time_ms(P, &rows[r], 0, 1, reps);
        tt[r] = time_ms(P, &rows[r], 1, 1, reps);
        char label[96];
        snprintf(label, sizeof label, "%s (%d/%d)", labels[r], rows[r].fwd_shape, rows[r].bwd_shape);
        printf("%-36s %9.4f %9.4f %9.4f %8.1f %8.1f %8.1f\n", label, tf[r], tb[r], tt[r], fwd_flop / tf[r] * 1e-9,
               bwd_flop / tb[r] * 1e-9, (fwd_flop + bwd_flop) / tt[r] * 1e-9);
    }
    FILE *rf = fopen(a->res_path, "w");
    if (!rf) {
        fprintf(stderr, "bench_fmha: cannot write %s\n", a->res_path);
        return 1;
    }
    fprintf(rf, "impl,dropout,n,heads,T,sum_len2,fwd_ms,bwd_ms,total_ms,fwd_tflops,bwd_tflops,total_tflops\n");
    for (int r = 0; r < 2; r++)
        fprintf(rf, "unpad fmha,%.1f,%d,%d,%d,%.0f,%.5f,%.5f,%.5f,%.2f,%.2f,%.2f\n", rows[r].p, a->n, a->NH, P->T,
                sum_len2, tf[r], tb[r], tt[r], fwd_flop / tf[r] * 1e-9, bwd_flop / tb[r] * 1e-9,
                (fwd_flop + bwd_flop) / tt[r] * 1e-9);
    fclose(rf);
    printf("bench_fmha: default shapes fwd+bwd %.4f ms (%.1f TFLOP/s), with dropout 0.1 %.4f ms (%.1f) -> %s\n",
           tt[0], (fwd_flop + bwd_flop) / tt[0] * 1e-9, tt[1], (fwd_flop + bwd_flop) / tt[1] * 1e-9, a->res_path);
    return 0;
}

/* The default backward timed by launch (prep pass, main kernel, convert pass, all three), without
 * and with dropout: where its time goes. A launch timed alone computes from what the runs before
 * left; only its time counts. */
static void launch_rows(const bench_args *a, const problem *P, double bwd_flop)
{
    static const unsigned parts[4] = {FMHA_BWD_PREP, FMHA_BWD_MAIN, FMHA_BWD_CONVERT, FMHA_BWD_ALL};
    printf("%-36s %9s %9s %9s %9s %8s %8s\n", "backward by launch (default shapes)", "prep ms", "main ms",
           "conv ms", "all ms", "main TF/s", "pass %");
    for (int k = 0; k < 2; k++) {
        const float p = k ? 0.1f : 0.0f;
        float t[4];
        const int f = def_fwd_at(a, p);
        const setup whole = {f, a->def_bwd, 1, p, 0, 0};
        run(P, &whole, 1, 1); /* forward and whole backward at this dropout: the inputs every launch reads */
        for (int i = 0; i < 4; i++) {
            const setup c = {f, a->def_bwd, 1, p, parts[i], 0};
            t[i] = time_ms(P, &c, 0, 1, a->reps);
        }
        char label[64];
        snprintf(label, sizeof label, "bwd launches p=%.1f (%d)", p, a->def_bwd);
        printf("%-36s %9.4f %9.4f %9.4f %9.4f %8.1f %8.1f\n", label, t[0], t[1], t[2], t[3], bwd_flop / t[1] * 1e-9,
               100.0 * (t[0] + t[2]) / t[3]);
        const setup two = {f, a->def_bwd, 2, p, 0, 0}, st = {f, a->def_bwd, 2, p, 0, 1};
        const float t2 = time_ms(P, &two, 0, 1, a->reps), ts = time_ms(P, &st, 0, 1, a->reps);
        printf("  two halves on two streams: together %.4f ms, staggered %.4f ms (%.1f TFLOP/s, %+.1f%% "
               "against one launch)\n", t2, ts, bwd_flop / ts * 1e-9, 100.0 * (ts / t[3] - 1));
    }
}

int main(int argc, char **argv)
{
    bench_args a;
    problem P;
    double sum_len2;
    int rc = args_parse(argc, argv, &a);
    if (rc || problem_make(&a, &P, &sum_len2))
        return rc ? rc : 1;
    for (int g = 0; g < 3; g++)
        cudaCheck(cudaStreamCreateWithFlags(&streams[g], cudaStreamNonBlocking));
    cudaCheck(cudaEventCreateWithFlags(&prep_done, cudaEventDisableTiming));
    const double fwd_flop = 4.0 * sum_len2 * 64 * a.NH, bwd_flop = 2.5 * fwd_flop;
    printf("bench_fmha: %d sequences (seed %lu), T = %d, max_len = %d, sum len^2 = %.0f, NH = %d, "
           "%d reps (median)\n",
           a.n, a.seed, P.T, P.max_len, sum_len2, a.NH, a.reps);
    printf("%-36s %9s %9s %9s %8s %8s %8s\n", "kernel shape", "fwd ms", "bwd ms", "total ms",
           "fwd TF/s", "bwd TF/s", "tot TF/s");
    int best_f[2], best_b[2];
    shape_sweep(&a, &P, fwd_flop, bwd_flop, best_f, best_b);
    if (summary_rows(&a, &P, sum_len2, fwd_flop, bwd_flop, best_f, best_b))
        return 1;
    launch_rows(&a, &P, bwd_flop);
    for (int g = 0; g < 3; g++)
        cudaCheck(cudaStreamDestroy(streams[g]));
    cudaCheck(cudaEventDestroy(prep_done));
    cudaCheck(cudaFree(P.d_cu));
    cudaCheck(cudaFree(P.qkv));
    cudaCheck(cudaFree(P.dqkv));
    cudaCheck(cudaFree(P.dout));
    cudaCheck(cudaFree(P.out));
    cudaCheck(cudaFree(P.lse));
    cudaCheck(cudaFree(P.ws));
    free(P.len);
    return 0;
}
