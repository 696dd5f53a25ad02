/* fit.c — calibration: the cost model's coefficients fitted to measured trace rows (the models
 * are in fit.h). */
#include "fit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "robust.h"

/* ---- calibration ------------------------------------------------------------------------------ */

static const char *PARAM_NAMES[FIT_NPARAM] = {
    "gemm_eff", "gemm_m_half", "attn_eff", "attn_cta_us", "attn_bwd_eff", "attn_bwd_cta_us", "bw_eff",
    "launch_us", "optim_bw_eff", "comm_eff", "step_overhead_us", "gemm_narrow", "bw_narrow",
    "attn_narrow", "attn_bwd_narrow", "attn_load", "attn_bwd_load", "host_launch_us", "graph_launch_us",
    "graph_step_overhead_us"};

const char *fit_param_name(fit_param_id p) { return p < FIT_NPARAM ? PARAM_NAMES[p] : "?"; }

const char *fit_group_name(int g)
{
    return g == FIT_GROUP_STEP ? "step overhead" : g == FIT_GROUP_GRAPHS ? "graph steps" : op_class_name((op_class)g);
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

double *fit_param_field(calib_coef *c, fit_param_id p)
{
    switch (p) {
    case FIT_GEMM_EFF: return &c->gemm_eff;
    case FIT_GEMM_M_HALF: return &c->gemm_m_half;
    case FIT_ATTN_EFF: return &c->attn_eff;
    case FIT_ATTN_CTA_US: return &c->attn_cta_us;
    case FIT_ATTN_BWD_EFF: return &c->attn_bwd_eff;
    case FIT_ATTN_BWD_CTA_US: return &c->attn_bwd_cta_us;
    case FIT_BW_EFF: return &c->bw_eff;
    case FIT_LAUNCH_US: return &c->launch_us;
    case FIT_OPTIM_BW_EFF: return &c->optim_bw_eff;
    case FIT_COMM_EFF: return &c->comm_eff;
    case FIT_STEP_OVERHEAD_US: return &c->step_overhead_us;
    case FIT_GEMM_NARROW: return &c->gemm_narrow;
    case FIT_BW_NARROW: return &c->bw_narrow;
    case FIT_ATTN_NARROW: return &c->attn_narrow;
    case FIT_ATTN_BWD_NARROW: return &c->attn_bwd_narrow;
    case FIT_ATTN_LOAD: return &c->attn_load;
    case FIT_ATTN_BWD_LOAD: return &c->attn_bwd_load;
    case FIT_HOST_LAUNCH_US: return &c->host_launch_us;
    case FIT_GRAPH_LAUNCH_US: return &c->graph_launch_us;
    case FIT_GRAPH_STEP_OVERHEAD_US: return &c->graph_step_overhead_us;
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
    if (cost_flops_only(c, oc->op))
        return 0;
    double t_mem = oc->bytes / (hw->mem_bw_gbs * 1e3 * cost_bw_eff(c, oc->op, oc->width));
    double t_flop = (oc->flops - oc->tensor_flops) / (hw->peak_fp32_tflops * 1e6);
    if (oc->tensor_flops > 0)
        t_flop += oc->tensor_flops * cost_tensor_us(hw, c->fp8, oc->op) / cost_gemm_eff(c, oc->op, oc->rows, oc->width);
    return t_mem >= t_flop;
}

/* Joint-fit unknowns: one inverse efficiency per operator (index op_id), then the pooled GEMM and
 * memory-bound inverse efficiencies of operators with too few rows, the shared small-M term
 * m_half / gemm_eff, the optimizer's inverse efficiency and the launch overhead. */
enum { J_GEMM = OP_COUNT, J_MEM, J_M, J_OPT, J_LAUNCH, J_GW, J_BW, J_N };

/* One iteration of the joint fit: which rows take part and as what, the unknowns present, and
 * the values fitted. */
typedef struct {
    char *use;            /* (rows) 0: left out; 1 compute-bound GEMM, 2 memory-bound, 3 optimizer */
    int *key;             /* (rows) the unknown of each row used */
    long per_op[OP_COUNT], count[J_N];
    size_t n;             /* the rows used */
    int col[J_N], p;      /* each unknown's column (-1: absent) and the columns in all */
    double v[J_N];        /* the fitted inverse efficiencies (and the M term, launch) */
    int m_refused;        /* a fit with the small-M term gave an efficiency above 1 */
    int m_fixed;          /* so it is left out: gemm_m_half set to 0 */
} joint_iter;

/* Classifies the rows under the current coefficients c: GEMMs that are compute-bound, memory
 * kernels and the optimizer that are memory-bound; each row's unknown (its operator's, or the
 * pooled one of its class when the operator has too few rows), and the columns present. */
static void joint_classify(const fit_ctx *fc, const calib_coef *c, joint_iter *it)
{
    const hw_spec *hw = fc->hw;
    memset(it->per_op, 0, sizeof it->per_op);
    memset(it->count, 0, sizeof it->count);
    it->n = 0;
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
        it->use[i] = (char)u;
        if (u == 1 || u == 2)
            it->per_op[x->oc.op]++;
    }
    for (size_t i = 0; i < fc->n; i++) {
        if (!it->use[i])
            continue;
        op_id op = fc->rows[i].oc.op;
        it->key[i] = it->use[i] == 3 ? J_OPT : it->per_op[op] >= FIT_OP_MIN_ROWS ? (int)op
                                             : it->use[i] == 1 ? J_GEMM : J_MEM;
        it->count[it->key[i]]++;
        if (it->use[i] == 1)
            it->count[J_M]++;
        it->n++;
    }
    it->m_fixed = it->count[J_M] > 0 && it->m_refused;
    /* The width terms need rows of two widths in their class (else they are the per-operator
     * efficiencies over again). */
    long wide[2] = {0}, narrow[2] = {0};
    for (size_t i = 0; i < fc->n; i++)
        if (it->use[i] == 1 || it->use[i] == 2) {
            int g = it->use[i] - 1;
            (calib_narrow(fc->rows[i].oc.width) != 0 ? narrow : wide)[g]++;
        }
    it->count[J_GW] = wide[0] && narrow[0] ? narrow[0] : 0;
    it->count[J_BW] = wide[1] && narrow[1] ? narrow[1] : 0;
    /* Unknowns present in the data; the others keep their values. */
    it->p = 0;
    for (int j = 0; j < J_N; j++)
        it->col[j] = j != J_LAUNCH && it->count[j] && !(j == J_M && it->m_fixed) ? it->p++ : -1;
    if (it->n)
        it->col[J_LAUNCH] = it->p++;
}

/* The equations: every row used, divided by its duration (relative residuals); c says at which
 * peak the GEMM rows' products ran (cost_tensor_us). */
static void joint_equations(const fit_ctx *fc, const calib_coef *c, const joint_iter *it, robust_fit *rf)
{
    const hw_spec *hw = fc->hw;
    double fp32 = hw->peak_fp32_tflops * 1e6;
    double bw = hw->mem_bw_gbs * 1e3;
    gsl_matrix *X = rf->X;
    const int *col = it->col;
    size_t k = 0;
    for (size_t i = 0; i < fc->n; i++) {
        if (!it->use[i])
            continue;
        const row_ctx *x = &fc->rows[i];
        const op_cost *o = &x->oc;
        double d = x->r->dur_us, yy = d;
        double nw = calib_narrow(o->width);
        if (it->use[i] == 1) {
            double tf = o->tensor_flops * cost_tensor_us(hw, c->fp8, o->op); /* us at efficiency 1 */
            gsl_matrix_set(X, k, (size_t)col[it->key[i]], tf / d);
            if (col[J_M] >= 0)
                gsl_matrix_set(X, k, (size_t)col[J_M], (1 + nw) * tf / o->rows / d);
            if (col[J_GW] >= 0)
                gsl_matrix_set(X, k, (size_t)col[J_GW], nw * tf / d);
            yy -= (o->flops - o->tensor_flops) / fp32;
        } else {
            gsl_matrix_set(X, k, (size_t)col[it->key[i]], o->bytes / bw / d);
            if (it->use[i] == 2 && col[J_BW] >= 0)
                gsl_matrix_set(X, k, (size_t)col[J_BW], nw * o->bytes / bw / d);
        }
        gsl_matrix_set(X, k, (size_t)col[J_LAUNCH], o->launches / d);
        gsl_vector_set(rf->y, k, yy / d);
        k++;
    }
}

/* Inverse efficiencies must exceed 1 (an efficiency above 1 means the counts are wrong). */
static int joint_check(const joint_iter *it, unpad_err *err)
{
    for (int j = 0; j <= J_MEM; j++) {
        if (it->col[j] < 0 || j == J_M)
            continue;
        int gemm = j == J_GEMM || (j < OP_COUNT && op_class_of((op_id)j) == OPC_GEMM);
        if (it->v[j] <= 1.0)
            return unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                              "the %s rows imply an efficiency of %.3g, not in (0, 1]: are flops and "
                              "bytes in the traces per operator instance and durations in "
                              "microseconds?", j < OP_COUNT ? op_name((op_id)j) : gemm ? "GEMM" : "memory-bound",
                              it->v[j] > 0 ? 1 / it->v[j] : -1.0);
    }
    return UNPAD_OK;
}

