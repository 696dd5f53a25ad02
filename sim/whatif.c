/* whatif.c — Monte Carlo sweeps over (GPUs, batch, policy, count, layout): sampling in chunks,
 * balancing, the step model on every GPU's batch, metrics, the slowest GPU's FMHA; chunks of steps
 * are the jobs the worker threads take. */
#include "whatif.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost.h"
#include "memory.h"
#include "step.h"
#include "outfile.h"
#include "pool.h"

void whatif_setup_default(whatif_setup *s)
{
    memset(s, 0, sizeof *s);
    s->steps = 1000;
    s->seed = 1;
    s->attn_steps = 32;
    s->max_streams = 4;
    s->granularity = 1;
    s->last_heads = 1;
}

int whatif_config_steps(const whatif_setup *s, long n)
{
    if (s->seq_budget <= 0 || n < 1 || (double)s->steps * n <= (double)s->seq_budget)
        return s->steps;
    long k = (s->seq_budget + n - 1) / n;
    k = k < WHATIF_AUTO_MIN_STEPS ? WHATIF_AUTO_MIN_STEPS : k;
    return k < s->steps ? (int)k : s->steps;
}

int whatif_chunk_steps(long n, int steps)
{
    long k = n > 0 ? WHATIF_CHUNK_SEQS / n : WHATIF_CHUNK;
    k = k < 1 ? 1 : k > WHATIF_CHUNK ? WHATIF_CHUNK : k;
    long least = (steps + WHATIF_CHUNK_MAX - 1) / WHATIF_CHUNK_MAX;
    return (int)(k < least ? least : k);
}

void whatif_setup_inputs(whatif_setup *s, const unpad_dist *d, const model_cfg *m, const hw_spec *hw,
                         const calib_coef *c)
{
    s->dist = d;
    s->model = m;
    s->hw = hw;
    s->calib = c;
}

/* Bytes one GPU's samples take in the exchange (ids, segments, positions; predictions; records),
 * as ops_count counts them. */
static double exchange_bytes(double tokens, double preds, double seqs)
{
    return tokens * 12 + preds * 8 + seqs * 8;
}

int whatif_fixed_us(const model_cfg *m, const hw_spec *hw, const calib_coef *c, double mean_len,
                    int gpus, int batch, balance_policy policy, double *out, unpad_err *err)
{
    int l = (int)(mean_len + 0.5);
    l = l < 1 ? 1 : l > m->max_len ? m->max_len : l;
    step_model sm;
    int rc = step_model_init(&sm, m, hw, c, STEP_FUSED, err); /* the parameters, LAMB, the overhead */
    if (rc)
        return rc;
    net_cost ar, ex;
    net_allreduce(hw, c, sm.param_bytes, gpus, &ar);
    double f = sm.lamb_us + sm.overhead_us + ar.us;
    step_model_free(&sm);
    if (policy != BAL_NONE) {
        double preds = (double)batch * ops_predictions(l, m->max_predictions);
        net_exchange(hw, c, exchange_bytes((double)batch * l, preds, batch), gpus, &ex);
        f += ex.us;
    }
    *out = f;
    return UNPAD_OK;
}

void whatif_typical_batch(const unpad_dist *d, int b, int *len)
{
    /* Walks the cumulative counts once: quantile (i + 0.5) / b for i = 0..b-1. */
    double cum = 0;
    int l = 1;
    for (int i = 0; i < b; i++) {
        double q = (i + 0.5) / b * d->total;
        while (l < d->max_len && cum + d->count[l] < q)
            cum += d->count[l++];
        len[i] = l;
    }
}

/* ---- the sweep --------------------------------------------------------------------------------- */

typedef struct {
    int gpus, batch, accum;
    int sampling;       /* -1: the capped distribution; else a buckets layout's index */
    int *rows, nrows;   /* indices into the row array */
    int *twin;          /* (nrows) an earlier row of the cell with the same results, or -1 */
    double work;        /* for scheduling */
    long long step_work; /* progress: work of one step of all its rows */
    int steps, chunk, chunks; /* its sampled steps, steps a chunk, chunks (whatif_config_steps) */
    size_t part0;       /* its rows' chunk sums from sweep.part[part0]: (nrows x chunks) */
    int chunks_left;    /* chunks not done yet (under the pool's lock) */
} cell;

typedef struct {
    int batch;
    int bounds[GROUP_MAX], nb;
    int streams;
} batch_groups;

/* One row's sums over one chunk of steps (written once, at the end of the chunk's job). */
typedef struct {
    double step_us, fixed_us, token_imb, tokens, real_tokens, exchange_us, attn, attn_grouped;
    double max_tokens, max_seqs, max_preds; /* per GPU, the most seen */
} partial;

