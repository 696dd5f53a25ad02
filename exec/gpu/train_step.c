/* train_step.c — one training step of a run: its batch (one fetcher for the current and the
 * prefetched global batch), forward and backward over the micro-batches, the gradient all-reduce,
 * the first step's dumps, LAMB, the measurements and the online calibration; and evaluation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gpu/dump.h"
#include "gpu/trainer.h"
#include "ops.h"

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* MLPerf BERT schedule: linear warm-up, then polynomial decay (power 1) towards 0 at `steps`:
 * lr s / W for s <= W, else lr (1 - (s - 1 - W) / (N - W)) (steps s 1-based). */
static double lr_at(const train_args *a, int step)
{
    if (a->warmup > 0 && step <= a->warmup)
        return a->lr * step / a->warmup;
    double frac = (double)(step - 1 - a->warmup) / (double)(a->steps - a->warmup);
    return a->lr * (1.0 - (frac < 0 ? 0 : frac > 1 ? 1 : frac));
}

static void batch_view(const shard_batch *sb, bert_batch *bb)
{
    bb->n = sb->n;
    bb->T = (int)sb->T;
    bb->P = (int)sb->P;
    bb->max_len = sb->max_seqlen;
    bb->ids = sb->tokens;
    bb->types = sb->segments;
    bb->cu_seqlens = sb->cu_seqlens;
    bb->mlm_rows = sb->mpos;
    bb->mlm_labels = sb->mlabels;
    bb->nsp_labels = sb->nsp;
}

static void batch_lengths(const shard_batch *sb, int *len)
{
    for (int i = 0; i < sb->n; i++)
        len[i] = sb->cu_seqlens[i + 1] - sb->cu_seqlens[i];
}

/* Groups of a micro-batch whose sequences are longest first (the balanced path builds them so):
 * the planner's length groups are then contiguous sequence ranges. */
static int micro_groups(const fmha_grouping *fg, const int *len, int n, bert_fmha_groups *out, unpad_err *err)
{
    out->ngroups = 0;
    if (fg->nb == 0 || n < 2)
        return UNPAD_OK;
    group_plan gp;
    int rc = fg->nb < 0 ? group_plan_auto(fg->hw, fg->cc, fg->heads, len, n, &fg->opts, &gp, err)
                        : group_plan_bounds(fg->hw, fg->cc, fg->heads, len, n, fg->bounds, fg->nb,
                                            fg->opts.max_streams, &gp, err);
    if (rc || (rc = group_seq_ranges(&gp, len, n, out->seq_begin, out->seq_end, out->max_len, err)))
        return rc;
    for (int g = 0; g < gp.ngroups; g++)
        out->stream[g] = gp.stream[g];
    out->ngroups = gp.ngroups;
    return UNPAD_OK;
}

int trainer_fetch(trainer *t, int which, int64_t pos, unpad_err *err)
{
    shard_batch *mb = t->bufs + (size_t)which * t->K;
    if (!t->dpp) { /* loader order: micro-batch r holds the samples at pos + r B ... */
        for (int r = 0; r < t->K; r++) {
            int rc = source_get(t->src, pos + (int64_t)r * t->B, t->B, &mb[r], err);
            if (rc)
                return rc;
        }
        return UNPAD_OK;
    }
    int rc = dp_step(t->dpp, t->src, pos, mb, t->pred_buf + (size_t)which * t->R, err);
    if (rc || !t->oc)
        return rc;
    /* every global virtual rank's lengths: rank g's are len[off[g] .. off[g + 1]) */
    int *len = t->olen + (size_t)which * t->step_samples, *off = t->ooff + (size_t)which * (t->R + 1);
    off[0] = 0;
    for (int g = 0; g < t->R; g++)
        off[g + 1] = off[g] + dp_rank_lengths(t->dpp, g, len + off[g]);
    return UNPAD_OK;
}

/* The dropout seed of micro-batch v of a step. */
static uint64_t dropout_seed(const trainer *t, int step, int v)
{
    return mix64((uint64_t)t->a->seed * 0x100000001B3ull ^
                 mix64((uint64_t)step * 4096 + (uint64_t)(t->comm.rank * t->K + v)));
}

/* Whether a step's passes launch as CUDA graphs: --graphs on, but not the run's first step (the
 * one that starts what a first pass starts, such as the FP8 scales), not a traced step (its hooks
 * time every operator), and not with all-reduce buckets launched from inside the backward. */
