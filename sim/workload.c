/* workload.c — measured workloads against predict (the trainer's own batches) and whatif (sampled
 * steps): the table, the reproduced batches, the errors (workload.h). */
#include "workload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "balance.h"
#include "dist.h"
#include "memory.h"
#include "outfile.h"
#include "pool.h"
#include "progress.h"
#include "resolve.h"
#include "step.h"
#include "whatif.h"

#define SYNTH_MIN_LEN 8 /* exec/gpu/source.c: synthetic samples are at least 8 tokens long */

static const char HEADER[] =
    "workload,model,batch,vranks,policy,dist,steps,step_ms_median,step_ms_mean,mem_gib,trace";
/* An optional last column: the tokens the trainer's activations held at the end (its summary's
 * `activations:` line). Without it, the run is of a trainer that sized them for B x the longest
 * length. */
static const char ACT_COLUMN[] = ",act_tokens";

/* A name that is one plain file name (it becomes models/<name>.cfg). */
static int plain_name(const char *s)
{
    if (!*s || !strcmp(s, ".") || !strcmp(s, ".."))
        return 0;
    for (; *s; s++)
        if (*s == '/' || *s == ' ')
            return 0;
    return 1;
}

static int row_parse(const char *path, int lineno, char *line, int ncol, workload_row *w, unpad_err *err)
{
    char raw[1024], *col[16];
    snprintf(raw, sizeof raw, "%s", line);
    int nc = 0;
    for (char *p = line, *t; nc < 16 && (t = strsep(&p, ",")); )
        col[nc++] = t;
    long v[3];
    double d[3];
    const char *why = NULL;
    memset(w, 0, sizeof *w);
    long act = 0;
    if (nc != ncol)
        why = ncol == 11 ? "11 columns" : "12 columns";
    else if (ncol == 12 && (unpad_parse_long(col[11], &act) || act < 1 || act > (1L << 30)))
        why = "act_tokens 1..2^30";
    else if (!plain_name(col[1]) || !plain_name(col[5]))
        why = "a plain model and distribution name (models/<model>.cfg, models/dists/<dist>.csv)";
    else if (unpad_parse_long(col[2], &v[0]) || v[0] < 1 || v[0] > 65536 ||
             unpad_parse_long(col[3], &v[1]) || v[1] < 1 || v[1] > 4096 ||
             unpad_parse_long(col[6], &v[2]) || v[2] < 1 || v[2] > 1000000)
        why = "batch 1..65536, vranks 1..4096 and steps 1..1000000";
    else if (unpad_parse_double(col[7], &d[0]) || !(d[0] > 0) || unpad_parse_double(col[8], &d[1]) ||
             !(d[1] > 0) || unpad_parse_double(col[9], &d[2]) || !(d[2] >= 0))
        why = "positive step_ms_median and step_ms_mean and a memory in GiB";
    if (why) {
        unpad_fail(err, UNPAD_EINVAL, path, lineno, "expected %s", why);
        unpad_err_show_line(err, lineno, raw);
        return UNPAD_EINVAL;
    }
    snprintf(w->name, sizeof w->name, "%s", col[0]);
    snprintf(w->model, sizeof w->model, "%s", col[1]);
    snprintf(w->policy, sizeof w->policy, "%s", col[4]);
    snprintf(w->dist, sizeof w->dist, "%s", col[5]);
    snprintf(w->trace, sizeof w->trace, "%s", col[10]);
    w->batch = (int)v[0];
    w->vranks = (int)v[1];
    w->steps = (int)v[2];
    w->meas_median_ms = d[0];
    w->meas_ms = d[1];
    w->meas_gib = d[2];
    w->act_tokens = act;
    balance_policy bp;
    unpad_err pe = {0};
    if (balance_policy_parse(w->policy, &bp, &pe)) {
        unpad_fail(err, UNPAD_EINVAL, path, lineno, "%s", pe.msg);
        unpad_err_show_line(err, lineno, raw);
        return UNPAD_EINVAL;
    }
    return UNPAD_OK;
}

