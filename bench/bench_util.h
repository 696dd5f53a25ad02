/* bench_util.h — what the GPU benchmarks share: the lengths of a batch drawn from the Wikipedia
 * distribution (models/dists/wiki512.csv, a fixed seed) and their prefix sums, and the order of
 * floats for medians. Header-only: each benchmark is one program (static inline: one may use
 * either). */
#ifndef UNPAD_BENCH_UTIL_H
#define UNPAD_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "dist.h" /* a C header without extern "C" guards */
#include "resolve.h"
}

static int bench_cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* n lengths into len (malloc'd) and their prefix sums into cu (n + 1, malloc'd); prints
 * "WHO: reason" and returns 1 when the distribution cannot be read. */
static inline int bench_wiki_lengths(const char *who, unsigned long seed, int n, int **len, int32_t **cu)
{
    unpad_dist dist;
    unpad_err err;
    memset(&err, 0, sizeof err);
    dist_sampler *smp;
    char dpath[RESOLVE_PATH_LEN];
    if (resolve_project_path("models/dists/wiki512.csv", dpath, sizeof dpath, &err) != UNPAD_OK ||
        dist_load(dpath, &dist, &err) != UNPAD_OK ||
        dist_sampler_alloc(&dist, seed, &smp, &err) != UNPAD_OK) {
        fprintf(stderr, "%s: %s\n", who, err.msg);
        return 1;
    }
    *len = (int *)malloc(sizeof(int) * n);
    dist_sample(smp, *len, n);
    dist_sampler_free(smp);
    dist_free(&dist);
    *cu = (int32_t *)malloc(sizeof(int32_t) * (n + 1));
    (*cu)[0] = 0;
    for (int i = 0; i < n; i++)
        (*cu)[i + 1] = (*cu)[i] + (*len)[i];
    return 0;
}

#endif
