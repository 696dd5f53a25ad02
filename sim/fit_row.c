/* fit_row.c — one trace row predicted from its own batch description (the lengths rebuilt from
 * the row's counts), shared by the calibration and the validation; and the checks on input traces. */
#include "fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- predicting one trace row ------------------------------------------------------------------ */

const model_cfg *fit_model_find(const model_cfg *models, int n_models, const char *name)
{
    for (int i = 0; i < n_models; i++)
        if (!strcmp(models[i].name, name))
            return &models[i];
    return NULL;
}

int fit_row_lengths(const trace_row *r, int model_max_len, int *len, unpad_err *err)
{
    long n = r->seqs, T = r->tokens;
    int M = r->max_len;
    if (n < 1 || M < 1 || M > model_max_len || T < M + (n - 1) || T > n * (long)M)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "%s row (step %d, rank %d): seqs %ld, tokens %ld, max_len %d cannot "
                          "describe a batch (expected 1 <= max_len <= %d and max_len + seqs - 1 <= "
                          "tokens <= seqs x max_len)",
                          op_name((op_id)r->op), r->step, r->rank, n, T, M, model_max_len);
    len[0] = M;
    if (n == 1)
        return UNPAD_OK;
    /* The other m sequences: k at the maximum (as few as needed), the rest spread uniformly over
     * [a, b] with the remaining mean and variance. BERT data has a spike at the maximum (packed
     * documents), and a spread rounds to tiles like real lengths do where two points would not. */
    long m = n - 1, k;
    double R = (double)(T - M), Q = r->sum_len2 - (double)M * M;
    double a = 1, b = M;
    for (k = 0; k < m; k++) {
        double rest = (double)(m - k);
        double mu = (R - (double)k * M) / rest;
        double var = (Q - (double)k * M * M) / rest - mu * mu;
        double h = var > 0 ? sqrt(3 * var) : 0;
        a = mu - h;
        b = mu + h;
        if (a >= 1 && b <= M)
            break;
    }
    if (k == m) { /* no such split: one uniform spread, clamped */
        double mu = R / m, var = Q / m - mu * mu, h = var > 0 ? sqrt(3 * var) : 0;
        k = 0;
        a = mu - h;
        b = mu + h;
    }
    if (a < 1)
        a = 1;
    if (b > M)
        b = M;
    /* Cumulative rounding keeps the total exact. */
    double acc = 0;
    long prev = 0;
    for (long i = 0; i < m; i++) {
        acc += i < k ? M : a + (b - a) * ((double)(i - k) + 0.5) / (double)(m - k);
        long cur = i + 1 < m ? lround(acc) : (long)(T - M);
        len[1 + i] = (int)(cur - prev);
        prev = cur;
    }
    for (long i = 1; i < n; i++) /* guards against rounding at the ends of the range */
        if (len[i] < 1 || len[i] > M)
            len[i] = len[i] < 1 ? 1 : M;
    return UNPAD_OK;
}

