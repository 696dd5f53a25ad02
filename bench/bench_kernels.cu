/* bench_kernels.cu — times every launcher of kernels/kernels.h on BERT-Large shapes: 56 sequences
 * drawn from the Wikipedia length distribution (models/dists/wiki512.csv, fixed seed; about 14,300
 * tokens), H = 1024, FFN 4096, vocabulary 30,522 padded to 30,528, 15% of the tokens masked (at
 * most 76 per sequence), LAMB over the 336M parameters of BERT-Large.
 *
 * Each kernel: 3 warm-up calls, then REPS samples, each timing NSETS back-to-back calls with
 * CUDA events; the median per-call time is reported. Inputs and outputs rotate over the NSETS
 * copies so that consecutive calls do not find their data in L2 (for the large kernels one call's
 * bytes alone exceed the L2). Achieved GB/s = the bytes the launcher must move (inputs read once,
 * outputs written once, the scratch traffic of its second pass included, as listed per row) /
 * median time, beside two device-to-device cudaMemcpy rates measured in the same run (read +
 * write counted): of 1 GiB ("of copy"), and of a copy that moves the row's own byte count ("of
 * same-size copy": half read, half written, rotating over NSETS buffers too), because a 60 MB
 * kernel cannot reach the 1 GiB copy's rate (launch and tail are a larger share of its time).
 * --only runs the rows whose name contains the given text.
 *   bench_kernels [--n 56] [--seed 1] [--reps 30] [--only NAME] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <functional>

#include "bench_util.h"
#include "kernels.h"

#define NSETS 4

/* Median time in microseconds of one call(set): each sample times NSETS calls launched back to
 * back (one per buffer set, as kernels run in a training step) and divides by NSETS. */
static float time_us(int reps, const std::function<void(int)> &call)
{
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++)
        call(i % NSETS);
    float *t = (float *)malloc(reps * sizeof(float));
    for (int i = 0; i < reps; i++) {
        cudaCheck(cudaEventRecord(a, 0));
        for (int s = 0; s < NSETS; s++)
            call(s);
        cudaCheck(cudaEventRecord(b, 0));
        cudaCheck(cudaEventSynchronize(b));
        cudaCheck(cudaEventElapsedTime(&t[i], a, b));
        t[i] /= NSETS;
    }
    qsort(t, reps, sizeof(float), bench_cmp_float);
    float med = 1000.0f * (reps % 2 ? t[reps / 2] : 0.5f * (t[reps / 2 - 1] + t[reps / 2]));
    free(t);
    cudaCheck(cudaEventDestroy(a));
    cudaCheck(cudaEventDestroy(b));
    return med;
}

static __global__ void fill_kernel(bf16 *p, size_t n, unsigned long long seed, float scale)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
        float u = (float)((z >> 40) & 0xffffff) / 8388608.0f - 1.0f;
        unsigned int f = __float_as_uint(u * scale);
        p[i] = (bf16)((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
    }
}

/* NSETS device buffers of `bytes`, filled with small random bf16 values (fp32 buffers: zeroed). */
typedef struct {
    void *p[NSETS];
} sets;
static unsigned long long fill_seed = 1;
static sets alloc_sets(size_t bytes, int is_bf16)
{
    sets s;
    for (int i = 0; i < NSETS; i++) {
        cudaCheck(cudaMalloc(&s.p[i], bytes ? bytes : 16));
        if (is_bf16)
            fill_kernel<<<1024, 256>>>((bf16 *)s.p[i], bytes / 2, fill_seed++, 1.0f);
        else
            cudaCheck(cudaMemset(s.p[i], 0, bytes));
        cudaCheck(cudaGetLastError());
    }
    return s;
}
static void free_sets(sets *s)
{
    for (int i = 0; i < NSETS; i++)
        cudaCheck(cudaFree(s->p[i]));
}
#define B(s, i) ((bf16 *)(s).p[i])
#define F(s, i) ((float *)(s).p[i])

