/* dp.h — one data-parallel step's batch: balanced across every (virtual) rank, moved by the
 * balanced sample exchange.
 *
 * R = ranks x K virtual ranks train on a global batch of R x B samples at positions
 * [pos, pos + R B) of the sample stream. Each rank loads its own K B samples (loader order), the
 * ranks all-gather the (length, predictions) of all of them, every rank runs the same balancer
 * (sim/balance.h, the plan's policy and per-sequence cost) and so computes the same assignment of
 * samples to the R virtual ranks; samples then move to the rank that trains them (NCCL with
 * several ranks; a local copy through the same records with one). Each virtual rank's micro-batch
 * holds its samples longest first, so FMHA length groups are contiguous ranges. */
#ifndef UNPAD_DP_H
#define UNPAD_DP_H

#include <stdint.h>

#include "balance.h"
#include "gpu/comm.h"
#include "gpu/source.h"

typedef struct dp dp;

typedef struct {
    int K;                   /* virtual ranks per process */
    int B;                   /* samples per virtual rank (with equal counts) */
    int max_len, max_pred;   /* per sample */
    balance_policy policy;
    balance_count count;
    int tokens;              /* 1: balance tokens; 0: the per-sequence cost below */
    seq_cost cost;           /* per-sequence cost balanced (a copy; dp_set_cost replaces it) */
} dp_options;

/* Micro-batch capacities are sized for free counts (a virtual rank may get up to all R B samples'
 * tokens, bounded by the micro-batch token capacity max_tokens). */
dp *dp_create(comm_t *c, const dp_options *o, long max_tokens, unpad_err *err);
void dp_free(dp *d);

/* Builds this process's K micro-batches of the global batch at stream position pos. mb[v] must
 * have the capacities dp_create was given. pred_us (R) receives each virtual rank's predicted
 * compute (the balanced weights in microseconds), or NULL. */
int dp_step(dp *d, batch_source *src, int64_t pos, shard_batch *mb, double *pred_us, unpad_err *err);

/* The lengths of global virtual rank g's samples in the last dp_step (any order) into len (room
 * for the global batch); returns their count (0 for a bad g). */
int dp_rank_lengths(const dp *d, int g, int *len);
/* Masked predictions in the whole global batch of the last dp_step (the MLM loss normaliser). */
long dp_global_predictions(const dp *d);
/* Balances every later global batch with this per-sequence cost (the online calibration's refit;
 * copied: the caller's variable may change). No effect when the options balance tokens. */
void dp_set_cost(dp *d, seq_cost cost);
/* Orders the next step's collectives after `ev` (recorded after the gradient all-reduce was
 * enqueued): NCCL calls on one communicator must not run concurrently from two streams. */
void dp_after(dp *d, cudaEvent_t ev);

#endif
