/* check_layout.c — length policies: each layout's tokens and padding computed here independently,
 * truncation, buckets' distributions, parsing and the messages for bad values. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "testutil.h"

static model_cfg M;
static hw_spec HW;
static calib_coef C;
static step_model SM;

static void setup(void)
{
    char p[512];
    unpad_err e = {0};
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-large.cfg"), &M, &e), 0);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &HW, &e), 0);
    calib_default(&HW, &C);
    ck_assert_int_eq(step_model_init(&SM, &M, &HW, &C, 1, &e), 0);
}

static void teardown(void)
{
    step_model_free(&SM);
}

static layout parse_ok(const char *text, int cap)
{
    layout l;
    unpad_err e = {0};
    ck_assert_msg(layout_parse("--layout", text, &l, &e) == UNPAD_OK, "%s: %s", text, e.msg);
    ck_assert_msg(layout_resolve(&l, cap, 512, 512, "--layout", &e) == UNPAD_OK, "%s", e.msg);
    return l;
}

static double padding(const step_batch *b)
{
    return 1 - b->shape.real_tokens / b->shape.tokens;
}

START_TEST(test_tokens_and_padding)
{
    int len[] = {500, 300, 200, 100, 12, 12};
    int n = 6, real = 500 + 300 + 200 + 100 + 12 + 12, scratch[32];
    step_batch b;
    layout l = parse_ok("unpadded", 0);
    layout_batch(&l, &SM, len, NULL, n, scratch, &b);
    ck_assert_double_eq(b.shape.tokens, real);
    ck_assert_double_eq(b.shape.attn_tokens, real);
    ck_assert_double_eq(padding(&b), 0);
    l = parse_ok("padded", 0);
    layout_batch(&l, &SM, len, NULL, n, scratch, &b);
    ck_assert_double_eq(b.shape.tokens, 6 * 512);
    ck_assert_double_eq(b.shape.sum_len2, 6 * 512.0 * 512); /* the padded FMHA runs its padding */
    ck_assert_double_eq_tol(padding(&b), 1 - real / 3072.0, 1e-12);
    l = parse_ok("pad-longest", 0);
    layout_batch(&l, &SM, len, NULL, n, scratch, &b);
    ck_assert_double_eq(b.shape.tokens, 6 * 500);
    ck_assert_double_eq(b.shape.attn_tokens, 6 * 500);
    l = parse_ok("buckets=128/256/384/512", 0);
    int mid[] = {300, 260, 380};
    layout_batch(&l, &SM, mid, NULL, 3, scratch, &b);
    ck_assert_double_eq(b.shape.tokens, 3 * 384);
    /* Packed, first-fit decreasing into rows of 512, at most 3 a row: 500+12 | 300+200+12 | 100. */
    l = parse_ok("packed", 0);
    layout_batch(&l, &SM, len, NULL, n, scratch, &b);
    ck_assert_double_eq(b.shape.tokens, 3 * 512);
    ck_assert_double_eq(b.shape.attn_tokens, real); /* attention per sequence */
    ck_assert_double_eq(b.shape.sum_len2, 500.0 * 500 + 300 * 300 + 200 * 200 + 100 * 100 + 2 * 144);
    ck_assert_double_eq_tol(padding(&b), 1 - real / 1536.0, 1e-12);
    /* At most 1 a row: one row per sequence, rows x 512 tokens. */
    l = parse_ok("packed:1", 0);
    layout_batch(&l, &SM, len, NULL, n, scratch, &b);
    ck_assert_double_eq(b.shape.tokens, 6 * 512);
    /* Predictions and NSP rows never change with the layout. */
    for (int k = 0; k < LAYOUT_KIND_COUNT; k++) {
        static const char *names[] = {"unpadded", "padded", "pad-longest", "buckets=512", "packed"};
        l = parse_ok(names[k], 0);
        layout_batch(&l, &SM, len, NULL, n, scratch, &b);
        double p = 0;
        for (int i = 0; i < n; i++)
            p += ops_predictions(len[i], M.max_predictions);
        ck_assert_double_eq(b.shape.preds, p);
        ck_assert_double_eq(b.shape.seqs, n);
        ck_assert_double_eq(b.shape.real_tokens, real);
    }
    /* Through an index list, as the what-if gives a GPU's sequences. */
    int idx[] = {5, 0, 3};
    l = parse_ok("pad-longest", 0);
    layout_batch(&l, &SM, len, idx, 3, scratch, &b);
    ck_assert_double_eq(b.shape.tokens, 3 * 500);
    ck_assert_double_eq(b.shape.real_tokens, 12 + 500 + 100);
}
END_TEST

/* First-fit decreasing, written plainly: rows as lists. */
static int ffd_rows(const int *len, int n, int cap, int k)
{
    int *s = malloc(sizeof *s * (size_t)n), rows = 0, used[512] = {0}, cnt[512] = {0};
    memcpy(s, len, sizeof *s * (size_t)n);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (s[j] > s[i]) {
                int t = s[i];
                s[i] = s[j];
                s[j] = t;
            }
    for (int i = 0; i < n; i++) {
        int r;
        for (r = 0; r < rows; r++)
            if (used[r] + s[i] <= cap && cnt[r] < k)
                break;
        if (r == rows)
            rows++;
        used[r] += s[i];
        cnt[r]++;
    }
    free(s);
    return rows;
}