/* The copy rates: 1 GiB, and per byte count (the copy buffers stay allocated for the run). */
#define COPY_BYTES ((size_t)1 << 30)
static double copy_gbs;
static void *copy_src, *copy_dst;
static double sized_bytes[64], sized_gbs[64];
static int nsized;

/* GB/s (read + write) of device-to-device copies that move `bytes` in all; NSETS disjoint slices
 * of the copy buffers rotate like the kernels' buffer sets while they fit. Beyond 1 GiB: the
 * 1 GiB rate. */
static double copy_gbs_sized(double bytes)
{
    size_t half = ((size_t)(bytes / 2) + 255) / 256 * 256;
    if (half >= COPY_BYTES)
        return copy_gbs;
    for (int i = 0; i < nsized; i++)
        if (sized_bytes[i] == (double)half)
            return sized_gbs[i];
    size_t step = half * NSETS <= COPY_BYTES ? half : 0;
    float us = time_us(10, [&](int s) {
        cudaCheck(cudaMemcpyAsync((char *)copy_dst + s * step, (char *)copy_src + s * step, half,
                                  cudaMemcpyDeviceToDevice, 0));
    });
    double gbs = 2.0 * half / (us * 1e-6) / 1e9;
    if (nsized < 64)
        sized_bytes[nsized] = (double)half, sized_gbs[nsized++] = gbs;
    return gbs;
}

/* Times call (the row's launcher over buffer set s) and prints the row, unless --only excludes it. */
static const char *only;
static void row(const char *name, const char *shape, double bytes, int reps,
                const std::function<void(int)> &call)
{
    if (only && !strstr(name, only))
        return;
    float us = time_us(reps, call);
    double gbs = bytes / (us * 1e-6) / 1e9;
    printf("%-36s %-22s %9.1f %10.1f %9.0f %7.0f%% %17.0f%%\n", name, shape, bytes / 1e6, us, gbs,
           100.0 * gbs / copy_gbs, 100.0 * gbs / copy_gbs_sized(bytes));
    fflush(stdout);
}

/* BERT-Large parameter tensors (BertForPreTraining, tied decoder; query, key and value apart, as the
 * trainer's per-tensor trust ratios have them): sizes and weight-decay flags. */
static int bert_large_tensors(lamb_tensor *t, int max)
{
    const int64_t H = 1024, F = 4096, V = 30528;
    int n = 0;
    int64_t off = 0;
    auto add = [&](int64_t size, int wd) {
        if (n < max) {
            t[n].offset = off;
            t[n].size = size;
            t[n].weight_decay = wd;
        }
        n++;
        off += (size + 7) / 8 * 8;
    };
    add(V * H, 1), add(512 * H, 1), add(2 * H, 1), add(H, 0), add(H, 0); /* embeddings + LN */
    for (int l = 0; l < 24; l++) {
        add(H * H, 1), add(H * H, 1), add(H * H, 1), add(H, 0), add(H, 0), add(H, 0); /* q, k, v apart */
        add(H * H, 1), add(H, 0), add(H, 0), add(H, 0);
        add(F * H, 1), add(F, 0), add(H * F, 1), add(H, 0), add(H, 0), add(H, 0);
    }
    add(H * H, 1), add(H, 0);                     /* pooler */
    add(H * H, 1), add(H, 0), add(H, 0), add(H, 0); /* MLM transform + LN */
    add(V, 0);                                    /* decoder bias */
    add(2 * H, 1), add(2, 0);                     /* NSP */
    return n;
}

/* The batch: its lengths (Wikipedia), token ids and types, masked rows and labels, NSP labels,
 * on the device. */
typedef struct {
    int n, T, P, max_len, distinct_ids; /* distinct_ids: the word rows the embedding reads */
    int32_t *d_cu, *d_ids, *d_types, *d_rows, *d_labels, *d_nsp;
} bench_batch;

