/* check_online.c — the trainer's online refit of the per-sequence cost: known coefficients
 * recovered from noisy synthetic per-rank timings (with outliers), degenerate windows refused,
 * equal counts (c0 from the prior), the sliding window, bad observations refused. */
#include <check.h>
#include <math.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "online.h"

/* The "true" per-rank time in ms of lengths len[0..n) under (k, c0, c1, c2) in microseconds. */
static double rank_ms(double k, const seq_cost *c, const int *len, int n)
{
    double t = k;
    for (int i = 0; i < n; i++)
        t += seq_cost_us(c, len[i]);
    return t / 1e3;
}

/* Adds `ranks` observations per step for steps [from, to]: counts 24..88 (free) or `fixed_n`,
 * lengths uniform 16..512, relative Gaussian noise, every `outlier_every`-th observation x1.6. */
static void feed(online_cal *oc, gsl_rng *r, int from, int to, int ranks, int fixed_n, double k,
                 const seq_cost *c, double noise, int outlier_every)
{
    int len[128];
    int count = 0;
    for (int s = from; s <= to; s++)
        for (int g = 0; g < ranks; g++) {
            int n = fixed_n ? fixed_n : 24 + (int)gsl_rng_uniform_int(r, 65);
            for (int i = 0; i < n; i++)
                len[i] = 16 + (int)gsl_rng_uniform_int(r, 497);
            double t = rank_ms(k, c, len, n) * (1 + noise * gsl_ran_gaussian(r, 1.0));
            if (outlier_every && ++count % outlier_every == 0)
                t *= 1.6;
            unpad_err e = {0};
            ck_assert_msg(online_add(oc, s, len, n, t, &e) == UNPAD_OK, "%s", e.msg);
        }
}