int workload_load(const char *path, workload_row **rows, int *n, unpad_err *err)
{
    char *text;
    int rc = unpad_read_file(path, &text, NULL, err);
    if (rc)
        return rc;
    int cap = 1;
    for (char *p = text; *p; p++)
        cap += *p == '\n';
    workload_row *w = calloc((size_t)cap, sizeof *w);
    int k = 0, lineno = 0, ncol = 11;
    if (!w) {
        free(text);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    char *start = strncmp(text, "\xEF\xBB\xBF", 3) ? text : text + 3; /* a UTF-8 byte-order mark */
    for (char *p = start, *line; (line = strsep(&p, "\n"));) {
        lineno++;
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r')
            line[--l] = '\0';
        if (!l || line[0] == '#')
            continue;
        if (lineno == 1 || (k == 0 && !strncmp(line, "workload,", 9))) {
            size_t hl = strlen(HEADER);
            if (strncmp(line, HEADER, hl) || (line[hl] && strcmp(line + hl, ACT_COLUMN))) {
                rc = unpad_fail(err, UNPAD_EINVAL, path, lineno, "expected the header '%s' (optionally with '%s')",
                                HEADER, ACT_COLUMN);
                break;
            }
            ncol = line[hl] ? 12 : 11;
            continue;
        }
        if ((rc = row_parse(path, lineno, line, ncol, &w[k], err)))
            break;
        k++;
    }
    free(text);
    if (!rc && k == 0)
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "no workloads (only a header)");
    if (rc) {
        free(w);
        return rc;
    }
    *rows = w;
    *n = k;
    return UNPAD_OK;
}

/* The synthetic loader's distribution: lengths below 8 are drawn as 8, above max_len as max_len. */
static int synthetic_dist(const unpad_dist *d, int max_len, unpad_dist *out, unpad_err *err)
{
    int top = d->max_len < max_len ? d->max_len : max_len;
    if (top < SYNTH_MIN_LEN)
        top = SYNTH_MIN_LEN;
    memset(out, 0, sizeof *out);
    if (!(out->count = calloc((size_t)top + 1, sizeof *out->count)))
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    out->max_len = top;
    for (int l = 1; l <= d->max_len; l++) {
        int c = l < SYNTH_MIN_LEN ? SYNTH_MIN_LEN : l > top ? top : l;
        out->count[c] += d->count[l];
    }
    out->total = d->total;
    snprintf(out->source, sizeof out->source, "%s", d->source);
    return UNPAD_OK;
}

/* The trainer's clamp of a synthetic length to [8, maxl]. */
static void clamp_lengths(int *len, int n, int maxl)
{
    for (int k = 0; k < n; k++)
        len[k] = len[k] > maxl ? maxl : len[k] < SYNTH_MIN_LEN ? SYNTH_MIN_LEN : len[k];
}

/* The lengths of the trainer's step st (n = K x B sequences, loader order): sample at stream
 * position p drawn with the generator seeded seed x 1000003 + p + 1, clamped to [8, maxl]. */
static void draw_step(dist_sampler *ds, uint64_t seed, int st, int n, int maxl, int *len)
{
    for (int k = 0; k < n; k++) { /* exec/gpu/source.c get_synthetic */
        uint64_t p = (uint64_t)(st - 1) * n + (uint64_t)k;
        dist_sampler_seed(ds, seed * 1000003ull + p + 1);
        dist_sample(ds, &len[k], 1);
    }
    clamp_lengths(len, n, maxl);
}

/* Host times whose waits predict_steps reports per step (workload_step_waits). */
typedef struct {
    const double *hs;
    int nh;
    double *wait; /* (steps x nh) */
} host_grid;

/* The step times the step model gives for the trainer's steps first..steps under each of the
 * seeds: out[j x steps + s - first]. The lengths are drawn from the file's distribution d and
 * clamped afterwards, as the trainer does. exact: the trainer's very draws (draw_step: one
 * seeding per sample); 0: the same distribution, batch and clamp drawn on from one seeding per
 * seed (for the band's other runs, which need the spread of such batches, not the loader's very
 * draws, at a fraction of the cost). hg (or NULL): the first seed's steps' waits under each of its
 * host times. */
