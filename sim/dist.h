/* dist.h — distributions of sequence lengths: loading, statistics and reproducible sampling.
 *
 * Two file forms: a `length,count` histogram CSV (header line exactly `length,count`, `#` comments)
 * and a plain list with one length per line. Lengths are 1..65536, counts 0..1e15 (fractions
 * allowed), each length at most once; a NUL byte, an over-long line or a malformed number is
 * refused with the file, line and reason. Sampling uses GSL's mt19937 generator, so a seed gives the same lengths on
 * every machine. */
#ifndef UNPAD_DIST_H
#define UNPAD_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "unpad.h"

typedef struct {
    int max_len;    /* longest length with a bin (bins 1..max_len) */
    double *count;  /* (max_len + 1): count[l] = sequences of length l; count[0] unused (0) */
    double total;   /* sum of counts */
    char source[256]; /* file it came from, or "built-in" */
} unpad_dist;

typedef struct {
    double count, mean, stddev;
    int min, max;
    int p50, p90, p99;
    double share_at_max;   /* fraction of sequences of length == max_len */
    double sum_len2_mean;  /* E[len^2], drives the attention cost */
    int fractional;        /* 1: a count has a fraction (weights, e.g. probabilities, not whole sequences) */
} dist_stats;

/* The default distribution, models/dists/wiki512.csv under the project home (resolve.h); kept
 * for the trainer until it resolves its inputs with resolve_inputs_load. */
const char *dist_default_path(void);

int dist_load_csv(const char *path, unpad_dist *d, unpad_err *err);
/* The same from text[0..len) in memory; name stands for the file in messages. */
int dist_parse_csv(const char *name, const char *text, size_t len, unpad_dist *d, unpad_err *err);
int dist_parse_list(const char *name, const char *text, size_t len, unpad_dist *d, unpad_err *err);
int dist_parse(const char *name, const char *text, size_t len, unpad_dist *d, unpad_err *err);
int dist_load_list(const char *path, unpad_dist *d, unpad_err *err);
/* Chooses the form from the content: a first data line with a comma is a histogram. */
int dist_load(const char *path, unpad_dist *d, unpad_err *err);
/* A distribution from lengths in memory (e.g. one batch). */
int dist_from_lengths(const int *len, int n, unpad_dist *d, unpad_err *err);
void dist_free(unpad_dist *d);

void dist_compute_stats(const unpad_dist *d, dist_stats *s);
/* A count as the file gives it, into buf: a whole number without decimals (2, 16279552), a
 * fraction with its digits (2.5, 0.3), never rounded to a whole one. */
const char *dist_count_text(double count, char *buf, size_t n);
/* Fraction of tokens that are padding when each sequence is padded to pad_len (>= max length). */
double dist_padding_fraction(const unpad_dist *d, int pad_len);
/* Smallest length l with P(len <= l) >= q, q in (0, 1]. */
int dist_percentile(const unpad_dist *d, double q);

/* Reproducible sampling. */
typedef struct dist_sampler dist_sampler;
int dist_sampler_alloc(const unpad_dist *d, uint64_t seed, dist_sampler **out, unpad_err *err);
void dist_sampler_free(dist_sampler *s);
void dist_sample(dist_sampler *s, int *len, int n);
/* Restarts the sampler's generator from seed (same stream as a fresh sampler with that seed). */
void dist_sampler_seed(dist_sampler *s, uint64_t seed);

#endif