/* Per-operator efficiencies; the class values gemm_eff and bw_eff are the pooled column when some
 * operator had too few rows, else the work-weighted mean over the rows fitted (tensor FLOPs for
 * GEMMs, bytes for memory-bound kernels), with its standard error from the covariance of the
 * columns it combines. */
static int joint_store_classes(const fit_ctx *fc, const joint_iter *it, const robust_fit *rf, calib_coef *c,
                               fit_result *out, unpad_err *err)
{
    const int *col = it->col;
    const double *v = it->v;
    int p = it->p;
    double wsum[2] = {0}, wv[2] = {0};
    double *share = calloc((size_t)p, sizeof *share), *share2 = calloc((size_t)p, sizeof *share2);
    if (!share || !share2) {
        free(share);
        free(share2);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    for (size_t i = 0; i < fc->n; i++) {
        if (it->use[i] != 1 && it->use[i] != 2)
            continue;
        int g = it->use[i] == 1 ? 0 : 1;
        double wt = g == 0 ? fc->rows[i].oc.tensor_flops : fc->rows[i].oc.bytes;
        wsum[g] += wt;
        wv[g] += wt * v[it->key[i]];
        (g == 0 ? share : share2)[col[it->key[i]]] += wt;
    }
    for (int op = 0; op < OP_COUNT; op++) {
        fit_param *q = &out->op[op];
        if (col[op] < 0) {
            if (it->per_op[op] && op_class_of((op_id)op) != OPC_ATTN) { /* pooled */
                c->op_eff[op] = 0;
                memset(q, 0, sizeof *q);
            }
            continue;
        }
        c->op_eff[op] = 1 / v[op];
        q->value = c->op_eff[op];
        q->se = robust_se(rf, (size_t)col[op]) * q->value * q->value;
        q->fitted = 1;
        q->rows = it->count[op];
    }
    for (int g = 0; g < 2; g++) {
        int pooled = g == 0 ? J_GEMM : J_MEM;
        fit_param_id id = g == 0 ? FIT_GEMM_EFF : FIT_BW_EFF;
        double *sh = g == 0 ? share : share2, inv, var = 0;
        if (col[pooled] >= 0) {
            inv = v[pooled];
            var = robust_cov(rf, (size_t)col[pooled], (size_t)col[pooled]);
        } else if (wsum[g] > 0) {
            inv = wv[g] / wsum[g];
            for (int a = 0; a < p; a++)
                for (int bb = 0; bb < p; bb++)
                    var += sh[a] * sh[bb] * robust_cov(rf, (size_t)a, (size_t)bb);
            var /= wsum[g] * wsum[g];
        } else {
            continue;
        }
        double e = 1 / inv;
        *(g == 0 ? &c->gemm_eff : &c->bw_eff) = e;
        out->param[id].se = sqrt(var > 0 ? var : 0) * e * e;
        out->param[id].fitted = 1;
        out->param[id].rows = g == 0 ? it->count[J_M] : (long)(it->n - it->count[J_M] - it->count[J_OPT]);
    }
    free(share);
    free(share2);
    return UNPAD_OK;
}

/* The shared small-M term, the optimizer's efficiency and the launch overhead. */
static int joint_store_rest(const joint_iter *it, const robust_fit *rf, calib_coef *c, fit_result *out,
                            unpad_err *err)
{
    const int *col = it->col;
    const double *v = it->v;
    if (it->m_fixed && !strstr(out->notes, "gemm_m_half: the rows' sizes")) {
        note(out, "%s", "gemm_m_half: the rows' sizes do not separate the small-M term from the "
                        "operators' efficiencies (with it, one came out above 1): set to 0, the "
                        "efficiencies hold at the rows' sizes; ");
    }
    if (it->m_fixed)
        c->gemm_m_half = 0;
    if (col[J_M] >= 0) {
        double mh = v[J_M] * c->gemm_eff;
        if (mh < 0) {
            note(out, "%s", "gemm_m_half came out negative and was set to 0; ");
            mh = 0;
        }
        c->gemm_m_half = mh;
        /* the standard error of gemm_eff is small against that of the M term: left out */
        out->param[FIT_GEMM_M_HALF].se = robust_se(rf, (size_t)col[J_M]) * c->gemm_eff;
        out->param[FIT_GEMM_M_HALF].fitted = 1;
        out->param[FIT_GEMM_M_HALF].rows = it->count[J_M];
    }
    for (int g = 0; g < 2; g++) {
        int j = g ? J_BW : J_GW;
        fit_param_id id = g ? FIT_BW_NARROW : FIT_GEMM_NARROW;
        if (col[j] < 0)
            continue;
        *(g ? &c->bw_narrow : &c->gemm_narrow) = v[j];
        out->param[id].value = v[j];
        out->param[id].se = robust_se(rf, (size_t)col[j]);
        out->param[id].fitted = 1;
        out->param[id].rows = it->count[j];
    }
    if (col[J_OPT] >= 0) {
        if (v[J_OPT] < 1.0)
            return unpad_fail(err, UNPAD_ERANGE, NULL, 0, "the optimizer rows imply optim_bw_eff = %.3g, above 1",
                              v[J_OPT] > 0 ? 1 / v[J_OPT] : -1.0);
        c->optim_bw_eff = 1 / v[J_OPT];
        out->param[FIT_OPTIM_BW_EFF].se = robust_se(rf, (size_t)col[J_OPT]) * c->optim_bw_eff * c->optim_bw_eff;
        out->param[FIT_OPTIM_BW_EFF].fitted = 1;
        out->param[FIT_OPTIM_BW_EFF].rows = it->count[J_OPT];
    }
    if (col[J_LAUNCH] >= 0) {
        double l = robust_coef(rf, (size_t)col[J_LAUNCH]);
        if (l < 0) {
            note(out, "%s", "launch_us came out negative and was set to 0; ");
            l = 0;
        }
        c->launch_us = l;
        out->param[FIT_LAUNCH_US].se = robust_se(rf, (size_t)col[J_LAUNCH]);
        out->param[FIT_LAUNCH_US].fitted = 1;
        out->param[FIT_LAUNCH_US].rows = (long)it->n;
    }
    return UNPAD_OK;
}

/* One robust solve over the rows classified in it: the coefficients into c and out, the rows'
 * weights into fc. */
static int joint_solve(fit_ctx *fc, joint_iter *it, calib_coef *c, fit_result *out, unpad_err *err)
{
    robust_fit rf;
    int rc = robust_alloc(&rf, it->n, (size_t)it->p, err);
    if (rc)
        return rc;
    joint_equations(fc, c, it, &rf);
    int st = robust_solve(&rf);
    if (st && st != GSL_EMAXITER) {
        rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                        "GEMM/memory/optimizer fit failed: %s (are the rows' sizes all alike?)", gsl_strerror(st));
        robust_free(&rf);
        return rc;
    }
    if (st == GSL_EMAXITER)
        note(out, "%s", "joint fit: the robust iterations did not settle (result kept); ");
    for (int j = 0; j < J_N; j++)
        it->v[j] = it->col[j] >= 0 ? robust_coef(&rf, (size_t)it->col[j]) : 0;
    if (!(rc = joint_check(it, err)) && !(rc = joint_store_classes(fc, it, &rf, c, out, err)) &&
        !(rc = joint_store_rest(it, &rf, c, out, err))) {
        size_t k = 0;
        for (size_t i = 0; i < fc->n; i++) {
            fc->rows[i].w = it->use[i] ? robust_weight(&rf, k++) : 1;
            fc->rows[i].in_fit = it->use[i] != 0;
        }
    }
    robust_free(&rf);
    return rc;
}

