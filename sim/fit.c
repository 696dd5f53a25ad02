/* fit.c — calibration of the cost model against measured trace rows (see fit.h for the models). */
#include "fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "outfile.h"

#define REJECT_WEIGHT 0.01  /* a row weighted below this by a robust fit counts as an outlier */

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

/* Rebuilt lengths and op_cost of a row; *lens_out (may be NULL) receives the lengths to free. */
static int row_cost_lens(const model_cfg *m, const trace_row *r, op_cost *oc, int **lens_out,
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
    return row_cost_lens(m, r, oc, NULL, err);
}

/* Time of a row from its op_cost (and lengths, for the FMHA), as cost_predict_step times it. */
static double row_time(const model_cfg *m, const hw_spec *hw, const calib_coef *c, const trace_row *r,
                       const op_cost *oc, const int *len)
{
    if (r->op == OP_FMHA_FWD || r->op == OP_FMHA_BWD) {
        double tiles = fit_fmha_us(hw, c, m->heads, len, (int)r->seqs, r->op == OP_FMHA_BWD);
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
    int rc = row_cost_lens(m, r, &oc, &len, err);
    if (rc)
        return rc;
    *us = row_time(m, hw, c, r, &oc, len);
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
    double mem = 0;
    for (int i = 0; i < n; i++) {
        if (r[i]->op != OP_FMHA_FWD && r[i]->op != OP_FMHA_BWD) {
            rc = unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s row in an FMHA group", op_name((op_id)r[i]->op));
            goto out;
        }
        op_cost oc;
        if ((rc = row_cost_lens(m, r[i], &oc, &len[i], err)))
            goto out;
        cnt[i] = (int)r[i]->seqs;
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
    if (hw && strcmp(first, hw))
        return unpad_fail(err, UNPAD_EINVAL, path, 0,
                          "measured on '%s' but --hw is '%s': calibrate each GPU type with its own "
                          "traces and spec (models/hw/%s.cfg)", first, hw, first);
    return UNPAD_OK;
}

/* ---- calibration ------------------------------------------------------------------------------ */

static const char *PARAM_NAMES[FIT_NPARAM] = {
    "gemm_eff", "gemm_m_half", "attn_eff", "attn_cta_us", "bw_eff",
    "launch_us", "optim_bw_eff", "comm_eff", "step_overhead_us"};

const char *fit_param_name(fit_param_id p) { return p < FIT_NPARAM ? PARAM_NAMES[p] : "?"; }

const char *fit_group_name(int g)
{
    return g == FIT_GROUP_STEP ? "step overhead" : op_class_name((op_class)g);
}

/* One measured row as the fits see it. */
typedef struct {
    const trace_row *r;
    const model_cfg *m;
    int set;
    op_cost oc;
    int *len;        /* FMHA rows: rebuilt lengths */
    int batch;       /* FMHA rows: index of the distinct batch (shared tile simulation) */
    int multi;       /* FMHA rows sharing their layer with another stream: not fitted */
    int in_fit;      /* the row took part in a fit (w is its weight there) */
    double w;        /* robust weight of the fit the row took part in (1: none) */
} row_ctx;

typedef struct {
    row_ctx *rows;
    size_t n;
    const hw_spec *hw;
    row_ctx **batch;   /* (nbatch) one row of each distinct FMHA batch */
    size_t nbatch;
} fit_ctx;

static double *coef_field(calib_coef *c, fit_param_id p)
{
    switch (p) {
    case FIT_GEMM_EFF: return &c->gemm_eff;
    case FIT_GEMM_M_HALF: return &c->gemm_m_half;
    case FIT_ATTN_EFF: return &c->attn_eff;
    case FIT_ATTN_CTA_US: return &c->attn_cta_us;
    case FIT_BW_EFF: return &c->bw_eff;
    case FIT_LAUNCH_US: return &c->launch_us;
    case FIT_OPTIM_BW_EFF: return &c->optim_bw_eff;
    case FIT_COMM_EFF: return &c->comm_eff;
    case FIT_STEP_OVERHEAD_US: return &c->step_overhead_us;
    default: return NULL;
    }
}

static void note(fit_result *out, const char *fmt, const char *a)
{
    size_t used = strlen(out->notes);
    if (used + 2 < sizeof out->notes)
        snprintf(out->notes + used, sizeof out->notes - used, fmt, a);
}

/* Row order for grouping: set, step, rank, op, layer, stream. */
static int cmp_rowkey(const void *a, const void *b)
{
    const row_ctx *x = *(row_ctx *const *)a, *y = *(row_ctx *const *)b;
#define CMP(f) if (x->f != y->f) return x->f < y->f ? -1 : 1
    CMP(set);
    CMP(r->step);
    CMP(r->rank);
    CMP(r->op);
    CMP(r->layer);
    CMP(r->stream);
#undef CMP
    return 0;
}

/* Memory-bound under coefficients c (the roofline's max picks the byte term). */
static int mem_bound(const hw_spec *hw, const calib_coef *c, const op_cost *oc)
{
    double t_mem = oc->bytes / (hw->mem_bw_gbs * 1e3 * cost_bw_eff(c, oc->op));
    double t_flop = (oc->flops - oc->tensor_flops) / (hw->peak_fp32_tflops * 1e6);
    if (oc->tensor_flops > 0)
        t_flop += oc->tensor_flops / (hw->peak_bf16_tflops * 1e6 * cost_gemm_eff(c, oc->op, oc->rows));
    return t_mem >= t_flop;
}

/* Joint-fit unknowns: one inverse efficiency per operator (index op_id), then the pooled GEMM and
 * memory-bound inverse efficiencies of operators with too few rows, the shared small-M term
 * m_half / gemm_eff, the optimizer's inverse efficiency and the launch overhead. */
enum { J_GEMM = OP_COUNT, J_MEM, J_M, J_OPT, J_LAUNCH, J_N };

/* Joint robust fit of GEMM, memory-bound and optimizer rows (see fit.h). */
static int fit_joint(fit_ctx *fc, calib_coef *c, fit_result *out, unpad_err *err)
{
    const hw_spec *hw = fc->hw;
    double peak = hw->peak_bf16_tflops * 1e6, fp32 = hw->peak_fp32_tflops * 1e6;
    double bw = hw->mem_bw_gbs * 1e3;
    char *use = calloc(fc->n, 1), *prev = calloc(fc->n, 1);
    int *key = calloc(fc->n ? fc->n : 1, sizeof *key);
    int rc = UNPAD_OK;
    if (!use || !prev || !key) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    for (int iter = 0; iter < 6; iter++) {
        /* Classify rows under the current coefficients: GEMMs that are compute-bound, memory
         * kernels and the optimizer that are memory-bound. */
        size_t n = 0;
        long per_op[OP_COUNT] = {0}, count[J_N] = {0};
        for (size_t i = 0; i < fc->n; i++) {
            const row_ctx *x = &fc->rows[i];
            op_class k = op_class_of(x->oc.op);
            int u = 0;
            if (x->r->dur_us > 0 && x->oc.launches > 0) {
                if (k == OPC_GEMM && x->oc.tensor_flops > 0 && x->oc.rows > 0)
                    u = !mem_bound(hw, c, &x->oc) ? 1 : 0;
                else if (k == OPC_NORM || k == OPC_ELEM)
                    u = mem_bound(hw, c, &x->oc) ? 2 : 0;
                else if (k == OPC_OPTIM)
                    u = mem_bound(hw, c, &x->oc) ? 3 : 0;
            }
            use[i] = (char)u;
            if (u == 1 || u == 2)
                per_op[x->oc.op]++;
        }
        for (size_t i = 0; i < fc->n; i++) {
            if (!use[i])
                continue;
            op_id op = fc->rows[i].oc.op;
            key[i] = use[i] == 3 ? J_OPT : per_op[op] >= FIT_OP_MIN_ROWS ? (int)op
                                           : use[i] == 1 ? J_GEMM : J_MEM;
            count[key[i]]++;
            if (use[i] == 1)
                count[J_M]++;
            n++;
        }
        if (iter > 0 && !memcmp(use, prev, fc->n))
            break;
        memcpy(prev, use, fc->n);
        /* Unknowns present in the data; the others keep their values. */
        int col[J_N], p = 0;
        for (int j = 0; j < J_N; j++)
            col[j] = count[j] ? p++ : -1;
        if (n)
            col[J_LAUNCH] = p++;
        if (n <= (size_t)p + 1) {
            rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                            "only %zu GEMM, memory-bound and optimizer rows with a duration: "
                            "too few to fit %d coefficients", n, p);
            goto out;
        }
        gsl_matrix *X = gsl_matrix_calloc(n, (size_t)p);
        gsl_vector *y = gsl_vector_alloc(n), *b = gsl_vector_alloc((size_t)p);
        gsl_matrix *cov = gsl_matrix_alloc((size_t)p, (size_t)p);
        gsl_multifit_robust_workspace *w = gsl_multifit_robust_alloc(gsl_multifit_robust_bisquare, n, (size_t)p);
        if (!X || !y || !b || !cov || !w) {
            rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
            goto free_iter;
        }
        gsl_multifit_robust_maxiter(200, w);
        size_t k = 0;
        for (size_t i = 0; i < fc->n; i++) {
            if (!use[i])
                continue;
            const row_ctx *x = &fc->rows[i];
            const op_cost *o = &x->oc;
            double d = x->r->dur_us, yy = d; /* every equation divided by d: relative residuals */
            if (use[i] == 1) {
                gsl_matrix_set(X, k, (size_t)col[key[i]], o->tensor_flops / peak / d);
                gsl_matrix_set(X, k, (size_t)col[J_M], o->tensor_flops / (peak * o->rows) / d);
                yy -= (o->flops - o->tensor_flops) / fp32;
            } else {
                gsl_matrix_set(X, k, (size_t)col[key[i]], o->bytes / bw / d);
            }
            gsl_matrix_set(X, k, (size_t)col[J_LAUNCH], o->launches / d);
            gsl_vector_set(y, k, yy / d);
            k++;
        }
        int st = gsl_multifit_robust(X, y, b, cov, w);
        if (st && st != GSL_EMAXITER) {
            rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                            "GEMM/memory/optimizer fit failed: %s (are the rows' sizes all alike?)",
                            gsl_strerror(st));
            goto free_iter;
        }
        if (st == GSL_EMAXITER)
            note(out, "%s", "joint fit: the robust iterations did not settle (result kept); ");
        double v[J_N] = {0};
        for (int j = 0; j < J_N; j++)
            if (col[j] >= 0)
                v[j] = gsl_vector_get(b, (size_t)col[j]);
        /* Inverse efficiencies must exceed 1 (an efficiency above 1 means the counts are wrong). */
        for (int j = 0; j <= J_MEM; j++) {
            if (col[j] < 0 || j == J_M)
                continue;
            int gemm = j == J_GEMM || (j < OP_COUNT && op_class_of((op_id)j) == OPC_GEMM);
            if (v[j] <= 1.0) {
                rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                                "the %s rows imply an efficiency of %.3g, not in (0, 1]: are flops and "
                                "bytes in the traces per operator instance and durations in "
                                "microseconds?", j < OP_COUNT ? op_name((op_id)j) : gemm ? "GEMM" : "memory-bound",
                                v[j] > 0 ? 1 / v[j] : -1.0);
                goto free_iter;
            }
        }
        /* Per-operator efficiencies; the class values gemm_eff and bw_eff are the pooled column
         * when some operator had too few rows, else the work-weighted mean over the rows fitted
         * (tensor FLOPs for GEMMs, bytes for memory-bound kernels), with its standard error from
         * the covariance of the columns it combines. */
        double wsum[2] = {0}, wv[2] = {0};
        double *share = calloc((size_t)p, sizeof *share), *share2 = calloc((size_t)p, sizeof *share2);
        if (!share || !share2) {
            free(share);
            free(share2);
            rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
            goto free_iter;
        }
        for (size_t i = 0; i < fc->n; i++) {
            if (use[i] != 1 && use[i] != 2)
                continue;
            int g = use[i] == 1 ? 0 : 1;
            double wt = g == 0 ? fc->rows[i].oc.tensor_flops : fc->rows[i].oc.bytes;
            wsum[g] += wt;
            wv[g] += wt * v[key[i]];
            (g == 0 ? share : share2)[col[key[i]]] += wt;
        }
        for (int op = 0; op < OP_COUNT; op++) {
            fit_param *q = &out->op[op];
            if (col[op] < 0) {
                if (per_op[op] && op_class_of((op_id)op) != OPC_ATTN) { /* pooled */
                    c->op_eff[op] = 0;
                    memset(q, 0, sizeof *q);
                }
                continue;
            }
            c->op_eff[op] = 1 / v[op];
            q->value = c->op_eff[op];
            q->se = sqrt(gsl_matrix_get(cov, (size_t)col[op], (size_t)col[op])) * q->value * q->value;
            q->fitted = 1;
            q->rows = count[op];
        }
        for (int g = 0; g < 2; g++) {
            int pooled = g == 0 ? J_GEMM : J_MEM;
            fit_param_id id = g == 0 ? FIT_GEMM_EFF : FIT_BW_EFF;
            double *sh = g == 0 ? share : share2, inv, var = 0;
            if (col[pooled] >= 0) {
                inv = v[pooled];
                var = gsl_matrix_get(cov, (size_t)col[pooled], (size_t)col[pooled]);
            } else if (wsum[g] > 0) {
                inv = wv[g] / wsum[g];
                for (int a = 0; a < p; a++)
                    for (int bb = 0; bb < p; bb++)
                        var += sh[a] * sh[bb] * gsl_matrix_get(cov, (size_t)a, (size_t)bb);
                var /= wsum[g] * wsum[g];
            } else {
                continue;
            }
            double e = 1 / inv;
            *(g == 0 ? &c->gemm_eff : &c->bw_eff) = e;
            out->param[id].se = sqrt(var > 0 ? var : 0) * e * e;
            out->param[id].fitted = 1;
            out->param[id].rows = g == 0 ? count[J_M] : (long)(n - count[J_M] - count[J_OPT]);
        }
        free(share);
        free(share2);
        if (col[J_M] >= 0) {
            double mh = v[J_M] * c->gemm_eff;
            if (mh < 0) {
                note(out, "%s", "gemm_m_half came out negative and was set to 0; ");
                mh = 0;
            }
            c->gemm_m_half = mh;
            /* the standard error of gemm_eff is small against that of the M term: left out */
            out->param[FIT_GEMM_M_HALF].se = sqrt(gsl_matrix_get(cov, (size_t)col[J_M], (size_t)col[J_M])) * c->gemm_eff;
            out->param[FIT_GEMM_M_HALF].fitted = 1;
            out->param[FIT_GEMM_M_HALF].rows = count[J_M];
        }
        if (col[J_OPT] >= 0) {
            if (v[J_OPT] < 1.0) {
                rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                                "the optimizer rows imply optim_bw_eff = %.3g, above 1",
                                v[J_OPT] > 0 ? 1 / v[J_OPT] : -1.0);
                goto free_iter;
            }
            c->optim_bw_eff = 1 / v[J_OPT];
            out->param[FIT_OPTIM_BW_EFF].se =
                sqrt(gsl_matrix_get(cov, (size_t)col[J_OPT], (size_t)col[J_OPT])) * c->optim_bw_eff * c->optim_bw_eff;
            out->param[FIT_OPTIM_BW_EFF].fitted = 1;
            out->param[FIT_OPTIM_BW_EFF].rows = count[J_OPT];
        }
        if (col[J_LAUNCH] >= 0) {
            double l = gsl_vector_get(b, (size_t)col[J_LAUNCH]);
            if (l < 0) {
                note(out, "%s", "launch_us came out negative and was set to 0; ");
                l = 0;
            }
            c->launch_us = l;
            out->param[FIT_LAUNCH_US].se = sqrt(gsl_matrix_get(cov, (size_t)col[J_LAUNCH], (size_t)col[J_LAUNCH]));
            out->param[FIT_LAUNCH_US].fitted = 1;
            out->param[FIT_LAUNCH_US].rows = (long)n;
        }
        {
            gsl_multifit_robust_stats s = gsl_multifit_robust_statistics(w);
            k = 0;
            for (size_t i = 0; i < fc->n; i++) {
                fc->rows[i].w = use[i] ? gsl_vector_get(s.weights, k++) : 1;
                fc->rows[i].in_fit = use[i] != 0;
            }
        }
    free_iter:
        if (w) gsl_multifit_robust_free(w);
        if (cov) gsl_matrix_free(cov);
        if (b) gsl_vector_free(b);
        if (y) gsl_vector_free(y);
        if (X) gsl_matrix_free(X);
        if (rc)
            goto out;
    }
