/* check_progress.c — the progress line's text, its counters under concurrent additions, and
 * silence where it is not wanted. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "progress.h"

START_TEST(test_format)
{
    char b[256];
    progress_format(b, sizeof b, "unpad whatif", "configurations", 12, 40, 250, 1000, 5.0);
    ck_assert_str_eq(b, "unpad whatif: 12/40 configurations, 25% of the work, 2.4 configurations/s, "
                        "5.0 s, ETA 15.0 s");
    progress_format(b, sizeof b, "unpad whatif", "configurations", 0, 40, 0, 1000, 3.0);
    ck_assert_str_eq(b, "unpad whatif: 0/40 configurations, 0% of the work, 3.0 s, ETA unknown");
    progress_format(b, sizeof b, "unpad predict", "steps", 150528, 300000, 150528, 300000, 89.0);
    ck_assert_str_eq(b, "unpad predict: 150528/300000 steps, 50% of the work, 1691 steps/s, "
                        "1 min 29 s, ETA 1 min 28 s");
    progress_format(b, sizeof b, "x", "steps", 1, 4, 1, 4, 100.0);
    ck_assert_ptr_nonnull(strstr(b, "1 min 40 s, ETA 5 min 00 s"));
    progress_format(b, sizeof b, "x", "steps", 1, 2, 1, 2, 4000.0);
    ck_assert_ptr_nonnull(strstr(b, "1 h 06 min, ETA 1 h 06 min"));
}
END_TEST

static void *adder(void *arg)
{
    for (int i = 0; i < 10000; i++)
        progress_add(arg, 1, 3);
    return NULL;
}

START_TEST(test_threads_and_disabled)
{
    /* Disabled: nothing is drawn, but the additions of 4 threads all count. */
    progress *p;
    unpad_err e = {0};
    ck_assert_int_eq(progress_start("t", "items", 40000, 120000, 0, &p, &e), UNPAD_OK);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, adder, p), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    long long items, work;
    progress_counts(p, &items, &work);
    ck_assert_int_eq(items, 40000);
    ck_assert_int_eq(work, 120000);
    progress_hold(p);
    progress_release(p);
    progress_end(p);
    progress_add(NULL, 1, 1); /* a NULL progress is a no-op */
    progress_end(NULL);
    /* Under `make test` stderr is not a terminal: no line is wanted; --quiet never. */
    ck_assert_int_eq(progress_wanted(1), 0);
}
END_TEST

Suite *progress_suite(void)
{
    Suite *s = suite_create("progress");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_format);
    tcase_add_test(tc, test_threads_and_disabled);
    suite_add_tcase(s, tc);
    return s;
}
