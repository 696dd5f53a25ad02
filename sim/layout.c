/* layout.c — length policies: parsing, truncation, buckets, and a GPU's batch in each layout. */
#include "layout.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const KIND_NAMES[LAYOUT_KIND_COUNT] = {"unpadded", "padded", "pad-longest",
                                                          "buckets", "packed"};

int layout_parse(const char *flag, const char *text, layout *out, unpad_err *err)
{
    memset(out, 0, sizeof *out);
    out->per_row = LAYOUT_PACK_DEFAULT;
    const char *expected = "unpadded, padded, pad-longest, buckets=B1/B2/... or packed[:K]";
    if (!text || !*text)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s: empty layout (expected %s)", flag, expected);
    if (!strcmp(text, "unpadded") || !strcmp(text, "padded") || !strcmp(text, "pad-longest") ||
        !strcmp(text, "packed")) {
        for (int k = 0; k < LAYOUT_KIND_COUNT; k++)
            if (!strcmp(text, KIND_NAMES[k]))
                out->kind = (layout_kind)k;
        return UNPAD_OK;
    }
    if (!strncmp(text, "packed:", 7)) {
        long k;
        if (unpad_parse_long(text + 7, &k) || k < 1 || k > 64)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "%s: '%s': the sequences per packed row must be an integer in [1, 64]",
                              flag, text);
        out->kind = LAYOUT_PACKED;
        out->per_row = (int)k;
        return UNPAD_OK;
    }
    if (!strncmp(text, "buckets=", 8)) {
        out->kind = LAYOUT_BUCKETS;
        char buf[512];
        snprintf(buf, sizeof buf, "%s", text + 8);
        char *save = NULL;
        for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
            long v;
            if (unpad_parse_long(t, &v) || v < 1 || v > 1 << 20)
                return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                                  "%s: '%s': bucket bound '%s' is not a length in [1, 1048576]", flag,
                                  text, t);
            if (out->nb == LAYOUT_MAX_BUCKETS)
                return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s: '%s': more than %d buckets",
                                  flag, text, LAYOUT_MAX_BUCKETS);
            if (out->nb > 0 && v <= out->bounds[out->nb - 1])
                return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                                  "%s: '%s': bucket bounds must increase (%ld after %d)", flag, text,
                                  v, out->bounds[out->nb - 1]);
            out->bounds[out->nb++] = (int)v;
        }
        if (!out->nb)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "%s: '%s': no bucket bounds (expected buckets=128/256/384/512)", flag,
                              text);
        return UNPAD_OK;
    }
    return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s: unknown layout '%s' (expected %s)", flag,
                      text, expected);
}

int layout_parse_list(const char *flag, const char *text, layout *out, int *n, int max,
                      unpad_err *err)
{
    char buf[1024];
    if (strlen(text) >= sizeof buf)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s: list too long", flag);
    snprintf(buf, sizeof buf, "%s", text);
    *n = 0;
    if (unpad_list_has_empty(text))
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s: an empty item in '%s'", flag, text);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == max)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s: more than %d layouts", flag, max);
        int rc = layout_parse(flag, t, &out[*n], err);
        if (rc)
            return rc;
        char a[64], b[64];
        for (int j = 0; j < *n; j++)
            if (!strcmp(layout_name(&out[j], a, sizeof a), layout_name(&out[*n], b, sizeof b)))
                return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s: %s is asked twice", flag, b);
        ++*n;
    }
    if (!*n)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "%s: empty list", flag);
    return UNPAD_OK;
}

const char *layout_name(const layout *l, char *buf, size_t n)
{
    if (l->kind == LAYOUT_BUCKETS) {
        int o = snprintf(buf, n, "buckets=");
        for (int j = 0; j < l->nb && o > 0 && (size_t)o < n; j++)
            o += snprintf(buf + o, n - (size_t)o, "%s%d", j ? "/" : "", l->bounds[j]);
    } else if (l->kind == LAYOUT_PACKED) {
        snprintf(buf, n, "packed:%d", l->per_row);
    } else {
        snprintf(buf, n, "%s", (unsigned)l->kind < LAYOUT_KIND_COUNT ? KIND_NAMES[l->kind] : "?");
    }
    return buf;
}

int layout_check_cap(int cap, int model_max_len, unpad_err *err)
{
    if (cap < 0 || cap > model_max_len)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "--max-len %d: the model trains at most %d tokens a sequence (its position "
                          "embeddings and max_len); a cap must be in [1, %d]",
                          cap, model_max_len, model_max_len);
    return UNPAD_OK;
}