out:
    free(use);
    free(prev);
    free(key);
    return rc;
}

/* ---- FMHA: the tile simulation, fitted through its decomposition ---- */

/* The simulated time is a sum of per-tile times d = attn_cta_us + flops / (slot rate x attn_eff)
 * along the slot that ends last: for a fixed schedule, T = A attn_cta_us + B / attn_eff exactly.
 * A comes from a small step in attn_cta_us, B from T itself. */
static void fmha_decompose(const hw_spec *hw, const calib_coef *c, const row_ctx *x, double *T,
                           double *A, double *B)
{
    int dir = x->r->op == OP_FMHA_BWD, n = (int)x->r->seqs, heads = x->m->heads;
    double t0 = fit_fmha_us(hw, c, heads, x->len, n, dir);
    calib_coef c2 = *c;
    double h = 1e-4 * (c->attn_cta_us > 1e-2 ? c->attn_cta_us : 1e-2);
    c2.attn_cta_us += h;
    double a = (fit_fmha_us(hw, &c2, heads, x->len, n, dir) - t0) / h;
    if (a < 0)
        a = 0;
    double b = (t0 - a * c->attn_cta_us) * c->attn_eff;
    *T = t0;
    *A = a;
    *B = b > 0 ? b : 0;
}

/* Distinct FMHA batches: every layer of a step has the same one, so it is simulated once. */
static int cmp_batch(const void *a, const void *b)
{
    const row_ctx *x = *(row_ctx *const *)a, *y = *(row_ctx *const *)b;
#define CMP(f) if (x->f != y->f) return x->f < y->f ? -1 : 1
    CMP(m);
    CMP(r->op);
    CMP(r->seqs);
    CMP(r->tokens);
    CMP(r->sum_len2);
    CMP(r->max_len);
#undef CMP
    return 0;
}