START_TEST(test_packed_against_plain_ffd)
{
    uint64_t x = 12345;
    int len[300], scratch[1024];
    for (int t = 0; t < 50; t++) {
        int n = 1 + t * 6, k = 1 + t % 4;
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            len[i] = 1 + (int)((x >> 33) % 512);
        }
        char name[32];
        snprintf(name, sizeof name, "packed:%d", k);
        layout l = parse_ok(name, 0);
        step_batch b;
        layout_batch(&l, &SM, len, NULL, n, scratch, &b);
        ck_assert_double_eq(b.shape.tokens, 512.0 * ffd_rows(len, n, 512, k));
    }
}
END_TEST

START_TEST(test_truncation)
{
    unpad_dist d, t;
    unpad_err e = {0};
    int len[] = {10, 100, 256, 300, 512, 512};
    ck_assert_int_eq(dist_from_lengths(len, 6, &d, &e), UNPAD_OK);
    ck_assert_int_eq(layout_truncate(&d, 256, &t, &e), UNPAD_OK);
    ck_assert_int_eq(t.max_len, 256);
    ck_assert_double_eq(t.count[256], 4); /* 256 itself, 300 and the two 512s */
    ck_assert_double_eq(t.count[10] + t.count[100], 2);
    ck_assert_double_eq(t.total, 6);
    dist_free(&t);
    ck_assert_int_eq(layout_truncate(&d, 0, &t, &e), UNPAD_OK); /* no cap: a copy */
    ck_assert_int_eq(t.max_len, 512);
    ck_assert_double_eq(t.count[512], 2);
    dist_free(&t);
    /* a cap below the model's max_len pads to the cap */
    layout l = parse_ok("padded", 256);
    ck_assert_int_eq(l.len, 256);
    /* buckets' distributions: their shares and contents */
    l = parse_ok("buckets=128/256/512", 0);
    unpad_dist pick, sub[3];
    ck_assert_int_eq(layout_bucket_dists(&l, &d, &pick, sub, &e), UNPAD_OK);
    ck_assert_double_eq(pick.count[1], 2);
    ck_assert_double_eq(pick.count[2], 1);
    ck_assert_double_eq(pick.count[3], 3);
    ck_assert_double_eq(sub[2].count[300], 1);
    ck_assert_double_eq(sub[2].count[256], 0);
    ck_assert_double_eq(sub[1].count[256], 1);
    dist_free(&pick);
    for (int j = 0; j < 3; j++)
        dist_free(&sub[j]);
    dist_free(&d);
}
END_TEST

static void refused(const char *text, int cap, int longest, const char *want)
{
    layout l;
    unpad_err e = {0};
    int rc = layout_parse("--layout", text, &l, &e);
    if (rc == UNPAD_OK)
        rc = layout_resolve(&l, cap, 512, longest, "--layout", &e);
    ck_assert_msg(rc == UNPAD_EINVAL, "%s accepted", text);
    ck_assert_msg(strstr(e.msg, want) != NULL, "expected '%s' in: %s", want, e.msg);
}

START_TEST(test_bad_values)
{
    refused("padding", 0, 512, "--layout: unknown layout 'padding'");
    refused("buckets=128/384/256", 0, 512, "bucket bounds must increase (256 after 384)");
    refused("buckets=128/128", 0, 512, "must increase");
    refused("buckets=", 0, 512, "no bucket bounds");
    refused("buckets=128/x", 0, 512, "bucket bound 'x'");
    refused("buckets=128/256/384", 0, 512, "the last bucket ends at 384 but lengths go up to 512");
    refused("buckets=128/1024", 0, 512, "above the longest trainable length 512");
    refused("packed:0", 0, 512, "'packed:0'");
    refused("unpadded", 1024, 512, "--max-len 1024");
    /* capped at 384, buckets ending at 384 are fine */
    layout l = parse_ok("buckets=128/256/384", 384);
    ck_assert_int_eq(l.nb, 3);
    layout list[8];
    int n;
    unpad_err e = {0};
    ck_assert_int_eq(layout_parse_list("--layout", "unpadded,padded,packed:2", list, &n, 8, &e), 0);
    ck_assert_int_eq(n, 3);
    char name[64];
    ck_assert_str_eq(layout_name(&list[2], name, sizeof name), "packed:2");
    ck_assert_str_eq(layout_name(&l, name, sizeof name), "buckets=128/256/384");
    ck_assert_int_eq(layout_parse_list("--layout", "unpadded,nope", list, &n, 8, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "'nope'"));
}
END_TEST

Suite *layout_suite(void)
{
    Suite *s = suite_create("layout");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_tokens_and_padding);
    tcase_add_test(tc, test_packed_against_plain_ffd);
    tcase_add_test(tc, test_truncation);
    tcase_add_test(tc, test_bad_values);
    suite_add_tcase(s, tc);
    return s;
}
