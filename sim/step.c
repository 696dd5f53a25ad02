/* step.c — the step model: per-operator coefficients computed once, a GPU's step from its batch's
 * sums in a few dozen flops per operator, and the closed-form FMHA (step.h). */
#include "step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

/* Features of a batch, in the order of the coefficient rows: x = (1, T, attention tokens, S2, P, n). */
enum { X_ONE, X_TOKENS, X_ATTN_TOKENS, X_SUM_LEN2, X_PREDS, X_SEQS, X_COUNT };

static void step_feat(const step_batch *b, double x[X_COUNT])
{
    x[X_ONE] = 1;
    x[X_TOKENS] = b->shape.tokens;
    x[X_ATTN_TOKENS] = b->shape.attn_tokens;
    x[X_SUM_LEN2] = b->shape.sum_len2;
    x[X_PREDS] = b->shape.preds;
    x[X_SEQS] = b->shape.seqs;
}

static void shape_of_feat(const double x[X_COUNT], int last_heads, ops_shape *s)
{
    memset(s, 0, sizeof *s);
    s->tokens = x[X_TOKENS];
    s->attn_tokens = x[X_ATTN_TOKENS];
    s->sum_len2 = x[X_SUM_LEN2];
    s->preds = x[X_PREDS];
    s->seqs = x[X_SEQS];
    s->real_tokens = x[X_TOKENS];
    s->max_len = 1;
    /* P + n, affine (ops_head_rows caps it at T for a real batch) */
    s->last_heads = last_heads;
    s->head_rows = x[X_PREDS] + x[X_SEQS];
}