static int graph_step(const trainer *t, int step)
{
    const train_args *a = t->a;
    return t->graphs && step != t->first_step && !t->gs && !(t->tr && step >= a->trace_a && step <= a->trace_b);
}

/* A micro-batch onto the device, its lengths into t->lens and its FMHA groups planned. */
static int micro_upload(trainer *t, const shard_batch *mb, unpad_err *err)
{
    bert_batch bb;
    batch_view(mb, &bb);
    int rc = bert_batch_upload(t->b, &bb, t->s, err);
    if (rc)
        return rc;
    batch_lengths(mb, t->lens);
    if (t->fg.nb != 0) {
        bert_fmha_groups grp;
        if ((rc = micro_groups(&t->fg, t->lens, mb->n, &grp, err)) || (rc = bert_set_fmha_groups(t->b, &grp, err)))
            return rc;
    }
    return UNPAD_OK;
}

void trainer_prep_discard(trainer *t)
{
    if (!t->prep.step)
        return;
    bert_marks_undo(t->b, &t->prep.before, &t->prep.after);
    t->prep.step = 0;
    t->prep.x = NULL;
}

/* The first micro-batch's graph captured at the end of the step before, when it still holds: made
 * for this step (from the same host batch, so with the same loss scales) and nothing uploaded since
 * (an evaluation between the steps uploads its own batches). Else NULL, and the pass is discarded. */
static cudaGraphExec_t prepared_pass(trainer *t, int step)
{
    if (t->prep.step == step && bert_uploads(t->b) == t->prep.upload) {
        cudaGraphExec_t x = t->prep.x;
        t->prep.step = 0;
        t->prep.x = NULL;
        t->prep_used++;
        return x;
    }
    trainer_prep_discard(t);
    t->prep_dropped++;
    return NULL;
}

/* Forward and backward of the K micro-batches of the current global batch. */
static int step_micro_batches(trainer *t, int step, int tracing, step_result *r, unpad_err *err)
{
    shard_batch *mb = t->bufs + (size_t)t->cur * t->K;
    int K = t->K, rc, graph = graph_step(t, step);
    const float ms = 1.0f / (float)(r->preds > 0 ? r->preds : 1), ns = 1.0f / (float)r->seqs;
    for (int v = 0; v < K; v++) {
        const int accumulate = v > 0 || !t->a->grad_write;
        cudaGraphExec_t x = v == 0 && t->prep.step ? prepared_pass(t, step) : NULL;
        if (!x) {
            if ((rc = micro_upload(t, &mb[v], err)))
                return rc;
            if (tracing)
                optrace_rank_begin(t->tr, v, K, t->lens, mb[v].n);
            /* the last micro-batch completes the gradients: its backward starts the all-reduce */
            bert_set_grads_ready(t->b, t->gs && v == K - 1 ? gradsync_ready : NULL, t->gs);
            if (graph) {
                bert_forward_prepare(t->b, t->s);
                x = step_graphs_capture(t->graphs, t->b, step & 1, v, dropout_seed(t, step, v), ms, ns, accumulate);
            }
        }
        cudaCheck(cudaEventRecord(t->evr[2 * v], t->s));
        if (x) {
            cudaCheck(cudaGraphLaunch(x, t->s));
        } else {
            bert_forward(t->b, dropout_seed(t, step, v), t->s);
            /* --grad-write on: the first micro-batch writes the step's gradients, the others add to
             * them; off: all add to the gradients zeroed at the step's start */
            bert_backward(t->b, ms, ns, accumulate, t->s);
        }
        cudaCheck(cudaEventRecord(t->evr[2 * v + 1], t->s));
    }
    bert_set_grads_ready(t->b, NULL, NULL);
    t->graph_steps += graph;
    return UNPAD_OK;
}

/* The gradient all-reduce (bucketed and overlapped, or one call after backward). */
static void step_allreduce(trainer *t, int tracing)
{
    if (t->gs) {
        gradsync_finish(t->gs, t->s); /* s waits for every bucket */
        dp_after(t->dpp, gradsync_done(t->gs));
    } else if (t->comm.launcher != COMM_SINGLE) {
        if (tracing)
            optrace_op_begin(t->tr, OP_ALLREDUCE, t->s);
        comm_allreduce_sum_f32(&t->comm, bert_grad(t->b), (size_t)bert_param_count(t->b), t->s);
        if (tracing)
            optrace_op_end(t->tr, OP_ALLREDUCE, t->s);
        cudaCheck(cudaEventRecord(t->ev_ar, t->s));
        dp_after(t->dpp, t->ev_ar);
    }
}