START_TEST(test_recover_known_coefficients)
{
    const seq_cost truth = {.c0 = 30, .c1 = 2.5, .c2 = 0.004};
    const double k = 4000;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    online_cal *oc;
    unpad_err e = {0};
    ck_assert_int_eq(online_alloc(&(online_opts){.window = 20}, 8, &oc, &e), UNPAD_OK);
    feed(oc, r, 1, 20, 8, 0, k, &truth, 0.003, 37); /* 0.3% noise, 4 of 160 observations x1.6 */
    ck_assert_int_eq(online_count(oc), 160);
    ck_assert_int_eq(online_steps(oc), 20);
    online_fit f;
    ck_assert_msg(online_refit(oc, NULL, &f, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(f.c0_fitted, 1);
    ck_assert_int_eq(f.obs, 160);
    /* Each coefficient within 4 standard errors of the truth, and the errors small enough to
     * matter: the sequence count and the token count move together, so c0 is the loosest. */
    ck_assert_double_eq_tol(f.cost.c1, truth.c1, 4 * f.se_c1);
    ck_assert_double_eq_tol(f.cost.c2, truth.c2, 4 * f.se_c2);
    ck_assert_double_eq_tol(f.cost.c0, truth.c0, 4 * f.se_c0);
    ck_assert_double_eq_tol(f.fixed_us, k, 4 * f.se_fixed);
    ck_assert_double_eq_tol(f.cost.c1, truth.c1, 0.06 * truth.c1);
    ck_assert_double_eq_tol(f.cost.c2, truth.c2, 0.06 * truth.c2);
    ck_assert_double_eq_tol(f.cost.c0, truth.c0, 0.5 * truth.c0);
    ck_assert_int_ge(f.outliers, 4); /* the x1.6 observations are set aside */
    ck_assert_int_le(f.outliers, 8);
    ck_assert_double_lt(f.rms_pct, 0.6);
    /* what the balancers compare: the cost of a rank's batch, within 0.5% of the truth */
    gsl_rng_set(r, 99);
    for (int trial = 0; trial < 20; trial++) {
        int len[88], n = 24 + (int)gsl_rng_uniform_int(r, 65);
        double fit = 0, tru = 0;
        for (int i = 0; i < n; i++) {
            len[i] = 16 + (int)gsl_rng_uniform_int(r, 497);
            fit += seq_cost_us(&f.cost, len[i]);
            tru += seq_cost_us(&truth, len[i]);
        }
        ck_assert_double_eq_tol(fit + f.fixed_us, tru + k, 0.005 * (tru + k));
    }
    online_free(oc);
    gsl_rng_free(r);
}
END_TEST

START_TEST(test_refuses_degenerate)
{
    online_cal *oc;
    unpad_err e = {0};
    online_fit f;
    ck_assert_int_eq(online_alloc(&(online_opts){.window = 10}, 8, &oc, &e), UNPAD_OK);
    /* too few */
    int len[4] = {128, 256, 64, 512};
    for (int g = 0; g < 3; g++)
        ck_assert_int_eq(online_add(oc, 1, len, 4 - g, 1.0 + g, &e), UNPAD_OK);
    ck_assert_int_eq(online_refit(oc, NULL, &f, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "too few observations"));
    ck_assert_int_eq(f.obs, 3);
    /* every rank with the same lengths: identical loads */
    online_reset(oc);
    for (int s = 1; s <= 5; s++)
        for (int g = 0; g < 8; g++)
            ck_assert_int_eq(online_add(oc, s, len, 4, 2.0 + 0.001 * g, &e), UNPAD_OK);
    ck_assert_int_eq(online_refit(oc, NULL, &f, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "same tokens"));
    /* every sequence at 512: S2 = 512 S1 whatever the counts, so c2 cannot be told from c1 */
    online_reset(oc);
    int full[8] = {512, 512, 512, 512, 512, 512, 512, 512};
    for (int s = 1; s <= 5; s++)
        for (int g = 0; g < 8; g++)
            ck_assert_int_eq(online_add(oc, s, full, 1 + g, 0.5 + 0.3 * g, &e), UNPAD_OK);
    ck_assert_int_eq(online_refit(oc, NULL, &f, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "squared lengths"));
    online_free(oc);
}
END_TEST

START_TEST(test_equal_counts_keep_prior_c0)
{
    const seq_cost truth = {.c0 = 30, .c1 = 2.5, .c2 = 0.004}, prior = {.c0 = 11, .c1 = 9, .c2 = 1};
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 3);
    online_cal *oc;
    unpad_err e = {0};
    ck_assert_int_eq(online_alloc(&(online_opts){.window = 12}, 8, &oc, &e), UNPAD_OK);
    feed(oc, r, 1, 12, 8, 56, 4000, &truth, 0.002, 0);
    online_fit f;
    ck_assert_msg(online_refit(oc, &prior, &f, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_int_eq(f.c0_fitted, 0);
    ck_assert_double_eq(f.cost.c0, prior.c0);
    ck_assert_double_eq(f.se_c0, 0);
    ck_assert_double_eq_tol(f.cost.c1, truth.c1, 4 * f.se_c1);
    ck_assert_double_eq_tol(f.cost.c2, truth.c2, 4 * f.se_c2);
    ck_assert_double_eq_tol(f.cost.c1, truth.c1, 0.06 * truth.c1);
    /* with 56 sequences everywhere, k absorbs 56 (c0_true - c0_prior) */
    ck_assert_double_eq_tol(f.fixed_us, 4000 + 56 * (truth.c0 - prior.c0), 400);
    online_free(oc);
    gsl_rng_free(r);
}
END_TEST

START_TEST(test_sliding_window)
{
    const seq_cost a = {.c0 = 30, .c1 = 2.5, .c2 = 0.004}, b = {.c0 = 30, .c1 = 4.0, .c2 = 0.002};
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 11);
    online_cal *oc;
    unpad_err e = {0};
    online_fit f;
    ck_assert_int_eq(online_alloc(&(online_opts){.window = 5}, 8, &oc, &e), UNPAD_OK);
    feed(oc, r, 1, 5, 8, 0, 3000, &a, 0.002, 0);
    ck_assert_msg(online_refit(oc, NULL, &f, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_double_eq_tol(f.cost.c1, a.c1, 4 * f.se_c1);
    ck_assert_double_eq_tol(f.cost.c2, a.c2, 4 * f.se_c2);
    /* the GPU changes (e.g. a slower clock): steps 6..10 follow b; once they fill the window only
     * b remains */
    feed(oc, r, 6, 8, 8, 0, 3000, &b, 0.002, 0);
    ck_assert_int_eq(online_steps(oc), 5);
    ck_assert_int_eq(online_count(oc), 40);
    feed(oc, r, 9, 10, 8, 0, 3000, &b, 0.002, 0);
    ck_assert_int_eq(online_steps(oc), 5);
    ck_assert_msg(online_refit(oc, NULL, &f, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_double_eq_tol(f.cost.c1, b.c1, 4 * f.se_c1);
    ck_assert_double_eq_tol(f.cost.c2, b.c2, 4 * f.se_c2);
    ck_assert_double_lt(fabs(f.cost.c2 - b.c2), fabs(f.cost.c2 - a.c2)); /* a has left the window */
    /* an observation of a step already out of the window is refused; one inside is taken */
    int len[3] = {100, 200, 300};
    ck_assert_int_eq(online_add(oc, 5, len, 3, 1.0, &e), UNPAD_ERANGE);
    ck_assert_ptr_nonnull(strstr(e.msg, "older than the window"));
    /* a ninth observation of one step with max_ranks 8 is refused */
    ck_assert_int_eq(online_add(oc, 10, len, 3, 1.0, &e), UNPAD_ERANGE);
    online_free(oc);
    gsl_rng_free(r);
}
END_TEST

START_TEST(test_bad_observations)
{
    online_cal *oc = NULL;
    unpad_err e = {0};
    ck_assert_int_eq(online_alloc(&(online_opts){.window = 0}, 8, &oc, &e), UNPAD_EINVAL);
    ck_assert_ptr_null(oc);
    ck_assert_int_eq(online_alloc(&(online_opts){.window = 4}, 2, &oc, &e), UNPAD_OK);
    int len[2] = {10, 0};
    ck_assert_int_eq(online_add(oc, 1, len, 2, 1.0, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "length 0"));
    ck_assert_int_eq(online_add(oc, 1, len, 1, -1.0, &e), UNPAD_EINVAL);
    ck_assert_int_eq(online_add(oc, 1, len, 0, 1.0, &e), UNPAD_EINVAL);
    ck_assert_int_eq(online_count(oc), 0);
    online_free(oc);
}
END_TEST

Suite *online_suite(void)
{
    Suite *s = suite_create("online");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_recover_known_coefficients);
    tcase_add_test(tc, test_refuses_degenerate);
    tcase_add_test(tc, test_equal_counts_keep_prior_c0);
    tcase_add_test(tc, test_sliding_window);
    tcase_add_test(tc, test_bad_observations);
    suite_add_tcase(s, tc);
    return s;
}