/* Joint robust fit of GEMM, memory-bound and optimizer rows (see fit.h): classified under the
 * current coefficients, fitted, and again until the classification stops changing (6 rounds at
 * most). */
static int fit_joint(fit_ctx *fc, calib_coef *c, fit_result *out, unpad_err *err)
{
    joint_iter it = {0};
    char *prev = calloc(fc->n, 1);
    it.use = calloc(fc->n, 1);
    it.key = calloc(fc->n ? fc->n : 1, sizeof *it.key);
    int rc = UNPAD_OK;
    if (!it.use || !prev || !it.key)
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    for (int iter = 0; !rc && iter < 6; iter++) {
        joint_classify(fc, c, &it);
        if (iter > 0 && !memcmp(it.use, prev, fc->n))
            break;
        memcpy(prev, it.use, fc->n);
        if (it.n <= (size_t)it.p + 1)
            rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                            "only %zu GEMM, memory-bound and optimizer rows with a duration: "
                            "too few to fit %d coefficients", it.n, it.p);
        else
            rc = joint_solve(fc, &it, c, out, err);
        if (rc == UNPAD_ERANGE && it.col[J_M] >= 0 && !it.m_refused) {
            /* rows of one size trade the small-M term against the efficiencies without bound:
             * once more without it */
            it.m_refused = 1;
            joint_classify(fc, c, &it);
            memcpy(prev, it.use, fc->n);
            rc = it.n <= (size_t)it.p + 1 ? UNPAD_ERANGE : joint_solve(fc, &it, c, out, err);
        }
    }
    free(it.use);
    free(prev);
    free(it.key);
    return rc;
}

