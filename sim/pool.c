/* pool.c — a job pool over threads (pool.h). */
#include "pool.h"

#include <pthread.h>
#include <stddef.h>
#include <unistd.h>

typedef struct {
    void *ctx;
    const pool_fns *fns;
    int njobs, next, rc;
    int failed;     /* the failure kept: its job (-1: a thread's init) */
    unpad_err err;
    pthread_mutex_t lock;
} pool;

/* Keeps the failure of job i (-1: an init) when it comes before the one kept: jobs are taken in
 * order, so every job before a failed one was taken and has run when the threads are joined, and
 * the failure kept is the first a serial run would meet, whatever the threads' timing. */
static void pool_fail(pool *p, int i, int rc, const unpad_err *err)
{
    if (!p->rc || i < p->failed) {
        p->rc = rc;
        p->failed = i;
        p->err = *err;
    }
}

static void *pool_thread(void *arg)
{
    pool *p = arg;
    unpad_err err = {0};
    void *state = NULL;
    int rc = p->fns->init ? p->fns->init(p->ctx, &state, &err) : UNPAD_OK, i = -1;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        if (rc)
            pool_fail(p, i, rc, &err);
        i = p->rc ? p->njobs : p->next++;
        pthread_mutex_unlock(&p->lock);
        if (i >= p->njobs)
            break;
        rc = p->fns->job(p->ctx, state, i, &err);
    }
    if (p->fns->fini)
        p->fns->fini(p->ctx, state);
    return NULL;
}

int pool_run(void *ctx, const pool_fns *fns, int threads, int njobs, unpad_err *err)
{
    if (njobs <= 0)
        return UNPAD_OK;
    if (threads <= 0)
        threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    threads = threads < 1 ? 1 : threads > njobs ? njobs : threads > POOL_MAX_THREADS ? POOL_MAX_THREADS : threads;
    pool p = {.ctx = ctx, .fns = fns, .njobs = njobs};
    pthread_mutex_init(&p.lock, NULL);
    pthread_t tid[POOL_MAX_THREADS];
    int started = 0;
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&tid[t], NULL, pool_thread, &p) != 0)
            break; /* fewer threads: the jobs still all run */
        started = t;
    }
    pool_thread(&p);
    for (int t = 1; t <= started; t++)
        pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&p.lock);
    if (p.rc && err)
        *err = p.err;
    return p.rc;
}