typedef struct {
    const whatif_setup *s;
    whatif_row *rows;
    int nrows;
    cell *cells;
    int ncells, njobs;
    int *job_cell, *job_chunk; /* (njobs) each job's cell and chunk, heaviest cells first */
    int *row_cell;      /* (nrows) the cell of each row */
    const batch_groups *bg;
    int nbg;
    seq_cost sc;
    step_model sm;
    unpad_dist dist;    /* capped */
    layout *lay;        /* (nlay) resolved */
    int nlay;
    double *allreduce_us; /* (nrows) */
    double *imb, *idle; /* (nrows x steps) per step */
    partial *part;      /* per cell (nrows x chunks), from its part0 */
    int max_n, max_gpus;
    pthread_mutex_t lock; /* the cells' chunk counts */
} sweep;

/* What one worker thread owns. */
typedef struct {
    balance_ws *ws;
    balance_result r;
    int *len, *glen, *scratch;
    int64_t *w;
    double *t;          /* (max_gpus) per-GPU time: the sum of its micro-batches */
} worker;

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static const batch_groups *groups_for(const sweep *sw, int batch)
{
    for (int i = 0; i < sw->nbg; i++)
        if (sw->bg[i].batch == batch)
            return &sw->bg[i];
    return NULL;
}

/* The sampler of one chunk: seeded by (seed, gpus, batch, sampling, chunk) and, for accumulation,
 * the micro-batch count. */
static int chunk_sampler(const sweep *sw, const cell *c, int chunk, layout_sampler **out,
                         unpad_err *err)
{
    uint64_t seed = splitmix(sw->s->seed ^ splitmix(((uint64_t)c->gpus << 32) | (uint32_t)c->batch));
    seed = splitmix(seed ^ ((uint64_t)(c->sampling + 1) << 40) ^ (uint64_t)chunk);
    if (c->accum > 1)
        seed = splitmix(seed ^ ((uint64_t)c->accum << 48));
    static const layout plain = {.kind = LAYOUT_UNPADDED};
    return layout_sampler_alloc(c->sampling < 0 ? &plain : &sw->lay[c->sampling], &sw->dist, seed,
                                out, err);
}

/* One row on one sampled step: the assignment over the virtual ranks (gpus x accum), every GPU's
 * time (the sum of its micro-batches), the metrics. */
static int run_row_step(sweep *sw, const cell *c, int j, int t, worker *wk, partial *pa,
                        unpad_err *err)
{
    const whatif_setup *s = sw->s;
    int ri = c->rows[j], K = c->accum, k = c->gpus, R = k * K, n = R * c->batch, rc;
    whatif_row *row = &sw->rows[ri];
    const layout *lay = &sw->lay[row->layout];
    balance_input in = {wk->len, s->weights_tokens ? NULL : wk->w, n, R, row->policy, row->count};
    if ((rc = balance_assign(wk->ws, &in, &wk->r, err)))
        return rc;
    const balance_result *r = &wk->r;
    double tmax = -1, tsum = 0, tok = 0, real = 0, preds = 0;
    int strag = 0;
    int64_t kmax = 0, ksum = 0, kg = 0;
    for (int v = 0; v < R; v++) { /* virtual rank v runs on GPU v / K */
        int m = r->start[v + 1] - r->start[v];
        step_batch sb;
        layout_batch(lay, &sw->sm, wk->len, r->seq + r->start[v], m, wk->scratch, &sb);
        double tv = m > 0 ? step_batch_us(&sw->sm, &sb) : 0;
        /* each GPU's first micro-batch starts on an empty queue (one host a GPU; virtual ranks on
         * one GPU: the first of them) */
        if (m > 0 && (s->serial_ranks ? v == 0 : v % K == 0))
            tv += step_host_wait_us(&sw->sm, &sb);
        wk->t[v / K] = (v % K ? wk->t[v / K] : 0) + tv;
        kg = (v % K ? kg : 0) + r->tokens[v];
        tok += sb.shape.tokens;
        real += sb.shape.real_tokens;
        preds += sb.shape.preds;
        pa->max_tokens = sb.shape.tokens > pa->max_tokens ? sb.shape.tokens : pa->max_tokens;
        pa->max_seqs = m > pa->max_seqs ? m : pa->max_seqs;
        pa->max_preds = sb.shape.preds > pa->max_preds ? sb.shape.preds : pa->max_preds;
        if (v % K == K - 1) { /* GPU v / K is complete */
            double tg = wk->t[v / K];
            tsum += tg;
            if (tg > tmax) {
                tmax = tg;
                strag = v / K;
            }
            kmax = kg > kmax ? kg : kmax;
            ksum += kg;
        }
    }
    double fixed = sw->sm.lamb_us + sw->sm.overhead_us, ex = 0, step;
    if (s->serial_ranks) { /* one optimizer step and one step overhead after all the passes */
        step = tsum + fixed;
    } else {
        if (row->policy != BAL_NONE) {
            net_cost nc;
            net_exchange(s->hw, s->calib, exchange_bytes(real, preds, n) / k, k, &nc);
            ex = nc.us;
        }
        fixed += sw->allreduce_us[ri] + ex;
        step = tmax + fixed;
    }
    double mx = tmax + fixed, mean = tsum / k + fixed;
    sw->imb[(size_t)ri * s->steps + t] = mean > 0 ? mx / mean : 1;
    sw->idle[(size_t)ri * s->steps + t] = mx > 0 ? 1 - mean / mx : 0;
    pa->step_us += step;
    pa->fixed_us += fixed;
    pa->exchange_us += ex;
    pa->tokens += tok / k;
    pa->real_tokens += real / k;
    pa->token_imb += ksum > 0 ? (double)kmax * k / ksum : 1;
    const batch_groups *bg = groups_for(sw, c->batch);
    if (t < s->attn_steps && bg && lay->kind == LAYOUT_UNPADDED) {
        int heads = s->model->heads, layers = s->model->layers;
        for (int v = strag * K; v < (strag + 1) * K; v++) { /* the slowest GPU's micro-batches */
            int q = 0;
            for (int p = r->start[v]; p < r->start[v + 1]; p++)
                wk->glen[q++] = wk->len[r->seq[p]];
            if (q == 0)
                continue;
            group_plan gp;
            if ((rc = group_plan_bounds(s->hw, s->calib, heads, wk->glen, q, bg->bounds, bg->nb,
                                        bg->streams, &gp, err)))
                return rc;
            pa->attn += layers * group_one_launch_us(s->hw, s->calib, heads, wk->glen, q);
            pa->attn_grouped += layers * gp.total_us;
        }
    }
    return UNPAD_OK;
}