enum { BH = 1024, BF = 4096, BV = 30522, BVP = 30528, BTV = 2 }; /* BERT-Large */

static int32_t *to_device(const int32_t *h, int n)
{
    int32_t *d;
    cudaCheck(cudaMalloc(&d, (size_t)n * 4));
    cudaCheck(cudaMemcpy(d, h, (size_t)n * 4, cudaMemcpyHostToDevice));
    return d;
}

static int batch_make(int n, unsigned long seed, bench_batch *b)
{
    int *len;
    int32_t *cu;
    if (bench_wiki_lengths("bench_kernels", seed, n, &len, &cu))
        return 1;
    int P = 0, max_len = 1;
    for (int s = 0; s < n; s++) {
        int pred = (int)lround(0.15 * len[s]);
        P += pred < 76 ? pred : 76;
        max_len = len[s] > max_len ? len[s] : max_len;
    }
    if (P < 1)
        P = 1;
    const int T = cu[n], V = BV;
    int32_t *ids = (int32_t *)malloc(T * 4), *types = (int32_t *)malloc(T * 4), *rows = (int32_t *)malloc(P * 4);
    int32_t *labels = (int32_t *)malloc(P * 4), *nsp_labels = (int32_t *)malloc(n * 4);
    for (int t = 0; t < T; t++)
        ids[t] = (int)((t * 2654435761u) % V), types[t] = (t / 37) % 2;
    for (int i = 0; i < P; i++)
        rows[i] = (int)((size_t)i * T / P), labels[i] = (i * 7919) % V;
    int distinct_ids = 0;
    {
        char *seen = (char *)calloc(V, 1);
        for (int t = 0; t < T; t++)
            distinct_ids += !seen[ids[t]], seen[ids[t]] = 1;
        free(seen);
    }
    for (int s = 0; s < n; s++)
        nsp_labels[s] = s % 2;
    *b = (bench_batch){n, T, P, max_len, distinct_ids, to_device(cu, n + 1), to_device(ids, T),
                       to_device(types, T), to_device(rows, P), to_device(labels, P), to_device(nsp_labels, n)};
    free(len), free(cu), free(ids), free(types), free(rows), free(labels), free(nsp_labels);
    return 0;
}

/* The parameters (one copy: small or gathered), their fp32 gradients, the launchers' scratch. */
typedef struct {
    sets word, pos, type, gam, bet, bias;
    float *dword, *dpos, *dtype, *dg, *db, *dbias, *scratch;
} bench_params;

static void params_make(const bench_batch *b, bench_params *q)
{
    const int H = BH, F = BF, VP = BVP, TV = BTV;
    q->word = alloc_sets((size_t)VP * H * 2, 1), q->pos = alloc_sets(512 * H * 2, 1);
    q->type = alloc_sets(TV * H * 2, 1);
    q->gam = alloc_sets(F * 2, 1), q->bet = alloc_sets(F * 2, 1), q->bias = alloc_sets(F * 2, 1);
    cudaCheck(cudaMalloc(&q->dword, (size_t)VP * H * 4));
    cudaCheck(cudaMalloc(&q->dpos, 512 * H * 4));
    cudaCheck(cudaMalloc(&q->dtype, TV * H * 4));
    cudaCheck(cudaMalloc(&q->dg, F * 4));
    cudaCheck(cudaMalloc(&q->db, F * 4));
    cudaCheck(cudaMalloc(&q->dbias, (size_t)VP * 4));
    size_t sb = embedding_bwd_scratch_bytes(b->T, H, TV);
    size_t s2 = layernorm_bwd_scratch_bytes(H), s3 = bias_bwd_scratch_bytes(VP);
    sb = sb > s2 ? sb : s2;
    sb = sb > s3 ? sb : s3;
    cudaCheck(cudaMalloc(&q->scratch, sb));
    cudaCheck(cudaMemset(q->dword, 0, (size_t)VP * H * 4));
}

