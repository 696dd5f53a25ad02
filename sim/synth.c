/* synth.c — synthetic traces from the cost model under known coefficients (see synth.h). */
#include "synth.h"

#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "cost.h"
#include "trace.h"

void synth_opts_default(synth_opts *o)
{
    *o = (synth_opts){.gpus = 2, .steps = 8, .batch = 56, .seed = 1, .noise = 0.01,
                      .outlier_frac = 0.005, .outlier_scale = 2.5, .overhead_jitter = 0.05};
}

void synth_truth_default(const hw_spec *hw, calib_coef *c)
{
    calib_default(hw, c);
    c->gemm_eff = 0.62;
    c->gemm_m_half = 400;
    c->attn_eff = 0.38;
    c->attn_cta_us = 1.5;
    c->attn_ctas_per_sm = 3; /* the kernels' occupancy, as calib_default (the fit keeps it) */
    c->attn_bwd_eff = 0.30; /* the backward its own kernel: other efficiency and tile cost */
    c->attn_bwd_cta_us = 2.5;
    c->attn_bwd_ctas_per_sm = 2;
    c->bw_eff = 0.71;
    c->launch_us = 4;
    c->optim_bw_eff = 0.75;
    c->comm_eff = 0.85;
    c->step_overhead_us = 150;
}

/* One row at the model's time with noise, now and then an outlier. */
static double emit_noisy(FILE *f, trace_row *r, op_id op, int layer, const cost_step *s, double t,
                         const synth_opts *o, gsl_rng *rng)
{
    double d = s->time_us[op] * (1 + o->noise * gsl_ran_gaussian(rng, 1.0));
    if (gsl_rng_uniform(rng) < o->outlier_frac)
        d *= o->outlier_scale;
    if (d < 0.01)
        d = 0.01;
    return trace_emit_op(f, r, op, layer, &s->ops[op], t, d);
}

int synth_trace_write(FILE *f, const model_cfg *m, const hw_spec *hw, const calib_coef *truth,
                      const unpad_dist *dist, const synth_opts *o, unpad_err *err)
{
    if (o->gpus < 1 || o->steps < 1 || o->batch < 1)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "synthetic trace needs gpus, steps, batch >= 1");
    dist_sampler *smp = NULL;
    int rc = dist_sampler_alloc(dist, o->seed, &smp, err); /* also unpad_gsl_quiet */
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
               "attn_eff=%g attn_cta_us=%g attn_bwd_eff=%g attn_bwd_cta_us=%g bw_eff=%g launch_us=%g "
               "optim_bw_eff=%g comm_eff=%g step_overhead_us=%g, noise %g, outliers %g x%g, seed %lu\n",
            truth->gemm_eff, truth->gemm_m_half, truth->attn_eff, truth->attn_cta_us,
            calib_fmha(truth, 1).eff, calib_fmha(truth, 1).cta_us, truth->bw_eff,
            truth->launch_us, truth->optim_bw_eff, truth->comm_eff, truth->step_overhead_us, o->noise,
            o->outlier_frac, o->outlier_scale, o->seed);
    if (truth->fp8) /* times of the trainer's --fp8 on products (cost_tensor_us) */
        trace_write_products(f, TRACE_FP8);
    trace_write_header(f);
    double t0 = 0;
    for (int step = 0; step < o->steps; step++) {
        for (int g = 0; g < o->gpus; g++) {
            dist_sample(smp, len, o->batch);
            op_batch b = {.len = len, .n = o->batch, .fused = 1, .gpus = o->gpus, .dropout = 1};
            if ((rc = cost_predict_step(m, hw, truth, &b, &st[g], err)))
                goto out;
        }
        trace_row r;
        memset(&r, 0, sizeof r);
        snprintf(r.hw, sizeof r.hw, "%.63s", hw->name);
        snprintf(r.model, sizeof r.model, "%.63s", m->name);
        r.gpus = o->gpus;
        r.step = step;
        r.group = r.stream = -1;
        /* Every rank's rows up to the all-reduce, then the host's step overhead; then the
         * all-reduce, which ends together on every rank, and the optimizer. */
        trace_step_iter it, tail;
        op_id op;
        int layer;
        trace_step_begin(&tail, m->layers, o->gpus);
        double last_end = 0;
        for (int g = 0; g < o->gpus; g++) {
            double t = t0;
            r.rank = g;
            trace_step_begin(&it, m->layers, o->gpus);
            for (;;) {
                trace_step_iter at = it;
                if (!trace_step_next(&it, &op, &layer))
                    break;
                if (op == OP_ALLREDUCE || op == OP_LAMB) {
                    tail = at;
                    break;
                }
                t = emit_noisy(f, &r, op, layer, &st[g], t, o, rng);
            }
            t += truth->step_overhead_us * (1 + o->overhead_jitter * gsl_ran_gaussian(rng, 1.0));
            ends[g] = t;
            if (t > last_end)
                last_end = t;
        }
        for (int g = 0; g < o->gpus; g++) {
            const cost_step *s = &st[g];
            double t = ends[g];
            r.rank = g;
            it = tail;
            while (trace_step_next(&it, &op, &layer)) {
                if (op == OP_ALLREDUCE) {
                    /* a faster rank's all-reduce waits for the slowest rank */
                    double d = s->time_us[op] * (1 + o->noise * gsl_ran_gaussian(rng, 1.0));
                    t = trace_emit_op(f, &r, op, layer, &s->ops[op], t, d + (last_end - ends[g]));
                } else {
                    t = emit_noisy(f, &r, op, layer, s, t, o, rng);
                }
            }
            ends[g] = t;
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