/* This process's global batch as one packed batch (micro-batches back to back) into d. */
static void dump_batch(dump_file *d, const char *pre, const shard_batch *mb, int K)
{
    int64_t T = 0, n = 0, P = 0;
    for (int v = 0; v < K; v++)
        T += mb[v].T, n += mb[v].n, P += mb[v].P;
    int32_t *buf = malloc(((size_t)(2 * T + 2 * n + 1 + 2 * P)) * sizeof *buf);
    if (!buf) {
        d->failed = 1;
        return;
    }
    int32_t *ids = buf, *types = ids + T, *cu = types + T, *rows = cu + n + 1, *labels = rows + P, *nsp = labels + P;
    int64_t t0 = 0, s0 = 0, p0 = 0;
    cu[0] = 0;
    for (int v = 0; v < K; v++) {
        memcpy(ids + t0, mb[v].tokens, (size_t)mb[v].T * 4);
        memcpy(types + t0, mb[v].segments, (size_t)mb[v].T * 4);
        for (int i = 0; i < mb[v].n; i++)
            cu[s0 + i + 1] = (int32_t)t0 + mb[v].cu_seqlens[i + 1];
        for (int i = 0; i < mb[v].P; i++)
            rows[p0 + i] = (int32_t)t0 + mb[v].mpos[i];
        memcpy(labels + p0, mb[v].mlabels, (size_t)mb[v].P * 4);
        memcpy(nsp + s0, mb[v].nsp, (size_t)mb[v].n * 4);
        t0 += mb[v].T, s0 += mb[v].n, p0 += mb[v].P;
    }
    int64_t n1 = n + 1;
    char name[96];
    const struct { const char *what; const int64_t *cnt; const int32_t *p; } parts[] = {
        {"ids", &T, ids}, {"types", &T, types}, {"cu_seqlens", &n1, cu}, {"mlm_rows", &P, rows},
        {"mlm_labels", &P, labels}, {"nsp_labels", &n, nsp}};
    for (size_t k = 0; k < sizeof parts / sizeof *parts; k++) {
        snprintf(name, sizeof name, "%s%s", pre, parts[k].what);
        dump_add(d, name, 1, 1, parts[k].cnt, parts[k].p);
    }
    free(buf);
}

/* --dump-weights / --dump-grads (the first step of the run) and --dump-batches (every step). */
static int step_dumps(trainer *t, int step, const step_result *r, unpad_err *err)
{
    const train_args *a = t->a;
    const shard_batch *mb = t->bufs + (size_t)t->cur * t->K;
    dump_file d;
    int rc;
    if (t->dumpb.f) { /* one dump file, six tensors per step appended (dump_close writes the count) */
        char pre[48];
        snprintf(pre, sizeof pre, "step.%d.batch.", step);
        dump_batch(&t->dumpb, pre, mb, t->K);
        if (t->dumpb.failed)
            return unpad_fail(err, UNPAD_EIO, a->dump_batches, 0, "write failed");
    }
    if (step != t->first_step)
        return UNPAD_OK;
    if (a->dump_w) { /* the weights the first step saw (before its LAMB update) */
        if ((rc = dump_open(&d, a->dump_w, err)) || (rc = dump_params(&d, t->b, 0, err)) ||
            (rc = dump_close(&d, err)))
            return rc;
    }
    if (!a->dump_g)
        return UNPAD_OK;
    if ((rc = dump_open(&d, a->dump_g, err)) || (rc = dump_params(&d, t->b, 1, err)))
        return rc;
    bert_stats bs;
    bert_stats_read(t->b, &bs, t->s);
    float losses[4] = {(float)(bs.mlm_loss_sum / (r->preds ? r->preds : 1)), (float)(bs.nsp_loss_sum / r->seqs),
                       (float)bs.mlm_correct, (float)bs.nsp_correct};
    int64_t d4 = 4;
    dump_add(&d, "loss.mlm,loss.nsp,mlm_correct,nsp_correct", 0, 1, &d4, losses);
    if (t->K == 1) /* the peer comparison needs the batch; with K > 1 only the gradients */
        dump_batch(&d, "batch.", mb, 1);
    if ((rc = dump_close(&d, err)))
        return rc;
    printf("  dumped the gradients and batch of step %d to %s\n", step, a->dump_g);
    return UNPAD_OK;
}

