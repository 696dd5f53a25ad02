/* whatif.c — Monte Carlo sweeps over (GPUs, batch, policy, count): sampling, balancing, metrics,
 * FMHA attention of the slowest GPU; configurations sharing GPUs and batch draw the same steps
 * (the sampler is seeded by them), and every configuration is a job of its own on the worker
 * threads, reported as soon as it is done. */
#include "whatif.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost.h"
#include "outfile.h"

void whatif_setup_default(whatif_setup *s)
{
    memset(s, 0, sizeof *s);
    s->steps = 1000;
    s->seed = 1;
    s->attn_steps = 32;
    s->max_streams = 4;
    s->granularity = 1;
}

int whatif_fixed_us(const model_cfg *m, const hw_spec *hw, const calib_coef *c, double mean_len,
                    int gpus, int batch, balance_policy policy, double *out, unpad_err *err)
{
    int l = (int)(mean_len + 0.5);
    if (l < 1)
        l = 1;
    if (l > m->max_len)
        l = m->max_len;
    int *len = malloc((size_t)batch * sizeof *len);
    if (!len)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    for (int i = 0; i < batch; i++)
        len[i] = l;
    op_batch b = {.len = len, .n = batch, .fused = 1, .gpus = gpus, .dropout = 1};
    cost_step st;
    int rc = cost_predict_step(m, hw, c, &b, &st, err);
    free(len);
    if (rc)
        return rc;
    double f = st.ops[OP_LAMB].instances * st.time_us[OP_LAMB] + c->step_overhead_us +
               st.ops[OP_ALLREDUCE].instances * st.time_us[OP_ALLREDUCE];
    if (policy != BAL_NONE)
        f += st.ops[OP_EXCHANGE].instances * st.time_us[OP_EXCHANGE];
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
    int gpus, batch;
    int *rows, nrows;   /* indices into the row array */
    double work;        /* for scheduling: sequences x steps x rows */
} cell;

typedef struct {
    int batch;
    int bounds[GROUP_MAX], nb;
    int streams;
} batch_groups;

typedef struct {
    const whatif_setup *s;
    whatif_row *rows;
    cell *cells;
    int ncells;
    const batch_groups *bg;
    int nbg;
    seq_cost sc;
    int max_n, max_gpus;
} sweep;

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