/* ---- FMHA: the tile simulation, fitted through its decomposition ---- */

/* One direction's fitted pair in c (the backward's when dir is 1). */
static double *fmha_eff(calib_coef *c, int dir) { return dir ? &c->attn_bwd_eff : &c->attn_eff; }
static double *fmha_cta(calib_coef *c, int dir) { return dir ? &c->attn_bwd_cta_us : &c->attn_cta_us; }
static double *fmha_narrow(calib_coef *c, int dir) { return dir ? &c->attn_bwd_narrow : &c->attn_narrow; }
static double *fmha_load(calib_coef *c, int dir) { return dir ? &c->attn_bwd_load : &c->attn_load; }

/* A row's launch size: its tiles (heads x 64-row tiles of its lengths). */
static double fmha_tiles(const row_ctx *x) { return cost_fmha_tiles(x->len, (int)x->r->seqs) * x->m->heads; }

/* The simulated time is a sum of per-tile times d = attn_cta_us + flops / (slot rate x attn_eff)
 * along the slot that ends last: for a fixed schedule, T = A attn_cta_us + B / attn_eff exactly.
 * A comes from a small step in attn_cta_us, B from T itself. (attn_bwd_* for the backward.) */
static void fmha_decompose(const hw_spec *hw, const calib_coef *c, const row_ctx *x, double *T,
                           double *A, double *B)
{
    int dir = x->r->op == OP_FMHA_BWD, n = (int)x->r->seqs, heads = x->m->heads;
    double t0 = fit_fmha_us(hw, c, heads, x->len, n, dir);
    calib_coef c2 = *c;
    double cta = *fmha_cta(&c2, dir), h = 1e-4 * (cta > 1e-2 ? cta : 1e-2);
    *fmha_cta(&c2, dir) += h;
    double a = (fit_fmha_us(hw, &c2, heads, x->len, n, dir) - t0) / h;
    if (a < 0)
        a = 0;
    calib_coef tmp;
    const int *len = x->len;
    double b = (t0 - a * cta) * calib_fmha(cost_fmha_coef(hw, c, heads, &len, &n, 1, &tmp), dir).eff;
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

static int fit_fmha_dir(fit_ctx *fc, calib_coef *c, int dir, fit_result *out, unpad_err *err)
{
    const int op = dir ? OP_FMHA_BWD : OP_FMHA_FWD;
    const char *D = dir ? "FMHA backward" : "FMHA forward";
    const fit_param_id P_EFF = dir ? FIT_ATTN_BWD_EFF : FIT_ATTN_EFF,
                       P_CTA = dir ? FIT_ATTN_BWD_CTA_US : FIT_ATTN_CTA_US;
    const hw_spec *hw = fc->hw;
    size_t n = 0;
    for (size_t i = 0; i < fc->n; i++) {
        const row_ctx *x = &fc->rows[i];
        n += x->len && !x->multi && x->r->dur_us > 0 && x->r->op == op;
    }
    if (n < 3) {
        note(out, "%s: fewer than 3 single-stream rows, not fitted; ", D);
        return UNPAD_OK;
    }
    int rc = UNPAD_OK;
    double *bt = malloc(fc->nbatch * 3 * sizeof *bt); /* per batch: T, A, B */
    size_t *idx = malloc(n * sizeof *idx);
    robust_fit rf = {0};
    if (!bt || !idx) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    calib_coef cur = *c;
    int converged = 0, clamped = 0;
    for (int it = 0; it < 12 && !converged; it++) {
        for (size_t q = 0; q < fc->nbatch; q++)
            if (fc->batch[q]->r->op == op)
                fmha_decompose(hw, &cur, fc->batch[q], &bt[3 * q], &bt[3 * q + 1], &bt[3 * q + 2]);
        /* Rows whose tiles, not the memory floor, set the time: measured clearly above the floor.
         * (Judging by the tile time under the current coefficients would keep a poor initial
         * attn_eff from ever being corrected.) */
        size_t k = 0;
        for (size_t i = 0; i < fc->n; i++) {
            const row_ctx *x = &fc->rows[i];
            if (!x->len || x->multi || x->r->dur_us <= 0 || x->r->op != op)
                continue;
            double mem = x->oc.bytes / (hw->mem_bw_gbs * 1e3 * cur.bw_eff);
            double t = x->r->dur_us - x->oc.launches * cur.launch_us;
            if (t > 1.05 * mem || bt[3 * x->batch] >= mem)
                idx[k++] = i;
        }
        if (k < 3) {
            note(out, "%s: memory-bound under the fitted bandwidth, not fitted; ", D);
            goto out;
        }
        /* the width term: rows of two widths (heads) */
        size_t nn = 0;
        double wmax = 0;
        for (size_t j = 0; j < k; j++) {
            double w = calib_narrow(64.0 * fc->rows[idx[j]].m->heads);
            nn += w != 0;
            wmax = w > wmax ? w : wmax;
        }
        int wcol = nn >= 3 && nn + 3 <= k;
        /* the load term: launches of a spread of sizes (the largest at least 4x the smallest in
         * waves; a narrower spread trades it against the tile cost and efficiency) */
        double slots_dir = hw->sms * calib_fmha(&cur, dir).ctas_per_sm, llo = INFINITY, lhi = -INFINITY;
        for (size_t j = 0; j < k; j++) {
            double L = calib_fmha_load_x(fmha_tiles(&fc->rows[idx[j]]), slots_dir);
            llo = L < llo ? L : llo;
            lhi = L > lhi ? L : lhi;
        }
        int lcol = lhi - llo >= log(4.0), p = 2 + wcol + lcol;
        if (rf.n != k || rf.p != (size_t)p) {
            robust_free(&rf);
            if ((rc = robust_alloc(&rf, k, (size_t)p, err)))
                goto out;
        }
        for (size_t j = 0; j < k; j++) {
            const row_ctx *x = &fc->rows[idx[j]];
            double d = x->r->dur_us;
            gsl_matrix_set(rf.X, j, 0, bt[3 * x->batch + 1] / d);
            gsl_matrix_set(rf.X, j, 1, bt[3 * x->batch + 2] / d);
            if (wcol)
                gsl_matrix_set(rf.X, j, 2, calib_narrow(64.0 * x->m->heads) * bt[3 * x->batch + 2] / d);
            if (lcol)
                gsl_matrix_set(rf.X, j, (size_t)(2 + wcol),
                               calib_fmha_load_x(fmha_tiles(x), slots_dir) * bt[3 * x->batch + 2] / d);
            /* the backward's per-token passes are no tiles' work */
            double pass = cost_fmha_passes_us(hw, &cur, x->m->heads, cost_fmha_tokens(x->len, (int)x->r->seqs), dir);
            gsl_vector_set(rf.y, j, (d - x->oc.launches * cur.launch_us - pass) / d);
        }
        int st = robust_solve(&rf);
        if (st && st != GSL_EMAXITER) {
            rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0, "FMHA fit failed: %s (all batches alike?)",
                            gsl_strerror(st));
            goto out;
        }
        double cta = robust_coef(&rf, 0), inv = robust_coef(&rf, 1);
        double se_cta = robust_se(&rf, 0), se_inv = robust_se(&rf, 1);
        double nar = wcol ? robust_coef(&rf, 2) : *fmha_narrow(&cur, dir), se_nar = wcol ? robust_se(&rf, 2) : 0;
        double ld = lcol ? robust_coef(&rf, (size_t)(2 + wcol)) : *fmha_load(&cur, dir);
        double se_ld = lcol ? robust_se(&rf, (size_t)(2 + wcol)) : 0;
        robust_fit r1 = {0}, *used = &rf;
        /* No negative tile cost, and no efficiency above 1 bought with a large one (rows of one
         * batch shape cannot separate the two): the efficiency alone, the cost at 0. */
        if (cta < 0 || inv < 1) {
            clamped = 1;
            if ((rc = robust_alloc(&r1, k, (size_t)(p - 1), err)))
                goto out;
            for (size_t j = 0; j < k; j++) {
                for (int q = 1; q < p; q++)
                    gsl_matrix_set(r1.X, j, (size_t)(q - 1), gsl_matrix_get(rf.X, j, (size_t)q));
                gsl_vector_set(r1.y, j, gsl_vector_get(rf.y, j));
            }
            st = robust_solve(&r1);
            if (st && st != GSL_EMAXITER) {
                robust_free(&r1);
                rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0, "%s fit failed: %s", D, gsl_strerror(st));
                goto out;
            }
            cta = 0;
            se_cta = 0;
            inv = robust_coef(&r1, 0);
            se_inv = robust_se(&r1, 0);
            if (wcol)
                nar = robust_coef(&r1, 1), se_nar = robust_se(&r1, 1);
            if (lcol)
                ld = robust_coef(&r1, (size_t)(1 + wcol)), se_ld = robust_se(&r1, (size_t)(1 + wcol));
            used = &r1;
        }
        if (nar < -10 || nar > 10) { /* the calibration file's range */
            note(out, "%s: the width term came out outside -10..10 and was clamped; ", D);
            nar = nar < -10 ? -10 : 10;
        }
        if (ld < -10 || ld > 10) {
            note(out, "%s: the load term came out outside -10..10 and was clamped; ", D);
            ld = ld < -10 ? -10 : 10;
        }
        /* at the reference, and at the narrowest width and the smallest and largest launches */
        double lmin = calib_fmha_load_x(0, 1), lext = ld * (ld < 0 ? (lhi > 0 ? lhi : 0) : lmin);
        if (inv < 1) {
            robust_free(&r1);
            rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                            "the %s rows imply an efficiency of %.3g, above 1 (are FMHA flops "
                            "and durations per layer?)", D, inv > 0 ? 1 / inv : -1.0);
            goto out;
        }
        if (inv + nar * wmax + lext < 1) {
            double x = inv + nar * wmax + lext;
            robust_free(&r1);
            rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                            "the %s rows imply an efficiency of %.3g at the reference but %.3g (above 1) "
                            "at the narrowest heads and the %s launch (width term %.3g, load term %.3g): "
                            "traces of different GPUs or builds mixed?", D, 1 / inv, x > 0 ? 1 / x : INFINITY,
                            ld < 0 ? "largest" : "smallest", nar, ld);
            goto out;
        }
        double change = fabs(cta - *fmha_cta(&cur, dir)) / (*fmha_cta(&cur, dir) + 1e-3) +
                        fabs(1 / inv - *fmha_eff(&cur, dir)) / *fmha_eff(&cur, dir) +
                        fabs(nar - *fmha_narrow(&cur, dir)) + fabs(ld - *fmha_load(&cur, dir));
        *fmha_cta(&cur, dir) = cta;
        *fmha_eff(&cur, dir) = 1 / inv;
        *fmha_narrow(&cur, dir) = nar;
        *fmha_load(&cur, dir) = ld;
        if (lcol) {
            fit_param *q = &out->param[dir ? FIT_ATTN_BWD_LOAD : FIT_ATTN_LOAD];
            *q = (fit_param){ld, se_ld, 1, (long)k};
        }
        if (wcol) {
            fit_param *q = &out->param[dir ? FIT_ATTN_BWD_NARROW : FIT_ATTN_NARROW];
            *q = (fit_param){nar, se_nar, 1, (long)nn};
        }
        converged = it > 0 && change < 1e-6;
        out->param[P_CTA].se = se_cta;
        out->param[P_EFF].se = se_inv / (inv * inv);
        out->param[P_EFF].rows = out->param[P_CTA].rows = (long)k;
        for (size_t i = 0; i < fc->n; i++)
            if (fc->rows[i].len && fc->rows[i].r->op == op) {
                fc->rows[i].w = 1;
                fc->rows[i].in_fit = 0;
            }
        for (size_t j = 0; j < k; j++) {
            fc->rows[idx[j]].w = robust_weight(used, j);
            fc->rows[idx[j]].in_fit = 1;
        }
        robust_free(&r1);
    }
    if (clamped)
        note(out, "%s: the rows do not separate tile cost and efficiency (a negative cost, or an "
                  "efficiency above 1 beside a large one): cost set to 0, the efficiency fitted alone; ", D);
    if (!converged)
        note(out, "%s: the tile schedule kept changing between iterations (last kept); ", D);
    *fmha_cta(c, dir) = *fmha_cta(&cur, dir);
    *fmha_eff(c, dir) = *fmha_eff(&cur, dir);
    *fmha_narrow(c, dir) = *fmha_narrow(&cur, dir);
    *fmha_load(c, dir) = *fmha_load(&cur, dir);
    out->param[P_EFF].fitted = out->param[P_CTA].fitted = 1;