static int index_batches(fit_ctx *fc, unpad_err *err)
{
    size_t n = 0;
    for (size_t i = 0; i < fc->n; i++)
        n += fc->rows[i].len != NULL;
    row_ctx **order = malloc((n ? n : 1) * sizeof *order);
    fc->batch = malloc((n ? n : 1) * sizeof *fc->batch);
    if (!order || !fc->batch) {
        free(order);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < fc->n; i++)
        if (fc->rows[i].len)
            order[k++] = &fc->rows[i];
    qsort(order, n, sizeof *order, cmp_batch);
    fc->nbatch = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || cmp_batch(&order[i - 1], &order[i]))
            fc->batch[fc->nbatch++] = order[i];
        order[i]->batch = (int)fc->nbatch - 1;
    }
    free(order);
    return UNPAD_OK;
}

static int fit_fmha(fit_ctx *fc, calib_coef *c, fit_result *out, unpad_err *err)
{
    const hw_spec *hw = fc->hw;
    size_t n = 0;
    for (size_t i = 0; i < fc->n; i++) {
        const row_ctx *x = &fc->rows[i];
        n += x->len && !x->multi && x->r->dur_us > 0;
    }
    if (n < 3) {
        note(out, "%s", "FMHA: fewer than 3 single-stream rows, attn_eff and attn_cta_us not fitted; ");
        return UNPAD_OK;
    }
    int rc = UNPAD_OK;
    double *bt = malloc(fc->nbatch * 3 * sizeof *bt); /* per batch: T, A, B */
    size_t *idx = malloc(n * sizeof *idx);
    gsl_matrix *X = NULL, *cov = gsl_matrix_alloc(2, 2);
    gsl_vector *y = NULL, *b = gsl_vector_alloc(2);
    gsl_multifit_robust_workspace *w = NULL;
    if (!bt || !idx || !cov || !b) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    calib_coef cur = *c;
    int converged = 0;
    for (int it = 0; it < 12 && !converged; it++) {
        for (size_t q = 0; q < fc->nbatch; q++)
            fmha_decompose(hw, &cur, fc->batch[q], &bt[3 * q], &bt[3 * q + 1], &bt[3 * q + 2]);
        /* Rows whose tiles, not the memory floor, set the time: measured clearly above the floor.
         * (Judging by the tile time under the current coefficients would keep a poor initial
         * attn_eff from ever being corrected.) */
        size_t k = 0;
        for (size_t i = 0; i < fc->n; i++) {
            const row_ctx *x = &fc->rows[i];
            if (!x->len || x->multi || x->r->dur_us <= 0)
                continue;
            double mem = x->oc.bytes / (hw->mem_bw_gbs * 1e3 * cur.bw_eff);
            double t = x->r->dur_us - x->oc.launches * cur.launch_us;
            if (t > 1.05 * mem || bt[3 * x->batch] >= mem)
                idx[k++] = i;
        }
        if (k < 3) {
            note(out, "%s", "FMHA: memory-bound under the fitted bandwidth, attn_eff not fitted; ");
            goto out;
        }
        if (X && X->size1 != k) {
            gsl_matrix_free(X);
            gsl_vector_free(y);
            gsl_multifit_robust_free(w);
            X = NULL;
        }
        if (!X) {
            X = gsl_matrix_alloc(k, 2);
            y = gsl_vector_alloc(k);
            w = gsl_multifit_robust_alloc(gsl_multifit_robust_bisquare, k, 2);
            if (!X || !y || !w) {
                rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
                goto out;
            }
            gsl_multifit_robust_maxiter(200, w);
        }
        for (size_t j = 0; j < k; j++) {
            const row_ctx *x = &fc->rows[idx[j]];
            double d = x->r->dur_us;
            gsl_matrix_set(X, j, 0, bt[3 * x->batch + 1] / d);
            gsl_matrix_set(X, j, 1, bt[3 * x->batch + 2] / d);
            gsl_vector_set(y, j, (d - x->oc.launches * cur.launch_us) / d);
        }
        int st = gsl_multifit_robust(X, y, b, cov, w);
        if (st && st != GSL_EMAXITER) {
            rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0, "FMHA fit failed: %s (all batches alike?)",
                            gsl_strerror(st));
            goto out;
        }
        double cta = gsl_vector_get(b, 0), inv = gsl_vector_get(b, 1);
        if (inv < 1) {
            rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                            "the FMHA rows imply attn_eff = %.3g, above 1 (are FMHA flops and "
                            "durations per layer?)", inv > 0 ? 1 / inv : -1.0);
            goto out;
        }
        if (cta < 0) {
            note(out, "%s", "attn_cta_us came out negative and was set to 0; ");
            cta = 0;
        }
        double change = fabs(cta - cur.attn_cta_us) / (cur.attn_cta_us + 1e-3) +
                        fabs(1 / inv - cur.attn_eff) / cur.attn_eff;
        cur.attn_cta_us = cta;
        cur.attn_eff = 1 / inv;
        converged = it > 0 && change < 1e-6;
        out->param[FIT_ATTN_CTA_US].se = sqrt(gsl_matrix_get(cov, 0, 0));
        out->param[FIT_ATTN_EFF].se = sqrt(gsl_matrix_get(cov, 1, 1)) / (inv * inv);
        out->param[FIT_ATTN_EFF].rows = out->param[FIT_ATTN_CTA_US].rows = (long)k;
        gsl_multifit_robust_stats s = gsl_multifit_robust_statistics(w);
        for (size_t i = 0; i < fc->n; i++)
            if (fc->rows[i].len) {
                fc->rows[i].w = 1;
                fc->rows[i].in_fit = 0;
            }
        for (size_t j = 0; j < k; j++) {
            fc->rows[idx[j]].w = gsl_vector_get(s.weights, j);
            fc->rows[idx[j]].in_fit = 1;
        }
    }
    if (!converged)
        note(out, "%s", "FMHA: the tile schedule kept changing between iterations (last kept); ");
    c->attn_cta_us = cur.attn_cta_us;
    c->attn_eff = cur.attn_eff;
    out->param[FIT_ATTN_EFF].fitted = out->param[FIT_ATTN_CTA_US].fitted = 1;