/* The token-wide activations, NSETS each (allocated in this order: each set's random contents
 * follow from it). */
typedef struct {
    sets x, res, out, lnin, dout, dadd, dx, mean, rstd;
} bench_acts;

/* The device copy rate: 1 GiB D2D, read + write counted; the buffers stay for the sized copies. */
static void copy_rate(void)
{
    cudaCheck(cudaMalloc(&copy_src, COPY_BYTES));
    cudaCheck(cudaMalloc(&copy_dst, COPY_BYTES));
    cudaCheck(cudaMemset(copy_src, 1, COPY_BYTES));
    float us = time_us(10, [&](int) {
        cudaCheck(cudaMemcpyAsync(copy_dst, copy_src, COPY_BYTES, cudaMemcpyDeviceToDevice, 0));
    });
    copy_gbs = 2.0 * COPY_BYTES / (us * 1e-6) / 1e9;
}

/* The embedding, the LayerNorms and the fused bias + dropout + residual + LayerNorm (x, res, lnin
 * and dadd freed after). */
static void rows_token(const bench_batch *b, const bench_params *q, bench_acts *a, int reps)
{
    const int n = b->n, T = b->T, H = BH, TV = BTV, max_len = b->max_len;
    const size_t TH = (size_t)T * H;
    const float eps = 1e-12f, p = 0.1f;
    sets &x = a->x, &res = a->res, &out = a->out, &lnin = a->lnin, &dout = a->dout, &dadd = a->dadd,
         &dx = a->dx, &mean = a->mean, &rstd = a->rstd;
    float *scratch = q->scratch, *dg = q->dg, *db = q->db;
    char shape[64];
    snprintf(shape, sizeof shape, "T%d H%d", T, H);
    /* minimal traffic: each distinct word row and the position / type rows used once, ids and
     * types, the output, mean and rstd (the position and type rows repeat across the sequences and
     * come from L2 after their first use, so counting them per token would inflate the rate) */
    double table_rows = (double)b->distinct_ids + max_len + TV;
    double emb_fwd_bytes = table_rows * H * 2 + TH * 2 + T * 16.0;
    row("embedding_fwd (+LN, dropout)", shape, emb_fwd_bytes, reps, [&](int s) {
        embedding_fwd(B(out, s), F(mean, s), F(rstd, s), b->d_ids, b->d_types, b->d_cu, n, B(q->word, 0),
                      B(q->pos, 0), B(q->type, 0), B(q->gam, 0), B(q->bet, 0), T, H, eps, p, 1, 0, 0);
    });
    /* minimal traffic: dout, dout_add, the distinct table rows read once (the LayerNorm input is
     * recomputed), the fp32 gradient rows of the word and position tables read and written once,
     * ids, types, mean and rstd; the launcher's scratch is its own cost, not counted */
    double emb_bwd_bytes =
        2.0 * TH * 2 + table_rows * H * 2 + ((double)b->distinct_ids + max_len) * H * 4 * 2 + T * 16.0;
    row("embedding_bwd (3 tables, gamma/beta)", shape, emb_bwd_bytes, reps, [&](int s) {
        embedding_bwd(q->dword, q->dpos, q->dtype, dg, db, B(dout, s), B(dadd, s), b->d_ids, b->d_types, b->d_cu,
                      n, max_len, B(q->word, 0), B(q->pos, 0), B(q->type, 0), B(q->gam, 0), F(mean, s),
                      F(rstd, s), T, H, TV, p, 1, 0, scratch, 0);
    });

    row("layernorm_fwd", shape, 2.0 * TH * 2 + T * 8.0, reps, [&](int s) {
        layernorm_fwd(B(out, s), F(mean, s), F(rstd, s), B(x, s), B(q->gam, 0), B(q->bet, 0), T, H, eps, 0);
    });
    row("layernorm_bwd", shape, 3.0 * TH * 2 + T * 8.0, reps, [&](int s) {
        layernorm_bwd(B(dx, s), dg, db, B(dout, s), B(x, s), F(mean, s), F(rstd, s), B(q->gam, 0), T, H,
                      scratch, 0, 0);
    });
    row("bias_dropout_residual_layernorm_fwd", shape, 4.0 * TH * 2 + T * 8.0, reps, [&](int s) {
        bias_dropout_residual_layernorm_fwd(B(out, s), B(lnin, s), F(mean, s), F(rstd, s), B(x, s),
                                            B(q->bias, 0), B(res, s), B(q->gam, 0), B(q->bet, 0), T, H, eps, p,
                                            1, 2, 0);
    });
    row("bias_dropout_residual_layernorm_bwd", shape, 5.0 * TH * 2 + T * 8.0, reps, [&](int s) {
        bias_dropout_residual_layernorm_bwd(B(dx, s), B(res, s), q->dbias, dg, db, B(dout, s), B(dadd, s),
                                            B(lnin, s), F(mean, s), F(rstd, s), B(q->gam, 0), T, H, p,
                                            1, 2, scratch, 0, 0);
    });
    row("  same, p = 0 (no dropout)", shape, 4.0 * TH * 2 + T * 8.0, reps, [&](int s) {
        bias_dropout_residual_layernorm_fwd(B(out, s), B(lnin, s), F(mean, s), F(rstd, s), B(x, s),
                                            B(q->bias, 0), B(res, s), B(q->gam, 0), B(q->bet, 0), T, H, eps,
                                            0.0f, 1, 2, 0);
    });
    free_sets(&x), free_sets(&res), free_sets(&lnin), free_sets(&dadd);
}