int layout_resolve(layout *l, int cap, int model_max_len, int longest, const char *flag,
                   unpad_err *err)
{
    int rc = layout_check_cap(cap, model_max_len, err);
    if (rc)
        return rc;
    l->len = cap > 0 ? cap : model_max_len;
    if (longest > l->len)
        longest = l->len;
    if (l->kind == LAYOUT_BUCKETS && l->bounds[l->nb - 1] < longest) {
        char nm[256];
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "%s: '%s': the last bucket ends at %d but lengths go up to %d (end the "
                          "buckets at %d or cap the lengths with --max-len %d)",
                          flag, layout_name(l, nm, sizeof nm), l->bounds[l->nb - 1], longest,
                          longest, l->bounds[l->nb - 1]);
    }
    if (l->kind == LAYOUT_BUCKETS && l->bounds[l->nb - 1] > l->len) {
        char nm[256];
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "%s: '%s': bucket bound %d is above the longest trainable length %d", flag,
                          layout_name(l, nm, sizeof nm), l->bounds[l->nb - 1], l->len);
    }
    return UNPAD_OK;
}

static int dist_alloc(unpad_dist *o, int max_len, const char *source, unpad_err *err)
{
    memset(o, 0, sizeof *o);
    o->count = calloc((size_t)max_len + 1, sizeof *o->count);
    if (!o->count)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    o->max_len = max_len;
    snprintf(o->source, sizeof o->source, "%s", source);
    return UNPAD_OK;
}

int layout_truncate(const unpad_dist *d, int cap, unpad_dist *out, unpad_err *err)
{
    int top = cap > 0 && cap < d->max_len ? cap : d->max_len;
    int rc = dist_alloc(out, top, d->source, err);
    if (rc)
        return rc;
    for (int l = 1; l <= d->max_len; l++)
        out->count[l < top ? l : top] += d->count[l];
    out->total = d->total;
    while (out->max_len > 1 && out->count[out->max_len] <= 0) /* the longest present */
        out->max_len--;
    return UNPAD_OK;
}

int layout_bucket_dists(const layout *l, const unpad_dist *d, unpad_dist *pick, unpad_dist *out,
                        unpad_err *err)
{
    int rc = dist_alloc(pick, l->nb, d->source, err);
    for (int j = 0; j < l->nb && !rc; j++) {
        int lo = j ? l->bounds[j - 1] + 1 : 1, hi = l->bounds[j] < d->max_len ? l->bounds[j] : d->max_len;
        if ((rc = dist_alloc(&out[j], l->bounds[j], d->source, err)))
            break;
        for (int k = lo; k <= hi; k++) {
            out[j].count[k] = d->count[k];
            out[j].total += d->count[k];
        }
        pick->count[j + 1] = out[j].total;
        pick->total += out[j].total;
    }
    if (rc) {
        dist_free(pick);
        for (int j = 0; j < l->nb; j++)
            dist_free(&out[j]);
    }
    return rc;
}

struct layout_sampler {
    dist_sampler *one;          /* not buckets: the distribution */
    dist_sampler *pick, **sub;  /* buckets: which bucket, then the lengths within it */
    unpad_dist pick_d, *sub_d;
    int nb;
};

