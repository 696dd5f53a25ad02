/* validate.c — predicted against measured trace rows: join, error tables, imbalance, CSV. */
#include "validate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"

/* ---- predictions ------------------------------------------------------------------------------ */

static int cmp_fmha_batch(const void *a, const void *b)
{
    const trace_row *x = *(const trace_row *const *)a, *y = *(const trace_row *const *)b;
    int s = strcmp(x->model, y->model);
    if (s)
        return s;
#define CMP(f) if (x->f != y->f) return x->f < y->f ? -1 : 1
    CMP(op);
    CMP(seqs);
    CMP(tokens);
    CMP(sum_len2);
    CMP(max_len);
#undef CMP
    return 0;
}

int validate_predict_set(const trace_set *meas, const model_cfg *models, int n_models,
                         const hw_spec *hw, const calib_coef *c, trace_set *pred, unpad_err *err)
{
    /* The FMHA simulation is the costly part and every layer of a step has the same batch: each
     * distinct batch is simulated once. */
    size_t nf = 0;
    for (size_t i = 0; i < meas->n; i++)
        nf += meas->rows[i].op == OP_FMHA_FWD || meas->rows[i].op == OP_FMHA_BWD;
    const trace_row **fr = malloc((nf ? nf : 1) * sizeof *fr);
    double *sim = malloc((nf ? nf : 1) * sizeof *sim);
    int rc = UNPAD_OK;
    if (!fr || !sim) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    size_t k = 0;
    for (size_t i = 0; i < meas->n; i++)
        if (meas->rows[i].op == OP_FMHA_FWD || meas->rows[i].op == OP_FMHA_BWD)
            fr[k++] = &meas->rows[i];
    qsort(fr, nf, sizeof *fr, cmp_fmha_batch);
    for (size_t i = 0; i < nf; i++) {
        if (i > 0 && !cmp_fmha_batch(&fr[i - 1], &fr[i])) {
            sim[i] = sim[i - 1];
            continue;
        }
        const model_cfg *m = fit_model_find(models, n_models, fr[i]->model);
        if (!m) {
            rc = unpad_fail(err, UNPAD_EINVAL, NULL, 0, "no model config for '%s'", fr[i]->model);
            goto out;
        }
        int *len = malloc(sizeof *len * (size_t)(fr[i]->seqs > 0 ? fr[i]->seqs : 1));
        if (!len) {
            rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
            goto out;
        }
        rc = fit_row_lengths(fr[i], m->max_len, len, err);
        if (!rc)
            sim[i] = fit_fmha_us(hw, c, m->heads, len, (int)fr[i]->seqs, fr[i]->op == OP_FMHA_BWD) +
                     cost_fmha_passes_us(hw, c, m->heads, cost_fmha_tokens(len, (int)fr[i]->seqs),
                                         fr[i]->op == OP_FMHA_BWD);
        free(len);
        if (rc)
            goto out;
    }
    double t = 0;
    for (size_t i = 0; i < meas->n; i++) {
        const trace_row *r = &meas->rows[i];
        const model_cfg *m = fit_model_find(models, n_models, r->model);
        if (!m) {
            rc = unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                            "no model config for '%s' (pass --model models/%s.cfg)", r->model, r->model);
            goto out;
        }
        trace_row p = *r;
        if (r->op == OP_FMHA_FWD || r->op == OP_FMHA_BWD) {
            const trace_row *key = r, **hit = bsearch(&key, fr, nf, sizeof *fr, cmp_fmha_batch);
            op_cost oc;
            if ((rc = fit_row_cost(m, r, &oc, err)))
                goto out;
            double tiles = sim[hit - fr];
            double mem = oc.bytes / (hw->mem_bw_gbs * 1e3 * c->bw_eff);
            p.dur_us = (tiles > mem ? tiles : mem) + oc.launches * c->launch_us;
        } else if ((rc = fit_row_predict(m, hw, c, r, &p.dur_us, err))) {
            goto out;
        }
        snprintf(p.hw, sizeof p.hw, "%.63s", c->hw);
        p.start_us = t;
        t += p.dur_us;
        if (trace_append(pred, &p)) {
            rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
            goto out;
        }
    }
out:
    free(fr);
    free(sim);
    return rc;
}

/* ---- join and aggregation --------------------------------------------------------------------- */