static int predict_steps(const workload_setup *s, const workload_row *w, const model_cfg *m,
                         const unpad_dist *d, const uint64_t *seeds, int nseeds, int exact, double *out,
                         workload_step *shape, const host_grid *hg, unpad_err *err)
{
    int maxl = d->max_len < m->max_len ? d->max_len : m->max_len;
    int K = w->vranks, B = w->batch, n = K * B, rc;
    int *len = malloc((size_t)n * sizeof *len);
    int64_t *wt = malloc((size_t)n * sizeof *wt);
    double *us = malloc((size_t)K * sizeof *us);
    dist_sampler *ds = NULL;
    balance_ws *ws = NULL;
    balance_result r = {0};
    step_model sm = {0};
    seq_cost sc;
    balance_policy pol;
    if (!len || !wt || !us) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    if ((rc = balance_policy_parse(w->policy, &pol, err)) ||
        (rc = step_model_init(&sm, m, s->hw, s->calib, step_trainer_flags(workload_log_last_heads(s, w)), err)) ||
        (rc = cost_seq_model(m, s->hw, s->calib, &sc, err)) ||
        (rc = dist_sampler_alloc(d, 1, &ds, err)) || (rc = balance_ws_alloc(n, K, &ws, err)) ||
        (rc = balance_result_alloc(n, K, &r, err)))
        goto out;
    for (int j = 0; j < nseeds; j++)
    for (int st = WORKLOAD_FIRST_STEP; st < WORKLOAD_FIRST_STEP + w->steps; st++) {
        if (exact) {
            draw_step(ds, seeds[j], st, n, maxl, len);
        } else {
            if (st == WORKLOAD_FIRST_STEP)
                dist_sampler_seed(ds, seeds[j]);
            dist_sample(ds, len, n);
            clamp_lengths(len, n, maxl);
        }
        if (shape && j == 0) { /* the first seed's batches: the trainer's own */
            workload_step *q = &shape[st - WORKLOAD_FIRST_STEP];
            *q = (workload_step){.step = st, .seqs = n};
            for (int k = 0; k < n; k++) {
                q->tokens += len[k];
                q->sum_len2 += (double)len[k] * len[k];
                q->max_len = len[k] > q->max_len ? len[k] : q->max_len;
            }
        }
        double t = sm.lamb_us + sm.overhead_us; /* once per step, however many passes */
        if (K == 1) {
            step_batch b;
            if ((rc = step_batch_of(&sm, len, n, &b, err)))
                goto out;
            t += step_batch_us(&sm, &b) + step_host_wait_us(&sm, &b);
            if (hg && j == 0)
                step_host_waits_us(&sm, &b, hg->hs, hg->nh, hg->wait + (size_t)(st - WORKLOAD_FIRST_STEP) * hg->nh);
        } else {
            balance_weights(&sc, len, n, wt);
            balance_input in = {len, wt, n, K, pol, BAL_EQUAL};
            if ((rc = balance_assign(ws, &in, &r, err)))
                goto out;
            step_model_rank_us(&sm, &r, len, us);
            for (int g = 0; g < K; g++)
                t += us[g];
            step_batch b0; /* the virtual ranks run one after another: the host waits once */
            step_rank_batch(&sm, &r, len, 0, &b0);
            t += step_host_wait_us(&sm, &b0);
            if (hg && j == 0)
                step_host_waits_us(&sm, &b0, hg->hs, hg->nh, hg->wait + (size_t)(st - WORKLOAD_FIRST_STEP) * hg->nh);
        }
        out[j * w->steps + st - WORKLOAD_FIRST_STEP] = t / 1e3;
    }
out:
    free(len);
    free(wt);
    free(us);
    dist_sampler_free(ds);
    balance_ws_free(ws);
    if (r.gpu)
        balance_result_free(&r);
    step_model_free(&sm);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static double mean_of(const double *t, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += t[i];
    return n ? s / n : NAN;
}

/* The spread of a `steps`-step mean: the same distribution and batch under other seeds (drawn
 * on from one seeding per run: predict_steps' exact 0). */
static int mean_band(const workload_setup *s, workload_row *w, const model_cfg *m,
                       const unpad_dist *d, double *t, unpad_err *err)
{
    double avg[WORKLOAD_BAND_RUNS];
    uint64_t seeds[WORKLOAD_BAND_RUNS];
    for (int j = 0; j < WORKLOAD_BAND_RUNS; j++)
        seeds[j] = s->seed + 7919ull * (uint64_t)(j + 1);
    int rc = predict_steps(s, w, m, d, seeds, WORKLOAD_BAND_RUNS, 0, t, NULL, NULL, err);
    if (rc)
        return rc;
    for (int j = 0; j < WORKLOAD_BAND_RUNS; j++)
        avg[j] = mean_of(t + (size_t)j * w->steps, w->steps);
    qsort(avg, WORKLOAD_BAND_RUNS, sizeof *avg, cmp_double);
    w->band_lo_ms = avg[WORKLOAD_BAND_RUNS * 5 / 100];
    w->band_hi_ms = avg[WORKLOAD_BAND_RUNS * 95 / 100 - 1];
    return UNPAD_OK;
}

/* The wall ms of steps first..first+n-1 from a trainer log (`step N/M | ... | X ms/step`);
 * returns how many were found (0: no log). */
static int log_steps(const char *path, int first, int n, double *ms)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[1024];
    int found = 0;
    for (int i = 0; i < n; i++)
        ms[i] = NAN;
    while (fgets(line, sizeof line, f)) {
        int st, of;
        if (sscanf(line, "step %d/%d", &st, &of) != 2 || st < first || st >= first + n)
            continue;
        char *q = strstr(line, " ms/step");
        if (!q)
            continue;
        while (q > line && q[-1] != '|')
            q--;
        double v = atof(q);
        if (v > 0 && isnan(ms[st - first])) {
            ms[st - first] = v;
            found++;
        }
    }
    fclose(f);
    return found;
}