out:
    robust_free(&rf);
    free(bt);
    free(idx);
    return rc;
}

/* Forward and backward apart (different kernels). A start without the backward's own three
 * (attn_bwd_ctas_per_sm 0) starts it from the forward's. */
static int fit_fmha(fit_ctx *fc, calib_coef *c, fit_result *out, unpad_err *err)
{
    if (c->attn_bwd_ctas_per_sm <= 0) {
        c->attn_bwd_eff = c->attn_eff;
        c->attn_bwd_cta_us = c->attn_cta_us;
        c->attn_bwd_ctas_per_sm = c->attn_ctas_per_sm;
    }
    /* the load terms hold at the largest launch of the rows */
    double tmax = 0;
    for (size_t i = 0; i < fc->n; i++)
        if (fc->rows[i].len && (fc->rows[i].r->op == OP_FMHA_FWD || fc->rows[i].r->op == OP_FMHA_BWD)) {
            double t = fmha_tiles(&fc->rows[i]);
            tmax = t > tmax ? t : tmax;
        }
    c->attn_load_tiles_max = tmax;
    int rc = fit_fmha_dir(fc, c, 0, out, err);
    return rc ? rc : fit_fmha_dir(fc, c, 1, out, err);
}

/* Robust fit of y = b x (x NULL: a constant, y = b) over n points; weights to w (may be NULL).
 * Returns a GSL status (not settling within the iterations counts as success). */
