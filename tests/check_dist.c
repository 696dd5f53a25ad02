/* check_dist.c — length distributions: the Wikipedia histogram's statistics, parser errors,
 * reproducible sampling. */
#include <check.h>
#include <string.h>

#include "dist.h"
#include "testutil.h"

START_TEST(test_wiki_histogram_stats)
{
    char p[512];
    unpad_dist d;
    unpad_err e = {0};
    ck_assert_int_eq(dist_load(tu_path(p, sizeof p, "models/dists/wiki512.csv"), &d, &e), UNPAD_OK);
    dist_stats s;
    dist_compute_stats(&d, &s);
    ck_assert_double_eq_tol(s.count, 16279552, 0.5);
    ck_assert_double_eq_tol(s.mean, 255.83, 0.005);
    ck_assert_int_eq(s.max, 512);
    ck_assert_double_eq_tol(s.share_at_max, 0.234, 0.0005);
    ck_assert_double_eq_tol(dist_padding_fraction(&d, 512), 0.500, 0.0005);
    ck_assert(s.p50 > 150 && s.p50 < 300);
    ck_assert_int_eq(s.p99, 512);
    dist_free(&d);
}
END_TEST

START_TEST(test_list_and_stats_exact)
{
    char p[512];
    unpad_dist d;
    unpad_err e = {0};
    tu_write_tmp(p, sizeof p, ".txt", "# lengths\n1\n2\n3\n4\n\n10\n");
    ck_assert_int_eq(dist_load(p, &d, &e), UNPAD_OK);
    dist_stats s;
    dist_compute_stats(&d, &s);
    ck_assert_double_eq_tol(s.mean, 4.0, 1e-12);
    ck_assert_int_eq(s.min, 1);
    ck_assert_int_eq(s.max, 10);
    ck_assert_int_eq(s.p50, 3);
    ck_assert_double_eq_tol(s.share_at_max, 0.2, 1e-12);
    /* 20 tokens padded to 5 x 10 = 50 slots. */
    ck_assert_double_eq_tol(dist_padding_fraction(&d, 10), 0.6, 1e-12);
    dist_free(&d);
    unlink(p);
}
END_TEST

static const char *load_error(const char *text, int *code)
{
    static unpad_err e;
    char p[512];
    unpad_dist d;
    memset(&e, 0, sizeof e);
    tu_write_tmp(p, sizeof p, ".csv", text);
    *code = dist_load_csv(p, &d, &e);
    if (*code == UNPAD_OK)
        dist_free(&d);
    unlink(p);
    return strchr(e.msg, ':') ? strchr(e.msg, ':') : e.msg; /* drop the temporary name */
}

START_TEST(test_csv_errors)
{
    int code;
    const char *m = load_error("length,count\n1,5\n2,x\n", &code);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(m, ":3: bad number 'x' in column 'count'"), "%s", m);
    m = load_error("length,count\n1,5\n2\n", &code);
    ck_assert_msg(strstr(m, ":3: missing column"), "%s", m);
    m = load_error("length,count\n1,5\n2,-4\n", &code);
    ck_assert_msg(strstr(m, ":3: negative count -4 for length 2"), "%s", m);
    m = load_error("len,number\n1,5\n", &code);
    ck_assert_msg(strstr(m, ":1: expected the header 'length,count'"), "%s", m);
    m = load_error("length,count\n0,5\n", &code);
    ck_assert_msg(strstr(m, ":2: length 0 out of range"), "%s", m);
    m = load_error("length,count\n3,5\n3,1\n", &code);
    ck_assert_msg(strstr(m, ":3: length 3 appears twice"), "%s", m);
    m = load_error("length,count\n1,0\n", &code);
    ck_assert_msg(strstr(m, "all counts are zero"), "%s", m);
    m = load_error("", &code);
    ck_assert_msg(strstr(m, "empty file"), "%s", m);
    unpad_dist d;
    unpad_err e = {0};
    ck_assert_int_eq(dist_load("/nonexistent/lengths.csv", &d, &e), UNPAD_EIO);
    ck_assert_msg(strstr(e.msg, "/nonexistent/lengths.csv: cannot open"), "%s", e.msg);
}
END_TEST

START_TEST(test_sampling_reproducible_and_faithful)
{
    char p[512];
    unpad_dist d;
    unpad_err e = {0};
    ck_assert_int_eq(dist_load(tu_path(p, sizeof p, "models/dists/wiki512.csv"), &d, &e), UNPAD_OK);
    dist_sampler *a, *b, *c;
    ck_assert_int_eq(dist_sampler_alloc(&d, 42, &a, &e), UNPAD_OK);
    ck_assert_int_eq(dist_sampler_alloc(&d, 42, &b, &e), UNPAD_OK);
    ck_assert_int_eq(dist_sampler_alloc(&d, 43, &c, &e), UNPAD_OK);
    enum { N = 200000 };
    static int x[N], y[N], z[N];
    dist_sample(a, x, N);
    dist_sample(b, y, N);
    dist_sample(c, z, N);
    ck_assert_int_eq(memcmp(x, y, sizeof x), 0);
    ck_assert_int_ne(memcmp(x, z, sizeof x), 0);
    double sum = 0;
    int at_max = 0;
    for (int i = 0; i < N; i++) {
        ck_assert(x[i] >= 1 && x[i] <= 512);
        sum += x[i];
        at_max += x[i] == 512;
    }
    /* Sample mean within 4 standard errors (std ~ 160). */
    ck_assert_double_eq_tol(sum / N, 255.83, 4 * 160 / 447.0);
    ck_assert_double_eq_tol((double)at_max / N, 0.234, 0.004);
    /* Reseeding restarts the same stream as a fresh sampler. */
    dist_sampler_seed(c, 42);
    dist_sample(c, z, 1000);
    ck_assert_int_eq(memcmp(x, z, sizeof(int) * 1000), 0);
    dist_sampler_free(a);
    dist_sampler_free(b);
    dist_sampler_free(c);
    dist_free(&d);
}
END_TEST

Suite *dist_suite(void)
{
    Suite *s = suite_create("dist");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_wiki_histogram_stats);
    tcase_add_test(tc, test_list_and_stats_exact);
    tcase_add_test(tc, test_csv_errors);
    tcase_add_test(tc, test_sampling_reproducible_and_faithful);
    suite_add_tcase(s, tc);
    return s;
}