static int cmp_key(const void *a, const void *b)
{
    const trace_row *x = *(const trace_row *const *)a, *y = *(const trace_row *const *)b;
#define CMP(f) if (x->f != y->f) return x->f < y->f ? -1 : 1
    CMP(step);
    CMP(rank);
    CMP(op);
    CMP(layer);
    CMP(group);
    CMP(stream);
#undef CMP
    return 0;
}

static const trace_row **sorted_rows(const trace_set *s)
{
    const trace_row **v = malloc((s->n ? s->n : 1) * sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < s->n; i++)
        v[i] = &s->rows[i];
    qsort(v, s->n, sizeof *v, cmp_key);
    return v;
}

#define GROW(arr, n, cap)                                                                          \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            size_t nc = (cap) ? (size_t)(cap) * 2 : 256;                                           \
            void *p = realloc((arr), nc * sizeof *(arr));                                          \
            if (!p)                                                                                \
                goto oom;                                                                          \
            (arr) = p;                                                                             \
            (cap) = nc;                                                                            \
        }                                                                                          \
    } while (0)


/* Measured and predicted time of the rows m[0..n) / p[0..n) of one (step, rank, op, layer). */
static int set_time(const trace_row **m, const trace_row **p, size_t n, const validate_ctx *ctx,
                    trace_span *scratch, double *meas, double *pred, int *nstreams, unpad_err *err)
{
    int streams = 0;
    for (size_t i = 0; i < n; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= m[j]->stream == m[i]->stream;
        streams += !seen;
    }
    double sm = 0, sp = 0;
    for (size_t i = 0; i < n; i++) {
        sm += m[i]->dur_us;
        sp += p[i]->dur_us;
    }
    *nstreams = streams;
    if (streams <= 1) {
        *meas = sm;
        *pred = sp;
        return UNPAD_OK;
    }
    for (size_t i = 0; i < n; i++) {
        scratch[i].start = m[i]->start_us;
        scratch[i].end = m[i]->start_us + m[i]->dur_us;
    }
    *meas = trace_span_union(scratch, n);
    *pred = sp;
    int fmha = m[0]->op == OP_FMHA_FWD || m[0]->op == OP_FMHA_BWD;
    if (fmha && ctx) {
        const model_cfg *mc = fit_model_find(ctx->models, ctx->n_models, m[0]->model);
        if (!mc)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "no model config for '%s'", m[0]->model);
        return fit_rows_fmha_together(mc, ctx->hw, ctx->calib, (const trace_row *const *)m, (int)n,
                                      pred, err);
    }
    return UNPAD_OK;
}

/* The joined rows of one run: measured jm[q] against predicted jp[q], in key order. */
typedef struct {
    const trace_row **jm, **jp;
    size_t n;
} joined;

/* Merge join of the sorted rows on the key; duplicates pair in order; the rows without a partner
 * are counted in rep. */
static void join_rows(validate_report *rep, const trace_row **ms, size_t nm, const trace_row **ps, size_t np,
                      joined *J)
{
    size_t i = 0, j = 0;
    J->n = 0;
    while (i < nm && j < np) {
        int c = cmp_key(&ms[i], &ps[j]);
        if (c < 0) {
            rep->unmatched_meas++;
            i++;
        } else if (c > 0) {
            rep->unmatched_pred++;
            j++;
        } else {
            J->jm[J->n] = ms[i++];
            J->jp[J->n++] = ps[j++];
        }
    }
    rep->unmatched_meas += nm - i;
    rep->unmatched_pred += np - j;
}

/* The run's record and a pair per joined row; the run's batches are fingerprinted by their
 * embedding rows (order-free: a sum of mixes, so the join order does not matter). */
