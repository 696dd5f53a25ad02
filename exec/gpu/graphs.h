/* graphs.h — a micro-batch's forward and backward launched as one CUDA graph (unpad-train
 * --graphs on): no gap between its kernels for the GPU to wait through.
 *
 * Every micro-batch has its own shapes (tokens, lengths, the attention's groups), so each pass is
 * captured anew; the capture then updates an executable graph of the same topology kept from an
 * earlier step (cudaGraphExecUpdate: new kernel parameters, no new instantiation), or is
 * instantiated into a new one when no kept graph has its topology (the GEMM plans of other token
 * counts launch other kernels, or more of them). Executable graphs are kept per micro-batch index
 * and step parity, at most STEP_GRAPHS_KEEP topologies each: the one updated for step n was last
 * launched in step n - 2, whose statistics the host has read, so no launch of it is in flight. */
#ifndef UNPAD_GRAPHS_H
#define UNPAD_GRAPHS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gpu/bert.h"

#define STEP_GRAPHS_KEEP 32

typedef struct step_graphs step_graphs;

typedef struct {
    long captures, updates, instantiations; /* passes captured; of them, kept graphs updated and
                                               graphs instantiated */
    long update_refused;                    /* updates refused (the topology differed): instantiated */
    long nodes;                             /* nodes of the last captured pass */
    double host_s;                          /* the host's time capturing, updating, instantiating */
} step_graphs_stats;

/* K: micro-batches per step. NULL with a message in err when out of host memory. */
step_graphs *step_graphs_create(int K, unpad_err *err);
void step_graphs_free(step_graphs *g);

/* Captures bert_forward(dseed) and bert_backward(mlm_scale, nsp_scale, accumulate) of the uploaded
 * micro-batch (bert must have no hooks and no gradient-ready callback) and returns the executable
 * graph of slot (parity, v) holding them, to launch on the step's stream. The capture enqueues
 * nothing: the host's marks of the pass advance (bert_marks). */
cudaGraphExec_t step_graphs_capture(step_graphs *g, bert *b, int parity, int v, uint64_t dseed, float mlm_scale,
                                    float nsp_scale, int accumulate);

void step_graphs_stats_get(const step_graphs *g, step_graphs_stats *st);

#endif