static int fit_one(const double *xv, const double *yv, size_t n, double *b, double *se, double *w)
{
    robust_fit f;
    if (robust_alloc(&f, n, 1, NULL))
        return GSL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        gsl_matrix_set(f.X, i, 0, xv ? xv[i] : 1.0);
        gsl_vector_set(f.y, i, yv[i]);
    }
    int st = robust_solve(&f);
    if (st == GSL_EMAXITER)
        st = GSL_SUCCESS;
    if (!st) {
        *b = robust_coef(&f, 0);
        *se = robust_se(&f, 0);
        for (size_t i = 0; w && i < n; i++)
            w[i] = robust_weight(&f, i);
    }
    robust_free(&f);
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

/* A batch's known lengths (trace_set.lens) over the ones rebuilt from its counts, in place: they
 * must agree with the row's counts, or the lengths describe another run. */
static int exact_lengths(const trace_set *set, int s, const trace_row *r, int *len, unpad_err *err)
{
    for (size_t i = 0; i < set->nlens; i++) {
        const trace_batch_lengths *b = &set->lens[i];
        if (b->step != r->step || b->rank != r->rank)
            continue;
        long tok = 0;
        double s2 = 0;
        int mx = 0;
        for (int k = 0; k < b->n; k++) {
            tok += b->len[k];
            s2 += (double)b->len[k] * b->len[k];
            mx = b->len[k] > mx ? b->len[k] : mx;
        }
        if (b->n != r->seqs || tok != r->tokens || fabs(s2 - r->sum_len2) > 1e-6 * s2 || mx != r->max_len)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "trace %d, step %d rank %d: the given lengths (%d sequences, %ld tokens, "
                              "longest %d) are not the row's (%ld, %ld, %d): another run's?", s + 1,
                              r->step, r->rank, b->n, tok, mx, r->seqs, r->tokens, r->max_len);
        memcpy(len, b->len, sizeof *len * (size_t)b->n);
        return UNPAD_OK;
    }
    return UNPAD_OK;
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
            int rc = fit_row_cost_lengths(m, r, &x->oc, &len, err);
            if (rc) {
                char msg[UNPAD_ERR_LEN];
                snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
                free_ctx(fc);
                return unpad_fail(err, rc, NULL, 0, "trace %d, row %zu: %s", s + 1, i + 1, msg);
            }
            if ((r->op == OP_FMHA_FWD || r->op == OP_FMHA_BWD) && r->group < 0 &&
                (rc = exact_lengths(&sets[s], s, r, len, err))) {
                free(len);
                free_ctx(fc);
                return rc;
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
    unpad_gsl_quiet();
    fit_ctx fc = {0};
    row_ctx **sorted = NULL;
    double *gaps = NULL, *spans = NULL, *e = NULL, *scratch = NULL, *sim = NULL;
    char *keep = NULL;
    size_t ngaps = 0;
    for (int i = 1; i < nsets; i++) /* one kind of products a calibration (cli_traces_load names the files) */
        if (sets[i].products != sets[0].products)
            return unpad_fail(err, UNPAD_EINVAL, NULL, sets[i].products_line,
                              "trace %d of %d was measured with %s products, the first with %s: one calibration "
                              "describes one kind", i + 1, nsets, trace_products_name(sets[i].products),
                              trace_products_name(sets[0].products));
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
    c->fp8 = nsets > 0 && sets[0].products == TRACE_FP8; /* one kind for all sets: checked above */
    if ((rc = fit_joint(&fc, c, out, err)) || (rc = fit_fmha(&fc, c, out, err)) ||
        (rc = fit_comm(&fc, sorted, c, out, err)) ||
        (rc = fit_overhead(&fc, sorted, c, out, &gaps, &spans, &ngaps, err)))
        goto out;
    for (int p = 0; p < FIT_NPARAM; p++)
        out->param[p].value = *fit_param_field(c, (fit_param_id)p);
    c->fitted = 1;
    c->transferred = 0;
    snprintf(c->hw, sizeof c->hw, "%s", hw->name);

    /* Residuals of every row under the fitted coefficients, per operator class. */
    if (fc.nbatch && !(sim = malloc(fc.nbatch * sizeof *sim))) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    for (size_t q = 0; q < fc.nbatch; q++) {
        const row_ctx *x = fc.batch[q];
        int dir = x->r->op == OP_FMHA_BWD;
        sim[q] = fit_fmha_us(hw, c, x->m->heads, x->len, (int)x->r->seqs, dir) +
                 cost_fmha_passes_us(hw, c, x->m->heads, cost_fmha_tokens(x->len, (int)x->r->seqs), dir);
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
                p = fit_row_time(x->m, hw, c, x->r, &x->oc, x->len);
            }
            e[k] = (p - x->r->dur_us) / x->r->dur_us;
            keep[k] = x->in_fit ? x->w > ROBUST_OUTLIER_WEIGHT : 2; /* 2: decided below */
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

int fit_overhead_untraced(fit_result *out, const double *gap_us, const double *step_us, size_t n,
                          unpad_err *err)
{
    if (n < 2)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "the step overhead needs at least 2 untraced steps with a wall time, got %zu", n);
    double b, se, *w = malloc(n * sizeof *w), *e = malloc(n * sizeof *e), *scratch = malloc(n * sizeof *scratch);
    char *keep = malloc(n);
    int rc = UNPAD_OK;
    if (!w || !e || !scratch || !keep) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    if (fit_one(NULL, gap_us, n, &b, &se, w)) {
        rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0, "step-overhead fit on the untraced steps failed");
        goto out;
    }
    if (b < 0) {
        note(out, "%s", "step overhead: the untraced steps ran faster than their operators' sum, set to 0; ");
        b = 0;
    }
    out->coef.step_overhead_us = b;
    out->param[FIT_STEP_OVERHEAD_US] = (fit_param){.value = b, .se = se, .fitted = 1, .rows = (long)n};
    for (size_t i = 0; i < n; i++) {
        e[i] = (b - gap_us[i]) / step_us[i];
        keep[i] = w[i] >= ROBUST_OUTLIER_WEIGHT;
    }
    summarize(&out->resid[FIT_GROUP_STEP], e, keep, n, scratch);
    note(out, "%s", "step overhead: from the untraced steps' wall times (--workloads), not the traced gaps; ");
