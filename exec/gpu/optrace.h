/* optrace.h — per-operator timing of training steps with CUDA events, written as trace rows
 * (traces/NAME.csv, the columns of sim/trace.h) and optionally as Chrome trace events
 * (exec/chrome_trace.h: one file per process, pid = the process's rank; lanes (tid) per virtual
 * rank v: v*16 its compute stream, v*16+k its FMHA group stream k; OPTRACE_TID_STEPS the steps,
 * OPTRACE_TID_ALLREDUCE the communication stream, OPTRACE_TID_OPTIMIZER LAMB; timestamps in
 * microseconds since the run's start, each step anchored at the host time it was enqueued, which
 * follows the previous step's synchronisation). Rows carry the predicted FLOPs and bytes of each operator instance
 * from the shared cost library (sim/ops.h) for the micro-batch it ran on, so a measured row joins
 * the simulator's row of the same step, rank, operator and layer. */
#ifndef UNPAD_OPTRACE_H
#define UNPAD_OPTRACE_H

#include <stdio.h>

#include <cuda_runtime.h>

#include "chrome_trace.h"
#include "gpu/bert.h"
#include "ops.h"
#include "trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct optrace optrace;

#define OPTRACE_TID_STEPS 998
#define OPTRACE_TID_ALLREDUCE 1000
#define OPTRACE_TID_OPTIMIZER 1001

/* csv / json may be NULL (not written); the tracer does not close them. products (TRACE_BF16,
 * TRACE_FP8, TRACE_FP32) goes into the CSV's products line. proc_rank names the JSON process, vranks
 * its lanes; start_us: the run's start (chrome_trace_now_us), the zero of the JSON timestamps. NULL
 * with err when out of host memory. */
optrace *optrace_create(const char *hw, const model_cfg *m, int products, FILE *csv, chrome_trace *json,
                        int proc_rank, int vranks, int64_t start_us, unpad_err *err);
void optrace_free(optrace *t);
/* The trainer runs its last layer after the attention on the heads' rows (bert_options.last_heads):
 * that layer's rows of those operators count their FLOPs and bytes (ops_on_head_rows). */
void optrace_set_last_heads(optrace *t, int on);

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
 * each rank in rank_us (up to max_ranks entries; may be NULL). ENOMEM if recording the step ran
 * out of host memory (its rows are then lost). */
int optrace_step_end(optrace *t, double *rank_us, int max_ranks, unpad_err *err);
/* The last traced step's summed operator time on the compute stream: every rank's (as rank_us)
 * plus the optimizer; the step's GPU span minus this is the idle time inside the step. */
double optrace_last_busy_us(const optrace *t);
/* Mean time per traced step of operator op, all ranks and layers together (grouped FMHA rows of a
 * layer count their union). */
double optrace_op_mean_us(const optrace *t, int op);

#ifdef __cplusplus
}
#endif

#endif