out:
    if (w) gsl_multifit_robust_free(w);
    if (X) gsl_matrix_free(X);
    if (y) gsl_vector_free(y);
    if (cov) gsl_matrix_free(cov);
    if (b) gsl_vector_free(b);
    free(bt);
    free(idx);
    return rc;
}

/* Robust fit of y = b x (x NULL: a constant, y = b) over n points; weights to w (may be NULL). */
static int fit_one(const double *xv, const double *yv, size_t n, double *b, double *se, double *w)
{
    gsl_matrix *X = gsl_matrix_alloc(n, 1);
    gsl_vector *y = gsl_vector_alloc(n), *c = gsl_vector_alloc(1);
    gsl_matrix *cov = gsl_matrix_alloc(1, 1);
    gsl_multifit_robust_workspace *ws = gsl_multifit_robust_alloc(gsl_multifit_robust_bisquare, n, 1);
    int st = GSL_ENOMEM;
    if (X && y && c && cov && ws) {
        for (size_t i = 0; i < n; i++) {
            gsl_matrix_set(X, i, 0, xv ? xv[i] : 1.0);
            gsl_vector_set(y, i, yv[i]);
        }
        gsl_multifit_robust_maxiter(200, ws);
        st = gsl_multifit_robust(X, y, c, cov, ws);
        if (st == GSL_EMAXITER)
            st = GSL_SUCCESS;
        if (!st) {
            *b = gsl_vector_get(c, 0);
            *se = sqrt(gsl_matrix_get(cov, 0, 0));
            if (w) {
                gsl_multifit_robust_stats s = gsl_multifit_robust_statistics(ws);
                for (size_t i = 0; i < n; i++)
                    w[i] = gsl_vector_get(s.weights, i);
            }
        }
    }
    if (ws) gsl_multifit_robust_free(ws);
    if (cov) gsl_matrix_free(cov);
    if (c) gsl_vector_free(c);
    if (y) gsl_vector_free(y);
    if (X) gsl_matrix_free(X);
    return st;
}