/* shape: the steps' batches (NULL: not kept); taken into w->per_step or freed. */
static void step_by_step(const workload_setup *s, workload_row *w, const double *pred, workload_step *shape)
{
    w->step_err = NAN;
    w->stalls = 0;
    free(w->per_step);
    w->per_step = NULL;
    w->nper_step = 0;
    if (!s->logs) {
        free(shape);
        return;
    }
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.log", s->logs, w->name);
    int n = w->steps, k = 0;
    double *ms = malloc((size_t)n * sizeof *ms), *e = malloc((size_t)n * sizeof *e);
    if (ms && e && log_steps(path, WORKLOAD_FIRST_STEP, n, ms)) {
        for (int i = 0; i < n; i++)
            if (!isnan(ms[i])) {
                e[k++] = (pred[i] - ms[i]) / ms[i];
                w->stalls += ms[i] > 1.15 * pred[i];
                if (shape) {
                    shape[w->nper_step] = shape[i];
                    shape[w->nper_step].pred_ms = pred[i];
                    shape[w->nper_step++].meas_ms = ms[i];
                }
            }
        if (k)
            w->step_err = median_of(e, k);
    }
    if (shape && w->nper_step) {
        w->per_step = shape;
        shape = NULL;
    }
    free(shape);
    free(ms);
    free(e);
}

/* Row w's model (models/<model>.cfg) and length distribution (models/dists/<dist>.csv). */
/* The GPU the trainer names on its log's first line (`... parameters) on <device>, <precision>`)
 * against the hardware spec's device: a run on another GPU is refused, naming the spec that
 * describes it where one does. A spec without a device, or a line without the name: no check. */
static int row_device(const workload_setup *s, const workload_row *w, const char *path, const char *line,
                      unpad_err *err)
{
    const char *on = strstr(line, ") on ");
    const char *comma = on ? strchr(on + 5, ',') : NULL;
    if (!s->hw->device[0] || !comma || comma - (on + 5) >= CFG_STR_LEN)
        return UNPAD_OK;
    char dev[CFG_STR_LEN];
    memcpy(dev, on + 5, (size_t)(comma - (on + 5)));
    dev[comma - (on + 5)] = '\0';
    if (!strcmp(dev, s->hw->device))
        return UNPAD_OK;
    char other[RESOLVE_PATH_LEN];
    hw_spec h;
    unpad_err oe = {0};
    int found = resolve_hw_by_device(dev, other, sizeof other, &h, &oe) == UNPAD_OK && other[0];
    return unpad_fail(err, UNPAD_EINVAL, path, 1, "workload %s ran on %s, but --hw is %s (device = %s): %s%s%s",
                      w->name, dev, s->hw->name, s->hw->device,
                      found ? "pass --hw " : "pass --hw with a spec of that GPU", found ? h.name : "",
                      found ? "" : " (models/hw/*.cfg, device = its name)");
}

