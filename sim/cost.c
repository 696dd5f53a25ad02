/* cost.c — predicted times: roofline per operator, FMHA tile simulation, per-sequence cost. */
#include "cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_multifit.h>

double cost_gemm_eff(const calib_coef *c, op_id op, double rows, double width)
{
    /* 1/eff = 1/eff_op + gemm_narrow w + (1 + w) m_half / (gemm_eff M), w = calib_narrow(width):
     * the large-M efficiency is the operator's (its N, K and epilogue) at the reference width, a
     * narrower model adds the shared width term, and the small-M penalty (tiles that do not fill
     * the GPU) is shared and grows as the rows narrow. With no per-operator value, at the
     * reference width this is gemm_eff M / (M + m_half). */
    double e = (int)op >= 0 && (int)op < OP_COUNT && c->op_eff[op] > 0 ? c->op_eff[op] : c->gemm_eff;
    double w = calib_narrow(width), inv = 1 / e + c->gemm_narrow * w;
    if (rows > 0)
        inv += (1 + w) * c->gemm_m_half / (c->gemm_eff * rows);
    return 1 / inv;
}

double cost_bw_eff(const calib_coef *c, op_id op, double width)
{
    if (op_class_of(op) == OPC_OPTIM)
        return c->optim_bw_eff;
    double e = op_class_of(op) != OPC_ATTN && op_class_of(op) != OPC_GEMM && c->op_eff[op] > 0 ? c->op_eff[op]
                                                                                             : c->bw_eff;
    if (op_class_of(op) == OPC_ATTN || op_class_of(op) == OPC_GEMM)
        return e;
    return 1 / (1 / e + c->bw_narrow * calib_narrow(width));
}

double cost_allreduce_us(const hw_spec *hw, const calib_coef *c, double bytes, int gpus)
{
    if (gpus <= 1)
        return 0;
    double g = gpus;
    /* bytes already counts 2(N-1)/N of the buffer when it comes from ops_step; link_bw is bus bw. */
    double bw = hw->link_bw_gbs * 1e3 * c->comm_eff; /* bytes per microsecond */
    return bytes / bw + hw->link_lat_us * ceil(log2(g));
}

double cost_fp8_share(op_id op)
{
    switch (op) {
    case OP_QKV_FWD: case OP_ATTN_OUT_FWD: case OP_FFN1_FWD: case OP_FFN2_FWD: case OP_FFN2_BWD: return 1;
    case OP_QKV_BWD: case OP_ATTN_OUT_BWD: return 0.5;
    case OP_FFN1_BWD: return 1.0 / 3;
    default: return 0;
    }
}

int cost_flops_only(const calib_coef *c, op_id op) { return c->fp8 && cost_fp8_share(op) > 0; }

double cost_tensor_us(const hw_spec *hw, int fp8, op_id op)
{
    double s = fp8 && hw->peak_fp8_tflops > 0 ? cost_fp8_share(op) : 0;
    double us = (1 - s) / (hw->peak_bf16_tflops * 1e6) + (s > 0 ? s / (hw->peak_fp8_tflops * 1e6) : 0);
    /* FFN2's weight gradient runs under ffn1_bwd with --fp8 on (ops.h counts it under ffn2_bwd) */
    if (s > 0 && op == OP_FFN2_BWD)
        return 0.5 * us;
    if (s > 0 && op == OP_FFN1_BWD)
        return 1.5 * us;
    return us;
}

double cost_op_us(const hw_spec *hw, const calib_coef *c, const op_cost *oc)
{
    if (op_class_of(oc->op) == OPC_COMM) /* one collective: bytes over the bus, one latency */
        return oc->launches ? oc->bytes / (hw->link_bw_gbs * 1e3 * c->comm_eff) + hw->link_lat_us : 0;
    double fp32 = hw->peak_fp32_tflops * 1e6; /* FLOPs per microsecond */
    double bw = hw->mem_bw_gbs * 1e3;          /* bytes per microsecond */
    double eff_bw = cost_bw_eff(c, oc->op, oc->width);
    double t_flop = 0;
    if (oc->tensor_flops > 0) {
        calib_coef tmp;
        double eff = op_class_of(oc->op) == OPC_ATTN
                         ? calib_fmha(calib_fmha_heads(c, (int)(oc->width / 64), &tmp), oc->op == OP_FMHA_BWD).eff
                         : cost_gemm_eff(c, oc->op, oc->rows, oc->width);
        t_flop = oc->tensor_flops * cost_tensor_us(hw, c->fp8, oc->op) / eff;
    }
    /* Scalar work overlaps with memory traffic in practice; it counts at the fp32 rate. */
    t_flop += (oc->flops - oc->tensor_flops) / fp32;
    double t_mem = cost_flops_only(c, oc->op) ? 0 : oc->bytes / (bw * eff_bw);
    return (t_flop > t_mem ? t_flop : t_mem) + oc->launches * c->launch_us;
}

