/* source.c — micro-batches from shards or synthetic tokens (see source.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/source.h"
#include "memory.h"
#include "ops.h"

#define SYNTH_LEN_MIN 8 /* the shortest synthetic sample: [CLS] A [SEP] B [SEP] with room to mask */

enum { TOK_CLS = 101, TOK_SEP = 102, TOK_MASK = 103, TOK_FIRST_WORD = 1000 };

struct batch_source {
    model_cfg cfg;
    uint64_t seed;
    char desc[512];
    /* synthetic */
    const unpad_dist *dist;
    /* shards */
    shard *sh;
    long n;
    long *perm;       /* (n) this epoch's order */
    int64_t epoch;    /* epoch of perm, -1 none */
    long *idx;        /* (max batch) */
    int cap_idx;
    shard_sample sample;
};

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t below(uint64_t *x, uint64_t n) { return splitmix(x) % n; }

/* A source of model cfg and seed, the rest zeroed; NULL (err filled) without memory. */
static batch_source *source_new(const model_cfg *cfg, uint64_t seed, unpad_err *err)
{
    batch_source *s = calloc(1, sizeof *s);
    if (!s) {
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    s->seed = seed;
    return s;
}

int source_synthetic(const model_cfg *cfg, const unpad_dist *d, uint64_t seed, batch_source **out,
                     unpad_err *err)
{
    batch_source *s = source_new(cfg, seed, err);
    if (!s)
        return UNPAD_ENOMEM;
    s->dist = d;
    snprintf(s->desc, sizeof s->desc, "synthetic tokens, lengths from %s", d->source);
    *out = s;
    return UNPAD_OK;
}

int source_shard(const model_cfg *cfg, const char *path, uint64_t seed, batch_source **out,
                 unpad_err *err)
{
    batch_source *s = source_new(cfg, seed, err);
    if (!s)
        return UNPAD_ENOMEM;
    s->epoch = -1;
    int rc = shard_open(path, &s->sh, err);
    if (rc) {
        free(s);
        return rc;
    }
    const shard_info *in = shard_get_info(s->sh);
    s->n = shard_count(s->sh);
    if (s->n < 1 || (int)in->vocab_size > cfg->vocab || (int)in->max_len > cfg->max_position ||
        (int)in->max_len > 512 || (int)in->max_pred > cfg->max_predictions) {
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0,
                        "shard (%ld samples, vocab %u, max_len %u, max_pred %u) does not fit model %s "
                        "(vocab %d, max_position %d, max_predictions %d); remake it with unpad-data",
                        s->n, in->vocab_size, in->max_len, in->max_pred, cfg->name, cfg->vocab,
                        cfg->max_position, cfg->max_predictions);
        source_free(s);
        return rc;
    }
    s->perm = malloc((size_t)s->n * sizeof *s->perm);
    if (!s->perm) {
        source_free(s);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    snprintf(s->desc, sizeof s->desc, "%s: %ld samples, %llu tokens (%d file%s)", path, s->n,
             (unsigned long long)in->n_tokens, in->n_files, in->n_files == 1 ? "" : "s");
    *out = s;
    return UNPAD_OK;
}

void source_free(batch_source *s)
{
    if (!s)
        return;
    if (s->sh)
        shard_close(s->sh);
    free(s->perm);
    free(s->idx);
    free(s);
}

long source_samples(const batch_source *s) { return s->sh ? s->n : 0; }
int source_max_len(const batch_source *s)
{
    if (s->sh)
        return (int)shard_get_info(s->sh)->max_len;
    return s->dist->max_len < s->cfg.max_len ? s->dist->max_len : s->cfg.max_len;
}
const char *source_describe(const batch_source *s) { return s->desc; }

long source_arena_tokens(const batch_source *s, int n)
{
    int maxl = source_max_len(s);
    if (!s->sh)
        return memory_dist_tokens(n, SYNTH_LEN_MIN, maxl, s->dist);
    const int *len = shard_lengths(s->sh);
    double s1 = 0, s2 = 0;
    for (long i = 0; i < s->n; i++) {
        s1 += len[i];
        s2 += (double)len[i] * len[i];
    }
    double mean = s1 / (double)s->n, var = s2 / (double)s->n - mean * mean;
    return memory_arena_tokens(n, maxl, mean, var > 0 ? sqrt(var) : 0);
}

static void shuffle_epoch(batch_source *s, int64_t epoch)
{
    uint64_t x = s->seed * 0x2545F4914F6CDD1Dull + (uint64_t)epoch + 1;
    for (long i = 0; i < s->n; i++)
        s->perm[i] = i;
    for (long i = s->n - 1; i > 0; i--) {
        long j = (long)below(&x, (uint64_t)i + 1);
        long t = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = t;
    }
    s->epoch = epoch;
}

static int get_shard(batch_source *s, int64_t pos, int n, shard_batch *b, unpad_err *err)
{
    if (n > s->cap_idx) {
        free(s->idx);
        s->idx = malloc((size_t)n * sizeof *s->idx);
        if (!s->idx)
            return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        s->cap_idx = n;
    }
    for (int i = 0; i < n; i++) {
        int64_t p = pos + i;
        int64_t e = p / s->n;
        if (e != s->epoch)
            shuffle_epoch(s, e);
        s->idx[i] = s->perm[p % s->n];
    }
    return shard_pack_batch(s->sh, s->idx, n, b, err);
}

static int get_synthetic(batch_source *s, int64_t pos, int n, shard_batch *b, unpad_err *err)
{
    const model_cfg *c = &s->cfg;
    int maxl = source_max_len(s);
    dist_sampler *ds;
    int rc = dist_sampler_alloc(s->dist, s->seed * 1000003ull + (uint64_t)pos + 1, &ds, err);
    if (rc)
        return rc;
    b->n = n;
    b->T = 0;
    b->P = 0;
    b->max_seqlen = 0;
    b->cu_seqlens[0] = 0;
    for (int k = 0; k < n; k++) {
        /* Each sample is a function of (seed, its own position) alone, so any selection of
         * positions (balanced micro-batches, another rank count) sees the same samples. */
        uint64_t p = (uint64_t)pos + (uint64_t)k;
        dist_sampler_seed(ds, s->seed * 1000003ull + p + 1);
        uint64_t x = s->seed ^ (p * 0x9E3779B97F4A7C15ull);
        int len;
        dist_sample(ds, &len, 1);
        if (len > maxl)
            len = maxl;
        if (len < SYNTH_LEN_MIN)
            len = SYNTH_LEN_MIN;
        if (b->T + len > b->cap_tokens || k >= b->cap_seqs) {
            dist_sampler_free(ds);
            return unpad_fail(err, UNPAD_ERANGE, NULL, 0, "synthetic batch exceeds the batch buffers");
        }
        int32_t *tok = b->tokens + b->T, *seg = b->segments + b->T, *posi = b->positions + b->T;
        int split = 2 + (int)below(&x, (uint64_t)(len - 4)); /* index of the first [SEP] */
        for (int i = 0; i < len; i++) {
            tok[i] = TOK_FIRST_WORD + (int32_t)below(&x, (uint64_t)(c->vocab - TOK_FIRST_WORD));
            seg[i] = i > split;
            posi[i] = i;
        }
        tok[0] = TOK_CLS;
        tok[split] = TOK_SEP;
        tok[len - 1] = TOK_SEP;
        int np = ops_predictions(len, c->max_predictions);
        if (b->P + np > b->cap_masked) {
            dist_sampler_free(ds);
            return unpad_fail(err, UNPAD_ERANGE, NULL, 0, "synthetic batch exceeds the mask buffers");
        }
        /* np distinct positions among the candidates (not [CLS] or [SEP]), increasing */
        int placed = 0;
        for (int i = 1; i < len - 1 && placed < np; i++) {
            if (i == split)
                continue;
            int left = len - 1 - i - (i < split); /* candidates from i on */
            if ((int)below(&x, (uint64_t)left) < np - placed) {
                b->mpos[b->P + placed] = (int32_t)b->T + i;
                b->mlabels[b->P + placed] = tok[i];
                b->mseq[b->P + placed] = k;
                tok[i] = TOK_MASK;
                placed++;
            }
        }
        b->P += placed;
        b->nsp[k] = (int32_t)below(&x, 2);
        b->T += len;
        b->cu_seqlens[k + 1] = (int32_t)b->T;
        if (len > b->max_seqlen)
            b->max_seqlen = len;
    }
    dist_sampler_free(ds);
    return UNPAD_OK;
}

int source_get(batch_source *s, int64_t pos, int n, shard_batch *b, unpad_err *err)
{
    return s->sh ? get_shard(s, pos, n, b, err) : get_synthetic(s, pos, n, b, err);
}
