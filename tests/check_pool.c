/* check_pool.c — the job pool: every job runs once on any thread count, each thread's state is
 * its own, and a failure (of a job or of an init) stops the rest; the one a serial run would meet
 * first comes back, whichever thread failed first. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool.h"

typedef struct {
    int runs[1000];          /* how many times each job ran */
    int fail_at;             /* the job that fails (-1: none) */
    int fail_init;           /* 1: every init fails */
    int fail_more;           /* the jobs after fail_at that fail too, at once; fail_at then fails
                                after 50 ms, so that a later job's failure comes first in time */
    int inits, finis;
    pthread_mutex_t lock;
} jobs;

static int count_init(void *ctx, void **state, unpad_err *err)
{
    jobs *j = ctx;
    pthread_mutex_lock(&j->lock);
    j->inits++;
    pthread_mutex_unlock(&j->lock);
    if (j->fail_init)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "init %s", "refused");
    int *own = calloc(1, sizeof *own);
    *state = own;
    return own ? UNPAD_OK : UNPAD_ENOMEM;
}

static void count_fini(void *ctx, void *state)
{
    jobs *j = ctx;
    pthread_mutex_lock(&j->lock);
    j->finis++;
    pthread_mutex_unlock(&j->lock);
    free(state);
}

static int count_job(void *ctx, void *state, int i, unpad_err *err)
{
    jobs *j = ctx;
    ++*(int *)state; /* the thread's own counter: no lock needed */
    pthread_mutex_lock(&j->lock);
    j->runs[i]++;
    pthread_mutex_unlock(&j->lock);
    if (j->fail_more && i > j->fail_at && i <= j->fail_at + j->fail_more)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "job %d failed", i);
    if (j->fail_more && i == j->fail_at) {
        struct timespec slow = {0, 50000000};
        nanosleep(&slow, NULL);
    }
    if (j->fail_at >= 0 && i > j->fail_at) {
        /* jobs after the failing one take 1 ms, so the other threads cannot finish them all before
         * the failure stops the pool (however the threads are scheduled, short of a 0.5 s stall) */
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return i == j->fail_at ? unpad_fail(err, UNPAD_EINVAL, NULL, 0, "job %d failed", i) : UNPAD_OK;
}

static const pool_fns FNS = {.init = count_init, .fini = count_fini, .job = count_job};

START_TEST(test_every_job_once)
{
    for (int threads = 0; threads <= 5; threads++) {
        jobs *j = calloc(1, sizeof *j);
        j->fail_at = -1;
        pthread_mutex_init(&j->lock, NULL);
        unpad_err e = {0};
        ck_assert_int_eq(pool_run(j, &FNS, threads, 1000, &e), UNPAD_OK);
        for (int i = 0; i < 1000; i++)
            ck_assert_int_eq(j->runs[i], 1);
        ck_assert_int_eq(j->inits, j->finis);
        ck_assert_int_ge(j->inits, 1);
        pthread_mutex_destroy(&j->lock);
        free(j);
    }
    /* no jobs: nothing runs, not even an init */
    jobs none = {.fail_at = -1};
    pthread_mutex_init(&none.lock, NULL);
    ck_assert_int_eq(pool_run(&none, &FNS, 4, 0, NULL), UNPAD_OK);
    ck_assert_int_eq(none.inits, 0);
    pthread_mutex_destroy(&none.lock);
}
END_TEST

START_TEST(test_failures_come_back)
{
    jobs *j = calloc(1, sizeof *j);
    j->fail_at = 10;
    pthread_mutex_init(&j->lock, NULL);
    unpad_err e = {0};
    ck_assert_int_eq(pool_run(j, &FNS, 3, 1000, &e), UNPAD_EINVAL);
    ck_assert_str_eq(e.msg, "job 10 failed");
    int ran = 0;
    for (int i = 0; i < 1000; i++)
        ran += j->runs[i];
    ck_assert_int_lt(ran, 1000); /* the jobs not yet taken are skipped */
    ck_assert_int_eq(j->inits, j->finis);
    /* an init that fails: its message, and no job runs on that thread */
    memset(j->runs, 0, sizeof j->runs);
    j->fail_at = -1;
    j->fail_init = 1;
    ck_assert_int_eq(pool_run(j, &FNS, 2, 100, &e), UNPAD_ENOMEM);
    ck_assert_str_eq(e.msg, "init refused");
    /* jobs 10..14 fail, job 10 last in time: its failure is the one that comes back, on any
     * thread count (the others fail while it still runs) */
    for (int threads = 1; threads <= 4; threads++) {
        memset(j->runs, 0, sizeof j->runs);
        j->fail_init = 0;
        j->fail_at = 10;
        j->fail_more = 4;
        ck_assert_int_eq(pool_run(j, &FNS, threads, 100, &e), UNPAD_EINVAL);
        ck_assert_msg(!strcmp(e.msg, "job 10 failed"), "%d threads: %s", threads, e.msg);
        for (int i = 0; i < 10; i++) /* every job before it ran */
            ck_assert_int_eq(j->runs[i], 1);
    }
    pthread_mutex_destroy(&j->lock);
    free(j);
}
END_TEST

Suite *pool_suite(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_every_job_once);
    tcase_add_test(tc, test_failures_come_back);
    suite_add_tcase(s, tc);
    return s;
}