out:
    free(w);
    free(e);
    free(scratch);
    free(keep);
    return rc;
}

int fit_graphs_untraced(fit_result *out, const double *gap_us, const double *launches, const double *step_us,
                        size_t n, unpad_err *err)
{
    if (n < 3)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "the coefficients of --graphs on need at least 3 untraced steps of runs with graphs, got %zu",
                          n);
    double lo = launches[0], hi = launches[0];
    for (size_t i = 1; i < n; i++) {
        lo = launches[i] < lo ? launches[i] : lo;
        hi = launches[i] > hi ? launches[i] : hi;
    }
    if (!(hi > 1.05 * lo))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "the runs with --graphs on all launch about %.0f kernels a step: graph_launch_us and the "
                          "step overhead cannot be told apart (add runs of another model or virtual-rank count)", lo);
    robust_fit f;
    if (robust_alloc(&f, n, 2, err))
        return UNPAD_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        gsl_matrix_set(f.X, i, 0, launches[i]);
        gsl_matrix_set(f.X, i, 1, 1.0);
        gsl_vector_set(f.y, i, gap_us[i]);
    }
    int st = robust_solve(&f), rc = UNPAD_OK;
    double *e = malloc(n * sizeof *e), *scratch = malloc(n * sizeof *scratch);
    char *keep = malloc(n);
    if (st && st != GSL_EMAXITER) {
        rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0, "graph-step fit on the untraced steps failed: %s",
                        gsl_strerror(st));
    } else if (!e || !scratch || !keep) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    } else {
        double a = robust_coef(&f, 0), b = robust_coef(&f, 1);
        if (a <= 0 || b < 0)
            note(out, "%s", "graph steps: a negative launch gap or overhead was set to 0; ");
        a = a > 0 ? a : 1e-3; /* graph_launch_us > 0 says the graph coefficients are fitted */
        b = b > 0 ? b : 0;
        out->coef.graph_launch_us = a;
        out->coef.graph_step_overhead_us = b;
        out->param[FIT_GRAPH_LAUNCH_US] = (fit_param){.value = a, .se = robust_se(&f, 0), .fitted = 1, .rows = (long)n};
        out->param[FIT_GRAPH_STEP_OVERHEAD_US] =
            (fit_param){.value = b, .se = robust_se(&f, 1), .fitted = 1, .rows = (long)n};
        for (size_t i = 0; i < n; i++) {
            e[i] = (a * launches[i] + b - gap_us[i]) / step_us[i];
            keep[i] = robust_weight(&f, i) >= ROBUST_OUTLIER_WEIGHT;
        }
        summarize(&out->resid[FIT_GROUP_GRAPHS], e, keep, n, scratch);
        note(out, "%s", "graph steps: graph_launch_us and graph_step_overhead_us from the untraced steps of runs "
                        "with --graphs on; ");
    }
    robust_free(&f);
    free(e);
    free(scratch);
    free(keep);
    return rc;
}

