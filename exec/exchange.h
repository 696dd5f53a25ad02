/* exchange.h — the balanced sample exchange of data-parallel training (docs/design.md).
 *
 * Every rank loads its own slice of the global batch (loader order: rank r holds the samples
 * [r*b, (r+1)*b) of the global batch of gpus*b); the ranks all-gather the (length, predictions)
 * of all samples (tiny), every rank runs the same balancer (sim/balance.h) on them and so knows
 * the same assignment; then each sample moves from the rank that loaded it to the rank that
 * trains it. This file is the plan of that move and the record each sample travels as; the
 * transport (NCCL send/recv, or nothing with virtual ranks on one GPU) is exec/gpu/comm.c.
 *
 * A sample record is int32 words: [global index, len, npred, nsp, tokens(len), segments(len),
 * masked positions(npred), masked labels(npred)], 4 + 2 len + 2 npred words. */
#ifndef UNPAD_EXCHANGE_H
#define UNPAD_EXCHANGE_H

#include <stdint.h>

#include "balance.h"

typedef struct {
    int32_t len, npred, nsp;
    int32_t *tokens, *segments;    /* (len) */
    int32_t *mpos, *mlabel;        /* (npred) positions within the sample, labels */
} exchange_sample;

static inline int64_t exchange_record_words(int len, int npred) { return 4 + 2L * len + 2L * npred; }

typedef struct {
    int gpus, n;
    int *owner;        /* (n) rank that loaded each sample */
    /* Pair (src, dst) = src * gpus + dst: samples seq[start[p] .. start[p+1]) go from src to dst,
     * in ascending global index. src == dst pairs are samples that stay. */
    int *start;        /* (gpus * gpus + 1) */
    int *seq;          /* (n) */
    int64_t *words;    /* (gpus * gpus) record words of each pair */
} exchange_plan;

/* owner[i] of the loader order: gpus*b samples, rank r owns [r*b, (r+1)*b); n need not be a
 * multiple of gpus (the first n % gpus ranks own one more). */
void exchange_loader_owner(int n, int gpus, int *owner);

int exchange_plan_build(const balance_result *assign, const int *owner, const int *len,
                        const int *npred, exchange_plan *p, unpad_err *err);
void exchange_plan_free(exchange_plan *p);

/* Packs the records rank `src` sends to `dst` into buf (exchange_plan.words[src*gpus+dst] words);
 * get(i) returns the loaded sample of global index i (held by src). */
typedef const exchange_sample *(*exchange_get_fn)(void *ctx, int global_index);
int exchange_pack(const exchange_plan *p, int src, int dst, exchange_get_fn get, void *ctx,
                  int32_t *buf, unpad_err *err);

/* Walks the records of a received buffer; calls put for each. Refuses records that don't match
 * the plan (wrong index, length or size) so a corrupted transfer is never trained on. */
typedef int (*exchange_put_fn)(void *ctx, int global_index, const exchange_sample *s);
int exchange_unpack(const exchange_plan *p, int src, int dst, const int *len, const int *npred,
                    const int32_t *buf, exchange_put_fn put, void *ctx, unpad_err *err);

#endif