/* The trainer's products from the first line of the workload's log (WORKLOAD_LOG_FP8 for --fp8 on)
 * against the calibration's: a mismatch is refused (the step model would time other
 * products than the trainer ran). No log, or no such line: nothing to check. The GPU it ran on
 * against the hardware spec's (row_device). */
static int row_products(const workload_setup *s, const workload_row *w, unpad_err *err)
{
    char path[4400], line[1024];
    if (!s->logs)
        return UNPAD_OK;
    snprintf(path, sizeof path, "%s/%s.log", s->logs, w->name);
    FILE *f = fopen(path, "r");
    if (!f)
        return UNPAD_OK;
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!got || strncmp(line, "unpad-train:", 12))
        return UNPAD_OK;
    int rc = row_device(s, w, path, line, err);
    if (rc)
        return rc;
    int fp8 = strstr(line, WORKLOAD_LOG_FP8) != NULL;
    if (fp8 != !!s->calib->fp8)
        return unpad_fail(err, UNPAD_EINVAL, path, 1,
                          "workload %s ran %s, but the calibration describes %s: %s", w->name,
                          fp8 ? "with --fp8 on" : "with bf16 products", s->calib->fp8 ? "--fp8 on's" : "bf16 products",
                          fp8 ? "pass --fp8 on (models/calib/<hw>-fp8.cfg)" : "leave out --fp8 on");
    return UNPAD_OK;
}

static int row_inputs(const workload_setup *s, const workload_row *w, model_cfg *m, unpad_dist *raw, unpad_err *err)
{
    char path[4200];
    int rp = row_products(s, w, err);
    if (rp)
        return rp;
    snprintf(path, sizeof path, "%s%smodels/%s.cfg", s->home, *s->home ? "/" : "", w->model);
    int rc = model_load(path, m, err);
    snprintf(path, sizeof path, "%s%smodels/dists/%s.csv", s->home, *s->home ? "/" : "", w->dist);
    return rc ? rc : dist_load(path, raw, err);
}

/* Whether a start-up line of row w's trainer log (before the first `step` line) begins with `start`
 * and does not hold `unless` (NULL: nothing); 0 without a log. */
static int log_says(const workload_setup *s, const workload_row *w, const char *start, const char *unless)
{
    char path[4400], line[1024];
    if (!s->logs)
        return 0;
    snprintf(path, sizeof path, "%s/%s.log", s->logs, w->name);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int on = 0;
    while (!on && fgets(line, sizeof line, f) && strncmp(line, "step", 4))
        on = !strncmp(line, start, strlen(start)) && !(unless && strstr(line, unless));
    fclose(f);
    return on;
}

int workload_log_graphs(const workload_setup *s, const workload_row *w)
{
    return log_says(s, w, WORKLOAD_LOG_GRAPHS, "(not used: ");
}

int workload_log_last_heads(const workload_setup *s, const workload_row *w)
{
    return log_says(s, w, WORKLOAD_LOG_LAST_HEADS, NULL);
}