/* Each virtual rank's compute, measured, beside its predicted cost; the online refit. */
static int step_measure(trainer *t, int step, step_result *r, unpad_err *err)
{
    int K = t->K, R = t->R;
    r->meas_max = r->meas_mean = r->pred_max = r->pred_mean = 0;
    for (int v = 0; v < K; v++) {
        float ms;
        cudaCheck(cudaEventElapsedTime(&ms, t->evr[2 * v], t->evr[2 * v + 1]));
        t->meas_us[v] = 1e3 * ms;
        r->meas_mean += t->meas_us[v] / K;
        r->meas_max = t->meas_us[v] > r->meas_max ? t->meas_us[v] : r->meas_max;
    }
    const double *pred = t->pred_buf + (size_t)t->cur * R;
    for (int g = 0; g < R; g++) {
        r->pred_mean += pred[g] / R;
        r->pred_max = pred[g] > r->pred_max ? pred[g] : r->pred_max;
    }
    if (!t->oc || t->steps_run == 0) /* step 1 warms up: left out */
        return UNPAD_OK;
    for (int v = 0; v < K; v++)
        t->otime[t->comm.rank * K + v] = (int32_t)(t->meas_us[v] * 1e3 < 2e9 ? t->meas_us[v] * 1e3 : 2e9);
    if (comm_uses_nccl(&t->comm)) {
        cudaCheck(cudaMemcpyAsync(t->otime_dev + t->comm.rank * K, t->otime + t->comm.rank * K, (size_t)K * 4,
                                  cudaMemcpyHostToDevice, t->s));
        comm_allgather_i32(&t->comm, t->otime_dev + t->comm.rank * K, t->otime_dev, (size_t)K, t->s);
        cudaCheck(cudaMemcpyAsync(t->otime, t->otime_dev, (size_t)R * 4, cudaMemcpyDeviceToHost, t->s));
        cudaCheck(cudaStreamSynchronize(t->s));
    }
    const int *L0 = t->olen + (size_t)t->cur * t->step_samples, *off = t->ooff + (size_t)t->cur * (R + 1);
    int rc;
    for (int g = 0; g < R; g++)
        if (off[g + 1] > off[g] && t->otime[g] > 0 &&
            (rc = online_add(t->oc, step, L0 + off[g], off[g + 1] - off[g], t->otime[g] * 1e-6, err)))
            return rc;
    online_fit f;
    unpad_err e2 = {0};
    if (online_refit(t->oc, &t->scost, &f, &e2) == UNPAD_OK) {
        t->scost = f.cost;
        dp_set_cost(t->dpp, f.cost); /* the balancer uses it from the next global batch it builds */
        t->ofit = f;
        t->online_refits++;
    } else {
        t->online_refused++;
        snprintf(t->online_why, sizeof t->online_why, "%.255s", e2.msg);
    }
    return UNPAD_OK;
}

/* The predictions, sequences, tokens and model FLOPs of the global batch in buffer `which`. */
static void step_counts(trainer *t, int which, step_result *r)
{
    const shard_batch *mb = t->bufs + (size_t)which * t->K;
    long P = 0, N = 0, T = 0;
    double flops = 0;
    for (int v = 0; v < t->K; v++) {
        P += mb[v].P;
        N += mb[v].n;
        T += mb[v].T;
        batch_lengths(&mb[v], t->lens);
        flops += ops_model_flops(&t->cfg, t->lens, mb[v].n);
    }
    if (t->dpp) { /* the loss is normalised over the GLOBAL batch, whatever each rank holds */
        P = dp_global_predictions(t->dpp);
        N = (long)t->step_samples;
        T *= t->comm.size;     /* throughput is reported for all ranks */
        flops *= t->comm.size;
    }
    r->preds = (double)P;
    r->seqs = (double)N;
    r->tokens = (double)T;
    r->flops = flops;
}

/* With --graphs on: the next step's first micro-batch uploaded (queued behind this step's LAMB)
 * and its pass captured, while this step computes. A micro-batch that needs larger activations, or
 * that the upload refuses (before it changes anything), is left to the next step, which makes the
 * same upload in its place. Returns the host's time. */