void layout_sampler_free(layout_sampler *s)
{
    if (!s)
        return;
    dist_sampler_free(s->one);
    dist_sampler_free(s->pick);
    for (int j = 0; j < s->nb; j++) {
        if (s->sub)
            dist_sampler_free(s->sub[j]);
        if (s->sub_d)
            dist_free(&s->sub_d[j]);
    }
    dist_free(&s->pick_d);
    free(s->sub);
    free(s->sub_d);
    free(s);
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

int layout_sampler_alloc(const layout *l, const unpad_dist *d, uint64_t seed, layout_sampler **out,
                         unpad_err *err)
{
    layout_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    int rc;
    if (l->kind != LAYOUT_BUCKETS) {
        rc = dist_sampler_alloc(d, seed, &s->one, err);
    } else {
        s->sub = calloc((size_t)l->nb, sizeof *s->sub);
        s->sub_d = calloc((size_t)l->nb, sizeof *s->sub_d);
        rc = !s->sub || !s->sub_d ? unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory")
                                  : layout_bucket_dists(l, d, &s->pick_d, s->sub_d, err);
        if (!rc) {
            s->nb = l->nb;
            rc = dist_sampler_alloc(&s->pick_d, seed, &s->pick, err);
        }
        for (int j = 0; j < s->nb && !rc; j++) /* empty buckets are never picked */
            if (s->sub_d[j].total > 0)
                rc = dist_sampler_alloc(&s->sub_d[j], mix(seed + 1 + (uint64_t)j), &s->sub[j], err);
    }
    if (rc) {
        layout_sampler_free(s);
        return rc;
    }
    *out = s;
    return UNPAD_OK;
}

void layout_sample(layout_sampler *s, int *len, int n)
{
    if (s->one) {
        dist_sample(s->one, len, n);
        return;
    }
    int b;
    dist_sample(s->pick, &b, 1); /* bucket b - 1 */
    dist_sample(s->sub[b - 1], len, n);
}

static int bucket_bound(const layout *l, int len)
{
    for (int j = 0; j < l->nb; j++)
        if (len <= l->bounds[j])
            return l->bounds[j];
    return l->bounds[l->nb - 1];
}

/* Rows of first-fit decreasing into rows of `cap` tokens, at most k a row. */
static int pack_rows(const int *len, const int *idx, int n, int cap, int k, int *scratch)
{
    int *s = scratch, *room = scratch + n, *cnt = scratch + 2 * n, rows = 0;
    for (int i = 0; i < n; i++) { /* insertion sort, longest first (batches are tens of sequences) */
        int v = len[idx ? idx[i] : i], j = i;
        while (j > 0 && s[j - 1] < v) {
            s[j] = s[j - 1];
            j--;
        }
        s[j] = v;
    }
    for (int i = 0; i < n; i++) {
        int r = 0;
        while (r < rows && (room[r] < s[i] || cnt[r] == k))
            r++;
        if (r == rows) {
            room[rows] = cap;
            cnt[rows++] = 0;
        }
        room[r] -= s[i];
        cnt[r]++;
    }
    return rows;
}

/* The unpadded batch: integer sums, converted once. */
static void unpadded_batch(const step_model *sm, const int *len, const int *idx, int n, step_batch *out)
{
    int64_t T = 0, S2 = 0, P = 0, tiles = 0, work = 0, top = 0;
    int mx = 0, k64max = 0;
    for (int i = 0; i < n; i++) {
        int v = len[idx ? idx[i] : i];
        const step_len *a = &sm->per_len[v];
        T += v;
        S2 += (int64_t)v * v;
        P += a->preds;
        tiles += a->tiles;
        work += a->work;
        int k64 = (v + 63) >> 6;
        if (k64 > k64max) {
            k64max = k64;
            top = 0;
        }
        top += k64 == k64max ? a->top : 0;
        mx = v > mx ? v : mx;
    }
    out->shape = (ops_shape){.seqs = n, .tokens = (double)T, .attn_tokens = (double)T,
                             .sum_len2 = (double)S2, .preds = (double)P, .real_tokens = (double)T,
                             .max_len = mx};
    out->tiles = (double)tiles;
    out->tile_work = (double)work;
    out->top_k64 = k64max;
    out->top_tiles = (double)top;
    out->real_len2 = (double)S2;
}

void layout_batch(const layout *l, const step_model *sm, const int *len, const int *idx, int n,
                  int *scratch, step_batch *out)
{
    if (l->kind == LAYOUT_UNPADDED) {
        unpadded_batch(sm, len, idx, n, out);
        return;
    }
    step_batch_clear(out);
    int pad = l->len;
    if (l->kind == LAYOUT_PAD_LONGEST || l->kind == LAYOUT_BUCKETS) {
        int mx = 0;
        for (int i = 0; i < n; i++) {
            int v = len[idx ? idx[i] : i];
            mx = v > mx ? v : mx;
        }
        pad = l->kind == LAYOUT_BUCKETS ? bucket_bound(l, mx) : mx;
    }
    for (int i = 0; i < n; i++) {
        int v = len[idx ? idx[i] : i];
        if (l->kind == LAYOUT_PACKED)
            step_batch_add(sm, out, v, 0, v);
        else
            step_batch_add(sm, out, v, pad, pad);
    }
    if (l->kind == LAYOUT_PACKED && n > 0)
        step_batch_rows(out, pack_rows(len, idx, n, l->len, l->per_row, scratch), l->len);
}