static int add_pairs(validate_report *rep, const char *name, const trace_set *meas, const joined *J,
                     unpad_err *err)
{
    const trace_row **jm = J->jm, **jp = J->jp;
    int run = rep->nruns;
    GROW(rep->runs, rep->nruns, rep->cap_runs);
    validate_run *R = &rep->runs[rep->nruns++];
    memset(R, 0, sizeof *R);
    snprintf(R->name, sizeof R->name, "%s", name);
    if (meas->n) {
        snprintf(R->model, sizeof R->model, "%s", meas->rows[0].model);
        R->gpus = meas->rows[0].gpus;
    }
    double seqs = 0;
    long nseqs = 0;
    for (size_t q = 0; q < J->n; q++) {
        GROW(rep->pairs, rep->npairs, rep->cap_pairs);
        validate_pair *P = &rep->pairs[rep->npairs++];
        P->run = run;
        P->side_by_side = 0;
        P->step = jm[q]->step;
        P->rank = jm[q]->rank;
        P->op = jm[q]->op;
        P->layer = jm[q]->layer;
        P->group = jm[q]->group;
        P->stream = jm[q]->stream;
        P->start_us = jm[q]->start_us;
        P->meas_us = jm[q]->dur_us;
        P->pred_us = jp[q]->dur_us;
        if (jm[q]->op == OP_EMBED_FWD) {
            seqs += (double)jm[q]->seqs;
            nseqs++;
            unsigned long long h = (unsigned long long)jm[q]->step * 0x9E3779B97F4A7C15ULL ^
                                   (unsigned long long)jm[q]->rank * 0xC2B2AE3D27D4EB4FULL ^
                                   (unsigned long long)jm[q]->seqs * 0x165667B19E3779F9ULL ^
                                   (unsigned long long)jm[q]->tokens * 0x27D4EB2F165667C5ULL ^
                                   (unsigned long long)jm[q]->sum_len2;
            h ^= h >> 31;
            h *= 0xBF58476D1CE4E5B9ULL;
            h ^= h >> 29;
            R->batches += h;
        }
    }
    R->seqs_per_rank = nseqs ? seqs / nseqs : 0;
    return UNPAD_OK;
oom:
    return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
}

/* Groups that ran side by side (the joined rows s..e of one operator and layer, on several
 * streams) are judged as one launch: a pair of the union of their spans against the shared-slot
 * prediction (tm, tp), the groups' own pairs (from base) marked. Each group's own row ran slower
 * than it would alone, which is the point, not an error. */
static int add_grouped(validate_report *rep, const joined *J, size_t base, size_t s, size_t e, double tm,
                       double tp, unpad_err *err)
{
    for (size_t q = s; q < e; q++)
        rep->pairs[base + q].side_by_side = 1;
    GROW(rep->pairs, rep->npairs, rep->cap_pairs);
    validate_pair *P = &rep->pairs[rep->npairs++];
    *P = rep->pairs[base + s];
    P->group = VALIDATE_GROUPED;
    P->stream = -1;
    P->side_by_side = 0;
    for (size_t q = s; q < e; q++)
        if (J->jm[q]->start_us < P->start_us)
            P->start_us = J->jm[q]->start_us;
    P->meas_us = tm;
    P->pred_us = tp;
    return UNPAD_OK;
oom:
    return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
}

/* Per (step, rank) of run: load and time (the join order groups rows by step, rank, op, layer);
 * base is the run's first pair. */
static int add_loads(validate_report *rep, int run, const joined *J, size_t base, const validate_ctx *ctx,
                     trace_span *scratch, unpad_err *err)
{
    const trace_row **jm = J->jm, **jp = J->jp;
    size_t n = J->n;
    double overhead = ctx ? ctx->calib->step_overhead_us : 0;
    int rc;
    for (size_t a = 0; a < n;) {
        size_t b = a;
        while (b < n && jm[b]->step == jm[a]->step && jm[b]->rank == jm[a]->rank)
            b++;
        double load_m = 0, load_p = 0, time_p = 0, first = jm[a]->start_us, last = first;
        for (size_t q = a; q < b; q++) {
            if (jm[q]->start_us < first)
                first = jm[q]->start_us;
            if (jm[q]->start_us + jm[q]->dur_us > last)
                last = jm[q]->start_us + jm[q]->dur_us;
        }
        for (size_t s = a; s < b;) {
            size_t e = s;
            while (e < b && jm[e]->op == jm[s]->op && jm[e]->layer == jm[s]->layer)
                e++;
            double tm, tp;
            int streams;
            if ((rc = set_time(jm + s, jp + s, e - s, ctx, scratch, &tm, &tp, &streams, err)))
                return rc;
            if (streams > 1 && (rc = add_grouped(rep, J, base, s, e, tm, tp, err)))
                return rc;
            if (op_class_of((op_id)jm[s]->op) != OPC_COMM) {
                load_m += tm;
                load_p += tp;
            }
            time_p += tp;
            s = e;
        }
        GROW(rep->loads, rep->nloads, rep->cap_loads);
        validate_load *L = &rep->loads[rep->nloads++];
        L->run = run;
        L->step = jm[a]->step;
        L->rank = jm[a]->rank;
        L->meas_load_us = load_m;
        L->pred_load_us = load_p;
        L->meas_time_us = last - first;
        L->pred_time_us = time_p + overhead;
        a = b;
    }
    return UNPAD_OK;
oom:
    return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
}