static double prepare_next(trainer *t, int next)
{
    double t0 = unpad_now_s();
    const int which = 1 - t->cur;
    const shard_batch *mb = t->bufs + (size_t)which * t->K;
    long act;
    int grown;
    bert_activations(t->b, &act, &grown);
    if (mb->T > act)
        return 0;
    step_result rn;
    memset(&rn, 0, sizeof rn);
    step_counts(t, which, &rn);
    unpad_err e = {0};
    if (micro_upload(t, mb, &e) != UNPAD_OK)
        return unpad_now_s() - t0;
    bert_set_hooks(t->b, NULL); /* this step may be traced; the next is not */
    bert_set_group_hooks(t->b, NULL);
    bert_set_grads_ready(t->b, NULL, NULL);
    bert_forward_prepare(t->b, t->s);
    bert_marks_get(t->b, &t->prep.before);
    t->prep.x = step_graphs_capture(t->graphs, t->b, next & 1, 0, dropout_seed(t, next, 0),
                                    1.0f / (float)(rn.preds > 0 ? rn.preds : 1), 1.0f / (float)rn.seqs,
                                    !t->a->grad_write);
    bert_marks_get(t->b, &t->prep.after);
    t->prep.step = next;
    t->prep.upload = bert_uploads(t->b);
    return unpad_now_s() - t0;
}

int trainer_step(trainer *t, int step, step_result *r, unpad_err *err)
{
    const train_args *a = t->a;
    memset(r, 0, sizeof *r);
    r->step = step;
    int tracing = t->tr && step >= a->trace_a && step <= a->trace_b, rc;
    char nv[32];
    snprintf(nv, sizeof nv, "step %d", step);
    nvtxRangePushA(nv);
    if (!t->have_next && (rc = trainer_fetch(t, t->cur, t->st.data_pos, err)))
        return rc;
    step_counts(t, t->cur, r);
    bert_set_hooks(t->b, NULL);
    bert_set_group_hooks(t->b, NULL);
    if (tracing) {
        optrace_step_begin(t->tr, step, t->s);
        bert_hooks h = optrace_hooks(t->tr);
        bert_set_hooks(t->b, &h);
        bert_group_hooks gh = optrace_group_hooks(t->tr);
        bert_set_group_hooks(t->b, &gh);
    }
    if (t->gs)
        gradsync_begin(t->gs, tracing ? t->tr : NULL);
    if (t->hold_us > 0) /* UNPAD_HOLD_STEP_US: the host enqueues the step while the GPU waits */
        hold_stream((uint64_t)(t->hold_us * 1e3), t->s);
    const double enq0 = unpad_now_s();
    cudaCheck(cudaEventRecord(t->ev_step[0], t->s));
    if (!a->grad_write)
        bert_grad_zero(t->b, t->s);
    else if (t->poison_grads) /* UNPAD_POISON_GRADS=1: every gradient must be written again */
        bert_grad_poison(t->b, t->s);
    bert_stats_reset(t->b, t->s);
    if ((rc = step_micro_batches(t, step, tracing, r, err)))
        return rc;
    step_allreduce(t, tracing);
    if (step == a->debug_nonfinite_step)
        bert_force_nonfinite(t->b, t->s);
    if ((rc = step_dumps(t, step, r, err)))
        return rc;
    r->lr = lr_at(a, step);
    bert_lamb_hparams hp = {.lr = r->lr, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6,
                            .weight_decay = a->wd, .max_grad_norm = a->max_norm, .step = step};
    if (tracing)
        optrace_op_begin(t->tr, OP_LAMB, t->s);
    nvtxRangePushA(op_name(OP_LAMB));
    bert_lamb_step(t->b, &hp, t->s);
    nvtxRangePop();
    if (tracing)
        optrace_op_end(t->tr, OP_LAMB, t->s);
    cudaCheck(cudaEventRecord(t->ev_step[1], t->s));
    r->host_s = unpad_now_s() - enq0;
    /* read the next step's batches while this one computes */
    t->have_next = step < a->steps;
    if (t->have_next && (rc = trainer_fetch(t, 1 - t->cur, t->st.data_pos + t->step_samples, err)))
        return rc;
    if (t->have_next && graph_step(t, step + 1))
        r->host_s += prepare_next(t, step + 1);
    /* the stop flag, agreed by all ranks, lands with the statistics (one synchronisation) */
    *t->stop_host = (float)(trainer_signal() != 0);
    if (comm_uses_nccl(&t->comm)) {
        cudaCheck(cudaMemcpyAsync(t->stop_dev, t->stop_host, sizeof(float), cudaMemcpyHostToDevice, t->s));
        comm_allreduce_sum_f32(&t->comm, t->stop_dev, 1, t->s);
        cudaCheck(cudaMemcpyAsync(t->stop_host, t->stop_dev, sizeof(float), cudaMemcpyDeviceToHost, t->s));
        /* the losses and counts of the global batch: each rank summed its own micro-batches, and
         * step_counts divides by the global predictions and sequences */
        if (t->comm.size > 1)
            comm_allreduce_sum_f32(&t->comm, bert_stats_sums(t->b), 4, t->s);
    }
    bert_stats bs;
    bert_stats_read(t->b, &bs, t->s); /* synchronises */
    t->stop = *t->stop_host > 0;
    nvtxRangePop();
    float span_ms;
    cudaCheck(cudaEventElapsedTime(&span_ms, t->ev_step[0], t->ev_step[1]));
    r->gpu_s = 1e-3 * span_ms;
    if (tracing) {
        if ((rc = optrace_step_end(t->tr, t->rank_us, t->K, err)))
            return rc;
        r->busy_s = 1e-6 * optrace_last_busy_us(t->tr);
    }
    r->mlm = bs.mlm_loss_sum / (r->preds ? r->preds : 1);
    r->nsp = bs.nsp_loss_sum / r->seqs;
    r->loss = r->mlm + r->nsp;
    r->mlm_correct = bs.mlm_correct;
    r->grad_norm = bs.grad_norm;
    r->nonfinite = !isfinite(r->loss) || !isfinite(r->grad_norm);
    if ((rc = step_measure(t, step, r, err)))
        return rc;
    return UNPAD_OK;
}

