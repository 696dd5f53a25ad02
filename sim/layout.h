/* layout.h — length policies: how a GPU's batch of sequence lengths becomes work on the GPU.
 *
 * A cap (`--max-len N`) truncates every longer sequence to N first (layout_truncate); N at most the
 * model's max_len. Then a layout (`--layout LIST`):
 *   unpadded      the trainer's own: GEMMs on the sum of the lengths, attention per sequence;
 *   padded        every sequence padded to N (the cap, else the model's max_len): GEMMs and
 *                 LayerNorms on n x N tokens, attention n x N^2 (a padded FMHA runs its padding);
 *   pad-longest   each GPU's micro-batch padded to its longest sequence (dynamic padding, as
 *                 common trainers' collators do);
 *   buckets=B1/B2/...  a step's batch comes from one length bucket (bucket j holds lengths in
 *                 (B[j-1], B[j]], chosen with its share of the sequences), every sequence padded to
 *                 its bucket's upper bound; the bounds increase and the last is at least N;
 *   packed[:K]    each GPU's sequences packed first-fit decreasing into rows of N tokens, at most K
 *                 per row (default 3, as the packed-BERT MLPerf submissions): GEMMs on rows x N
 *                 tokens (padding within a row included), attention per sequence (block-diagonal).
 * Predictions (15% of each real length) and the NSP head (one row per sequence) never change; the
 * sample exchange moves the real tokens. A layout fills the step model's batch sums (step.h), so
 * every layout is timed by the same model. */
#ifndef UNPAD_LAYOUT_H
#define UNPAD_LAYOUT_H

#include "dist.h"
#include "step.h"

typedef enum {
    LAYOUT_UNPADDED,
    LAYOUT_PADDED,
    LAYOUT_PAD_LONGEST,
    LAYOUT_BUCKETS,
    LAYOUT_PACKED,
    LAYOUT_KIND_COUNT
} layout_kind;

#define LAYOUT_MAX_BUCKETS 32
#define LAYOUT_PACK_DEFAULT 3

typedef struct {
    layout_kind kind;
    int nb, bounds[LAYOUT_MAX_BUCKETS]; /* buckets: ascending upper lengths */
    int per_row;                        /* packed: most sequences in a row */
    int len;                            /* pad / row length N (layout_resolve) */
} layout;

/* Parses one layout name ("unpadded", "padded", "pad-longest", "buckets=128/256/384/512",
 * "packed", "packed:K"); errors name `flag` and the value. */
int layout_parse(const char *flag, const char *text, layout *out, unpad_err *err);
/* A comma-separated list of them (at most max). */
int layout_parse_list(const char *flag, const char *text, layout *out, int *n, int max,
                      unpad_err *err);
/* "unpadded", "buckets=128/256/384/512", "packed:3", ... */
const char *layout_name(const layout *l, char *buf, size_t n);

/* Checks a cap (0: none) against the model's max_len: a cap above it cannot be trained. */
int layout_check_cap(int cap, int model_max_len, unpad_err *err);
/* Sets l->len = N (the cap, or the model's max_len) and checks the layout can hold every length up
 * to the distribution's longest after the cap (buckets: the last bound). `flag` names the option. */
int layout_resolve(layout *l, int cap, int model_max_len, int longest, const char *flag,
                   unpad_err *err);

/* The distribution with every length above cap moved to cap (cap >= d->max_len: a copy). */
int layout_truncate(const unpad_dist *d, int cap, unpad_dist *out, unpad_err *err);
/* Buckets: out[j] the distribution within bucket j, pick the bucket distribution (length j+1 has
 * bucket j's share of the sequences); out has room for l->nb. Empty buckets have total 0. */
int layout_bucket_dists(const layout *l, const unpad_dist *d, unpad_dist *pick, unpad_dist *out,
                        unpad_err *err);

/* Draws a step's lengths as the layout's loader would: from d (already capped), or for buckets
 * one bucket (with its share of the sequences) and the lengths within it. */
typedef struct layout_sampler layout_sampler;
int layout_sampler_alloc(const layout *l, const unpad_dist *d, uint64_t seed, layout_sampler **out,
                         unpad_err *err);
void layout_sampler_free(layout_sampler *s);
void layout_sample(layout_sampler *s, int *len, int n);

/* Scratch (ints) layout_batch needs for a batch of n sequences. */
static inline int layout_scratch_len(int n)
{
    return 3 * n + 1;
}
/* One GPU's batch in the layout: lengths len[idx[i]] for i < n (idx NULL: len[0..n)), already
 * capped; scratch of layout_scratch_len(n) ints (packed only). */
void layout_batch(const layout *l, const step_model *sm, const int *len, const int *idx, int n,
                  int *scratch, step_batch *out);

#endif