/* Per step of run (its loads from first_load): the slowest rank; the imbalance when every rank is
 * there. */
static int add_steps(validate_report *rep, int run, size_t first_load, unpad_err *err)
{
    int gpus = rep->runs[run].gpus;
    for (size_t a = first_load; a < rep->nloads;) {
        size_t b = a;
        while (b < rep->nloads && rep->loads[b].step == rep->loads[a].step)
            b++;
        GROW(rep->steps, rep->nsteps, rep->cap_steps);
        validate_step *S = &rep->steps[rep->nsteps++];
        memset(S, 0, sizeof *S);
        S->run = run;
        S->step = rep->loads[a].step;
        S->ranks = (int)(b - a);
        double mm = 0, mp = 0, sum_m = 0, sum_p = 0, max_m = 0, max_p = 0;
        for (size_t q = a; q < b; q++) {
            const validate_load *L = &rep->loads[q];
            if (L->meas_time_us > mm)
                mm = L->meas_time_us;
            if (L->pred_time_us > mp)
                mp = L->pred_time_us;
            sum_m += L->meas_load_us;
            sum_p += L->pred_load_us;
            if (L->meas_load_us > max_m)
                max_m = L->meas_load_us;
            if (L->pred_load_us > max_p)
                max_p = L->pred_load_us;
        }
        S->meas_us = mm;
        S->pred_us = mp;
        if (gpus > 1 && S->ranks == gpus && sum_m > 0 && sum_p > 0) {
            S->meas_imb = max_m / (sum_m / S->ranks);
            S->pred_imb = max_p / (sum_p / S->ranks);
        }
        a = b;
    }
    return UNPAD_OK;
oom:
    return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
}

int validate_add_run(validate_report *rep, const char *name, const trace_set *pred,
                     const trace_set *meas, const validate_ctx *ctx, unpad_err *err)
{
    const trace_row **ms = sorted_rows(meas), **ps = sorted_rows(pred);
    size_t cap = meas->n < pred->n ? meas->n : pred->n;
    joined J = {malloc((cap ? cap : 1) * sizeof *J.jm), malloc((cap ? cap : 1) * sizeof *J.jp), 0};
    trace_span *scratch = malloc((cap ? cap : 1) * sizeof *scratch);
    int rc = UNPAD_OK;
    if (!ms || !ps || !J.jm || !J.jp || !scratch) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    join_rows(rep, ms, meas->n, ps, pred->n, &J);
    int run = rep->nruns;
    size_t base = rep->npairs, first_load = rep->nloads; /* pair base + q is the joined row q */
    if (!(rc = add_pairs(rep, name, meas, &J, err)) && !(rc = add_loads(rep, run, &J, base, ctx, scratch, err)))
        rc = add_steps(rep, run, first_load, err);
out:
    free(ms);
    free(ps);
    free(J.jm);
    free(J.jp);
    free(scratch);
    return rc;
}

/* ---- tables ----------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Statistics of errors e[0..n) in % (n may be 0); sorts a copy in scratch. */
static void stat_of(validate_stat *s, const double *e, size_t n, double *scratch)
{
    memset(s, 0, sizeof *s);
    s->n = (long)n;
    if (!n)
        return;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        scratch[i] = fabs(e[i]);
        sum += e[i];
    }
    qsort(scratch, n, sizeof *scratch, cmp_double);
    s->median_abs_pct = n % 2 ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
    s->max_abs_pct = scratch[n - 1];
    s->bias_pct = sum / (double)n;
}

static double pct(double pred, double meas) { return 100 * (pred - meas) / meas; }