/* The fixed pseudo-random launch orders: shuffles v[0..n) in place, advancing *st. */
#define FIT_ORDER_SEED 0x9E3779B97F4A7C15ULL
static void order_shuffle(int *v, int n, unsigned long long *st)
{
    for (int i = n - 1; i > 0; i--) {
        *st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
        int j = (int)((*st >> 33) % (unsigned long long)(i + 1)), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

double fit_fmha_us(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n, int dir)
{
    /* A row does not say in which order its sequences were launched, and the tile simulation's
     * tail depends on it: average over FIT_FMHA_ORDERS fixed pseudo-random orders. */
    int stack[1024];
    int *v = n <= 1024 ? stack : malloc(sizeof *v * (size_t)n);
    if (!v)
        return cost_fmha_us(hw, c, heads, len, n, dir);
    memcpy(v, len, sizeof *v * (size_t)n);
    unsigned long long st = FIT_ORDER_SEED;
    double sum = 0;
    for (int k = 0; k < FIT_FMHA_ORDERS; k++) {
        order_shuffle(v, n, &st);
        sum += cost_fmha_us(hw, c, heads, v, n, dir);
    }
    if (v != stack)
        free(v);
    return sum / FIT_FMHA_ORDERS;
}

int fit_row_cost_lengths(const model_cfg *m, const trace_row *r, op_cost *oc, int **lens_out,
                         unpad_err *err)
{
    if (r->op < 0 || r->op >= OP_COUNT)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "row with operator id %d", r->op);
    int *len = malloc(sizeof *len * (size_t)(r->seqs > 0 ? r->seqs : 1));
    if (!len)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    int rc = fit_row_lengths(r, m->max_len, len, err);
    op_cost all[OP_COUNT];
    op_batch b = {.len = len, .n = (int)r->seqs, .fused = 1, .gpus = r->gpus, .dropout = 1};
    if (!rc)
        rc = ops_step(m, &b, all, err);
    if (rc) {
        free(len);
        return rc;
    }
    op_cost o = all[r->op];
    if (r->bytes > 0 && o.bytes_unfused != o.bytes_fused &&
        fabs(r->bytes - o.bytes_unfused) < fabs(r->bytes - o.bytes_fused)) {
        b.fused = 0;
        if ((rc = ops_step(m, &b, all, err))) {
            free(len);
            return rc;
        }
        o = all[r->op];
    }
    /* The row's own counts win; a row without them (0) keeps the model's. Rows (GEMM M, tokens,
     * predictions) per FLOP and the tensor share are properties of the operator's shape, so they
     * scale with the FLOPs (the FMHA's FLOPs grow with the squares instead: its rows stay). */
    if (r->flops > 0 && o.flops > 0) {
        double k = r->flops / o.flops;
        o.tensor_flops *= k;
        if (op_class_of(o.op) != OPC_ATTN)
            o.rows *= k;
        o.flops = r->flops;
    }
    if (r->bytes > 0)
        o.bytes = r->bytes;
    o.seqs = r->seqs;
    o.tokens = r->tokens;
    o.sum_len2 = r->sum_len2;
    o.max_len = r->max_len;
    *oc = o;
    if (lens_out)
        *lens_out = len;
    else
        free(len);
    return UNPAD_OK;
}

int fit_row_cost(const model_cfg *m, const trace_row *r, op_cost *oc, unpad_err *err)
{
    return fit_row_cost_lengths(m, r, oc, NULL, err);
}

double fit_row_time(const model_cfg *m, const hw_spec *hw, const calib_coef *c, const trace_row *r,
                       const op_cost *oc, const int *len)
{
    if (r->op == OP_FMHA_FWD || r->op == OP_FMHA_BWD) {
        double tiles = fit_fmha_us(hw, c, m->heads, len, (int)r->seqs, r->op == OP_FMHA_BWD) +
                       cost_fmha_passes_us(hw, c, m->heads, cost_fmha_tokens(len, (int)r->seqs),
                                           r->op == OP_FMHA_BWD);
        double mem = oc->bytes / (hw->mem_bw_gbs * 1e3 * c->bw_eff);
        return (tiles > mem ? tiles : mem) + oc->launches * c->launch_us;
    }
    if (r->op == OP_ALLREDUCE)
        return cost_allreduce_us(hw, c, oc->bytes, r->gpus);
    return cost_op_us(hw, c, oc);
}

int fit_row_predict(const model_cfg *m, const hw_spec *hw, const calib_coef *c, const trace_row *r,
                    double *us, unpad_err *err)
{
    op_cost oc;
    int *len;
    int rc = fit_row_cost_lengths(m, r, &oc, &len, err);
    if (rc)
        return rc;
    *us = fit_row_time(m, hw, c, r, &oc, len);
    free(len);
    return UNPAD_OK;
}

static int cmp_row_group(const void *a, const void *b)
{
    const trace_row *x = *(const trace_row *const *)a, *y = *(const trace_row *const *)b;
    return (x->group > y->group) - (x->group < y->group);
}

int fit_rows_fmha_together(const model_cfg *m, const hw_spec *hw, const calib_coef *c,
                           const trace_row *const *rows, int n, double *us, unpad_err *err)
{
    if (n < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "no FMHA rows to time together");
    if (n > 64)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "step %d, rank %d, %s layer %d: %d FMHA groups launched together (at most 64)",
                          rows[0]->step, rows[0]->rank, op_name((op_id)rows[0]->op), rows[0]->layer, n);
    const trace_row *r[64];
    memcpy(r, rows, sizeof *r * (size_t)n);
    qsort(r, (size_t)n, sizeof *r, cmp_row_group); /* launch order */
    int *len[64] = {0}, cnt[64], stream[64], per_stream[64] = {0}, launches = 0, chain = 0, rc = UNPAD_OK;
    double mem = 0, tokens = 0;
    for (int i = 0; i < n; i++) {
        if (r[i]->op != OP_FMHA_FWD && r[i]->op != OP_FMHA_BWD) {
            rc = unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s row in an FMHA group", op_name((op_id)r[i]->op));
            goto out;
        }
        op_cost oc;
        if ((rc = fit_row_cost_lengths(m, r[i], &oc, &len[i], err)))
            goto out;
        cnt[i] = (int)r[i]->seqs;
        tokens += cost_fmha_tokens(len[i], cnt[i]);
        stream[i] = r[i]->stream >= 0 && r[i]->stream < 64 ? r[i]->stream : 0;
        if (++per_stream[stream[i]] > chain)
            chain = per_stream[stream[i]];
        mem += oc.bytes / (hw->mem_bw_gbs * 1e3 * c->bw_eff);
        if (oc.launches > launches)
            launches = oc.launches;
    }
    /* The groups' tiles share the slots (cost_fmha_streams_us); each row's own launch order is
     * unknown, so the simulation is averaged over the same fixed orders as fit_fmha_us. */
    unsigned long long st = FIT_ORDER_SEED;
    double tiles = 0;
    for (int o = 0; o < FIT_FMHA_ORDERS; o++) {
        for (int g = 0; g < n; g++)
            order_shuffle(len[g], cnt[g], &st);
        tiles += cost_fmha_streams_us(hw, c, m->heads, (const int *const *)len, cnt, stream, n,
                                      r[0]->op == OP_FMHA_BWD, NULL);
    }
    tiles /= FIT_FMHA_ORDERS;
    /* the groups' passes, bound by the memory's bandwidth, add up: every group's tokens, in series */
    tiles += cost_fmha_passes_us(hw, c, m->heads, tokens, r[0]->op == OP_FMHA_BWD);
    /* launches follow each other on a stream: the longest chain pays them in series */
    *us = (tiles > mem ? tiles : mem) + (double)chain * launches * c->launch_us;
out:
    for (int i = 0; i < n; i++)
        free(len[i]);
    return rc;
}