int step_model_init(step_model *sm, const model_cfg *m, const hw_spec *hw, const calib_coef *c,
                    int flags, unpad_err *err)
{
    int fused = flags & STEP_FUSED, last_heads = (flags & STEP_LAST_HEADS) != 0;
    if (!m || !hw || !c)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "step model: missing model, hardware or calibration");
    memset(sm, 0, sizeof *sm);
    sm->layers = m->layers;
    sm->heads = m->heads;
    sm->max_len = m->max_len;
    sm->max_pred = m->max_predictions;
    sm->fused = fused;
    sm->last_heads = last_heads;
    sm->calib_fitted = c->fitted;
    double fp32 = hw->peak_fp32_tflops * 1e6; /* per us */
    double bw = hw->mem_bw_gbs * 1e3;
    /* The counts are affine in the features: the value at 0 and the change per unit of each. */
    op_cost at0[OP_COUNT], at1[OP_COUNT];
    double x[X_COUNT] = {0};
    ops_shape s;
    shape_of_feat(x, last_heads, &s);
    ops_count(m, &s, fused, 1, 1, at0);
    for (int f = 0; f < X_COUNT; f++) {
        for (int g = 0; g < X_COUNT; g++)
            x[g] = g == f && f != X_ONE ? 1 : 0;
        shape_of_feat(x, last_heads, &s);
        ops_count(m, &s, fused, 1, 1, at1);
        for (int i = 0; i < OP_COUNT; i++) {
            const op_cost *o0 = &at0[i], *o1 = &at1[i];
            double tf = f == X_ONE ? o0->tensor_flops : o1->tensor_flops - o0->tensor_flops;
            double af = f == X_ONE ? o0->flops : o1->flops - o0->flops;
            double by = f == X_ONE ? o0->bytes : o1->bytes - o0->bytes;
            op_class cls = op_class_of((op_id)i);
            double eff = cls == OPC_GEMM ? cost_gemm_eff(c, (op_id)i, 0, m->hidden) : 1; /* large-M part */
            sm->flop[i][f] = (cls == OPC_GEMM ? tf * cost_tensor_us(hw, c->fp8, (op_id)i) / eff : 0) + (af - tf) / fp32;
            sm->mem[i][f] = cost_flops_only(c, (op_id)i)
                                ? 0
                                : by / (bw * (cls == OPC_ATTN ? c->bw_eff : cost_bw_eff(c, (op_id)i, m->hidden)));
        }
    }
    /* The small-M term of a GEMM: tensor FLOPs / rows is the operator's constant, so
     * tensor / (peak M) x m_half / gemm_eff is a constant time (cost_gemm_eff; the peak the
     * operator's products run at, cost_tensor_us). */
    {
        double gx[X_COUNT] = {1, 4096, 4096, 4096.0 * 300, 600, 16};
        shape_of_feat(gx, last_heads, &s);
        ops_count(m, &s, fused, 1, 1, at1);
        for (int i = 0; i < OP_COUNT; i++) {
            sm->instances[i] = at1[i].instances;
            sm->launches[i] = at1[i].launches;
            sm->launch[i] = at1[i].launches * c->launch_us;
            if (op_class_of((op_id)i) == OPC_GEMM && at1[i].rows > 0 && at1[i].tensor_flops > 0)
                sm->small_m[i] = at1[i].tensor_flops / at1[i].rows * cost_tensor_us(hw, c->fp8, (op_id)i) *
                                 c->gemm_m_half / c->gemm_eff *
                                 (1 + calib_narrow(m->hidden));
        }
        sm->lamb_us = cost_op_us(hw, c, &at1[OP_LAMB]);
    }
    for (int i = 0; i < OP_COUNT; i++) { /* the batch's operators, x instances */
        if (i == OP_LAMB || op_class_of((op_id)i) == OPC_COMM)
            continue;
        sm->run_launch += sm->instances[i] * sm->launch[i];
        if (i == OP_FMHA_FWD || i == OP_FMHA_BWD)
            continue;
        int r = sm->nrun++;
        sm->run_op[r] = i;
        for (int f = 0; f < X_COUNT; f++) {
            sm->run_flop[r][f] = sm->instances[i] * sm->flop[i][f];
            sm->run_mem[r][f] = sm->instances[i] * sm->mem[i][f];
        }
        sm->run_small[r] = sm->instances[i] * sm->small_m[i];
    }
    for (int dir = 0; dir < 2; dir++) { /* cost_fmha_cta_us: 4 q k 64 FLOPs (x2.5 backward) */
        calib_coef tmp;
        calib_fmha_coef f = calib_fmha(calib_fmha_heads(c, m->heads, &tmp), dir);
        sm->load_ge[dir] = (dir && c->attn_bwd_ctas_per_sm > 0 ? c->attn_bwd_load : c->attn_load) * f.eff;
        sm->load_tiles_max = c->attn_load_tiles_max;
        double per_slot = hw->peak_bf16_tflops * 1e6 / hw->sms / f.ctas_per_sm;
        sm->tile_a[dir] = 4.0 * 64 * (dir ? 2.5 : 1.0) / (per_slot * f.eff);
        sm->cta_us[dir] = f.cta_us;
        sm->slots[dir] = (int)(hw->sms * f.ctas_per_sm);
        sm->pass_us[dir] = cost_fmha_passes_us(hw, c, m->heads, 1.0, dir);
    }
    sm->overhead_us = c->step_overhead_us;
    sm->host_launch_us = c->host_launch_us;
    sm->param_bytes = 4.0 * (double)model_param_count(m);
    if (!(sm->per_len = malloc(((size_t)m->max_len + 1) * sizeof *sm->per_len)))
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    for (int l = 0; l <= m->max_len; l++) {
        int k64 = (l + 63) / 64; /* COST_FMHA_TILE = 64: every tile 64 rows against ceil64(l) keys */
        sm->per_len[l] = (step_len){.preds = l ? ops_predictions(l, m->max_predictions) : 0,
                                    .tiles = k64, .work = k64 * 64 * k64 * 64, .top = k64};
    }
    return UNPAD_OK;
}

void step_model_free(step_model *sm)
{
    free(sm->per_len);
    sm->per_len = NULL;
}

void step_batch_clear(step_batch *b)
{
    memset(b, 0, sizeof *b);
}

int step_batch_of(const step_model *sm, const int *len, int n, step_batch *b, unpad_err *err)
{
    step_batch_clear(b);
    for (int i = 0; i < n; i++) {
        if (len[i] < 1 || len[i] > sm->max_len)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "sequence %d has length %d (expected 1..%d)",
                              i, len[i], sm->max_len);
        step_batch_add(sm, b, len[i], len[i], len[i]);
    }
    return UNPAD_OK;
}