static void row_results(sweep *sw, int i);

static int run_chunk(void *ctx, void *state, int job, unpad_err *err)
{
    sweep *sw = ctx;
    worker *wk = state;
    const whatif_setup *s = sw->s;
    const cell *c = &sw->cells[sw->job_cell[job]];
    int chunk = sw->job_chunk[job], n = c->gpus * c->accum * c->batch, rc;
    int t0 = chunk * c->chunk, t1 = t0 + c->chunk < c->steps ? t0 + c->chunk : c->steps;
    layout_sampler *smp;
    if ((rc = chunk_sampler(sw, c, chunk, &smp, err)))
        return rc;
    partial local[64], *pa = c->nrows <= 64 ? local : calloc((size_t)c->nrows, sizeof *pa);
    if (!pa) {
        layout_sampler_free(smp);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    memset(pa, 0, sizeof *pa * (size_t)c->nrows);
    /* the progress line hears of a chunk at its end, or of each step where steps are slow (tens of
     * thousands of sequences: a chunk of those can take minutes) */
    int each_step = n >= WHATIF_PROGRESS_SEQS;
    for (int t = t0; t < t1 && !rc; t++) {
        layout_sample(smp, wk->len, n);
        balance_weights(&sw->sc, wk->len, n, wk->w);
        for (int j = 0; j < c->nrows && !rc; j++)
            if (c->twin[j] < 0)
                rc = run_row_step(sw, c, j, t, wk, &pa[j], err);
        if (each_step)
            progress_add(s->progress, 0, c->step_work);
    }
    for (int j = 0; j < c->nrows && !rc; j++) { /* a twin's steps are its earlier row's */
        int j0 = c->twin[j];
        if (j0 < 0)
            continue;
        pa[j] = pa[j0];
        size_t from = (size_t)c->rows[j0] * s->steps + t0, to = (size_t)c->rows[j] * s->steps + t0;
        memcpy(sw->imb + to, sw->imb + from, (size_t)(t1 - t0) * sizeof *sw->imb);
        memcpy(sw->idle + to, sw->idle + from, (size_t)(t1 - t0) * sizeof *sw->idle);
    }
    for (int j = 0; j < c->nrows && !rc; j++) /* one write per row: no sharing between threads */
        sw->part[c->part0 + (size_t)j * c->chunks + chunk] = pa[j];
    if (!each_step)
        progress_add(s->progress, 0, (long long)(t1 - t0) * c->step_work);
    /* the last chunk of a cell finishes its rows and reports them */
    pthread_mutex_lock(&sw->lock);
    int last = !rc && --((cell *)c)->chunks_left == 0;
    pthread_mutex_unlock(&sw->lock);
    if (last) {
        for (int j = 0; j < c->nrows; j++)
            row_results(sw, c->rows[j]);
        for (int j = 0; j < c->nrows && s->row_done; j++)
            s->row_done(s->row_ctx, &sw->rows[c->rows[j]]);
        progress_add(s->progress, c->nrows, 0);
    }
    if (pa != local)
        free(pa);
    layout_sampler_free(smp);
    return rc;
}

static void worker_free(void *ctx, void *state)
{
    (void)ctx;
    worker *wk = state;
    if (!wk)
        return;
    balance_ws_free(wk->ws);
    if (wk->r.gpu)
        balance_result_free(&wk->r);
    free(wk->len);
    free(wk->glen);
    free(wk->scratch);
    free(wk->w);
    free(wk->t);
    free(wk);
}

/* A worker thread's own buffers, for the largest cell (pool.h init). */
static int worker_alloc(void *ctx, void **state, unpad_err *err)
{
    const sweep *sw = ctx;
    worker *wk = calloc(1, sizeof *wk);
    *state = wk;
    if (!wk)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    int n = sw->max_n > 0 ? sw->max_n : 1, k = sw->max_gpus > 0 ? sw->max_gpus : 1;
    int rc = balance_ws_alloc(n, k, &wk->ws, err);
    if (!rc)
        rc = balance_result_alloc(n, k, &wk->r, err);
    wk->len = malloc((size_t)n * sizeof *wk->len);
    wk->glen = malloc((size_t)n * sizeof *wk->glen);
    wk->scratch = malloc((size_t)layout_scratch_len(n) * sizeof *wk->scratch);
    wk->w = malloc((size_t)n * sizeof *wk->w);
    wk->t = malloc((size_t)k * sizeof *wk->t);
    if (!rc && (!wk->len || !wk->glen || !wk->scratch || !wk->w || !wk->t))
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory for %d sequences", n);
    return rc;
}

/* One grouping per batch size, planned on the distribution's typical batch (coarse: at most 24
 * candidate units, as boundaries of a plan file are). */
static int groups_job(void *ctx, void *state, int i, unpad_err *err)
{
    (void)state;
    sweep *sw = ctx;
    const whatif_setup *s = sw->s;
    batch_groups *bg = (batch_groups *)&sw->bg[i];
    group_opts o = {s->max_streams, s->granularity, 24};
    int *tl = malloc((size_t)bg->batch * sizeof *tl);
    if (!tl)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    whatif_typical_batch(&sw->dist, bg->batch, tl);
    group_plan gp;
    int rc = group_plan_auto(s->hw, s->calib, s->model->heads, tl, bg->batch, &o, &gp, err);
    free(tl);
    if (rc)
        return rc;
    bg->nb = group_plan_upper_bounds(&gp, bg->bounds);
    bg->streams = gp.streams;
    return UNPAD_OK;
}

static int cmp_cell_work(const void *a, const void *b)
{
    const cell *x = a, *y = b;
    double wx = x->work * x->steps, wy = y->work * y->steps;
    if (wx != wy)
        return wx < wy ? 1 : -1; /* heaviest first: the sweep ends sooner */
    if (x->gpus != y->gpus)
        return x->gpus - y->gpus;
    if (x->batch != y->batch)
        return x->batch - y->batch;
    if (x->accum != y->accum)
        return x->accum - y->accum;
    return x->sampling - y->sampling;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Mean, the value at rank ceil(0.99 n) and the maximum of v[0..n) (v is sorted). */
static void summarise(double *v, int n, double *mean, double *p99, double *max)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    *mean = s / n;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    long rank = (long)(0.99 * n);
    if ((double)rank < 0.99 * n)
        rank++;
    *p99 = v[(rank < 1 ? 1 : rank) - 1];
    if (max)
        *max = v[n - 1];
}

static void row_results(sweep *sw, int i)
{
    const whatif_setup *s = sw->s;
    whatif_row *w = &sw->rows[i];
    const cell *ce = &sw->cells[sw->row_cell[i]];
    int steps = ce->steps, attn_steps = s->attn_steps < steps ? s->attn_steps : steps, j = 0;
    while (ce->rows[j] != i)
        j++;
    partial sum = {0};
    for (int c = 0; c < ce->chunks; c++) { /* in chunk order: the same sums on any thread count */
        const partial *p = &sw->part[ce->part0 + (size_t)j * ce->chunks + c];
        sum.step_us += p->step_us;
        sum.fixed_us += p->fixed_us;
        sum.token_imb += p->token_imb;
        sum.tokens += p->tokens;
        sum.real_tokens += p->real_tokens;
        sum.exchange_us += p->exchange_us;
        sum.attn += p->attn;
        sum.attn_grouped += p->attn_grouped;
        sum.max_tokens = p->max_tokens > sum.max_tokens ? p->max_tokens : sum.max_tokens;
        sum.max_seqs = p->max_seqs > sum.max_seqs ? p->max_seqs : sum.max_seqs;
        sum.max_preds = p->max_preds > sum.max_preds ? p->max_preds : sum.max_preds;
    }
    w->steps = steps;
    w->step_us = sum.step_us / steps;
    w->samples_per_s = (double)w->gpus * w->accum * w->batch * steps / (sum.step_us * 1e-6);
    w->fixed_us = sum.fixed_us / steps;
    w->token_imbalance_mean = sum.token_imb / steps;
    w->tokens_per_gpu = sum.tokens / steps;
    w->padding = sum.tokens > 0 ? 1 - sum.real_tokens / sum.tokens : 0;
    w->exchange_us = sum.exchange_us / steps;
    summarise(sw->imb + (size_t)i * s->steps, steps, &w->imbalance_mean, &w->imbalance_p99,
              &w->imbalance_max);
    summarise(sw->idle + (size_t)i * s->steps, steps, &w->idle_mean, &w->idle_p99, NULL);
    int timed = groups_for(sw, w->batch) && sw->lay[w->layout].kind == LAYOUT_UNPADDED;
    w->attn_us = timed && attn_steps ? sum.attn / attn_steps : NAN;
    w->attn_grouped_us = timed && attn_steps ? sum.attn_grouped / attn_steps : NAN;
    const batch_groups *bg = groups_for(sw, w->batch);
    if (bg && timed) {
        w->groups = bg->nb + 1;
        w->streams = bg->streams;
        group_bounds_format(bg->bounds, bg->nb, w->bounds, sizeof w->bounds);
    }
    /* what an arena sized for the most any GPU got would take */
    memory_setup ms = {.tokens = (long)sum.max_tokens, .seqs = (long)sum.max_seqs,
                       .preds = (long)sum.max_preds, .nccl = w->gpus > 1 && !s->serial_ranks,
                       .fp8 = s->fp8, .last_heads = s->last_heads};
    memory_use mu;
    memory_predict(s->model, s->hw, &ms, &mu);
    w->mem_budget_gib = mu.total_gib;
    /* a configuration that does not fit trains nothing: no hours, no cost */
    whatif_train(w->mem_fits ? s->train_samples : 0, w->samples_per_s, s->serial_ranks ? 1 : w->gpus,
                 s->gpu_hour_price, &w->train_hours, &w->gpu_hours, &w->cost);
}

void whatif_train(double samples, double samples_per_s, int gpus, double price, double *hours,
                  double *gpu_hours, double *cost)
{
    int asked = samples > 0 && samples_per_s > 0;
    *hours = asked ? samples / samples_per_s / 3600.0 : NAN;
    *gpu_hours = asked ? *hours * gpus : NAN;
    *cost = asked && price > 0 ? *gpu_hours * price : NAN;
}

static void sweep_free(sweep *sw)
{
    free(sw->cells);
    free(sw->job_cell);
    free(sw->job_chunk);
    free(sw->row_cell);
    free((void *)sw->bg);
    free(sw->allreduce_us);
    free(sw->imb);
    free(sw->idle);
    free(sw->part);
    dist_free(&sw->dist);
    step_model_free(&sw->sm);
    free(sw->lay);
}

/* The rows' layouts resolved against the cap and the distribution. */
static int sweep_layouts(sweep *sw, unpad_err *err)
{
    const whatif_setup *s = sw->s;
    static const layout unpadded = {.kind = LAYOUT_UNPADDED, .per_row = LAYOUT_PACK_DEFAULT};
    sw->nlay = s->layouts && s->nlayouts > 0 ? s->nlayouts : 1;
    if (!(sw->lay = malloc((size_t)sw->nlay * sizeof *sw->lay)))
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    for (int l = 0; l < sw->nlay; l++) {
        sw->lay[l] = s->layouts && s->nlayouts > 0 ? s->layouts[l] : unpadded;
        int rc = layout_resolve(&sw->lay[l], s->max_len, s->model->max_len, sw->dist.max_len,
                                "--layout", err);
        if (rc)
            return rc;
    }
    return UNPAD_OK;
}

int whatif_run(const whatif_setup *s, whatif_row *rows, int n, unpad_err *err)
{
    if (!s || !s->dist || !s->model || !s->hw || !s->calib)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "what-if: missing distribution or config");
    if (s->steps < 1 || s->steps > 100000000 || n < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "what-if: %d steps x %d configurations",
                          s->steps, n);
    sweep sw = {.s = s, .rows = rows, .nrows = n};
    int rc = cost_seq_model(s->model, s->hw, s->calib, &sw.sc, err);
    if (!rc)
        rc = step_model_init(&sw.sm, s->model, s->hw, s->calib, step_trainer_flags(s->last_heads), err);
    if (!rc)
        rc = layout_truncate(s->dist, s->max_len, &sw.dist, err);
    if (!rc)
        rc = sweep_layouts(&sw, err);
    if (rc) {
        sweep_free(&sw);
        return rc;
    }
    sw.cells = calloc((size_t)n, sizeof *sw.cells);
    int *idx = malloc(2 * (size_t)n * sizeof *idx); /* the cells' rows, then their twins */
    batch_groups *bg = calloc((size_t)n, sizeof *bg);
    sw.bg = bg;
    sw.allreduce_us = calloc((size_t)n, sizeof *sw.allreduce_us);
    sw.imb = malloc((size_t)n * s->steps * sizeof *sw.imb);
    sw.idle = malloc((size_t)n * s->steps * sizeof *sw.idle);
    sw.row_cell = malloc((size_t)n * sizeof *sw.row_cell);
    if (!sw.cells || !idx || !bg || !sw.allreduce_us || !sw.imb || !sw.idle || !sw.row_cell) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory for %d configurations x %d steps",
                        n, s->steps);
        goto out;
    }
    int nc = 0, nbg = 0;
    for (int i = 0; i < n; i++) {
        whatif_row *w = &rows[i];
        w->accum = w->accum < 1 ? 1 : w->accum;
        if (w->gpus < 1 || w->batch < 1 || w->accum > WHATIF_ACCUM_MAX ||
            (long)w->gpus * w->accum * w->batch > (1L << 24) ||
            (unsigned)w->policy >= BAL_POLICY_COUNT || (unsigned)w->count >= BAL_COUNT_COUNT ||
            w->layout < 0 || w->layout >= sw.nlay || (w->accum > 1 && s->serial_ranks)) {
            rc = unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                            "what-if row %d: %d GPUs x %d micro-batches x %d sequences, policy %d, count %d, "
                            "layout %d is out of range%s", i, w->gpus, w->accum, w->batch, (int)w->policy,
                            (int)w->count, w->layout,
                            w->accum > 1 && s->serial_ranks ? " (accumulation with virtual ranks)" : "");
            goto out;
        }
        layout_name(&sw.lay[w->layout], w->layout_name, sizeof w->layout_name);
        net_cost ar;
        net_allreduce(s->hw, s->calib, sw.sm.param_bytes, s->serial_ranks ? 1 : w->gpus, &ar);
        sw.allreduce_us[i] = w->allreduce_us = ar.us;
        w->net = ar.algo;
        w->nodes = ar.nodes;
        /* the trainer's arena (memory_arena_tokens; a padded layout's trainer: B x N tokens); free
         * counts let a rank take up to 4B sequences */
        long ranks = (long)w->gpus * w->accum;
        int seq_cap = w->count == BAL_FREE ? (4 < ranks ? 4 * w->batch : (int)ranks * w->batch) : w->batch;
        const layout *ly = &sw.lay[w->layout];
        long tokens = ly->kind == LAYOUT_UNPADDED ? memory_dist_tokens(w->batch, 1, ly->len, &sw.dist)
                                                  : (long)w->batch * ly->len;
        memory_setup ms;
        w->mem_tokens = tokens;
        memory_trainer_setup(s->model, w->batch, tokens, seq_cap, w->gpus > 1 && !s->serial_ranks, &ms);
        ms.fp8 = s->fp8;
        ms.last_heads = s->last_heads;
        memory_use mu;
        memory_predict(s->model, s->hw, &ms, &mu);
        w->mem_gib = mu.total_gib;
        w->mem_fits = memory_fits(&mu, s->hw, NULL, 0);
        w->mem_tight = memory_tight(&mu, s->hw);
        w->groups = 1;
        w->streams = 1;
        snprintf(w->bounds, sizeof w->bounds, "none");
        int sampling = sw.lay[w->layout].kind == LAYOUT_BUCKETS ? w->layout : -1, c;
        for (c = 0; c < nc; c++)
            if (sw.cells[c].gpus == w->gpus && sw.cells[c].batch == w->batch &&
                sw.cells[c].accum == w->accum && sw.cells[c].sampling == sampling)
                break;
        if (c == nc) {
            sw.cells[nc++] = (cell){.gpus = w->gpus, .batch = w->batch, .accum = w->accum, .sampling = sampling};
            int b;
            for (b = 0; b < nbg; b++)
                if (bg[b].batch == w->batch)
                    break;
            if (b == nbg)
                bg[nbg++].batch = w->batch;
        }
        sw.cells[c].nrows++;
        sw.cells[c].work += (double)w->gpus * w->accum * w->batch *
                            (w->policy == BAL_KK && w->count == BAL_FREE ? 4 : 1);
    }
    /* Row index lists, then heaviest cells first. */
    for (int c = 0, o = 0; c < nc; c++) {
        sw.cells[c].rows = idx + o;
        sw.cells[c].twin = idx + n + o;
        o += sw.cells[c].nrows;
        sw.cells[c].nrows = 0;
    }
    for (int i = 0; i < n; i++) {
        int sampling = sw.lay[rows[i].layout].kind == LAYOUT_BUCKETS ? rows[i].layout : -1;
        for (int c = 0; c < nc; c++)
            if (sw.cells[c].gpus == rows[i].gpus && sw.cells[c].batch == rows[i].batch &&
                sw.cells[c].accum == rows[i].accum && sw.cells[c].sampling == sampling) {
                sw.cells[c].rows[sw.cells[c].nrows++] = i;
                break;
            }
    }
    /* Rows of a cell that balance alike in the same layout have the same steps: the first is timed,
     * the others copy it (a free-count row of a policy that always gives equal counts, a row asked
     * twice). The first of equal rows has no twin itself, so every twin is timed. */
    for (int c = 0; c < nc; c++)
        for (int j = 0; j < sw.cells[c].nrows; j++) {
            const whatif_row *a = &rows[sw.cells[c].rows[j]];
            sw.cells[c].twin[j] = -1;
            for (int i = 0; i < j && sw.cells[c].twin[j] < 0; i++) {
                const whatif_row *b = &rows[sw.cells[c].rows[i]];
                if (b->layout == a->layout && b->policy == a->policy &&
                    (b->count == a->count || !balance_count_matters(a->policy)))
                    sw.cells[c].twin[j] = i;
            }
        }
    for (int c = 0; c < nc; c++)
        sw.cells[c].steps = whatif_config_steps(s, (long)sw.cells[c].gpus * sw.cells[c].accum * sw.cells[c].batch);
    qsort(sw.cells, (size_t)nc, sizeof *sw.cells, cmp_cell_work);
    sw.ncells = nc;
    sw.nbg = nbg;
    for (int c = 0; c < nc; c++) {
        int cr = sw.cells[c].gpus * sw.cells[c].accum, cn = cr * sw.cells[c].batch;
        sw.max_n = cn > sw.max_n ? cn : sw.max_n;
        sw.max_gpus = cr > sw.max_gpus ? cr : sw.max_gpus; /* the balancer's ranks: virtual ones */
    }
    /* Each cell's steps and chunks; jobs: every chunk of the heaviest cell first, then the next
     * cell's. */
    size_t nparts = 0;
    for (int c = 0; c < nc; c++) {
        cell *ce = &sw.cells[c];
        long cn = (long)ce->gpus * ce->accum * ce->batch;
        ce->chunk = whatif_chunk_steps(cn, ce->steps);
        ce->chunks = (ce->steps + ce->chunk - 1) / ce->chunk;
        ce->chunks_left = ce->chunks;
        ce->part0 = nparts;
        nparts += (size_t)ce->nrows * ce->chunks;
        ce->step_work = (long long)ce->work;
        sw.njobs += ce->chunks;
        for (int j = 0; j < ce->nrows; j++)
            sw.row_cell[ce->rows[j]] = c;
    }
    sw.part = calloc(nparts, sizeof *sw.part);
    sw.job_cell = malloc((size_t)sw.njobs * sizeof *sw.job_cell);
    sw.job_chunk = malloc((size_t)sw.njobs * sizeof *sw.job_chunk);
    if (!sw.part || !sw.job_cell || !sw.job_chunk) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory for %d configurations x %d steps", n,
                        s->steps);
        goto out;
    }
    for (int c = 0, j = 0; c < nc; c++)
        for (int k = 0; k < sw.cells[c].chunks; k++, j++) {
            sw.job_cell[j] = c;
            sw.job_chunk[j] = k;
        }
    static const pool_fns groups = {.job = groups_job};
    static const pool_fns chunks = {.init = worker_alloc, .fini = worker_free, .job = run_chunk};
    if (s->attn_steps > 0 && (rc = pool_run(&sw, &groups, s->threads, nbg, err)))
        goto out;
    if (s->attn_steps <= 0)
        sw.nbg = 0;
    pthread_mutex_init(&sw.lock, NULL);
    rc = pool_run(&sw, &chunks, s->threads, sw.njobs, err);
    pthread_mutex_destroy(&sw.lock);
