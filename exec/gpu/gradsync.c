/* gradsync.c — bucketed gradient all-reduce overlapped with backward (see gradsync.h). */
#include <stdio.h>
#include <stdlib.h>

#include "gpu/gradsync.h"
#include "common.h" /* after the CUDA headers: cudaCheck */

#define GRADSYNC_EVENTS 256 /* buckets per step at most (more ranges are merged) */

struct gradsync {
    comm_t *comm;
    float *grad;
    int64_t n;
    double bucket_bytes;
    cudaStream_t cs;            /* communication stream */
    cudaEvent_t ready[GRADSYNC_EVENTS], done;
    int used;                   /* events (buckets) this step */
    int64_t lo, hi;             /* pending range [lo, hi), empty when lo == hi */
    int64_t covered;            /* elements reported this step */
    int64_t next_hi;            /* the next range must end here (descending, contiguous) */
    optrace *tr;
};

gradsync *gradsync_create(comm_t *c, float *grad, int64_t n, double bucket_bytes, unpad_err *err)
{
    if (!(bucket_bytes > 0) || n < 1) {
        unpad_fail(err, UNPAD_EINVAL, NULL, 0, "all-reduce buckets of %g bytes over %lld gradients",
                   bucket_bytes, (long long)n);
        return NULL;
    }
    gradsync *g = calloc(1, sizeof *g);
    if (!g) {
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory");
        return NULL;
    }
    g->comm = c;
    g->grad = grad;
    g->n = n;
    g->bucket_bytes = bucket_bytes;
    /* a high priority: a bucket's NCCL kernel starts as soon as its gradients are ready */
    int lo = 0, hi = 0;
    cudaCheck(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    cudaCheck(cudaStreamCreateWithPriority(&g->cs, cudaStreamNonBlocking, hi));
    for (int i = 0; i < GRADSYNC_EVENTS; i++)
        cudaCheck(cudaEventCreateWithFlags(&g->ready[i], cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming));
    return g;
}

void gradsync_free(gradsync *g)
{
    if (!g)
        return;
    for (int i = 0; i < GRADSYNC_EVENTS; i++)
        cudaEventDestroy(g->ready[i]);
    cudaEventDestroy(g->done);
    cudaStreamDestroy(g->cs);
    free(g);
}

void gradsync_begin(gradsync *g, optrace *tr)
{
    g->used = 0;
    g->lo = g->hi = g->n;
    g->covered = 0;
    g->next_hi = g->n;
    g->tr = tr;
}

/* Enqueues the pending range's all-reduce after the work enqueued on s so far. */
static void flush(gradsync *g, cudaStream_t s)
{
    if (g->hi <= g->lo)
        return;
    cudaEvent_t ev = g->ready[g->used < GRADSYNC_EVENTS ? g->used : GRADSYNC_EVENTS - 1];
    cudaCheck(cudaEventRecord(ev, s));
    cudaCheck(cudaStreamWaitEvent(g->cs, ev, 0));
    size_t cnt = (size_t)(g->hi - g->lo);
    if (g->tr)
        optrace_bucket_begin(g->tr, g->used, GRADSYNC_TRACE_STREAM, 4.0 * (double)cnt, g->cs);
    comm_allreduce_sum_f32(g->comm, g->grad + g->lo, cnt, g->cs);
    if (g->tr)
        optrace_bucket_end(g->tr, g->cs);
    g->used++;
    g->hi = g->lo;
}

void gradsync_ready(void *ctx, int64_t begin, int64_t end, cudaStream_t s)
{
    gradsync *g = ctx;
    invariantCheck(begin >= 0 && end <= g->n && begin < end && end == g->next_hi,
                   "gradient range [%lld, %lld) is not the next one (expected to end at %lld)", (long long)begin,
                   (long long)end, (long long)g->next_hi);
    g->next_hi = begin;
    g->covered += end - begin;
    g->lo = begin; /* contiguous with the pending range [end, hi) */
    /* the last events stay for the final flush: merge when they run short */
    if (4.0 * (double)(g->hi - g->lo) >= g->bucket_bytes && g->used < GRADSYNC_EVENTS - 1)
        flush(g, s);
}

void gradsync_finish(gradsync *g, cudaStream_t s)
{
    invariantCheck(g->covered == g->n && g->next_hi == 0,
                   "the backward reported %lld of %lld gradients before the all-reduce", (long long)g->covered,
                   (long long)g->n);
    flush(g, s);
    cudaCheck(cudaEventRecord(g->done, g->cs));
    cudaCheck(cudaStreamWaitEvent(s, g->done, 0));
}

cudaEvent_t gradsync_done(const gradsync *g) { return g->done; }