static int predict_one(const workload_setup *given, workload_row *w, unpad_err *err)
{
    workload_setup graphs = *given;
    calib_coef gc = *given->calib;
    const workload_setup *s = given;
    w->graphs = 0;
    w->last_heads = workload_log_last_heads(given, w);
    if (workload_log_graphs(given, w)) {
        calib_graphs(&gc);
        graphs.calib = &gc;
        s = &graphs;
        w->graphs = gc.graphs;
    }
    model_cfg m;
    unpad_dist raw = {0}, d = {0};
    int rc = row_inputs(s, w, &m, &raw, err);
    if (!rc)
        rc = synthetic_dist(&raw, m.max_len, &d, err);
    int ns = w->steps;
    double *t = malloc((size_t)ns * WORKLOAD_BAND_RUNS * sizeof *t);
    if (!rc && !t)
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    workload_step *shape = s->keep_steps ? calloc((size_t)ns, sizeof *shape) : NULL;
    if (!rc && s->keep_steps && !shape)
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    if (!rc)
        rc = predict_steps(s, w, &m, &raw, &s->seed, 1, 1, t, shape, NULL, err);
    if (!rc) {
        step_by_step(s, w, t, shape);
        shape = NULL; /* the row's now, or freed */
        w->predict_ms = mean_of(t, ns);
        rc = mean_band(s, w, &m, &raw, t, err);
    }
    if (!rc) {
        whatif_setup ws;
        whatif_setup_default(&ws);
        whatif_setup_inputs(&ws, &d, &m, s->hw, s->calib);
        ws.steps = s->whatif_steps;
        ws.threads = s->threads;
        ws.attn_steps = 0;
        ws.serial_ranks = w->vranks > 1; /* virtual ranks, one after another on one GPU */
        ws.last_heads = w->last_heads;
        whatif_row row = {.gpus = w->vranks, .batch = w->batch, .count = BAL_EQUAL};
        balance_policy_parse(w->policy, &row.policy, NULL);
        rc = whatif_run(&ws, &row, 1, err);
        w->whatif_ms = row.step_us / 1e3;
    }
    if (!rc) {
        memory_setup ms;
        memory_use mu;
        memory_trainer_setup(&m, w->batch, w->act_tokens > 0 ? w->act_tokens : (long)w->batch * d.max_len, w->batch,
                             0, &ms);
        ms.fp8 = s->calib->fp8 ? MEMORY_FP8_ON : MEMORY_FP8_OFF; /* the products the logs were checked for */
        ms.last_heads = w->last_heads;
        memory_predict(&m, s->hw, &ms, &mu);
        w->mem_gib = mu.total_gib;
        w->predict_err = (w->predict_ms - w->meas_ms) / w->meas_ms;
        w->whatif_err = (w->whatif_ms - w->meas_ms) / w->meas_ms;
        w->mem_err = w->meas_gib > 0 ? (w->mem_gib - w->meas_gib) / w->meas_gib : 0;
    }
    free(t);
    free(shape);
    dist_free(&raw);
    dist_free(&d);
    return rc;
}

int workload_batch_lengths(const workload_setup *s, const workload_row *w, const int *steps, int nsteps, int *len,
                           unpad_err *err)
{
    if (w->vranks != 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "workload %s: lengths per rank need the balancer (%d virtual ranks)", w->name, w->vranks);
    model_cfg m;
    unpad_dist raw = {0};
    dist_sampler *ds = NULL;
    int rc = row_inputs(s, w, &m, &raw, err);
    if (!rc)
        rc = dist_sampler_alloc(&raw, 1, &ds, err);
    for (int j = 0; !rc && j < nsteps; j++)
        draw_step(ds, s->seed, steps[j], w->batch, raw.max_len < m.max_len ? raw.max_len : m.max_len,
                  len + (size_t)j * w->batch);
    dist_sampler_free(ds);
    dist_free(&raw);
    return rc;
}