int fit_host_untraced(fit_result *out, double *gap_us, const double *step_us, size_t n, const double *hs,
                      int nh, const double *wait_us, unpad_err *err)
{
    if (n < 2 || nh < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "the host's enqueueing time needs at least 2 untraced steps, got %zu", n);
    double *g = malloc(n * sizeof *g), *w = malloc(n * sizeof *w), *e = malloc(n * sizeof *e);
    int rc = UNPAD_OK, best = 0;
    double best_score = INFINITY;
    if (!g || !w || !e) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    for (int j = 0; j < nh; j++) {
        double b, se;
        for (size_t i = 0; i < n; i++)
            g[i] = gap_us[i] - wait_us[i * (size_t)nh + (size_t)j];
        if (fit_one(NULL, g, n, &b, &se, w))
            continue;
        b = b > 0 ? b : 0; /* as fit_overhead_untraced keeps it */
        for (size_t i = 0; i < n; i++)
            e[i] = fabs(g[i] - b) / step_us[i];
        qsort(e, n, sizeof *e, cmp_double);
        double score = n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
        /* a larger host time must do better by more than rounding: where every step waits alike
         * (its first kernel only) the scores tie and the overhead takes the wait: 0 is kept */
        if (score < best_score * (1 - 1e-9)) {
            best_score = score;
            best = j;
        }
    }
    if (!isfinite(best_score)) {
        rc = unpad_fail(err, UNPAD_ERANGE, NULL, 0, "host-time fit on the untraced steps failed");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        gap_us[i] -= wait_us[i * (size_t)nh + (size_t)best];
    out->coef.host_launch_us = hs[best];
    out->param[FIT_HOST_LAUNCH_US] =
        (fit_param){.value = hs[best], .se = nh > 1 ? hs[1] - hs[0] : 0, .fitted = 1, .rows = (long)n};
out:
    free(g);
    free(w);
    free(e);
    return rc;
}
