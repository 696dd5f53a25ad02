/* gradsync.h — the gradient all-reduce in buckets, overlapped with the backward pass.
 *
 * bert_backward reports each range of the flat fp32 gradient buffer as soon as it is complete
 * (heads, then each encoder layer from the last, then the embeddings: descending and contiguous).
 * gradsync merges consecutive ranges until a bucket holds at least bucket_bytes, then enqueues its
 * NCCL all-reduce on the communication stream after an event recorded on the compute stream, so
 * layer l's all-reduce runs while layer l-1's backward computes. gradsync_finish sends the rest and
 * makes the compute stream wait for every bucket before the optimizer reads the gradients.
 *
 * With virtual ranks only the last micro-batch's backward completes the gradients: the trainer
 * installs gradsync_ready as the callback for that micro-batch alone. */
#ifndef UNPAD_GRADSYNC_H
#define UNPAD_GRADSYNC_H

#include <stdint.h>

#include <cuda_runtime.h>

#include "gpu/comm.h"
#include "gpu/optrace.h"

/* The trace's stream column for the communication stream (FMHA groups use 0..7). */
#define GRADSYNC_TRACE_STREAM 8

typedef struct gradsync gradsync;

/* grad: (n) fp32 on the device. bucket_bytes > 0. Returns NULL with a message on failure. */
gradsync *gradsync_create(comm_t *c, float *grad, int64_t n, double bucket_bytes, unpad_err *err);
void gradsync_free(gradsync *g);

/* Starts a step's all-reduce; tr (may be NULL) receives one row per bucket. */
void gradsync_begin(gradsync *g, optrace *tr);
/* bert_grads_ready_fn: ctx is the gradsync. */
void gradsync_ready(void *ctx, int64_t begin, int64_t end, cudaStream_t s);
/* Sends what is pending and makes s wait for every bucket. Checks that the step's ranges covered
 * the whole buffer exactly once (an invariant: stops with file:line otherwise). */
void gradsync_finish(gradsync *g, cudaStream_t s);
/* Recorded on the communication stream after the step's last bucket (for dp_after). */
cudaEvent_t gradsync_done(const gradsync *g);

#endif