double step_fmha_us(const step_model *sm, const step_batch *b, int dir)
{
    if (b->tiles <= 0)
        return 0;
    double a = sm->tile_a[dir], H = sm->heads, S = sm->slots[dir], cta = sm->cta_us[dir];
    if (sm->load_ge[dir] != 0) {
        double t = H * b->tiles;
        if (sm->load_tiles_max > 0 && t > sm->load_tiles_max)
            t = sm->load_tiles_max;
        a *= 1 + sm->load_ge[dir] * calib_fmha_load_x(t, S);
    }
    int k = b->top_k64 * 64;
    double p = cta + a * COST_FMHA_TILE * k; /* the longest tile */
    double passes = sm->pass_us[dir] * b->shape.attn_tokens;
    if (H * b->tiles <= S)
        return p + passes;
    double work = H * (b->tiles * cta + a * b->tile_work);
    double waves = ceil(H * b->top_tiles / S) * p, spread = work / S + STEP_FMHA_TAIL * p;
    return (waves > spread ? waves : spread) + passes;
}

static double dot(const double *c, const double *x)
{
    double s = 0;
    for (int f = 0; f < X_COUNT; f++)
        s += c[f] * x[f];
    return s;
}

static double op_us_x(const step_model *sm, int i, const step_batch *b, const double *x)
{
    double mem = dot(sm->mem[i], x);
    double t;
    if (i == OP_FMHA_FWD || i == OP_FMHA_BWD) {
        t = step_fmha_us(sm, b, i == OP_FMHA_BWD);
    } else {
        t = dot(sm->flop[i], x);
        if (t > 0)
            t += sm->small_m[i];
    }
    return (t > mem ? t : mem) + sm->launch[i];
}

double step_op_us(const step_model *sm, op_id op, const step_batch *b)
{
    if (op == OP_LAMB)
        return sm->lamb_us;
    if (op_class_of(op) == OPC_COMM)
        return 0;
    double x[X_COUNT];
    step_feat(b, x);
    return op_us_x(sm, op, b, x);
}

double step_batch_us(const step_model *sm, const step_batch *b)
{
    double x[X_COUNT];
    step_feat(b, x);
    double t = sm->run_launch;
    for (int r = 0; r < sm->nrun; r++) {
        const double *f = sm->run_flop[r], *m = sm->run_mem[r];
        double tf = f[0] + f[1] * x[1] + f[2] * x[2] + f[3] * x[3] + f[4] * x[4] + f[5] * x[5];
        double tm = m[0] + m[1] * x[1] + m[2] * x[2] + m[3] * x[3] + m[4] * x[4] + m[5] * x[5];
        tf += tf > 0 ? sm->run_small[r] : 0;
        t += tf > tm ? tf : tm;
    }
    for (int d = 0; d < 2; d++) {
        int i = d ? OP_FMHA_BWD : OP_FMHA_FWD;
        double tf = step_fmha_us(sm, b, d), tm = dot(sm->mem[i], x);
        t += sm->instances[i] * (tf > tm ? tf : tm);
    }
    return t;
}