/* Collectives: per set, step and operator the fastest rank's row (the others waited). */
static int fit_comm(fit_ctx *fc, row_ctx **sorted, calib_coef *c, fit_result *out, unpad_err *err)
{
    const hw_spec *hw = fc->hw;
    size_t cap = 0;
    for (size_t i = 0; i < fc->n; i++)
        cap += op_class_of(sorted[i]->oc.op) == OPC_COMM;
    if (!cap)
        return UNPAD_OK;
    double *xv = malloc(cap * sizeof *xv), *yv = malloc(cap * sizeof *yv), *wv = malloc(cap * sizeof *wv);
    row_ctx **who = malloc(cap * sizeof *who);
    int rc = UNPAD_OK;
    if (!xv || !yv || !wv || !who) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    /* sorted is by set, step, rank, op, ...: find, per (set, step, op), the minimum duration. */
    size_t n = 0;
    for (size_t i = 0; i < fc->n; i++) {
        row_ctx *r = sorted[i];
        if (op_class_of(r->oc.op) != OPC_COMM || r->r->gpus < 2 || r->r->dur_us <= 0 || r->oc.bytes <= 0)
            continue;
        size_t j;
        for (j = 0; j < n; j++)
            if (who[j]->set == r->set && who[j]->r->step == r->r->step && who[j]->r->op == r->r->op)
                break;
        if (j == n)
            who[n++] = r;
        else if (r->r->dur_us < who[j]->r->dur_us)
            who[j] = r;
    }
    if (n < 3) {
        if (n)
            note(out, "%s", "collectives: fewer than 3 steps with all-reduce rows, comm_eff not fitted; ");
        goto out;
    }
    for (size_t j = 0; j < n; j++) {
        const trace_row *r = who[j]->r;
        double lat = r->op == OP_ALLREDUCE ? hw->link_lat_us * ceil(log2((double)r->gpus)) : hw->link_lat_us;
        xv[j] = who[j]->oc.bytes / (hw->link_bw_gbs * 1e3) / r->dur_us;
        yv[j] = (r->dur_us - lat) / r->dur_us;
    }
    double b, se;
    if (fit_one(xv, yv, n, &b, &se, wv) || b < 1.0) {
        rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                        "the all-reduce rows imply comm_eff = %.3g, not in (0, 1] (is link_bw_gbs in "
                        "the hardware spec a bus bandwidth?)", b > 0 ? 1 / b : -1.0);
        goto out;
    }
    c->comm_eff = 1 / b;
    out->param[FIT_COMM_EFF].value = c->comm_eff;
    out->param[FIT_COMM_EFF].se = se * c->comm_eff * c->comm_eff;
    out->param[FIT_COMM_EFF].fitted = 1;
    out->param[FIT_COMM_EFF].rows = (long)n;
    for (size_t j = 0; j < n; j++) {
        who[j]->w = wv[j];
        who[j]->in_fit = 1;
    }
out:
    free(xv);
    free(yv);
    free(wv);
    free(who);
    return rc;
}


/* Step overhead: the idle time inside each (set, step, rank), its robust location. */
static int fit_overhead(fit_ctx *fc, row_ctx **sorted, calib_coef *c, fit_result *out,
                        double **gaps_out, double **spans_out, size_t *ngaps, unpad_err *err)
{
    trace_span *sp = malloc(fc->n * sizeof *sp);
    double *gap = malloc(fc->n * sizeof *gap), *tot = malloc(fc->n * sizeof *tot);
    int rc = UNPAD_OK;
    size_t n = 0, skipped = 0;
    if (!sp || !gap || !tot) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < fc->n;) {
        size_t j = i, k = 0;
        double sum = 0;
        while (j < fc->n && sorted[j]->set == sorted[i]->set && sorted[j]->r->step == sorted[i]->r->step &&
               sorted[j]->r->rank == sorted[i]->r->rank) {
            const trace_row *r = sorted[j]->r;
            sp[k].start = r->start_us;
            sp[k].end = r->start_us + r->dur_us;
            sum += r->dur_us;
            k++;
            j++;
        }
        double first = sp[0].start, last = sp[0].end;
        for (size_t q = 1; q < k; q++) {
            if (sp[q].start < first)
                first = sp[q].start;
            if (sp[q].end > last)
                last = sp[q].end;
        }
        double busy = trace_span_union(sp, k);
        /* Rows that overlap far beyond a few streams mean start_us was not recorded. */
        if (k > 1 && sum <= 1.5 * busy) {
            gap[n] = (last - first) - busy;
            tot[n] = last - first;
            n++;
        } else {
            skipped++;
        }
        i = j;
    }
    if (skipped)
        note(out, "%s", "step overhead: steps whose rows overlap (no usable start_us) were left out; ");
    if (n < 2) {
        note(out, "%s", "step overhead: fewer than 2 steps with start times, not fitted; ");
        goto out;
    }
    double b, se;
    if (fit_one(NULL, gap, n, &b, &se, NULL)) {
        rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0, "step-overhead fit failed");
        goto out;
    }
    c->step_overhead_us = b > 0 ? b : 0;
    out->param[FIT_STEP_OVERHEAD_US].se = se;
    out->param[FIT_STEP_OVERHEAD_US].fitted = 1;
    out->param[FIT_STEP_OVERHEAD_US].rows = (long)n;