out:
    free(idx);
    sweep_free(&sw);
    return rc;
}

const char whatif_csv_header[] =
    "gpus,batch,accum,policy,count,steps,step_us,samples_per_s,imbalance_mean,imbalance_p99,"
    "imbalance_max,idle_mean,idle_p99,token_imbalance_mean,fixed_us,attn_us,attn_grouped_us,"
    "groups,streams,bounds,layout,tokens_per_gpu,padding,allreduce_us,net,nodes,exchange_us,"
    "mem_gib,mem_budget_gib,mem_fits,train_hours,gpu_hours,cost";

void whatif_csv_row(FILE *f, const whatif_row *r)
{
    char b[sizeof r->bounds], attn[64] = ",";
    snprintf(b, sizeof b, "%s", r->bounds);
    for (char *p = b; *p; p++)
        if (*p == ',')
            *p = '/'; /* one CSV column */
    if (!isnan(r->attn_us))
        snprintf(attn, sizeof attn, "%.3f,%.3f", r->attn_us, r->attn_grouped_us);
    char train[96] = ",,";
    if (!isnan(r->train_hours))
        snprintf(train, sizeof train, "%.4f,%.4f,%s", r->train_hours, r->gpu_hours, "");
    if (!isnan(r->cost))
        snprintf(train + strlen(train), sizeof train - strlen(train), "%.2f", r->cost);
    fprintf(f, "%d,%d,%d,%s,%s,%d,%.3f,%.2f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.3f,%s,%d,%d,%s,%s,%.1f,%.6f,"
               "%.3f,%s,%d,%.3f,%.3f,%.3f,%d,%s\n",
            r->gpus, r->batch, r->accum < 1 ? 1 : r->accum, balance_policy_name(r->policy),
            balance_count_name(r->count), r->steps, r->step_us, r->samples_per_s, r->imbalance_mean, r->imbalance_p99,
            r->imbalance_max, r->idle_mean, r->idle_p99, r->token_imbalance_mean, r->fixed_us, attn,
            r->groups, r->streams, b, r->layout_name, r->tokens_per_gpu, r->padding,
            r->allreduce_us, net_algo_name(r->net), r->nodes, r->exchange_us, r->mem_gib,
            r->mem_budget_gib, r->mem_fits, train);
}