static int run_cell(sweep *sw, const cell *c, balance_ws *ws, balance_result *r, unpad_err *err)
{
    const whatif_setup *s = sw->s;
    int n = c->gpus * c->batch, steps = s->steps, R = c->nrows, rc = UNPAD_OK;
    int attn_steps = s->attn_steps < steps ? s->attn_steps : steps;
    int *len = malloc((size_t)n * sizeof *len), *glen = malloc((size_t)n * sizeof *glen);
    int64_t *w = malloc((size_t)n * sizeof *w);
    double *v = malloc((size_t)R * steps * 4 * sizeof *v);
    double *attn = calloc((size_t)R * 2, sizeof *attn);
    dist_sampler *smp = NULL;
    if (!len || !glen || !w || !v || !attn) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory for %d GPUs x %d", c->gpus,
                        c->batch);
        goto out;
    }
    uint64_t seed = splitmix(s->seed ^ splitmix(((uint64_t)c->gpus << 32) | (uint32_t)c->batch));
    if ((rc = dist_sampler_alloc(s->dist, seed, &smp, err)))
        goto out;
    const batch_groups *bg = groups_for(sw, c->batch);
    int layers = s->model->layers, heads = s->model->heads;
    long long step_work = (long long)c->work, pending = 0; /* progress, added every 256 steps */
    for (int t = 0; t < steps; t++) {
        if (++pending == 256 || t == steps - 1) {
            progress_add(s->progress, 0, pending * step_work);
            pending = 0;
        }
        dist_sample(smp, len, n);
        balance_weights(&sw->sc, len, n, w);
        for (int j = 0; j < R; j++) {
            whatif_row *row = &sw->rows[c->rows[j]];
            balance_input in = {len, s->weights_tokens ? NULL : w, n, c->gpus, row->policy,
                                row->count};
            if ((rc = balance_assign(ws, &in, r, err)))
                goto out;
            balance_metrics m;
            balance_metrics_compute(r, s->weights_tokens ? w : NULL, row->fixed_us, &m);
            double *vr = v + (size_t)j * steps * 4;
            vr[t] = m.imbalance;
            vr[steps + t] = m.idle;
            vr[2 * steps + t] = m.max_us;
            vr[3 * steps + t] = m.token_imbalance;
            if (t < attn_steps && bg) {
                int g = m.straggler, k = 0;
                for (int p = r->start[g]; p < r->start[g + 1]; p++)
                    glen[k++] = len[r->seq[p]];
                if (k > 0) {
                    group_plan gp;
                    if ((rc = group_plan_bounds(s->hw, s->calib, heads, glen, k, bg->bounds, bg->nb,
                                                bg->streams, &gp, err)))
                        goto out;
                    attn[2 * j] += layers * group_one_launch_us(s->hw, s->calib, heads, glen, k);
                    attn[2 * j + 1] += layers * gp.total_us;
                }
            }
        }
    }
    for (int j = 0; j < R; j++) {
        whatif_row *row = &sw->rows[c->rows[j]];
        double *vr = v + (size_t)j * steps * 4;
        balance_mc mc;
        if ((rc = balance_mc_summarise(vr, vr + steps, vr + 2 * steps, vr + 3 * steps, steps, &mc,
                                       err)))
            goto out;
        row->steps = steps;
        row->step_us = mc.step_us_mean;
        row->samples_per_s = (double)n / (mc.step_us_mean * 1e-6);
        row->imbalance_mean = mc.imbalance_mean;
        row->imbalance_p99 = mc.imbalance_p99;
        row->imbalance_max = mc.imbalance_max;
        row->idle_mean = mc.idle_mean;
        row->idle_p99 = mc.idle_p99;
        row->token_imbalance_mean = mc.token_imbalance_mean;
        row->attn_us = attn_steps && bg ? attn[2 * j] / attn_steps : NAN;
        row->attn_grouped_us = attn_steps && bg ? attn[2 * j + 1] / attn_steps : NAN;
        if (bg) {
            row->groups = bg->nb + 1;
            row->streams = bg->streams;
            group_bounds_format(bg->bounds, bg->nb, row->bounds, sizeof row->bounds);
        }
    }
    for (int j = 0; j < R; j++)
        if (s->row_done)
            s->row_done(s->row_ctx, &sw->rows[c->rows[j]]);
    progress_add(s->progress, R, 0);
out:
    dist_sampler_free(smp);
    free(len);
    free(glen);
    free(w);
    free(v);
    free(attn);
    return rc;
}

/* Jobs 0..njobs-1 over `threads` threads (the caller's included), taken in order; the first
 * failure stops the others and is kept. */
typedef struct {
    int (*fn)(sweep *sw, int job, balance_ws *ws, balance_result *r, unpad_err *err);
    sweep *sw;
    int njobs, next, rc, need_ws;
    unpad_err err;
    pthread_mutex_t lock;
} job_pool;

static void *pool_worker(void *arg)
{
    job_pool *jp = arg;
    sweep *sw = jp->sw;
    unpad_err err = {0};
    balance_ws *ws = NULL;
    balance_result r = {0};
    int rc = UNPAD_OK;
    if (jp->need_ws) {
        rc = balance_ws_alloc(sw->max_n, sw->max_gpus, &ws, &err);
        if (!rc)
            rc = balance_result_alloc(sw->max_n, sw->max_gpus, &r, &err);
    }
    for (;;) {
        pthread_mutex_lock(&jp->lock);
        if (rc && !jp->rc) {
            jp->rc = rc;
            jp->err = err;
        }
        int i = jp->rc ? jp->njobs : jp->next++;
        pthread_mutex_unlock(&jp->lock);
        if (i >= jp->njobs)
            break;
        rc = jp->fn(sw, i, ws, &r, &err);
    }
    balance_ws_free(ws);
    if (r.gpu)
        balance_result_free(&r);
    return NULL;
}