out:
    free(sp);
    *gaps_out = gap;
    *spans_out = tot;
    *ngaps = n;
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Residual summary of values e[0..n) (relative errors) with their keep flags. */
static void summarize(fit_resid *s, const double *e, const char *keep, size_t n, double *scratch)
{
    size_t k = 0;
    double sum = 0, sum2 = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        if (!keep[i])
            continue;
        double a = fabs(e[i]) * 100;
        scratch[k++] = a;
        sum += e[i] * 100;
        sum2 += e[i] * e[i] * 1e4;
        if (a > mx)
            mx = a;
    }
    s->rows = (long)n;
    s->rejected = (long)(n - k);
    if (!k)
        return;
    qsort(scratch, k, sizeof *scratch, cmp_double);
    s->median_abs_pct = k % 2 ? scratch[k / 2] : 0.5 * (scratch[k / 2 - 1] + scratch[k / 2]);
    s->max_abs_pct = mx;
    s->rms_pct = sqrt(sum2 / (double)k);
    s->bias_pct = sum / (double)k;
}

static void free_ctx(fit_ctx *fc)
{
    for (size_t i = 0; i < fc->n; i++)
        free(fc->rows[i].len);
    free(fc->rows);
    free(fc->batch);
    fc->rows = NULL;
    fc->batch = NULL;
    fc->n = fc->nbatch = 0;
}

/* Builds the per-row context; rows without a duration stay out. */
static int build_ctx(const trace_set *sets, int nsets, const model_cfg *models, int n_models,
                     const hw_spec *hw, fit_ctx *fc, long *skipped, unpad_err *err)
{
    size_t total = 0;
    for (int s = 0; s < nsets; s++)
        total += sets[s].n;
    fc->hw = hw;
    fc->n = 0;
    fc->rows = calloc(total ? total : 1, sizeof *fc->rows);
    if (!fc->rows)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    *skipped = 0;
    for (int s = 0; s < nsets; s++)
        for (size_t i = 0; i < sets[s].n; i++) {
            const trace_row *r = &sets[s].rows[i];
            const model_cfg *m = fit_model_find(models, n_models, r->model);
            if (!m) {
                free_ctx(fc);
                return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                                  "trace rows of model '%s' but no such model config was given "
                                  "(pass --model models/%s.cfg)", r->model, r->model);
            }
            if (r->dur_us <= 0) {
                (*skipped)++;
                continue;
            }
            row_ctx *x = &fc->rows[fc->n];
            x->r = r;
            x->m = m;
            x->set = s;
            x->w = 1;
            int *len = NULL;
            int rc = row_cost_lens(m, r, &x->oc, &len, err);
            if (rc) {
                char msg[UNPAD_ERR_LEN];
                snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
                free_ctx(fc);
                return unpad_fail(err, rc, NULL, 0, "trace %d, row %zu: %s", s + 1, i + 1, msg);
            }
            if (r->op == OP_FMHA_FWD || r->op == OP_FMHA_BWD)
                x->len = len;
            else
                free(len);
            fc->n++;
        }
    return UNPAD_OK;
}

/* Marks FMHA rows whose (set, step, rank, op, layer) holds several streams. */
static void mark_multi(fit_ctx *fc, row_ctx **sorted)
{
    for (size_t i = 0; i < fc->n;) {
        size_t j = i + 1;
        while (j < fc->n && sorted[j]->set == sorted[i]->set && sorted[j]->r->step == sorted[i]->r->step &&
               sorted[j]->r->rank == sorted[i]->r->rank && sorted[j]->r->op == sorted[i]->r->op &&
               sorted[j]->r->layer == sorted[i]->r->layer)
            j++;
        int multi = 0;
        for (size_t k = i + 1; k < j; k++)
            multi |= sorted[k]->r->stream != sorted[i]->r->stream;
        for (size_t k = i; k < j; k++)
            sorted[k]->multi = multi;
        i = j;
    }
}

int fit_calibrate(const trace_set *sets, int nsets, const model_cfg *models, int n_models,
                  const hw_spec *hw, const calib_coef *init, fit_result *out, unpad_err *err)
{
    memset(out, 0, sizeof *out);
    out->coef = *init;
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    fit_ctx fc = {0};
    row_ctx **sorted = NULL;
    double *gaps = NULL, *spans = NULL, *e = NULL, *scratch = NULL, *sim = NULL;
    char *keep = NULL;
    size_t ngaps = 0;
    int rc = build_ctx(sets, nsets, models, n_models, hw, &fc, &out->rows_skipped, err);
    if (rc)
        goto out;
    if (out->rows_skipped)
        note(out, "%s", "rows with dur_us = 0 were left out; ");
    out->rows_used = (long)fc.n;
    sorted = malloc((fc.n ? fc.n : 1) * sizeof *sorted);
    e = malloc((fc.n ? fc.n : 1) * sizeof *e);
    scratch = malloc((fc.n ? fc.n : 1) * sizeof *scratch);
    keep = malloc(fc.n ? fc.n : 1);
    if (!sorted || !e || !scratch || !keep) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < fc.n; i++)
        sorted[i] = &fc.rows[i];
    qsort(sorted, fc.n, sizeof *sorted, cmp_rowkey);
    mark_multi(&fc, sorted);

    if ((rc = index_batches(&fc, err)))
        goto out;
    calib_coef *c = &out->coef;
    if ((rc = fit_joint(&fc, c, out, err)) || (rc = fit_fmha(&fc, c, out, err)) ||
        (rc = fit_comm(&fc, sorted, c, out, err)) ||
        (rc = fit_overhead(&fc, sorted, c, out, &gaps, &spans, &ngaps, err)))
        goto out;
    for (int p = 0; p < FIT_NPARAM; p++)
        out->param[p].value = *coef_field(c, (fit_param_id)p);
    c->fitted = 1;
    snprintf(c->hw, sizeof c->hw, "%s", hw->name);

    /* Residuals of every row under the fitted coefficients, per operator class. */
    if (fc.nbatch && !(sim = malloc(fc.nbatch * sizeof *sim))) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    for (size_t q = 0; q < fc.nbatch; q++) {
        const row_ctx *x = fc.batch[q];
        sim[q] = fit_fmha_us(hw, c, x->m->heads, x->len, (int)x->r->seqs, x->r->op == OP_FMHA_BWD);
    }
    for (int g = 0; g < OPC_COUNT; g++) {
        size_t k = 0;
        for (size_t i = 0; i < fc.n; i++) {
            const row_ctx *x = &fc.rows[i];
            if ((int)op_class_of(x->oc.op) != g || (g == OPC_COMM && !x->in_fit))
                continue;
            double p;
            if (x->len) {
                double mem = x->oc.bytes / (hw->mem_bw_gbs * 1e3 * c->bw_eff);
                p = (sim[x->batch] > mem ? sim[x->batch] : mem) + x->oc.launches * c->launch_us;
            } else {
                p = row_time(x->m, hw, c, x->r, &x->oc, x->len);
            }
            e[k] = (p - x->r->dur_us) / x->r->dur_us;
            keep[k] = x->in_fit ? x->w > REJECT_WEIGHT : 2; /* 2: decided below */
            k++;
        }
        /* Rows no fit weighed (e.g. memory-bound GEMMs): outliers by the same bisquare cut-off on
         * the group's robust scale. */
        size_t ks = 0;
        for (size_t i = 0; i < k; i++)
            if (keep[i] == 1)
                scratch[ks++] = fabs(e[i]);
        double scale = 0;
        if (ks) {
            qsort(scratch, ks, sizeof *scratch, cmp_double);
            scale = 1.4826 * scratch[ks / 2];
        }
        for (size_t i = 0; i < k; i++)
            if (keep[i] == 2)
                keep[i] = !ks || fabs(e[i]) <= 4.685 * scale;
        summarize(&out->resid[g], e, keep, k, scratch);
    }
    if (ngaps) {
        for (size_t i = 0; i < ngaps; i++) {
            e[i] = (c->step_overhead_us - gaps[i]) / spans[i];
            keep[i] = 1;
        }
        summarize(&out->resid[FIT_GROUP_STEP], e, keep, ngaps, scratch);
    }