int validate_finish(validate_report *rep, unpad_err *err)
{
    size_t cap = rep->npairs;
    if (rep->nloads > cap)
        cap = rep->nloads;
    if (rep->nsteps > cap)
        cap = rep->nsteps;
    double *e = malloc((cap ? cap : 1) * sizeof *e), *scratch = malloc((cap ? cap : 1) * sizeof *scratch);
    if (!e || !scratch) {
        free(e);
        free(scratch);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    size_t k;
    for (int op = 0; op < OP_COUNT; op++) {
        k = 0;
        for (size_t i = 0; i < rep->npairs; i++)
            if (rep->pairs[i].op == op && rep->pairs[i].meas_us > 0 && !rep->pairs[i].side_by_side)
                e[k++] = pct(rep->pairs[i].pred_us, rep->pairs[i].meas_us);
        stat_of(&rep->op[op], e, k, scratch);
    }
    k = 0;
    for (size_t i = 0; i < rep->npairs; i++)
        if (rep->pairs[i].meas_us > 0 && !rep->pairs[i].side_by_side)
            e[k++] = pct(rep->pairs[i].pred_us, rep->pairs[i].meas_us);
    stat_of(&rep->all_rows, e, k, scratch);

    int nrank = 0;
    for (size_t i = 0; i < rep->nloads; i++)
        if (rep->loads[i].rank + 1 > nrank)
            nrank = rep->loads[i].rank + 1;
    free(rep->rank);
    rep->rank = calloc((size_t)(nrank ? nrank : 1), sizeof *rep->rank);
    if (!rep->rank) {
        free(e);
        free(scratch);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    rep->nrank = nrank;
    for (int r = 0; r < nrank; r++) {
        k = 0;
        for (size_t i = 0; i < rep->nloads; i++)
            if (rep->loads[i].rank == r && rep->loads[i].meas_load_us > 0)
                e[k++] = pct(rep->loads[i].pred_load_us, rep->loads[i].meas_load_us);
        stat_of(&rep->rank[r], e, k, scratch);
    }
    k = 0;
    for (size_t i = 0; i < rep->nloads; i++)
        if (rep->loads[i].meas_load_us > 0)
            e[k++] = pct(rep->loads[i].pred_load_us, rep->loads[i].meas_load_us);
    stat_of(&rep->rank_load, e, k, scratch);
    k = 0;
    for (size_t i = 0; i < rep->nsteps; i++)
        if (rep->steps[i].meas_us > 0)
            e[k++] = pct(rep->steps[i].pred_us, rep->steps[i].meas_us);
    stat_of(&rep->step_time, e, k, scratch);
    /* Imbalance: absolute differences, not % (the target is +-0.01). */
    k = 0;
    rep->imb_max_diff = 0;
    for (size_t i = 0; i < rep->nsteps; i++)
        if (rep->steps[i].meas_imb > 0) {
            double d = rep->steps[i].pred_imb - rep->steps[i].meas_imb;
            e[k++] = d;
            if (fabs(d) > rep->imb_max_diff)
                rep->imb_max_diff = fabs(d);
        }
    rep->imb_steps = (long)k;
    {
        validate_stat s;
        stat_of(&s, e, k, scratch);
        rep->imb_median_diff = s.median_abs_pct;
    }
    /* Per run. */
    for (int r = 0; r < rep->nruns; r++) {
        validate_run *R = &rep->runs[r];
        double sm = 0, sp = 0, im = 0, ip = 0;
        long ns = 0;
        k = 0;
        R->imb_max_diff = 0;
        R->imb_steps = 0;
        for (size_t i = 0; i < rep->nsteps; i++) {
            const validate_step *S = &rep->steps[i];
            if (S->run != r)
                continue;
            sm += S->meas_us;
            sp += S->pred_us;
            ns++;
            if (S->meas_us > 0)
                e[k++] = pct(S->pred_us, S->meas_us);
            if (S->meas_imb > 0) {
                im += S->meas_imb;
                ip += S->pred_imb;
                R->imb_steps++;
                double d = fabs(S->pred_imb - S->meas_imb);
                if (d > R->imb_max_diff)
                    R->imb_max_diff = d;
            }
        }
        stat_of(&R->step_time, e, k, scratch);
        R->meas_step_us = ns ? sm / ns : 0;
        R->pred_step_us = ns ? sp / ns : 0;
        R->meas_imb = R->imb_steps ? im / R->imb_steps : 0;
        R->pred_imb = R->imb_steps ? ip / R->imb_steps : 0;
        k = 0;
        for (size_t i = 0; i < rep->nloads; i++)
            if (rep->loads[i].run == r && rep->loads[i].meas_load_us > 0)
                e[k++] = pct(rep->loads[i].pred_load_us, rep->loads[i].meas_load_us);
        stat_of(&R->rank_load, e, k, scratch);
    }
    free(e);
    free(scratch);
    return UNPAD_OK;
}

static const char *met(int ok) { return ok ? "met" : "NOT met"; }

/* Runs to rank against each other: same model and GPUs, and the same batch size (same = 0) or the
 * very same batches (same = 1). */
static int runs_alike(const validate_run *A, const validate_run *B, int same)
{
    if (strcmp(A->model, B->model) || A->gpus != B->gpus)
        return 0;
    return same ? A->batches == B->batches : fabs(A->seqs_per_rank - B->seqs_per_rank) <= 0.5;
}

/* Run a's group (counted once, at its first run; 0 otherwise): its size, and its fastest run
 * measured and predicted. */
static int rank_runs(const validate_report *rep, int a, int same, int *best_m, int *best_p)
{
    int nb = 0;
    *best_m = *best_p = a;
    for (int b = 0; b < rep->nruns; b++) {
        const validate_run *B = &rep->runs[b];
        if (!runs_alike(&rep->runs[a], B, same))
            continue;
        if (b < a)
            return 0;
        nb++;
        if (B->meas_step_us < rep->runs[*best_m].meas_step_us)
            *best_m = b;
        if (B->pred_step_us < rep->runs[*best_p].pred_step_us)
            *best_p = b;
    }
    return nb;
}

/* A run's file name for the 34-column tables: its last 31 characters after "..." when longer
 * (the end tells runs apart), lab holding it. */
enum { RUN_LABEL = 35 };
static const char *run_label(const char *path, char lab[RUN_LABEL])
{
    const char *nm = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t L = strlen(nm);
    if (L < RUN_LABEL)
        return nm;
    snprintf(lab, RUN_LABEL, "...%s", nm + L - (RUN_LABEL - 4));
    return lab;
}

void validate_print(FILE *f, const validate_report *rep)
{
    fprintf(f, "joined %zu rows of %d run%s (unmatched: %zu measured, %zu predicted)\n\n", rep->npairs,
            rep->nruns, rep->nruns == 1 ? "" : "s", rep->unmatched_meas, rep->unmatched_pred);
    fprintf(f, "per operator: (predicted - measured) / measured\n");
    fprintf(f, "%-14s %8s %9s %9s %9s\n", "operator", "rows", "median|%|", "max|%|", "bias%");
    for (int op = 0; op < OP_COUNT; op++) {
        const validate_stat *s = &rep->op[op];
        if (s->n)
            fprintf(f, "%-14s %8ld %9.2f %9.2f %+9.2f\n", op_name((op_id)op), s->n, s->median_abs_pct,
                    s->max_abs_pct, s->bias_pct);
    }
    fprintf(f, "%-14s %8ld %9.2f %9.2f %+9.2f\n", "all rows", rep->all_rows.n,
            rep->all_rows.median_abs_pct, rep->all_rows.max_abs_pct, rep->all_rows.bias_pct);
    if (rep->op[OP_ALLREDUCE].n)
        fprintf(f, "(a faster rank's all-reduce row includes its wait for the slowest rank; the model\n"
                   " times the transfer alone, and the step time below accounts for the wait)\n");
    fprintf(f, "\n");

    fprintf(f, "per rank: load (compute time of one rank in one step)\n");
    fprintf(f, "%-14s %8s %9s %9s %9s\n", "rank", "steps", "median|%|", "max|%|", "bias%");
    for (int r = 0; r < rep->nrank; r++) {
        const validate_stat *s = &rep->rank[r];
        if (s->n)
            fprintf(f, "%-14d %8ld %9.2f %9.2f %+9.2f\n", r, s->n, s->median_abs_pct, s->max_abs_pct,
                    s->bias_pct);
    }
    fprintf(f, "%-14s %8ld %9.2f %9.2f %+9.2f\n\n", "all", rep->rank_load.n,
            rep->rank_load.median_abs_pct, rep->rank_load.max_abs_pct, rep->rank_load.bias_pct);

    fprintf(f, "per run: step time (the slowest rank) and imbalance (max / mean rank load)\n");
    fprintf(f, "%-34s %4s %6s %9s %9s %9s %9s %8s %8s %9s\n", "run", "gpus", "steps", "meas_ms",
            "pred_ms", "median|%|", "max|%|", "imb_meas", "imb_pred", "max|dimb|");
    for (int r = 0; r < rep->nruns; r++) {
        const validate_run *R = &rep->runs[r];
        char lab[RUN_LABEL];
        const char *nm = run_label(R->name, lab);
        fprintf(f, "%-34s %4d %6ld %9.3f %9.3f %9.2f %9.2f", nm, R->gpus, R->step_time.n,
                R->meas_step_us / 1e3, R->pred_step_us / 1e3, R->step_time.median_abs_pct,
                R->step_time.max_abs_pct);
        if (R->imb_steps)
            fprintf(f, " %8.4f %8.4f %9.4f\n", R->meas_imb, R->pred_imb, R->imb_max_diff);
        else
            fprintf(f, " %8s %8s %9s\n", "-", "-", "-");
    }
    fprintf(f, "%-34s %4s %6ld %9s %9s %9.2f %9.2f\n\n", "all steps", "", rep->step_time.n, "", "",
            rep->step_time.median_abs_pct, rep->step_time.max_abs_pct);

    /* Every step, with the rank that set it and the largest single-rank load error: shows whether
     * a step's error is the model's (every rank off alike) or one rank's (a stall, a slow rank). */
    fprintf(f, "per step: step time, the slowest rank measured / predicted, worst rank load error\n");
    fprintf(f, "%-34s %5s %9s %9s %8s %6s %6s %11s\n", "run", "step", "meas_ms", "pred_ms", "err%",
            "slow_m", "slow_p", "worst_load%");
    for (size_t i = 0; i < rep->nsteps; i++) {
        const validate_step *S = &rep->steps[i];
        char lab[RUN_LABEL];
        const char *nm = run_label(rep->runs[S->run].name, lab);
        int sm = -1, sp = -1;
        double tm = 0, tp = 0, worst = 0;
        for (size_t q = 0; q < rep->nloads; q++) {
            const validate_load *ld = &rep->loads[q];
            if (ld->run != S->run || ld->step != S->step)
                continue;
            if (ld->meas_time_us > tm) {
                tm = ld->meas_time_us;
                sm = ld->rank;
            }
            if (ld->pred_time_us > tp) {
                tp = ld->pred_time_us;
                sp = ld->rank;
            }
            double e = ld->meas_load_us > 0 ? pct(ld->pred_load_us, ld->meas_load_us) : 0;
            if (fabs(e) > fabs(worst))
                worst = e;
        }
        fprintf(f, "%-34s %5d %9.3f %9.3f %+8.2f %6d %6d %+11.2f\n", nm, S->step, S->meas_us / 1e3,
                S->pred_us / 1e3, S->meas_us > 0 ? pct(S->pred_us, S->meas_us) : 0.0, sm, sp, worst);
    }
    fprintf(f, "\n");

    fprintf(f, "targets (meant for held-out traces):\n");
    if (rep->step_time.n) {
        fprintf(f, "  per-step time error   median %.2f%% (<= 2%%: %s), max %.2f%% (<= 5%%: %s)\n",
                rep->step_time.median_abs_pct, met(rep->step_time.median_abs_pct <= 2),
                rep->step_time.max_abs_pct, met(rep->step_time.max_abs_pct <= 5));
        size_t w = 0; /* the step behind the max, so that a stall is seen for one */
        double we = -1;
        for (size_t i = 0; i < rep->nsteps; i++) {
            const validate_step *S = &rep->steps[i];
            double e = S->meas_us > 0 ? fabs(pct(S->pred_us, S->meas_us)) : 0;
            if (e > we) {
                we = e;
                w = i;
            }
        }
        if (rep->nsteps)
            fprintf(f, "                        the worst: %s step %d, measured %.3f ms against %.3f predicted\n",
                    rep->runs[rep->steps[w].run].name, rep->steps[w].step, rep->steps[w].meas_us / 1e3,
                    rep->steps[w].pred_us / 1e3);
    }
    if (rep->rank_load.n)
        fprintf(f, "  per-rank load error   median %.2f%% (<= 3%%: %s)\n", rep->rank_load.median_abs_pct,
                met(rep->rank_load.median_abs_pct <= 3));
    if (rep->imb_steps)
        fprintf(f, "  imbalance             max |predicted - measured| %.4f (median %.4f) over %ld steps "
                   "(<= 0.01: %s)\n",
                rep->imb_max_diff, rep->imb_median_diff, rep->imb_steps, met(rep->imb_max_diff <= 0.01));
    else
        fprintf(f, "  imbalance             no multi-GPU step with every rank present\n");
    /* Fastest option as predicted against as measured: among runs of the same model, GPUs and
     * batch size (policies, groupings), then among runs of the very same batches, which differ
     * only in how they ran them (grouping options). The measured fastest agrees when the
     * prediction ranks it first, ties within 0.1% included (identical settings predict identical
     * times). */
    int compared = 0;
    for (int same = 0; same < 2; same++)
        for (int a = 0; a < rep->nruns; a++) {
            int best_m, best_p, nb = rank_runs(rep, a, same, &best_m, &best_p);
            if (nb < 2)
                continue;
            const validate_run *A = &rep->runs[a];
            int agree = rep->runs[best_m].pred_step_us <= rep->runs[best_p].pred_step_us * 1.001;
            if (same)
                fprintf(f, "  fastest of %d runs of the same batches (grouping options; %s, %d GPUs): ", nb,
                        A->model, A->gpus);
            else
                fprintf(f, "  fastest of %d comparable runs (%s, %d GPUs, %.0f seqs/rank): ", nb, A->model,
                        A->gpus, A->seqs_per_rank);
            fprintf(f, "measured %s, predicted %s: %s\n", rep->runs[best_m].name, rep->runs[best_p].name,
                    agree ? "agree" : "DISAGREE");
            compared += !same;
            for (int b = 0; same && b < rep->nruns; b++)
                if (runs_alike(A, &rep->runs[b], 1))
                    fprintf(f, "    %-60s measured %9.3f ms  predicted %9.3f ms\n", rep->runs[b].name,
                            rep->runs[b].meas_step_us / 1e3, rep->runs[b].pred_step_us / 1e3);
        }
    if (!compared)
        fprintf(f, "  fastest option        no comparable runs (same model, GPUs and batch) to rank\n");
}

int validate_write_csv(const char *path, const validate_report *rep, const char *comment,
                       unpad_err *err)
{
    unpad_outfile *o;
    int rc = outfile_open_csv(path, comment,
                              "level,run,step,rank,op,layer,group,stream,measured_us,predicted_us,err_pct",
                              &o, err);
    if (rc)
        return rc;
    FILE *f = outfile_stream(o);
    for (size_t i = 0; i < rep->npairs; i++) {
        const validate_pair *p = &rep->pairs[i];
        /* a group of a side-by-side launch: level "group" (its launch as a whole is the "op" row
         * with group VALIDATE_GROUPED) */
        fprintf(f, "%s,%d,%d,%d,%s,%d,%d,%d,%.3f,%.3f,%.3f\n", p->side_by_side ? "group" : "op",
                p->run + 1, p->step, p->rank,
                op_name((op_id)p->op), p->layer, p->group, p->stream, p->meas_us, p->pred_us,
                p->meas_us > 0 ? pct(p->pred_us, p->meas_us) : 0.0);
    }
    for (size_t i = 0; i < rep->nloads; i++) {
        const validate_load *l = &rep->loads[i];
        fprintf(f, "rank,%d,%d,%d,load,-1,-1,-1,%.3f,%.3f,%.3f\n", l->run + 1, l->step, l->rank,
                l->meas_load_us, l->pred_load_us,
                l->meas_load_us > 0 ? pct(l->pred_load_us, l->meas_load_us) : 0.0);
    }
    for (size_t i = 0; i < rep->nsteps; i++) {
        const validate_step *s = &rep->steps[i];
        fprintf(f, "step,%d,%d,-1,step,-1,-1,-1,%.3f,%.3f,%.3f\n", s->run + 1, s->step, s->meas_us,
                s->pred_us, s->meas_us > 0 ? pct(s->pred_us, s->meas_us) : 0.0);
    }
    return outfile_commit(o, err);
}

void validate_report_free(validate_report *rep)
{
    free(rep->pairs);
    free(rep->loads);
    free(rep->steps);
    free(rep->runs);
    free(rep->rank);
    memset(rep, 0, sizeof *rep);
}