/* The FFN-wide bias + GELU, the QKV bias gradient, the pooler, the MLM rows' gather and scatter. */
static void rows_ffn(const bench_batch *b, const bench_params *q, bench_acts *a, int reps)
{
    const int n = b->n, T = b->T, P = b->P, H = BH, F = BF;
    const size_t TF = (size_t)T * F;
    float *scratch = q->scratch, *dbias = q->dbias;
    const sets &bias = q->bias;
    sets fx = alloc_sets(TF * 2, 1), fo = alloc_sets(TF * 2, 1), fd = alloc_sets(TF * 2, 1);
    char shape[64];
    snprintf(shape, sizeof shape, "T%d N%d", T, F);
    row("bias_gelu_fwd", shape, 2.0 * TF * 2, reps, [&](int s) {
        bias_gelu_fwd(B(fo, s), B(fx, s), B(bias, 0), T, F, 0);
    });
    row("bias_gelu_bwd (+dbias)", shape, 3.0 * TF * 2, reps, [&](int s) {
        bias_gelu_bwd(B(fo, s), dbias, B(fd, s), B(fx, s), B(bias, 0), T, F, scratch, 0, 0);
    });
    snprintf(shape, sizeof shape, "T%d N%d", T, 3 * H);
    row("bias_bwd (all 3H columns)", shape, (double)T * 3 * H * 2, reps, [&](int s) {
        bias_bwd(dbias, B(fd, s), T, 3 * H, scratch, 0, 0);
    });
    row("bias_bwd_qkv (QKV bias, q and v read)", shape, (double)T * 2 * H * 2, reps, [&](int s) {
        bias_bwd_qkv(dbias, NULL, NULL, NULL, B(fd, s), T, H, scratch, 0, 0);
    });
    snprintf(shape, sizeof shape, "n%d N%d", n, H);
    row("bias_tanh_fwd (pooler)", shape, 2.0 * n * H * 2, reps, [&](int s) {
        bias_tanh_fwd(B(fo, s), B(fx, s), B(bias, 0), n, H, 0);
    });
    row("bias_tanh_bwd (pooler)", shape, 3.0 * n * H * 2, reps, [&](int s) {
        bias_tanh_bwd(B(fo, s), dbias, B(fd, s), B(fx, s), n, H, scratch, 0, 0);
    });
    snprintf(shape, sizeof shape, "P%d H%d", P, H);
    row("rows_gather", shape, 2.0 * P * H * 2, reps, [&](int s) {
        rows_gather(B(fo, s), B(a->out, s), b->d_rows, P, H, 0);
    });
    row("rows_scatter_add", shape, 3.0 * P * H * 2, reps, [&](int s) {
        rows_scatter_add(B(a->dx, s), B(fo, s), b->d_rows, P, H, 0);
    });
    free_sets(&fx), free_sets(&fo), free_sets(&fd);
}

