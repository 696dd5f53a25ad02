/* pool.h — jobs 0..n-1 run over a few threads (the caller's among them), taken in order. Each
 * thread may own state, made before its first job (init) and freed after its last (fini). A failure
 * (of a job or of an init) stops the jobs not yet taken; pool_run returns the failure a serial run
 * would meet first (an init's, else the lowest job's), its message in *err, whatever the threads'
 * timing. The jobs must not depend on which thread runs them. */
#ifndef UNPAD_POOL_H
#define UNPAD_POOL_H

#include "unpad.h"

#define POOL_MAX_THREADS 64

typedef struct {
    int (*init)(void *ctx, void **state, unpad_err *err); /* NULL: no state */
    void (*fini)(void *ctx, void *state);                 /* NULL: nothing to free */
    int (*job)(void *ctx, void *state, int job, unpad_err *err);
} pool_fns;

/* threads: at most that many (0 or less: one per online CPU), never more than jobs or
 * POOL_MAX_THREADS. */
int pool_run(void *ctx, const pool_fns *fns, int threads, int njobs, unpad_err *err);

#endif
