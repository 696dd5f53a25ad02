/* train_warm.c — before the first step, with its micro-batches fetched: the GEMM plans the run will
 * need, each launched once, so that no step stalls on a cuBLASLt heuristic query or a kernel load
 * when its token count enters a new shape bucket (gemm.h). The range covers the micro-batches at
 * hand with room on both sides: predictions from half the fewest to tokens at 1.5x the most, or
 * where the step's lengths put a micro-batch five standard deviations above its mean if that is
 * more (a short-heavy distribution's batches vary by more than half; capped at the buffers' size),
 * and sequence counts. Then, in a fresh run with --gemm-tune on, the
 * plans of the token and prediction counts the run will mostly meet (those at hand, 15% either
 * side) are tuned: the heuristic's first candidates timed, the fastest kept (gemm.h
 * gemm_ctx_tune); a resumed run instead runs the algorithms its checkpoint lists. First of all,
 * one forward and backward of the first micro-batch (trainer_dry_pass) makes the plans of its
 * products (the templates the warm-up varies), loads the project's own kernels (the FMHA's, the
 * LayerNorms', the losses'), which CUDA loads lazily at their first launch, and runs the
 * communicator's first collective; the first step then runs as the rest do. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/trainer.h"

/* The tuning's settings: UNPAD_GEMM_TUNE="candidates,reps,budget_s,min_gflop" overrides the
 * defaults (for measuring the tuning itself). */
static gemm_tune_opts tune_opts(void)
{
    gemm_tune_opts o = {.candidates = 16, .reps = 3, .budget_s = 2.0, .min_flop = 8e9};
    const char *e = getenv("UNPAD_GEMM_TUNE");
    double gf = o.min_flop / 1e9;
    if (e && *e)
        sscanf(e, "%d,%d,%lf,%lf", &o.candidates, &o.reps, &o.budget_s, &gf);
    o.min_flop = gf * 1e9;
    return o;
}

/* Tunes the plans of token counts [0.85 tmin, 1.15 tmax] and prediction counts [0.85 pmin,
 * 1.15 pmax] (a fresh run with --gemm-tune on; a resumed one runs its checkpoint's algorithms),
 * saying what it did in `said` (n bytes; empty when tuning is off). */
static int trainer_tune(trainer *t, long tmin, long tmax, long pmin, long pmax, char *said, size_t n, unpad_err *err)
{
    said[0] = 0;
    if (!t->a->gemm_tune)
        return UNPAD_OK;
    if (t->gemm_presets != -2) {
        if (t->gemm_presets >= 0)
            snprintf(said, n, "; GEMM algorithms: %d tuned ones from the checkpoint (%d refused by cuBLASLt), "
                     "none tuned in this run", t->gemm_presets, gemm_ctx_presets_refused(bert_gemm(t->b)));
        return UNPAD_OK;
    }
    gemm_tune_opts o = tune_opts();
    gemm_tune_stats a, b;
    long cap = t->opt.max_tokens;
    long t_lo = (long)(tmin * 0.85) > 1 ? (long)(tmin * 0.85) : 1, t_hi = (long)(tmax * 1.15) + 1;
    long p_lo = (long)(pmin * 0.85) > 1 ? (long)(pmin * 0.85) : 1, p_hi = (long)(pmax * 1.15) + 1;
    t_hi = t_hi < cap ? t_hi : cap;
    t_lo = t_lo < t_hi ? t_lo : t_hi;
    int rc = bert_gemm_tune(t->b, (int)t_lo, (int)t_hi, &o, t->s, &a, err);
    if (rc)
        return rc;
    o.budget_s -= a.seconds;
    memset(&b, 0, sizeof b);
    if (pmax > 0 && o.budget_s > 0 && !a.no_memory &&
        (rc = bert_gemm_tune(t->b, (int)p_lo, (int)p_hi, &o, t->s, &b, err)))
        return rc;
    if (a.no_memory || b.no_memory) {
        snprintf(said, n, "; GEMM tuning skipped: no device memory for its %.0f MiB of scratch operands",
                 (a.no_memory ? a.scratch_bytes : b.scratch_bytes) / 1048576.0);
        return UNPAD_OK;
    }
    snprintf(said, n, "; GEMM tuning: %d plans of %ld..%ld tokens and %ld..%ld predictions timed (%d candidates, "
             "%d runs each), %d on a faster algorithm: %.2f -> %.2f ms summed at the bucket shapes, in %.2f s%s",
             a.tuned + b.tuned, t_lo, t_hi, p_lo, p_hi, o.candidates, o.reps, a.changed + b.changed,
             (a.top1_us + b.top1_us) / 1e3, (a.best_us + b.best_us) / 1e3, a.seconds + b.seconds,
             a.over_budget + b.over_budget ? " (the budget ran out: the rest keep the heuristic's choice)" : "");
    return UNPAD_OK;
}

