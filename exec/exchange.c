/* exchange.c — plan, pack and unpack the balanced sample exchange. */
#include "exchange.h"

#include <stdlib.h>
#include <string.h>

void exchange_loader_owner(int n, int gpus, int *owner)
{
    int base = n / gpus, extra = n % gpus, i = 0;
    for (int r = 0; r < gpus; r++)
        for (int k = 0; k < base + (r < extra); k++)
            owner[i++] = r;
}

void exchange_plan_free(exchange_plan *p)
{
    free(p->owner);
    free(p->start);
    free(p->seq);
    free(p->words);
    memset(p, 0, sizeof *p);
}

int exchange_plan_build(const balance_result *a, const int *owner, const int *len,
                        const int *npred, exchange_plan *p, unpad_err *err)
{
    memset(p, 0, sizeof *p);
    int g = a->gpus, n = a->n;
    p->gpus = g;
    p->n = n;
    p->owner = malloc(sizeof *p->owner * (size_t)n);
    p->start = calloc((size_t)g * g + 1, sizeof *p->start);
    p->seq = malloc(sizeof *p->seq * (size_t)n);
    p->words = calloc((size_t)g * g, sizeof *p->words);
    if (!p->owner || !p->start || !p->seq || !p->words) {
        exchange_plan_free(p);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        if (owner[i] < 0 || owner[i] >= g || a->gpu[i] < 0 || a->gpu[i] >= g) {
            exchange_plan_free(p);
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "sample %d: owner %d or GPU %d out of range",
                              i, owner[i], a->gpu[i]);
        }
        p->owner[i] = owner[i];
        int pair = owner[i] * g + a->gpu[i];
        p->start[pair + 1]++;
        p->words[pair] += exchange_record_words(len[i], npred[i]);
    }
    for (int k = 0; k < g * g; k++)
        p->start[k + 1] += p->start[k];
    int *fill = malloc(sizeof *fill * (size_t)g * g);
    if (!fill) {
        exchange_plan_free(p);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    }
    memcpy(fill, p->start, sizeof *fill * (size_t)g * g);
    for (int i = 0; i < n; i++) /* ascending i: each pair's list is in ascending global index */
        p->seq[fill[owner[i] * g + a->gpu[i]]++] = i;
    free(fill);
    return UNPAD_OK;
}

int exchange_pack(const exchange_plan *p, int src, int dst, exchange_get_fn get, void *ctx,
                  int32_t *buf, unpad_err *err)
{
    int pair = src * p->gpus + dst;
    int64_t w = 0;
    for (int k = p->start[pair]; k < p->start[pair + 1]; k++) {
        int i = p->seq[k];
        const exchange_sample *s = get(ctx, i);
        if (!s)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "rank %d does not hold sample %d", src, i);
        int32_t *r = buf + w;
        r[0] = i;
        r[1] = s->len;
        r[2] = s->npred;
        r[3] = s->nsp;
        memcpy(r + 4, s->tokens, sizeof *r * (size_t)s->len);
        memcpy(r + 4 + s->len, s->segments, sizeof *r * (size_t)s->len);
        memcpy(r + 4 + 2 * s->len, s->mpos, sizeof *r * (size_t)s->npred);
        memcpy(r + 4 + 2 * s->len + s->npred, s->mlabel, sizeof *r * (size_t)s->npred);
        w += exchange_record_words(s->len, s->npred);
    }
    if (w != p->words[pair])
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                          "packed %lld words for ranks %d->%d but the plan expects %lld (a sample's "
                          "length or predictions differ from the all-gathered ones)",
                          (long long)w, src, dst, (long long)p->words[pair]);
    return UNPAD_OK;
}

int exchange_unpack(const exchange_plan *p, int src, int dst, const int *len, const int *npred,
                    const int32_t *buf, exchange_put_fn put, void *ctx, unpad_err *err)
{
    int pair = src * p->gpus + dst;
    int64_t w = 0;
    for (int k = p->start[pair]; k < p->start[pair + 1]; k++) {
        int i = p->seq[k];
        const int32_t *r = buf + w;
        if (r[0] != i || r[1] != len[i] || r[2] != npred[i] || r[3] < 0 || r[3] > 1)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                              "exchange %d->%d: record %d is (index %d, len %d, npred %d, nsp %d) "
                              "but the plan expects (index %d, len %d, npred %d)",
                              src, dst, k - p->start[pair], r[0], r[1], r[2], r[3], i, len[i], npred[i]);
        exchange_sample s = {.len = r[1], .npred = r[2], .nsp = r[3],
                             .tokens = (int32_t *)r + 4, .segments = (int32_t *)r + 4 + r[1],
                             .mpos = (int32_t *)r + 4 + 2 * r[1],
                             .mlabel = (int32_t *)r + 4 + 2 * r[1] + r[2]};
        int rc = put(ctx, i, &s);
        if (rc)
            return unpad_fail(err, rc, NULL, 0, "exchange %d->%d: sample %d refused", src, dst, i);
        w += exchange_record_words(r[1], r[2]);
    }
    return UNPAD_OK;
}