out:
    gsl_set_error_handler(old);
    free(sim);
    free(gaps);
    free(spans);
    free(e);
    free(scratch);
    free(keep);
    free(sorted);
    free_ctx(&fc);
    return rc;
}

int fit_write_residuals(const char *path, const trace_set *sets, int nsets, const model_cfg *models,
                        int n_models, const hw_spec *hw, const calib_coef *c, unpad_err *err)
{
    unpad_outfile *o;
    int rc = outfile_open(path, &o, err);
    if (rc)
        return rc;
    FILE *f = outfile_stream(o);
    fprintf(f, "trace,step,rank,op,layer,group,stream,measured_us,predicted_us,err_pct\n");
    for (int s = 0; s < nsets && !rc; s++)
        for (size_t i = 0; i < sets[s].n; i++) {
            const trace_row *r = &sets[s].rows[i];
            const model_cfg *m = fit_model_find(models, n_models, r->model);
            double p;
            if (!m) {
                rc = unpad_fail(err, UNPAD_EINVAL, NULL, 0, "no model config '%s'", r->model);
                break;
            }
            if (r->dur_us <= 0)
                continue;
            if ((rc = fit_row_predict(m, hw, c, r, &p, err)))
                break;
            fprintf(f, "%d,%d,%d,%s,%d,%d,%d,%.3f,%.3f,%.3f\n", s + 1, r->step, r->rank,
                    op_name((op_id)r->op), r->layer, r->group, r->stream, r->dur_us, p,
                    100 * (p - r->dur_us) / r->dur_us);
        }
    if (rc) {
        outfile_abort(o);
        return rc;
    }
    return outfile_commit(o, err);
}

void fit_print(FILE *f, const fit_result *r, const calib_coef *init)
{
    fprintf(f, "%-18s %14s %12s %10s %8s\n", "coefficient", "fitted", "std. error", "initial", "rows");
    calib_coef ini = *init;
    for (int p = 0; p < FIT_NPARAM; p++) {
        const fit_param *q = &r->param[p];
        double v0 = *coef_field(&ini, (fit_param_id)p);
        if (q->fitted)
            fprintf(f, "%-18s %14.6g %12.3g %10.4g %8ld\n", PARAM_NAMES[p], q->value, q->se, v0, q->rows);
        else
            fprintf(f, "%-18s %14.6g %12s %10.4g %8s\n", PARAM_NAMES[p], q->value, "(kept)", v0, "-");
    }
    fprintf(f, "%-18s %14.6g %12s %10.4g %8s\n", "attn_ctas_per_sm", r->coef.attn_ctas_per_sm,
            "(kept)", init->attn_ctas_per_sm, "-");
    int any = 0;
    for (int op = 0; op < OP_COUNT; op++)
        any |= r->op[op].fitted;
    if (any) {
        fprintf(f, "\nper-operator efficiency (GEMM: of bf16 peak at large M, with the shared small-M term;\n"
                   "memory-bound: of bandwidth); others use the class value above\n");
        fprintf(f, "%-18s %14s %12s %10s %8s\n", "operator", "eff", "std. error", "class", "rows");
        for (int op = 0; op < OP_COUNT; op++) {
            const fit_param *q = &r->op[op];
            if (!q->fitted)
                continue;
            int gemm = op_class_of((op_id)op) == OPC_GEMM;
            fprintf(f, "eff_%-14s %14.6g %12.3g %10s %8ld\n", op_name((op_id)op), q->value, q->se,
                    gemm ? "gemm" : "bandwidth", q->rows);
        }
    }
    fprintf(f, "\nresiduals: (predicted - measured) / measured, %% (outliers: rows a robust fit set aside,\n"
               "not in the statistics; step overhead: %% of the step span)\n");
    fprintf(f, "%-15s %8s %8s %10s %9s %8s %8s\n", "class", "rows", "outliers", "median|e|", "max|e|",
            "rms", "bias");
    for (int g = 0; g < FIT_NGROUP; g++) {
        const fit_resid *s = &r->resid[g];
        if (!s->rows)
            continue;
        fprintf(f, "%-15s %8ld %8ld %10.3f %9.3f %8.3f %+8.3f\n", fit_group_name(g), s->rows,
                s->rejected, s->median_abs_pct, s->max_abs_pct, s->rms_pct, s->bias_pct);
    }
    fprintf(f, "rows used %ld, left out %ld\n", r->rows_used, r->rows_skipped);
    if (r->notes[0])
        fprintf(f, "notes: %s\n", r->notes);
}

/* ---- cross-hardware transfer ------------------------------------------------------------------ */

void fit_transfer(const calib_coef *src, const hw_spec *from, const hw_spec *to, calib_coef *out)
{
    *out = *src;
    snprintf(out->hw, sizeof out->hw, "%s", to->name);
    if (from->sms > 0)
        out->gemm_m_half = src->gemm_m_half * to->sms / from->sms;
    if (to->clock_ghz > 0)
        out->attn_cta_us = src->attn_cta_us * from->clock_ghz / to->clock_ghz;
    if (from->launch_us > 0)
        out->launch_us = src->launch_us * to->launch_us / from->launch_us;
}

/* ---- synthetic traces ------------------------------------------------------------------------- */