int whatif_write_csv(const char *path, const whatif_row *rows, int n, unpad_err *err)
{
    unpad_outfile *o;
    int rc = outfile_open(path, &o, err);
    if (rc)
        return rc;
    FILE *f = outfile_stream(o);
    fprintf(f, "%s\n", whatif_csv_header);
    for (int i = 0; i < n; i++)
        whatif_csv_row(f, &rows[i]);
    return outfile_commit(o, err);
}

void whatif_print_header(FILE *f, int train)
{
    fprintf(f, "%5s %7s %-10s %-5s %-23s %9s %10s %8s %8s %7s %9s %6s %9s %-5s %10s %9s %9s ",
            "gpus", "batch", "policy", "count", "layout", "step ms", "samples/s", "imb mean",
            "imb p99", "idle %", "tokens", "pad %", "allred ms", "net", "memory GiB", "attn ms",
            "grouped");
    if (train)
        fprintf(f, "%9s %11s ", "train h", "cost");
    fprintf(f, " fmha groups (streams)\n");
}

void whatif_print_row(FILE *f, const whatif_row *r, int train)
{
    char mem[32], attn[32] = "        -         -", hours[32] = "-", cost[32] = "-", batch[32];
    snprintf(mem, sizeof mem, "%.1f%s", r->mem_gib, !r->mem_fits ? " NO" : r->mem_tight ? " TIGHT" : "");
    if (r->accum > 1) /* micro-batches: sequences x micro-batches */
        snprintf(batch, sizeof batch, "%dx%d", r->batch, r->accum);
    else
        snprintf(batch, sizeof batch, "%d", r->batch);
    if (!isnan(r->attn_us))
        snprintf(attn, sizeof attn, "%9.2f %9.2f", r->attn_us / 1e3, r->attn_grouped_us / 1e3);
    fprintf(f, "%5d %7s %-10s %-5s %-23s %9.2f %10.1f %8.4f %8.4f %7.2f %9.0f %6.1f %9.3f %-5s %10s %s ",
            r->gpus, batch, balance_policy_name(r->policy), balance_count_name(r->count),
            r->layout_name, r->step_us / 1e3, r->samples_per_s, r->imbalance_mean,
            r->imbalance_p99, 100 * r->idle_mean, r->tokens_per_gpu, 100 * r->padding,
            r->allreduce_us / 1e3, net_algo_name(r->net), mem, attn);
    if (train) {
        if (!isnan(r->train_hours))
            snprintf(hours, sizeof hours, "%.2f", r->train_hours);
        if (!isnan(r->cost))
            snprintf(cost, sizeof cost, r->cost < 100 ? "%.2f" : "%.0f", r->cost);
        fprintf(f, "%9s %11s ", hours, cost);
    }
    fprintf(f, " %s (%d)\n", r->bounds, r->streams);
}

void whatif_print_table(FILE *f, const whatif_row *rows, int n, int train)
{
    whatif_print_header(f, train);
    for (int i = 0; i < n; i++)
        whatif_print_row(f, &rows[i], train);
}