int trainer_dry_pass(trainer *t, unpad_err *err)
{
    shard_batch *mb = t->bufs + (size_t)t->cur * t->K;
    bert_batch bb;
    batch_view(&mb[0], &bb);
    int rc = bert_batch_upload(t->b, &bb, t->s, err);
    if (rc)
        return rc;
    bert_set_hooks(t->b, NULL);
    bert_set_group_hooks(t->b, NULL);
    bert_set_grads_ready(t->b, NULL, NULL);
    bert_stats_reset(t->b, t->s);
    bert_forward(t->b, mix64((uint64_t)t->a->seed ^ 0x5EEDull), t->s);
    bert_backward(t->b, 1.0f / (float)(mb[0].P > 0 ? mb[0].P : 1), 1.0f / (float)(mb[0].n > 0 ? mb[0].n : 1), 0,
                  t->s);
    /* nothing of it stays: the gradients and the statistics are cleared (a step with --grad-write
     * on writes every gradient, off zeroes them again; cleared here all the same) */
    bert_grad_zero(t->b, t->s);
    bert_stats_reset(t->b, t->s);
    if (comm_uses_nccl(&t->comm)) { /* the communicator's first collective sets up its channels */
        *t->stop_host = 0;
        cudaCheck(cudaMemcpyAsync(t->stop_dev, t->stop_host, sizeof(float), cudaMemcpyHostToDevice, t->s));
        comm_allreduce_sum_f32(&t->comm, t->stop_dev, 1, t->s);
    }
    cudaCheck(cudaStreamSynchronize(t->s));
    return UNPAD_OK;
}

int trainer_evaluate(trainer *t, double *acc, double *loss, unpad_err *err)
{
    double tot_l = 0, tot_c = 0, tot_p = 0;
    /* after a step, cur holds the next step's prefetched batch (or the last step's): the other is free */
    shard_batch *sb = &t->bufs[(size_t)(1 - t->cur) * t->K];
    bert_set_dropout(t->b, 0);
    bert_set_hooks(t->b, NULL);
    bert_set_group_hooks(t->b, NULL);
    long n = source_samples(t->evsrc);
    int rc = UNPAD_OK;
    for (int i = 0; i < t->a->eval_batches && rc == UNPAD_OK; i++) {
        if (n > 0 && (int64_t)i * t->B >= n)
            break;
        bert_batch bb;
        if ((rc = source_get(t->evsrc, (int64_t)i * t->B, t->B, sb, err)))
            break;
        batch_view(sb, &bb);
        if ((rc = bert_batch_upload(t->b, &bb, t->s, err)))
            break;
        bert_stats_reset(t->b, t->s);
        bert_forward(t->b, 0, t->s);
        bert_stats bs;
        bert_stats_read(t->b, &bs, t->s);
        tot_l += bs.mlm_loss_sum;
        tot_c += bs.mlm_correct;
        tot_p += bb.P;
    }
    bert_set_dropout(t->b, 1);
    *acc = tot_p > 0 ? tot_c / tot_p : 0;
    *loss = tot_p > 0 ? tot_l / tot_p : 0;
    return rc;
}