int fit_synth_write(FILE *f, const model_cfg *m, const hw_spec *hw, const calib_coef *truth,
                    const unpad_dist *dist, const fit_synth_opts *o, unpad_err *err)
{
    static const op_id fwd_layer[] = {OP_QKV_FWD, OP_FMHA_FWD, OP_ATTN_OUT_FWD, OP_ATTN_LN_FWD,
                                      OP_FFN1_FWD, OP_FFN2_FWD, OP_FFN_LN_FWD};
    static const op_id bwd_layer[] = {OP_FFN_LN_BWD, OP_FFN2_BWD, OP_FFN1_BWD, OP_ATTN_LN_BWD,
                                      OP_ATTN_OUT_BWD, OP_FMHA_BWD, OP_QKV_BWD};
    static const op_id head_ops[] = {OP_MLM_HEAD_FWD, OP_NSP_HEAD_FWD, OP_LOSS_FWD, OP_LOSS_BWD,
                                     OP_NSP_HEAD_BWD, OP_MLM_HEAD_BWD};
    if (o->gpus < 1 || o->steps < 1 || o->batch < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "synthetic trace needs gpus, steps, batch >= 1");
    dist_sampler *smp = NULL;
    int rc = dist_sampler_alloc(dist, o->seed, &smp, err);
    if (rc)
        return rc;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    int *len = malloc(sizeof *len * (size_t)o->batch);
    cost_step *st = malloc(sizeof *st * (size_t)o->gpus);
    double *ends = malloc(sizeof *ends * (size_t)o->gpus);
    if (!rng || !len || !st || !ends) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    gsl_rng_set(rng, o->seed + 1);
    fprintf(f, "# SYNTHETIC trace (not a measurement): cost-model times under gemm_eff=%g gemm_m_half=%g "
               "attn_eff=%g attn_cta_us=%g bw_eff=%g launch_us=%g optim_bw_eff=%g comm_eff=%g "
               "step_overhead_us=%g, noise %g, outliers %g x%g, seed %lu\n",
            truth->gemm_eff, truth->gemm_m_half, truth->attn_eff, truth->attn_cta_us, truth->bw_eff,
            truth->launch_us, truth->optim_bw_eff, truth->comm_eff, truth->step_overhead_us, o->noise,
            o->outlier_frac, o->outlier_scale, o->seed);
    trace_write_header(f);
    double t0 = 0;
    for (int step = 0; step < o->steps; step++) {
        for (int g = 0; g < o->gpus; g++) {
            dist_sample(smp, len, o->batch);
            op_batch b = {.len = len, .n = o->batch, .fused = 1, .gpus = o->gpus, .dropout = 1};
            if ((rc = cost_predict_step(m, hw, truth, &b, &st[g], err)))
                goto out;
        }
        /* Rows of every rank up to the all-reduce; then the all-reduce, which ends together. */
        trace_row r;
        memset(&r, 0, sizeof r);
        snprintf(r.hw, sizeof r.hw, "%.63s", hw->name);
        snprintf(r.model, sizeof r.model, "%.63s", m->name);
        r.gpus = o->gpus;
        r.step = step;
        r.group = r.stream = -1;
        double last_end = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (int g = 0; g < o->gpus; g++) {
                const cost_step *s = &st[g];
                double t = t0;
                r.rank = g;
#define EMIT(op_, layer_)                                                                          \
    do {                                                                                           \
        const op_cost *oc = &s->ops[op_];                                                          \
        double d = s->time_us[op_] * (1 + o->noise * gsl_ran_gaussian(rng, 1.0));                  \
        if (gsl_rng_uniform(rng) < o->outlier_frac)                                                \
            d *= o->outlier_scale;                                                                 \
        if (d < 0.01)                                                                              \
            d = 0.01;                                                                              \
        r.op = op_;                                                                                \
        r.layer = layer_;                                                                          \
        r.seqs = oc->seqs;                                                                         \
        r.tokens = oc->tokens;                                                                     \
        r.sum_len2 = oc->sum_len2;                                                                 \
        r.max_len = oc->max_len;                                                                   \
        r.flops = oc->flops;                                                                       \
        r.bytes = oc->bytes;                                                                       \
        r.start_us = t;                                                                            \
        r.dur_us = d;                                                                              \
        t += d;                                                                                    \
        trace_write_row(f, &r);                                                                    \
    } while (0)
                if (pass == 0) {
                    if (o->gpus > 1)
                        EMIT(OP_EXCHANGE, -1);
                    EMIT(OP_EMBED_FWD, -1);
                    for (int l = 0; l < m->layers; l++)
                        for (size_t q = 0; q < sizeof fwd_layer / sizeof *fwd_layer; q++)
                            EMIT(fwd_layer[q], l);
                    for (size_t q = 0; q < sizeof head_ops / sizeof *head_ops; q++)
                        EMIT(head_ops[q], -1);
                    for (int l = m->layers - 1; l >= 0; l--)
                        for (size_t q = 0; q < sizeof bwd_layer / sizeof *bwd_layer; q++)
                            EMIT(bwd_layer[q], l);
                    EMIT(OP_EMBED_BWD, -1);
                    /* host work and synchronisation before the all-reduce */
                    t += truth->step_overhead_us * (1 + o->overhead_jitter * gsl_ran_gaussian(rng, 1.0));
                    ends[g] = t;
                    if (t > last_end)
                        last_end = t;
                } else {
                    t = ends[g];
                    if (o->gpus > 1) {
                        /* A faster rank's all-reduce waits for the slowest rank. */
                        double wait = last_end - ends[g];
                        const op_cost *oc = &s->ops[OP_ALLREDUCE];
                        double d = s->time_us[OP_ALLREDUCE] * (1 + o->noise * gsl_ran_gaussian(rng, 1.0));
                        r.op = OP_ALLREDUCE;
                        r.layer = -1;
                        r.seqs = oc->seqs;
                        r.tokens = oc->tokens;
                        r.sum_len2 = oc->sum_len2;
                        r.max_len = oc->max_len;
                        r.flops = oc->flops;
                        r.bytes = oc->bytes;
                        r.start_us = t;
                        r.dur_us = d + wait;
                        t += r.dur_us;
                        trace_write_row(f, &r);
                    }
                    EMIT(OP_LAMB, -1);
                    ends[g] = t;
                }
#undef EMIT
            }
        }
        double next = 0;
        for (int g = 0; g < o->gpus; g++)
            if (ends[g] > next)
                next = ends[g];
        t0 = next;
    }
    if (ferror(f))
        rc = unpad_fail(err, UNPAD_EIO, NULL, 0, "write failed");
out:
    free(len);
    free(st);
    free(ends);
    if (rng)
        gsl_rng_free(rng);
    dist_sampler_free(smp);
    return rc;
}
