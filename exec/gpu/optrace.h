/* optrace.h — per-operator timing of training steps with CUDA events, written as trace rows
 * (traces/NAME.csv, the columns of sim/trace.h) and optionally as Chrome trace events (JSON, for
 * chrome://tracing or Perfetto). Rows carry the predicted FLOPs and bytes of each operator instance
 * from the shared cost library (sim/ops.h) for the micro-batch it ran on, so a measured row joins
 * the simulator's row of the same step, rank, operator and layer. */
#ifndef UNPAD_OPTRACE_H
#define UNPAD_OPTRACE_H

#include <stdio.h>

#include <cuda_runtime.h>

#include "gpu/bert.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct optrace optrace;

/* csv / json may be NULL (not written); the tracer does not close them. */
optrace *optrace_create(const char *hw, const model_cfg *m, FILE *csv, FILE *json);
void optrace_free(optrace *t);

/* The hooks to give bert_set_hooks and bert_set_group_hooks. A grouped FMHA launch becomes a row
 * with its group and stream, counting its own sequences; the rank's time adds the union of its
 * groups' spans. */
bert_hooks optrace_hooks(optrace *t);
bert_group_hooks optrace_group_hooks(optrace *t);

/* Marks the start of a step (all start_us are relative to it). */
void optrace_step_begin(optrace *t, int step, cudaStream_t s);
/* The rank the next operators belong to (virtual ranks), with its sequence lengths (copied). */
void optrace_rank_begin(optrace *t, int rank, int gpus, const int *len, int n);
/* An operator outside the model (the optimizer, all-reduce): a begin/end pair on stream s. */
void optrace_op_begin(optrace *t, int op, cudaStream_t s);
void optrace_op_end(optrace *t, int op, cudaStream_t s);
/* One gradient all-reduce bucket of `bytes` on stream s (trace column stream = `stream`, group =
 * the bucket's index): a row of op allreduce, layer -1. */
void optrace_bucket_begin(optrace *t, int bucket, int stream, double bytes, cudaStream_t s);
void optrace_bucket_end(optrace *t, cudaStream_t s);
/* Synchronises, writes the step's rows and forgets them. Returns the summed operator time of
 * each rank in rank_us (up to max_ranks entries; may be NULL). */
void optrace_step_end(optrace *t, double *rank_us, int max_ranks);
/* Mean time per traced step of operator op, all ranks and layers together (grouped FMHA rows of a
 * layer count their union). */
double optrace_op_mean_us(const optrace *t, int op);

#ifdef __cplusplus
}
#endif

#endif