double cost_fmha_passes_us(const hw_spec *hw, const calib_coef *c, int heads, double tokens, int dir)
{
    if (!dir || tokens <= 0)
        return 0;
    double x = c->attn_bwd_pass_x > 0 ? c->attn_bwd_pass_x : 1;
    return COST_FMHA_PASS_BYTES * tokens * heads * 64 / (hw->mem_bw_gbs * 1e3 * c->optim_bw_eff * x);
}

double cost_fmha_tokens(const int *len, int n)
{
    double t = 0;
    for (int s = 0; s < n; s++)
        t += len[s];
    return t;
}

double cost_fmha_cta_us(const hw_spec *hw, const calib_coef *c, int q_rows, int kv_len, int dir)
{
    /* MMA work rounds query rows to 64 (four warps of 16) and keys to 64-wide tiles. */
    double q = ceil(q_rows / 64.0) * 64, k = ceil(kv_len / 64.0) * 64;
    double flops = 4.0 * q * k * 64 * (dir ? 2.5 : 1.0);
    calib_fmha_coef f = calib_fmha(c, dir);
    double per_slot = hw->peak_bf16_tflops * 1e6 / hw->sms / f.ctas_per_sm; /* FLOP/us */
    return f.cta_us + flops / (per_slot * f.eff);
}

/* Min-heap of slot free times: replaces the root (the smallest) with v. The hole left by the root
 * goes down along the smaller children to a leaf, then v rises to its place (Floyd's order: one
 * comparison a level on the way down; v, a slot's new end, belongs near the bottom). Slots are
 * interchangeable, so only the multiset of free times matters, which any correct heap keeps. */