int workload_step_waits(const workload_setup *s, const workload_row *w, double *gap_us, double *step_us,
                        size_t *n, const double *hs, int nh, double *wait_us, unpad_err *err)
{
    char path[4400];
    model_cfg m;
    unpad_dist raw = {0};
    int rc = row_inputs(s, w, &m, &raw, err);
    double *t = malloc((size_t)w->steps * sizeof *t), *ms = malloc((size_t)w->steps * sizeof *ms);
    double *wt = nh > 0 ? malloc((size_t)w->steps * (size_t)nh * sizeof *wt) : NULL;
    if (!rc && (!t || !ms || (nh > 0 && !wt)))
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    host_grid hg = {hs, nh, wt};
    if (!rc)
        rc = predict_steps(s, w, &m, &raw, &s->seed, 1, 1, t, NULL, nh > 0 ? &hg : NULL, err);
    if (!rc) {
        snprintf(path, sizeof path, "%s/%s.log", s->logs ? s->logs : ".", w->name);
        if (!log_steps(path, WORKLOAD_FIRST_STEP, w->steps, ms))
            rc = unpad_fail(err, UNPAD_EIO, path, 0,
                            "no `step N/M | ... | X ms/step` lines of steps %d.. in the trainer log of "
                            "workload %s (missing or empty)", WORKLOAD_FIRST_STEP, w->name);
    }
    for (int i = 0; !rc && i < w->steps; i++)
        if (!isnan(ms[i])) {
            gap_us[*n] = (ms[i] - t[i]) * 1e3;
            step_us[*n] = ms[i] * 1e3;
            for (int j = 0; j < nh; j++)
                wait_us[*n * (size_t)nh + (size_t)j] = wt[(size_t)i * (size_t)nh + (size_t)j];
            (*n)++;
        }
    free(t);
    free(ms);
    free(wt);
    dist_free(&raw);
    return rc;
}

int workload_step_gaps(const workload_setup *s, const workload_row *w, double *gap_us, double *step_us,
                       size_t *n, unpad_err *err)
{
    return workload_step_waits(s, w, gap_us, step_us, n, NULL, 0, NULL, err);
}

/* One workload, a job of the pool (pool.h): each row is predicted on its own (its own samplers,
 * models, and a what-if on one thread), so the results do not depend on the thread count. */
typedef struct {
    workload_setup one;
    workload_row *rows;
} rows_job;

static int predict_job(void *ctx, void *state, int i, unpad_err *err)
{
    (void)state;
    rows_job *j = ctx;
    int rc = predict_one(&j->one, &j->rows[i], err);
    progress_add(j->one.progress, 1, 1);
    return rc;
}

int workload_predict(const workload_setup *s, workload_row *rows, int n, unpad_err *err)
{
    static const pool_fns fns = {.job = predict_job};
    rows_job j = {.one = *s, .rows = rows};
    j.one.threads = 1;
    return pool_run(&j, &fns, s->threads, n, err);
}

int workload_in_band(const workload_row *w) { return w->meas_ms >= w->band_lo_ms && w->meas_ms <= w->band_hi_ms; }

void workload_summarize(const workload_row *rows, int n, workload_summary *s)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->step_max_abs = NAN;
    for (int i = 0; i < n; i++) {
        const workload_row *w = &rows[i];
        s->whatif_max_abs = fmax(s->whatif_max_abs, fabs(w->whatif_err));
        s->predict_max_abs = fmax(s->predict_max_abs, fabs(w->predict_err));
        s->mem_max_abs = fmax(s->mem_max_abs, fabs(w->mem_err));
        s->within += fabs(w->whatif_err) <= 0.02;
        s->in_band += workload_in_band(w);
        double draw = w->predict_ms / w->whatif_ms - 1;
        s->draw_mean += draw / n;
        s->draw_above += draw > 0;
        if (!isnan(w->step_err)) {
            s->step_max_abs = fmax(s->step_max_abs, fabs(w->step_err)); /* fmax drops the NaN start */
            s->step_within += fabs(w->step_err) <= 0.02;
            s->step_logs++;
        }
    }
}