void step_host_waits_us(const step_model *sm, const step_batch *b, const double *hs, int nh, double *wait)
{
    static const op_id layer[] = {OP_QKV_FWD, OP_FMHA_FWD, OP_ATTN_OUT_FWD, OP_ATTN_LN_FWD,
                                  OP_FFN1_FWD, OP_FFN2_FWD, OP_FFN_LN_FWD};
    enum { NL = sizeof layer / sizeof layer[0] };
    double x[X_COUNT], g[NL], G = 0, g0 = 0;
    if (b->shape.seqs >= 1) { /* the forward's kernel times: once, whatever the host times */
        step_feat(b, x);
        g0 = op_us_x(sm, OP_EMBED_FWD, b, x);
        for (int k = 0; k < NL; k++)
            G += g[k] = op_us_x(sm, layer[k], b, x);
    }
    for (int j = 0; j < nh; j++) {
        double h = hs[j];
        wait[j] = 0;
        if (h <= 0 || b->shape.seqs < 1)
            continue;
        double e[NL], H = 0;
        for (int k = 0; k < NL; k++)
            H += e[k] = h * sm->launches[layer[k]];
        /* host: when the host has enqueued the kernel at hand; gpu: when the GPU is done with what
         * was enqueued before it */
        double host = h * sm->launches[OP_EMBED_FWD], gpu = host + g0, w = host;
        for (int l = 0; l < sm->layers; l++) {
            double before = w;
            for (int k = 0; k < NL; k++) {
                host += e[k];
                if (host > gpu) {
                    w += host - gpu;
                    gpu = host;
                }
                gpu += g[k];
            }
            /* a layer that did not wait, and whose kernels take no less than their enqueueing,
             * left the GPU at least as far behind the host as it found it: no later layer waits */
            if (w == before && G >= H)
                break;
        }
        wait[j] = w;
    }
}

double step_host_wait_us(const step_model *sm, const step_batch *b)
{
    double w;
    step_host_waits_us(sm, b, &sm->host_launch_us, 1, &w);
    return w;
}

void step_rank_batch(const step_model *sm, const balance_result *r, const int *len, int g, step_batch *b)
{
    step_batch_clear(b);
    for (int p = r->start[g]; p < r->start[g + 1]; p++) {
        int l = len[r->seq[p]];
        l = l < 1 ? 1 : l > sm->max_len ? sm->max_len : l; /* the loader's lengths are in range */
        step_batch_add(sm, b, l, l, l);
    }
}

void step_model_rank_us(const step_model *sm, const balance_result *r, const int *len, double *us)
{
    for (int g = 0; g < r->gpus; g++) {
        step_batch b;
        step_rank_batch(sm, r, len, g, &b);
        us[g] = b.shape.seqs > 0 ? step_batch_us(sm, &b) : 0;
    }
}

int step_model_predict(const step_model *sm, const model_cfg *m, const hw_spec *hw,
                       const calib_coef *c, const step_batch *b, int gpus, cost_step *out,
                       unpad_err *err)
{
    if (b->shape.seqs < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "step model: empty batch");
    memset(out, 0, sizeof *out);
    ops_shape sh = b->shape;
    sh.last_heads = sm->last_heads;
    sh.head_rows = ops_head_rows(sh.tokens, sh.preds, sh.seqs);
    ops_count(m, &sh, sm->fused, gpus, 1, out->ops);
    for (int i = 0; i < OP_COUNT; i++) {
        double t;
        if (i == OP_ALLREDUCE || i == OP_EXCHANGE) {
            net_cost nc;
            if (i == OP_ALLREDUCE)
                net_allreduce(hw, c, sm->param_bytes, gpus, &nc);
            else /* one GPU's samples; ops_count's volume already counts the (G-1)/G moved */
                net_exchange(hw, c, gpus > 1 ? out->ops[i].bytes * gpus / (gpus - 1.0) : 0, gpus, &nc);
            t = nc.us;
        } else {
            t = step_op_us(sm, (op_id)i, b);
        }
        out->time_us[i] = t;
        out->step_us += out->ops[i].instances * t;
        if (i != OP_ALLREDUCE && i != OP_EXCHANGE)
            out->compute_us += out->ops[i].instances * t;
    }
    out->host_wait_us = step_host_wait_us(sm, b);
    out->step_us += sm->overhead_us + out->host_wait_us;
    out->compute_us += sm->overhead_us + out->host_wait_us;
    /* useful work: the tensor FLOPs of the same sequences unpadded */
    ops_shape real = b->shape;
    real.tokens = real.attn_tokens = real.real_tokens;
    real.sum_len2 = b->real_len2;
    op_cost u[OP_COUNT];
    ops_count(m, &real, 1, 1, 1, u);
    for (int i = 0; i < OP_COUNT; i++)
        if (i != OP_LAMB && op_class_of((op_id)i) != OPC_COMM)
            out->model_flops += u[i].instances * u[i].tensor_flops;
    return UNPAD_OK;
}