/* UNPAD_GRAPH_PROBE=N, a diagnostic: the first micro-batch's forward and backward N times as
 * launched on the stream and N times as one CUDA graph of the same launches, interleaved twice,
 * each timed by events: what launching a step as a graph would save on the GPU. Leaves the
 * gradients and statistics cleared, as the dry pass does. */
static void graph_probe(trainer *t, int n)
{
    const shard_batch *mb = t->bufs + (size_t)t->cur * t->K;
    const float sp = 1.0f / (float)(mb[0].P > 0 ? mb[0].P : 1), sn = 1.0f / (float)(mb[0].n > 0 ? mb[0].n : 1);
    const uint64_t seed = (uint64_t)t->a->seed * 0x9E3779B97F4A7C15ull + 1;
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    cudaError_t ce = cudaStreamBeginCapture(t->s, cudaStreamCaptureModeThreadLocal);
    if (ce == cudaSuccess) {
        bert_forward(t->b, seed, t->s);
        bert_backward(t->b, sp, sn, 0, t->s);
        ce = cudaStreamEndCapture(t->s, &g);
    }
    if (ce == cudaSuccess)
        ce = cudaGraphInstantiate(&x, g, 0);
    if (ce != cudaSuccess) { /* a diagnostic: say so and train on */
        printf("  graph probe: the forward and backward could not be captured as a graph: %s\n",
               cudaGetErrorString(ce));
        cudaGetLastError();
        if (g)
            cudaGraphDestroy(g);
        cudaCheck(cudaEventDestroy(e0));
        cudaCheck(cudaEventDestroy(e1));
        return;
    }
    size_t nodes = 0;
    cudaCheck(cudaGraphGetNodes(g, NULL, &nodes));
    for (int i = 0; i < 3; i++) {
        bert_forward(t->b, seed, t->s);
        bert_backward(t->b, sp, sn, 0, t->s);
        cudaCheck(cudaGraphLaunch(x, t->s));
    }
    for (int round = 0; round < 2; round++) {
        float ms[2];
        for (int k = 0; k < 2; k++) {
            cudaCheck(cudaStreamSynchronize(t->s));
            cudaCheck(cudaEventRecord(e0, t->s));
            for (int i = 0; i < n; i++) {
                if (k) {
                    cudaCheck(cudaGraphLaunch(x, t->s));
                } else {
                    bert_forward(t->b, seed, t->s);
                    bert_backward(t->b, sp, sn, 0, t->s);
                }
            }
            cudaCheck(cudaEventRecord(e1, t->s));
            cudaCheck(cudaEventSynchronize(e1));
            cudaCheck(cudaEventElapsedTime(&ms[k], e0, e1));
        }
        printf("  graph probe: forward + backward of %ld tokens, %d times: %.3f ms each launched on the stream, "
               "%.3f ms as a graph of %zu nodes (%+.2f%%)\n",
               (long)mb[0].T, n, ms[0] / n, ms[1] / n, nodes, 100.0 * (ms[1] / ms[0] - 1));
    }
    cudaCheck(cudaGraphExecDestroy(x));
    cudaCheck(cudaGraphDestroy(g));
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
    bert_grad_zero(t->b, t->s);
    bert_stats_reset(t->b, t->s);
    cudaCheck(cudaStreamSynchronize(t->s));
}