/* ---- checks on input traces ------------------------------------------------------------------- */

int fit_models_resolve(const trace_set *sets, int nsets, const char *dir, model_cfg *models, int *n,
                       int cap, unpad_err *err)
{
    for (int s = 0; s < nsets; s++)
        for (size_t i = 0; i < sets[s].n; i++) {
            const char *name = sets[s].rows[i].model;
            if (fit_model_find(models, *n, name))
                continue;
            if (strchr(name, '/') || name[0] == '.')
                return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                                  "model name '%s' in a trace is not a plain name (pass --model F)", name);
            if (*n >= cap)
                return unpad_fail(err, UNPAD_ERANGE, NULL, 0, "more than %d models in the traces", cap);
            char path[4200];
            snprintf(path, sizeof path, "%s/%s.cfg", dir, name);
            int rc = model_load(path, &models[*n], err);
            if (rc) {
                char msg[UNPAD_ERR_LEN];
                snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
                return unpad_fail(err, rc, NULL, 0,
                                  "traces name model '%s': %s (pass --model F for its config)", name, msg);
            }
            if (strcmp(models[*n].name, name))
                return unpad_fail(err, UNPAD_EINVAL, path, 0, "names model '%s', the traces '%s'",
                                  models[*n].name, name);
            (*n)++;
        }
    return UNPAD_OK;
}

int fit_check_trace_model(const trace_set *set, const char *path, const model_cfg *models, int n, unpad_err *err)
{
    if (set->n == 0)
        return UNPAD_OK;
    const char *name = set->rows[0].model;
    const model_cfg *m = fit_model_find(models, n, name);
    for (size_t i = 0; i < set->n; i++) {
        const trace_row *r = &set->rows[i];
        if (strcmp(r->model, name))
            return unpad_fail(err, UNPAD_EINVAL, path, 0,
                              "mixed models in one trace: row %zu (step %d, rank %d, %s) is of '%s', the first "
                              "of '%s' (one trace file per run)", i + 1, r->step, r->rank, op_name((op_id)r->op),
                              r->model, name);
        if (m && r->layer >= m->layers)
            return unpad_fail(err, UNPAD_EINVAL, path, 0,
                              "row %zu (step %d, rank %d, %s): layer %d, but %s has %d layers (0..%d)", i + 1,
                              r->step, r->rank, op_name((op_id)r->op), r->layer, name, m->layers,
                              m->layers - 1);
    }
    return UNPAD_OK;
}

int fit_check_trace(const trace_set *set, const char *path, const char *hw, unpad_err *err)
{
    if (set->n == 0)
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "no rows (only the header): nothing to calibrate or validate");
    const char *first = set->rows[0].hw;
    for (size_t i = 1; i < set->n; i++)
        if (strcmp(set->rows[i].hw, first))
            return unpad_fail(err, UNPAD_EINVAL, path, 0,
                              "mixed hardware in one trace: rows of '%s' and '%s' (one trace "
                              "file per GPU type)", first, set->rows[i].hw);
    if (set->products == TRACE_FP32)
        return unpad_fail(err, UNPAD_EINVAL, path, set->products_line,
                          "measured with fp32 products (the fp32 build): the cost model describes the bf16 "
                          "trainer's operators (and with an FP8 calibration, unpad-train --fp8 on's); calibrate "
                          "and validate with traces of the default build");
    if (hw && strcmp(first, hw))
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "measured on '%s' but --hw is '%s': calibrate each GPU type with its own "
                          "traces and spec (models/hw/%s.cfg)", first, hw, first);
    return UNPAD_OK;
}