static int pool_run(sweep *sw, int threads, int njobs, int need_ws,
                    int (*fn)(sweep *, int, balance_ws *, balance_result *, unpad_err *),
                    unpad_err *err)
{
    job_pool jp = {.fn = fn, .sw = sw, .njobs = njobs, .need_ws = need_ws};
    if (threads > njobs)
        threads = njobs;
    if (threads > 64)
        threads = 64;
    pthread_mutex_init(&jp.lock, NULL);
    pthread_t tid[64];
    int started = 0;
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&tid[t], NULL, pool_worker, &jp) != 0)
            break;
        started = t;
    }
    pool_worker(&jp);
    for (int t = 1; t <= started; t++)
        pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&jp.lock);
    if (jp.rc && err)
        *err = jp.err;
    return jp.rc;
}

static int cell_job(sweep *sw, int i, balance_ws *ws, balance_result *r, unpad_err *err)
{
    return run_cell(sw, &sw->cells[i], ws, r, err);
}

/* One grouping per batch size, planned on the distribution's typical batch (coarse: at most 24
 * candidate units, as boundaries of a plan file are). */
static int groups_job(sweep *sw, int i, balance_ws *ws, balance_result *r, unpad_err *err)
{
    const whatif_setup *s = sw->s;
    batch_groups *bg = (batch_groups *)&sw->bg[i];
    group_opts o = {s->max_streams, s->granularity, 24};
    int *tl = malloc((size_t)bg->batch * sizeof *tl);
    if (!tl)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    whatif_typical_batch(s->dist, bg->batch, tl);
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
    if (x->work != y->work)
        return x->work < y->work ? 1 : -1; /* heaviest first: the sweep ends sooner */
    if (x->gpus != y->gpus)
        return x->gpus - y->gpus;
    if (x->batch != y->batch)
        return x->batch - y->batch;
    return x->rows[0] - y->rows[0];
}

int whatif_run(const whatif_setup *s, whatif_row *rows, int n, unpad_err *err)
{
    if (!s || !s->dist || !s->model || !s->hw || !s->calib)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "what-if: missing distribution or config");
    if (s->steps < 1 || s->steps > 100000000 || n < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "what-if: %d steps x %d configurations",
                          s->steps, n);
    sweep sw = {.s = s, .rows = rows};
    int rc = cost_seq_model(s->model, s->hw, s->calib, &sw.sc, err);
    if (rc)
        return rc;
    dist_stats ds;
    dist_compute_stats(s->dist, &ds);
    cell *cells = calloc((size_t)n, sizeof *cells);
    int *idx = malloc((size_t)n * sizeof *idx);
    batch_groups *bg = calloc((size_t)n, sizeof *bg);
    if (!cells || !idx || !bg) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    int nc = 0, nbg = 0;
    for (int i = 0; i < n; i++) {
        whatif_row *w = &rows[i];
        if (w->gpus < 1 || w->batch < 1 || (long)w->gpus * w->batch > (1L << 24) ||
            (unsigned)w->policy >= BAL_POLICY_COUNT || (unsigned)w->count >= BAL_COUNT_COUNT)
        {
            rc = unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                            "what-if row %d: %d GPUs x %d sequences, policy %d, count %d is out of "
                            "range", i, w->gpus, w->batch, (int)w->policy, (int)w->count);
            goto out;
        }
        if ((rc = whatif_fixed_us(s->model, s->hw, s->calib, ds.mean, w->gpus, w->batch, w->policy,
                                  &w->fixed_us, err)))
            goto out;
        w->groups = 1;
        w->streams = 1;
        snprintf(w->bounds, sizeof w->bounds, "none");
        /* A job per row, so each row is done (and reported) on its own and a sweep of one
         * shape still spreads over the threads; rows of the same GPUs and batch draw the same
         * steps from their seed. */
        int b;
        for (b = 0; b < nbg; b++)
            if (bg[b].batch == w->batch)
                break;
        if (b == nbg)
            bg[nbg++].batch = w->batch;
        idx[i] = i;
        cells[nc++] = (cell){.gpus = w->gpus, .batch = w->batch, .rows = &idx[i], .nrows = 1,
                             .work = (double)w->gpus * w->batch *
                                     (w->policy == BAL_KK && w->count == BAL_FREE ? 4 : 1)};
    }
    qsort(cells, (size_t)nc, sizeof *cells, cmp_cell_work);
    sw.cells = cells;
    sw.ncells = nc;
    sw.bg = bg;
    sw.nbg = nbg;
    for (int c = 0; c < nc; c++) {
        int cn = cells[c].gpus * cells[c].batch;
        sw.max_n = cn > sw.max_n ? cn : sw.max_n;
        sw.max_gpus = cells[c].gpus > sw.max_gpus ? cells[c].gpus : sw.max_gpus;
    }
    int threads = s->threads > 0 ? s->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1)
        threads = 1;
    if (s->attn_steps > 0 && (rc = pool_run(&sw, threads, nbg, 0, groups_job, err)))
        goto out;
    if (s->attn_steps <= 0)
        sw.nbg = 0;
    rc = pool_run(&sw, threads, nc, 1, cell_job, err);