static void heap_push_pop(double *h, int n, double v)
{
    int i = 0;
    for (;;) {
        int l = 2 * i + 1;
        if (l >= n)
            break;
        int c = l + 1 < n && h[l + 1] < h[l] ? l + 1 : l;
        h[i] = h[c];
        i = c;
    }
    while (i > 0) {
        int p = (i - 1) / 2;
        if (h[p] <= v)
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

/* Slots' free times a[0..S) kept ascending. A run of r tiles of equal duration d, each dispatched
 * to the slot that frees first (the block scheduler): the times taken come out in ascending order
 * and each comes back d later, so the new times form a second ascending queue (q, circular, at most
 * S live); taking the smaller head of the two queues r times, then merging them, gives the very
 * multiset r heap operations would (the same additions in the same order), in O(r + where the
 * last new time lands) instead of O(r log S). Returns the largest new time (0 when r == 0). */
static double run_equal(double *a, double *q, int S, long r, double d)
{
    int i = 0, qh = 0, qn = 0;
    double last = 0;
    for (long t = 0; t < r; t++) {
        double v;
        if (qn > 0 && (i >= S || q[qh] < a[i])) {
            v = q[qh];
            qh = qh + 1 == S ? 0 : qh + 1;
            qn--;
        } else {
            v = a[i++];
        }
        last = v + d;
        int tail = qh + qn < S ? qh + qn : qh + qn - S;
        q[tail] = last;
        qn++;
    }
    /* Merge in place, front to back: the queue holds as many times as a lost at its front (i),
     * so the write position never passes the read position of a, and once the queue is empty
     * the rest of a is where it belongs. */
    int o = 0;
    while (qn > 0) {
        if (i >= S || q[qh] < a[i]) {
            a[o++] = q[qh];
            qh = qh + 1 == S ? 0 : qh + 1;
            qn--;
        } else {
            a[o++] = a[i++];
        }
    }
    return last;
}

double cost_fmha_tiles(const int *len, int n)
{
    double t = 0;
    for (int s = 0; s < n; s++)
        t += (len[s] + COST_FMHA_TILE - 1) / COST_FMHA_TILE;
    return t;
}

const calib_coef *cost_fmha_coef(const hw_spec *hw, const calib_coef *c, int heads, const int *const *len,
                                 const int *n, int G, calib_coef *tmp)
{
    c = calib_fmha_heads(c, heads, tmp);
    if (c->attn_load == 0 && c->attn_bwd_load == 0)
        return c;
    double tiles = 0;
    for (int g = 0; g < G; g++)
        tiles += cost_fmha_tiles(len[g], n[g]);
    return calib_fmha_tiles(c, hw->sms, tiles * heads, tmp);
}

double cost_fmha_prefix_us(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n,
                           int dir, double *end_after)
{
    calib_coef tmp;
    c = cost_fmha_coef(hw, c, heads, &len, &n, 1, &tmp);
    int slots = (int)(hw->sms * calib_fmha(c, dir).ctas_per_sm);
    double stack[2 * 1024];
    double *a = slots <= 1024 ? stack : calloc(2 * (size_t)slots, sizeof *a);
    if (!a)
        return 0;
    double *q = a + slots;
    memset(a, 0, sizeof(double) * (size_t)slots);
    const int tile = COST_FMHA_TILE;
    double end = 0;
    /* Launch order: sequence-major, then its tiles, each over the heads. Each tile goes to the
     * slot that frees first, as the hardware block scheduler does; consecutive tiles of equal
     * time (a sequence's 64-row tiles) are dispatched as one run. */
    for (int s = 0; s < n; s++) {
        int tiles = (len[s] + tile - 1) / tile;
        if (tiles < 1)
            continue;
        double full = cost_fmha_cta_us(hw, c, tile, len[s], dir);
        double last = cost_fmha_cta_us(hw, c, len[s] - (tiles - 1) * tile, len[s], dir);
        double f;
        if (last == full) { /* a short last tile rounds to the same work: one run */
            f = run_equal(a, q, slots, (long)tiles * heads, full);
        } else {
            f = run_equal(a, q, slots, (long)(tiles - 1) * heads, full);
            double g = run_equal(a, q, slots, heads, last);
            f = g > f ? g : f;
        }
        end = f > end ? f : end;
        if (end_after)
            end_after[s] = end;
    }
    if (a != stack)
        free(a);
    return end;
}

double cost_fmha_us(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n, int dir)
{
    return cost_fmha_prefix_us(hw, c, heads, len, n, dir, NULL);
}

double cost_fmha_streams_us(const hw_spec *hw, const calib_coef *c, int heads, const int *const *len,
                            const int *n, const int *stream, int G, int dir, double *group_end)
{
    for (int g = 0; g < G && group_end; g++)
        group_end[g] = 0;
    calib_coef tmp;
    c = cost_fmha_coef(hw, c, heads, len, n, G, &tmp);
    int slots = (int)(hw->sms * calib_fmha(c, dir).ctas_per_sm);
    const int tile = COST_FMHA_TILE;
    double stack[1024];
    double *h = slots <= 1024 ? stack : calloc((size_t)slots, sizeof *h);
    /* per group: next sequence, tile and head to place; the group before it on its stream */
    int *seq = calloc((size_t)G + 1, sizeof *seq), *t = calloc((size_t)G + 1, sizeof *t),
        *k = calloc((size_t)G + 1, sizeof *k), *prev = calloc((size_t)G + 1, sizeof *prev);
    double *ready = calloc((size_t)G + 1, sizeof *ready), *end = calloc((size_t)G + 1, sizeof *end);
    double *dur = calloc((size_t)G + 1, sizeof *dur); /* the time of each group's current tile */
    double total = 0;
    if (!h || !seq || !t || !k || !prev || !ready || !end || !dur)
        goto out;
    memset(h, 0, sizeof(double) * (size_t)slots);
    int left = 0;
    for (int g = 0; g < G; g++) {
        prev[g] = -1;
        for (int q = g - 1; q >= 0 && prev[g] < 0; q--)
            if (stream[q] == stream[g] && n[q] > 0) /* empty groups take no time */
                prev[g] = q;
        ready[g] = prev[g] < 0 ? 0 : -1; /* < 0: not known until prev's last tile is placed */
        left += n[g] > 0;
    }
    while (left > 0) {
        double now = h[0], next_ready = INFINITY;
        /* the earliest-launched group that has started and has tiles left takes the free slot */
        int g = -1;
        for (int q = 0; q < G && g < 0; q++) {
            if (seq[q] >= n[q] || ready[q] < 0)
                continue;
            if (ready[q] <= now)
                g = q;
            else if (ready[q] < next_ready)
                next_ready = ready[q];
        }
        if (g < 0) { /* the slot idles until a group starts (some stream's group always has) */
            heap_push_pop(h, slots, next_ready);
            continue;
        }
        int L = len[g][seq[g]], tiles = (L + tile - 1) / tile;
        if (k[g] == 0) { /* a new tile: its time, for every head */
            int rows = t[g] + 1 < tiles ? tile : L - t[g] * tile;
            dur[g] = cost_fmha_cta_us(hw, c, rows, L, dir);
        }
        double f = now + dur[g];
        heap_push_pop(h, slots, f);
        if (f > end[g])
            end[g] = f;
        if (++k[g] == heads) { /* launch order: sequence-major, then tiles, heads fastest */
            k[g] = 0;
            if (++t[g] == tiles) {
                t[g] = 0;
                seq[g]++;
            }
        }
        if (seq[g] == n[g]) { /* every tile of g is placed: its end is known */
            left--;
            for (int q = g + 1; q < G; q++)
                if (prev[q] == g)
                    ready[q] = end[g];
        }
    }
    for (int g = 0; g < G; g++) {
        if (end[g] > total)
            total = end[g];
        if (group_end)
            group_end[g] = end[g];
    }
out:
    if (h && h != stack)
        free(h);
    free(seq);
    free(t);
    free(k);
    free(prev);
    free(ready);
    free(end);
    free(dur);
    return total;
}

int cost_predict_step(const model_cfg *m, const hw_spec *hw, const calib_coef *c, const op_batch *b,
                      cost_step *out, unpad_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = ops_step(m, b, out->ops, err);
    if (rc)
        return rc;
    int *padded = NULL;
    const int *lens = b->len;
    if (b->padded) {
        padded = malloc(sizeof *padded * (size_t)b->n);
        if (!padded)
            return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        for (int i = 0; i < b->n; i++)
            padded[i] = b->pad_len;
        lens = padded;
    }
    for (int i = 0; i < OP_COUNT; i++) {
        const op_cost *oc = &out->ops[i];
        double t;
        if (i == OP_FMHA_FWD || i == OP_FMHA_BWD) {
            double tiles = cost_fmha_us(hw, c, m->heads, lens, b->n, i == OP_FMHA_BWD) +
                           cost_fmha_passes_us(hw, c, m->heads, cost_fmha_tokens(lens, b->n), i == OP_FMHA_BWD);
            /* Memory-bound floor still applies (matters when unfused). */
            double mem = oc->bytes / (hw->mem_bw_gbs * 1e3 * c->bw_eff);
            t = (tiles > mem ? tiles : mem) + oc->launches * c->launch_us;
        } else if (i == OP_ALLREDUCE) {
            t = cost_allreduce_us(hw, c, oc->bytes, b->gpus);
        } else {
            t = cost_op_us(hw, c, oc);
        }
        out->time_us[i] = t;
        out->step_us += oc->instances * t;
        if (i != OP_ALLREDUCE && i != OP_EXCHANGE)
            out->compute_us += oc->instances * t;
    }
    out->step_us += c->step_overhead_us;
    out->compute_us += c->step_overhead_us;
    out->model_flops = ops_model_flops(m, b->len, b->n);
    free(padded);
    return UNPAD_OK;
}

int cost_seq_model(const model_cfg *m, const hw_spec *hw, const calib_coef *c, seq_cost *out,
                   unpad_err *err)
{
    /* Per-sequence share of a step's compute, from batches of nseq sequences of one length (so
     * GEMMs run at their batch efficiency), less the work that does not scale with the batch. */
    enum { NPTS = 16, NSEQ = 64 };
    int lens[NSEQ];
    unpad_gsl_quiet();
    gsl_matrix *X = gsl_matrix_alloc(NPTS, 3);
    gsl_vector *y = gsl_vector_alloc(NPTS), *coef = gsl_vector_alloc(3);
    gsl_matrix *cov = gsl_matrix_alloc(3, 3);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc(NPTS, 3);
    int rc = UNPAD_OK;
    if (!X || !y || !coef || !cov || !w) {
        rc = unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        goto out;
    }
    for (int p = 0; p < NPTS; p++) {
        int l = (p + 1) * m->max_len / NPTS;
        if (l < 1)
            l = 1;
        for (int i = 0; i < NSEQ; i++)
            lens[i] = l;
        op_batch b = {.len = lens, .n = NSEQ, .fused = 1, .gpus = 1, .dropout = 1};
        cost_step st;
        if ((rc = cost_predict_step(m, hw, c, &b, &st, err)))
            goto out;
        double fixed = st.time_us[OP_LAMB] + c->step_overhead_us;
        double per = (st.compute_us - fixed) / NSEQ;
        gsl_matrix_set(X, p, 0, 1.0);
        gsl_matrix_set(X, p, 1, l);
        gsl_matrix_set(X, p, 2, (double)l * l);
        gsl_vector_set(y, p, per);
    }
    double chisq;
    gsl_multifit_linear(X, y, coef, cov, &chisq, w);
    out->c0 = gsl_vector_get(coef, 0);
    out->c1 = gsl_vector_get(coef, 1);
    out->c2 = gsl_vector_get(coef, 2);
    /* A negative intercept or quadratic term would make short sequences free or misorder
     * lengths; clamp to keep the cost monotone in the length. */
    if (out->c0 < 0)
        out->c0 = 0;
    if (out->c2 < 0)
        out->c2 = 0;
out:
    if (w) gsl_multifit_linear_free(w);
    if (cov) gsl_matrix_free(cov);
    if (coef) gsl_vector_free(coef);
    if (y) gsl_vector_free(y);
    if (X) gsl_matrix_free(X);
    return rc;
}