int trainer_warm(trainer *t, unpad_err *err)
{
    long tmax = 0, tmin = -1, pmin = -1, pmax = 0;
    int nmin = -1, nmax = 0;
    double s1 = 0, s2 = 0, seqs = 0; /* the step's lengths: their mean and spread */
    for (int i = 0; i < t->K; i++) { /* the first step's micro-batches */
        const shard_batch *mb = &t->bufs[(size_t)t->cur * t->K + i];
        for (int k = 0; k < mb->n; k++) {
            double l = mb->cu_seqlens[k + 1] - mb->cu_seqlens[k];
            s1 += l;
            s2 += l * l;
        }
        seqs += mb->n;
        tmax = mb->T > tmax ? mb->T : tmax;
        tmin = tmin < 0 || mb->T < tmin ? mb->T : tmin;
        pmax = mb->P > pmax ? mb->P : pmax;
        pmin = pmin < 0 || mb->P < pmin ? mb->P : pmin;
        nmin = nmin < 0 || mb->n < nmin ? mb->n : nmin;
        nmax = mb->n > nmax ? mb->n : nmax;
    }
    /* the dry pass first: its products are the templates the GEMM warm-up varies (gemm.h) */
    double t0 = unpad_now_s();
    int rc;
    if ((rc = trainer_dry_pass(t, err)))
        return rc;
    double dry_s = unpad_now_s() - t0;
    double mu = seqs > 0 ? s1 / seqs : 0, var = seqs > 1 ? (s2 - s1 * mu) / (seqs - 1) : 0;
    double spread = nmax * mu + 5 * sqrt(nmax * (var > 0 ? var : 0)); /* n lengths: mean n mu, sd sqrt(n) sd */
    long hi = tmax + tmax / 2 > spread ? tmax + tmax / 2 : (long)spread;
    hi = hi < t->opt.max_tokens ? hi : t->opt.max_tokens;
    long lo = pmin / 2 > 1 ? pmin / 2 : 1;
    int made = 0, made_n = 0, ran = 0, ran_n = 0;
    gemm_ctx_warm_accumulation(bert_gemm(t->b), t->K > 1); /* later micro-batches add to the gradients */
    if ((rc = bert_gemm_warm(t->b, (int)lo, (int)(hi > lo ? hi : lo), t->s, &made, &ran, err)))
        return rc;
    int n_hi = 2 * nmax < t->seq_cap ? 2 * nmax : t->seq_cap;
    if (nmin / 2 < lo &&
        (rc = bert_gemm_warm(t->b, nmin / 2 > 1 ? nmin / 2 : 1, n_hi, t->s, &made_n, &ran_n, err)))
        return rc;
    double warm_s = unpad_now_s() - t0 - dry_s;
    char tuned[512];
    if ((rc = trainer_tune(t, tmin, tmax, pmin, pmax, tuned, sizeof tuned, err)))
        return rc;
    t->warm_s = unpad_now_s() - t0;
    const char *gp = getenv("UNPAD_GRAPH_PROBE");
    if (gp && atoi(gp) > 0)
        graph_probe(t, atoi(gp));
    printf("  warm-up: one forward and backward of the first micro-batch (plans and kernel loads of its shapes) "
           "in %.2f s; %d GEMM plans for %ld..%ld tokens and predictions, %d for %d..%d sequences, %d of them "
           "launched once to load their kernels, in %.2f s%s; %.2f s in all, before step %d\n",
           dry_s, made, lo, hi, made_n, nmin / 2 > 1 ? nmin / 2 : 1, n_hi, ran + ran_n, warm_s, tuned, t->warm_s,
           t->first_step);
    return UNPAD_OK;
}
