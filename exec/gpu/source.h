/* source.h — where the trainer's micro-batches come from: shards (exec/shard.h) read in a shuffled
 * order per epoch, or synthetic tokens with lengths drawn from a distribution. Both are pure
 * functions of (seed, position): micro-batch r of global batch g holds the samples at positions
 * (g * ranks + r) * per_rank ... + per_rank - 1 of the sample stream, so the data position of a
 * checkpoint is the number of global batches consumed and a resumed run reads the same batches. */
#ifndef UNPAD_SOURCE_H
#define UNPAD_SOURCE_H

#include <stdint.h>

#include "dist.h"
#include "model.h"
#include "shard.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct batch_source batch_source;

/* Synthetic: every sample is a pure function of (seed, position); lengths from d (clipped to
 * cfg->max_len, at least 8), random token ids, [CLS] A [SEP] B [SEP] with the split at a random
 * point, masked positions (15%, at most max_predictions) replaced by [MASK] (id 103), random NSP
 * labels. */
int source_synthetic(const model_cfg *cfg, const unpad_dist *d, uint64_t seed, batch_source **out,
                     unpad_err *err);
/* Shards: a file or a folder; its vocabulary and max_len must fit the model. */
int source_shard(const model_cfg *cfg, const char *path, uint64_t seed, batch_source **out,
                 unpad_err *err);
void source_free(batch_source *s);

/* Samples of one epoch (0 for synthetic: endless). */
long source_samples(const batch_source *s);
/* Most tokens a sample may have (to size the activations). */
int source_max_len(const batch_source *s);
const char *source_describe(const batch_source *s); /* for the log */
/* The activations' first size for micro-batches of n samples: memory_arena_tokens (sim/memory.h) of
 * the lengths this source gives (the synthetic distribution clamped as drawn, or every sample of the
 * shards). */
long source_arena_tokens(const batch_source *s, int n);

/* Fills b (capacities: n sequences of max_len tokens, n * max_predictions masks) with the
 * micro-batch of n samples starting at sample position pos of the stream. */
int source_get(batch_source *s, int64_t pos, int n, shard_batch *b, unpad_err *err);

#ifdef __cplusplus
}
#endif

#endif
