/* check_exchange.c — the balanced sample exchange moves every sample exactly once, to the GPU the
 * balancer chose, unchanged; a corrupted record is refused. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "exchange.h"

enum { MAXN = 512, MAXLEN = 512 };

typedef struct {
    exchange_sample s[MAXN];
    int32_t data[MAXN][2 * MAXLEN + 2 * 76];
    int n;
} store;

static const exchange_sample *get(void *ctx, int i)
{
    store *st = ctx;
    return i >= 0 && i < st->n ? &st->s[i] : NULL;
}

typedef struct {
    const store *src;
    int *seen;      /* (n) times received */
    int *where;     /* (n) rank received at */
    int rank;
    int mismatch;
} sink;

static int put(void *ctx, int i, const exchange_sample *s)
{
    sink *k = ctx;
    const exchange_sample *o = &k->src->s[i];
    k->seen[i]++;
    k->where[i] = k->rank;
    if (s->len != o->len || s->npred != o->npred || s->nsp != o->nsp ||
        memcmp(s->tokens, o->tokens, sizeof(int32_t) * (size_t)o->len) ||
        memcmp(s->segments, o->segments, sizeof(int32_t) * (size_t)o->len) ||
        memcmp(s->mpos, o->mpos, sizeof(int32_t) * (size_t)o->npred) ||
        memcmp(s->mlabel, o->mlabel, sizeof(int32_t) * (size_t)o->npred))
        k->mismatch++;
    return 0;
}

static void make_store(store *st, int n, unsigned seed, int *len, int *npred)
{
    srand(seed);
    st->n = n;
    for (int i = 0; i < n; i++) {
        int l = 1 + rand() % MAXLEN, np = 1 + rand() % (l < 76 ? l : 76);
        len[i] = l;
        npred[i] = np;
        exchange_sample *s = &st->s[i];
        s->len = l;
        s->npred = np;
        s->nsp = rand() & 1;
        s->tokens = st->data[i];
        s->segments = st->data[i] + l;
        s->mpos = st->data[i] + 2 * l;
        s->mlabel = st->data[i] + 2 * l + np;
        for (int k = 0; k < 2 * l + 2 * np; k++)
            st->data[i][k] = rand() % 30522;
    }
}

START_TEST(test_every_sample_once_to_its_gpu)
{
    static store st;
    static int len[MAXN], npred[MAXN], owner[MAXN], seen[MAXN], where[MAXN];
    for (int trial = 0; trial < 40; trial++) {
        int gpus = 1 + trial % 8, b = 1 + (trial * 7) % 64, n = gpus * b;
        make_store(&st, n, 1000 + trial, len, npred);
        balance_ws *ws;
        balance_result r;
        ck_assert_int_eq(balance_ws_alloc(n, gpus, &ws, NULL), UNPAD_OK);
        ck_assert_int_eq(balance_result_alloc(n, gpus, &r, NULL), UNPAD_OK);
        balance_input in = {.len = len, .n = n, .gpus = gpus,
                            .policy = (balance_policy)(trial % BAL_POLICY_COUNT),
                            .count = trial % 3 ? BAL_EQUAL : BAL_FREE};
        unpad_err e = {0};
        ck_assert_msg(balance_assign(ws, &in, &r, &e) == UNPAD_OK, "%s", e.msg);
        exchange_loader_owner(n, gpus, owner);
        exchange_plan p;
        ck_assert_int_eq(exchange_plan_build(&r, owner, len, npred, &p, &e), UNPAD_OK);
        memset(seen, 0, sizeof seen);
        int64_t total = 0;
        for (int src = 0; src < gpus; src++)
            for (int dst = 0; dst < gpus; dst++) {
                int64_t w = p.words[src * gpus + dst];
                total += w;
                int32_t *buf = malloc(sizeof *buf * (size_t)(w ? w : 1));
                ck_assert_int_eq(exchange_pack(&p, src, dst, get, &st, buf, &e), UNPAD_OK);
                sink k = {.src = &st, .seen = seen, .where = where, .rank = dst};
                ck_assert_int_eq(exchange_unpack(&p, src, dst, len, npred, buf, put, &k, &e), UNPAD_OK);
                ck_assert_int_eq(k.mismatch, 0);
                for (int q = p.start[src * gpus + dst]; q < p.start[src * gpus + dst + 1]; q++)
                    ck_assert_int_eq(owner[p.seq[q]], src);
                free(buf);
            }
        int64_t expect = 0;
        for (int i = 0; i < n; i++) {
            ck_assert_int_eq(seen[i], 1);
            ck_assert_int_eq(where[i], r.gpu[i]);
            expect += exchange_record_words(len[i], npred[i]);
        }
        ck_assert_int_eq(total, expect);
        exchange_plan_free(&p);
        balance_result_free(&r);
        balance_ws_free(ws);
    }
}
END_TEST

START_TEST(test_corrupt_record_refused)
{
    static store st;
    static int len[8], npred[8], owner[8];
    make_store(&st, 8, 7, len, npred);
    balance_ws *ws;
    balance_result r;
    ck_assert_int_eq(balance_ws_alloc(8, 2, &ws, NULL), UNPAD_OK);
    ck_assert_int_eq(balance_result_alloc(8, 2, &r, NULL), UNPAD_OK);
    balance_input in = {.len = len, .n = 8, .gpus = 2, .policy = BAL_SORT_DEAL, .count = BAL_EQUAL};
    ck_assert_int_eq(balance_assign(ws, &in, &r, NULL), UNPAD_OK);
    exchange_loader_owner(8, 2, owner);
    exchange_plan p;
    unpad_err e = {0};
    ck_assert_int_eq(exchange_plan_build(&r, owner, len, npred, &p, &e), UNPAD_OK);
    int pair = 0 * 2 + 1;
    ck_assert_int_gt(p.start[pair + 1] - p.start[pair], 0);
    int32_t *buf = malloc(sizeof *buf * (size_t)p.words[pair]);
    ck_assert_int_eq(exchange_pack(&p, 0, 1, get, &st, buf, &e), UNPAD_OK);
    buf[1] += 1; /* the first record's length */
    static int seen[8], where[8];
    sink k = {.src = &st, .seen = seen, .where = where, .rank = 1};
    ck_assert_int_eq(exchange_unpack(&p, 0, 1, len, npred, buf, put, &k, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "exchange 0->1: record 0"), "%s", e.msg);
    /* A sample whose content disagrees with the all-gathered length is refused when packing. */
    st.s[p.seq[p.start[pair]]].len -= 1;
    ck_assert_int_eq(exchange_pack(&p, 0, 1, get, &st, buf, &e), UNPAD_EINVAL);
    free(buf);
    exchange_plan_free(&p);
    balance_result_free(&r);
    balance_ws_free(ws);
}
END_TEST

Suite *exchange_suite(void)
{
    Suite *s = suite_create("exchange");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_every_sample_once_to_its_gpu);
    tcase_add_test(tc, test_corrupt_record_refused);
    suite_add_tcase(s, tc);
    return s;
}