/* The MLM and NSP losses, the decoder bias gradient, the loss reduction. */
static void rows_loss(const bench_batch *b, const bench_params *q, int reps)
{
    const int n = b->n, P = b->P, V = BV, VP = BVP;
    const size_t PV = (size_t)P * VP;
    float *scratch = q->scratch, *dbias = q->dbias;
    sets logits = alloc_sets(PV * 2, 1), dlog = alloc_sets(PV * 2, 1), loss = alloc_sets(P * 4, 0),
         lse = alloc_sets(P * 4, 0);
    char shape[64];
    snprintf(shape, sizeof shape, "P%d V%d", P, VP);
    row("mlm_xent_fwd", shape, (double)PV * 2, reps, [&](int s) {
        mlm_xent_fwd(F(loss, s), F(lse, s), B(logits, s), b->d_labels, P, V, VP, 0);
    });
    row("mlm_xent_bwd", shape, 2.0 * PV * 2, reps, [&](int s) {
        mlm_xent_bwd(B(dlog, s), B(logits, s), F(lse, s), b->d_labels, 1.0f / P, P, V, VP, 0);
    });
    row("bias_bwd (decoder bias)", shape, (double)PV * 2, reps, [&](int s) {
        bias_bwd(dbias, B(dlog, s), P, VP, scratch, 0, 0);
    });
    snprintf(shape, sizeof shape, "n%d", n);
    row("nsp_xent_fwd_bwd", shape, n * 12.0, reps, [&](int s) {
        nsp_xent_fwd_bwd(F(loss, s), B(dlog, s), B(logits, s), b->d_nsp, 1.0f / n, n, 0);
    });
    snprintf(shape, sizeof shape, "n%d", P);
    row("reduce_sum_f32", shape, P * 4.0, reps, [&](int s) {
        reduce_sum_f32(F(lse, s), F(loss, s), P, 0);
    });
    free_sets(&logits), free_sets(&dlog), free_sets(&loss), free_sets(&lse);
}

/* LAMB over BERT-Large (one set: 18 bytes per parameter ~ 6 GB, far beyond L2). */
static void rows_lamb(int reps)
{
    char shape[64];
    int nt = bert_large_tensors(NULL, 0);
    lamb_tensor *t = (lamb_tensor *)malloc(nt * sizeof *t);
    bert_large_tensors(t, nt);
    int nchunks = lamb_tensors_chunk(t, nt);
    int64_t N = t[nt - 1].offset + t[nt - 1].size, params = 0;
    for (int i = 0; i < nt; i++)
        params += t[i].size;
    lamb_tensor *d_t;
    float *w, *m, *v, *g, *gn, *ls;
    bf16 *work;
    cudaCheck(cudaMalloc(&d_t, nt * sizeof *t));
    cudaCheck(cudaMemcpy(d_t, t, nt * sizeof *t, cudaMemcpyHostToDevice));
    cudaCheck(cudaMalloc(&w, N * 4));
    cudaCheck(cudaMalloc(&m, N * 4));
    cudaCheck(cudaMalloc(&v, N * 4));
    cudaCheck(cudaMalloc(&g, N * 4));
    cudaCheck(cudaMalloc(&work, N * 2));
    cudaCheck(cudaMalloc(&gn, 4));
    cudaCheck(cudaMalloc(&ls, lamb_scratch_bytes(nchunks)));
    cudaCheck(cudaMemset(w, 0, N * 4));
    cudaCheck(cudaMemset(m, 0, N * 4));
    cudaCheck(cudaMemset(v, 0, N * 4));
    cudaCheck(cudaMemset(g, 0, N * 4));
    lamb_hparams hp = {4e-3f, 0.9f, 0.999f, 1e-6f, 0.01f, 1.0f, 1};
    int lreps = reps < 10 ? reps : 10;
    snprintf(shape, sizeof shape, "%.1fM params, %d tensors", params / 1e6, nt);
    row("lamb_update", shape, 46.0 * params, lreps, [&](int) {
        lamb_update(w, work, m, v, g, d_t, nt, nchunks, hp, gn, NULL, 0, ls, 0);
    });
    snprintf(shape, sizeof shape, "%.1fM", N / 1e6);
    row("convert_f32_to_floatX", shape, 6.0 * N, lreps, [&](int) {
        convert_f32_to_floatX(work, w, N, 0);
    });
    void *bufs[] = {d_t, w, m, v, g, work, gn, ls};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        cudaCheck(cudaFree(bufs[i]));
    free(t);
}