void workload_print(FILE *f, const workload_row *rows, int n)
{
    fprintf(f, "%-44s %8s %9s %9s %7s %15s %7s %8s %6s | %7s %7s %6s\n", "workload", "measured",
            "predict", "whatif", "err %", "band %", "err %", "err %", "", "mem GiB", "pred",
            "err %");
    fprintf(f, "%-44s %8s %9s %9s %7s %15s %7s %8s %6s | %7s %7s %6s\n", "", "ms", "same", "sampled",
            "whatif", "of whatif", "predict", "per step", "stalls", "meas", "", "");
    for (int i = 0; i < n; i++) {
        const workload_row *w = &rows[i];
        char band[32];
        snprintf(band, sizeof band, "%+.1f..%+.1f", 100 * (w->band_lo_ms / w->whatif_ms - 1),
                 100 * (w->band_hi_ms / w->whatif_ms - 1));
        int in = workload_in_band(w);
        char se[16] = "-", sn[16] = "-";
        if (!isnan(w->step_err)) {
            snprintf(se, sizeof se, "%+.2f", 100 * w->step_err);
            snprintf(sn, sizeof sn, "%d", w->stalls);
        }
        fprintf(f, "%-44s %8.2f %9.2f %9.2f %+7.2f %14s%c %+7.2f %8s %6s | %7.2f %7.2f %+6.1f\n",
                w->name, w->meas_ms, w->predict_ms, w->whatif_ms, 100 * w->whatif_err, band,
                in ? '*' : ' ', 100 * w->predict_err, se, sn, w->meas_gib, w->mem_gib,
                100 * w->mem_err);
    }
    workload_summary s;
    workload_summarize(rows, n, &s);
    int ng = 0, est = 0, nl = 0;
    for (int i = 0; i < n; i++) {
        ng += rows[i].graphs != 0;
        est |= rows[i].graphs == CALIB_GRAPHS_ESTIMATED;
        nl += rows[i].last_heads;
    }
    fprintf(f, "\n  measured: mean wall step of the trainer's untraced steps %d.. (steps column of the "
               "table); predict: the step model on those very batches (mean); whatif: mean over sampled "
               "steps\n", WORKLOAD_FIRST_STEP);
    fprintf(f, "  band: where the mean of as many steps as were measured falls (5th..95th percentile of "
               "%d runs of batches like the trainer's under other seeds, step model), relative to the whatif "
               "mean; '*': the measurement inside it\n", WORKLOAD_BAND_RUNS);
    if (ng)
        fprintf(f, "  %d of %d workloads ran with --graphs on (their logs say so): predicted with CUDA graphs, %s\n",
                ng, n,
                est ? "an estimate (the calibration has no graph_launch_us)"
                    : "the calibration's graph_launch_us and graph_step_overhead_us");
    if (nl)
        fprintf(f, "  %d of %d workloads ran the last layer after its attention on the heads' rows only (their logs "
                   "say so): predicted so; the others with every layer on all tokens\n", nl, n);
    fprintf(f, "  target whatif within 2%% of measured: %d of %d workloads (max |error| %.2f%%; "
               "predict %.2f%%); measured inside the band: %d of %d; memory max |error| "
               "%.1f%% (target 10%%)\n",
            s.within, n, 100 * s.whatif_max_abs, 100 * s.predict_max_abs, s.in_band, n, 100 * s.mem_max_abs);
    fprintf(f, "  the trainer's batches against sampled ones (predict / whatif - 1): %+.2f%% on average, above on %d "
               "of %d workloads (the runs of one seed share a draw of batches)\n", 100 * s.draw_mean, s.draw_above, n);
    if (s.step_logs)
        fprintf(f, "  per step (the trainer's log, each step against the model on its own batch; the "
                   "median over steps 9..): within 2%% on %d of %d workloads (max |error| %.2f%%); "
                   "stalls: steps over 1.15 x predicted\n", s.step_within, s.step_logs, 100 * s.step_max_abs);
}

int workload_write_steps_csv(const char *path, const workload_row *rows, int n, const char *comment,
                             unpad_err *err)
{
    unpad_outfile *o;
    int rc = outfile_open_csv(path, comment,
                              "workload,step,seqs,tokens,sum_len2,max_len,measured_ms,predicted_ms,err_pct",
                              &o, err);
    if (rc)
        return rc;
    FILE *f = outfile_stream(o);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < rows[i].nper_step; j++) {
            const workload_step *q = &rows[i].per_step[j];
            fprintf(f, "%s,%d,%d,%d,%.0f,%d,%.4f,%.4f,%.3f\n", rows[i].name, q->step, q->seqs, q->tokens,
                    q->sum_len2, q->max_len, q->meas_ms, q->pred_ms, 100 * (q->pred_ms - q->meas_ms) / q->meas_ms);
        }
    return outfile_commit(o, err);
}

void workload_free_steps(workload_row *rows, int n)
{
    for (int i = 0; rows && i < n; i++) {
        free(rows[i].per_step);
        rows[i].per_step = NULL;
        rows[i].nper_step = 0;
    }
}