out:
    free(cells);
    free(idx);
    free(bg);
    return rc;
}

const char whatif_csv_header[] =
    "gpus,batch,policy,count,steps,step_us,samples_per_s,imbalance_mean,imbalance_p99,"
    "imbalance_max,idle_mean,idle_p99,token_imbalance_mean,fixed_us,attn_us,attn_grouped_us,"
    "groups,streams,bounds";

void whatif_csv_row(FILE *f, const whatif_row *r)
{
    char b[sizeof r->bounds], attn[64] = ",";
    snprintf(b, sizeof b, "%s", r->bounds);
    for (char *p = b; *p; p++)
        if (*p == ',')
            *p = '/'; /* one CSV column */
    if (!isnan(r->attn_us))
        snprintf(attn, sizeof attn, "%.3f,%.3f", r->attn_us, r->attn_grouped_us);
    fprintf(f, "%d,%d,%s,%s,%d,%.3f,%.2f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.3f,%s,%d,%d,%s\n", r->gpus,
            r->batch, balance_policy_name(r->policy), balance_count_name(r->count), r->steps,
            r->step_us, r->samples_per_s, r->imbalance_mean, r->imbalance_p99, r->imbalance_max,
            r->idle_mean, r->idle_p99, r->token_imbalance_mean, r->fixed_us, attn, r->groups,
            r->streams, b);
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

void whatif_print_header(FILE *f)
{
    fprintf(f, "%5s %5s %-10s %-5s %9s %10s %8s %8s %7s %10s %10s  %s\n", "gpus", "batch",
            "policy", "count", "step ms", "samples/s", "imb mean", "imb p99", "idle %", "attn ms",
            "grouped", "fmha groups (streams)");
}

void whatif_print_row(FILE *f, const whatif_row *r)
{
    char attn[32] = "         -          -";
    if (!isnan(r->attn_us))
        snprintf(attn, sizeof attn, "%10.2f %10.2f", r->attn_us / 1e3, r->attn_grouped_us / 1e3);
    fprintf(f, "%5d %5d %-10s %-5s %9.2f %10.1f %8.4f %8.4f %7.2f %s  %s (%d)\n", r->gpus,
            r->batch, balance_policy_name(r->policy), balance_count_name(r->count),
            r->step_us / 1e3, r->samples_per_s, r->imbalance_mean, r->imbalance_p99,
            100 * r->idle_mean, attn, r->bounds, r->streams);
}

void whatif_print_table(FILE *f, const whatif_row *rows, int n)
{
    whatif_print_header(f);
    for (int i = 0; i < n; i++)
        whatif_print_row(f, &rows[i]);
}