int main(int argc, char **argv)
{
    int n = 56, reps = 30;
    unsigned long seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--only"))
            only = argv[i + 1];
        else {
            fprintf(stderr, "usage: bench_kernels [--n 56] [--seed 1] [--reps 30] [--only NAME]\n");
            return 2;
        }
    }
    if (n < 1 || reps < 1) {
        fprintf(stderr, "bench_kernels: --n and --reps must be >= 1\n");
        return 2;
    }
    bench_batch b;
    if (batch_make(n, seed, &b))
        return 1;
    const int T = b.T, H = BH;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    copy_rate();
    printf("bench_kernels on %s (%d SMs, L2 %d MB): %d sequences (seed %lu), T = %d tokens, max len %d, "
           "P = %d masked, H = %d, median of %d reps, %d rotating buffer sets\n",
           prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, n, seed, T, b.max_len, b.P, H,
           reps, NSETS);
    printf("device-to-device cudaMemcpy (1 GiB, read + write): %.0f GB/s\n\n", copy_gbs);
    printf("%-36s %-22s %9s %10s %9s %8s %18s\n", "kernel", "shape", "MB moved", "median us", "GB/s",
           "of copy", "of same-size copy");
    bench_params q;
    params_make(&b, &q);
    const size_t TH = (size_t)T * H;
    bench_acts a;
    sets *tok[] = {&a.x, &a.res, &a.out, &a.lnin, &a.dout, &a.dadd, &a.dx};
    for (size_t i = 0; i < sizeof tok / sizeof tok[0]; i++)
        *tok[i] = alloc_sets(TH * 2, 1);
    a.mean = alloc_sets(T * 4, 0), a.rstd = alloc_sets(T * 4, 0);
    rows_token(&b, &q, &a, reps);
    rows_ffn(&b, &q, &a, reps);
    free_sets(&a.out), free_sets(&a.dout), free_sets(&a.dx);
    rows_loss(&b, &q, reps);
    free_sets(&a.mean), free_sets(&a.rstd);
    rows_lamb(reps);
    printf("\nMB moved: each input read once and each output written once (bf16 activations, fp32 "
           "statistics); the embedding counts each distinct table row once and the gradient rows of "
           "its word and position tables read and written once (not its scratch); "
           "lamb_update 46 bytes per parameter: the gradient read twice (global norm, update), m, v "
           "and the master weights read twice and written once (the trust ratio needs the whole "
           "tensor's update norm before any weight is written), the bf16 copy written. "
           "Same-size copy: a cudaMemcpy of half the row's bytes (the 1 GiB rate past 2 GiB moved).\n");
    cudaCheck(cudaFree(copy_src));
    cudaCheck(cudaFree(copy_dst));
    return 0;
}
