/* dist.c — length distributions: parse, summarise, sample (GSL mt19937 + Walker alias tables). */
#include "dist.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "resolve.h"

#define DIST_MAX_LEN 65536

const char *dist_default_path(void)
{
    static char buf[RESOLVE_PATH_LEN];
    if (resolve_project_path("models/dists/wiki512.csv", buf, sizeof buf, NULL))
        snprintf(buf, sizeof buf, "models/dists/wiki512.csv");
    return buf;
}

static int dist_alloc(unpad_dist *d, int max_len, const char *path, unpad_err *err)
{
    d->count = calloc((size_t)max_len + 1, sizeof *d->count);
    if (!d->count)
        return unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
    d->max_len = max_len;
    d->total = 0;
    snprintf(d->source, sizeof d->source, "%s", path);
    return UNPAD_OK;
}

void dist_free(unpad_dist *d)
{
    free(d->count);
    d->count = NULL;
    d->max_len = 0;
    d->total = 0;
}

/* Iterates over lines: returns the next line (NUL-terminated in place), its number, or NULL. */
static char *next_line(char **cursor, int *lineno)
{
    char *s = *cursor;
    if (!*s)
        return NULL;
    char *e = strchr(s, '\n');
    if (e) {
        *e = '\0';
        *cursor = e + 1;
    } else
        *cursor = s + strlen(s);
    size_t n = strlen(s);
    if (n && s[n - 1] == '\r')
        s[n - 1] = '\0';
    (*lineno)++;
    return s;
}

static int blank_or_comment(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return *s == '\0' || *s == '#';
}

/* Keeps bins up to the largest non-empty one; refuses an empty distribution. */
static int dist_finish(unpad_dist *d, const char *path)
{
    (void)path;
    int last = d->max_len;
    while (last > 1 && d->count[last] == 0)
        last--;
    d->max_len = last;
    return UNPAD_OK;
}

int dist_load_csv(const char *path, unpad_dist *d, unpad_err *err)
{
    memset(d, 0, sizeof *d);
    char *text;
    int rc = unpad_read_file(path, &text, NULL, err);
    if (rc)
        return rc;
    char *cur = text, *line;
    int lineno = 0, header = 0;
    /* First pass: largest length, to size the bins. */
    long maxl = 0;
    struct row { long len; double count; int lineno; } *rows = NULL;
    size_t nrows = 0, cap = 0;
    while ((line = next_line(&cur, &lineno))) {
        if (blank_or_comment(line))
            continue;
        char copy[512];
        snprintf(copy, sizeof copy, "%s", line);
        if (!header) {
            /* The header names the two columns. */
            char *c = strchr(copy, ',');
            if (!c) {
                rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                                "expected the header 'length,count'");
                unpad_err_show_line(err, lineno, line);
                goto out;
            }
            *c = '\0';
            char *a = copy, *b = c + 1;
            while (isspace((unsigned char)*a)) a++;
            while (isspace((unsigned char)*b)) b++;
            size_t nb = strlen(b);
            while (nb && isspace((unsigned char)b[nb - 1])) b[--nb] = '\0';
            if (strncmp(a, "length", 6) || strcmp(b, "count")) {
                rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                                "missing column: expected the header 'length,count'");
                unpad_err_show_line(err, lineno, line);
                goto out;
            }
            header = 1;
            continue;
        }
        char *c = strchr(copy, ',');
        if (!c) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                            "missing column: expected 'length,count'");
            unpad_err_show_line(err, lineno, line);
            goto out;
        }
        *c = '\0';
        if (strchr(c + 1, ',')) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                            "too many columns: expected 'length,count'");
            unpad_err_show_line(err, lineno, line);
            goto out;
        }
        long len;
        double cnt;
        if (unpad_parse_long(copy, &len)) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                            "bad number '%s' in column 'length' (expected an integer 1..%d)", copy,
                            DIST_MAX_LEN);
            unpad_err_show_line(err, lineno, line);
            goto out;
        }
        if (len < 1 || len > DIST_MAX_LEN) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                            "length %ld out of range (expected 1..%d)", len, DIST_MAX_LEN);
            unpad_err_show_line(err, lineno, line);
            goto out;
        }
        if (unpad_parse_double(c + 1, &cnt)) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                            "bad number '%s' in column 'count' (expected a count >= 0)", c + 1);
            unpad_err_show_line(err, lineno, line);
            goto out;
        }
        if (cnt < 0) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                            "negative count %g for length %ld (expected a count >= 0)", cnt, len);
            unpad_err_show_line(err, lineno, line);
            goto out;
        }
        if (nrows == cap) {
            cap = cap ? cap * 2 : 1024;
            struct row *nr = realloc(rows, cap * sizeof *rows);
            if (!nr) {
                rc = unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
                goto out;
            }
            rows = nr;
        }
        rows[nrows++] = (struct row){len, cnt, lineno};
        if (len > maxl)
            maxl = len;
    }
    if (!header) {
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "empty file: expected the header 'length,count'");
        goto out;
    }
    if (!nrows) {
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "no data rows after the header");
        goto out;
    }
    if ((rc = dist_alloc(d, (int)maxl, path, err)))
        goto out;
    for (size_t i = 0; i < nrows; i++) {
        if (d->count[rows[i].len] != 0) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, rows[i].lineno,
                            "length %ld appears twice", rows[i].len);
            dist_free(d);
            goto out;
        }
        d->count[rows[i].len] = rows[i].count;
        d->total += rows[i].count;
    }
    if (d->total <= 0) {
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "all counts are zero");
        dist_free(d);
        goto out;
    }
    rc = dist_finish(d, path);
out:
    free(rows);
    free(text);
    return rc;
}

int dist_load_list(const char *path, unpad_dist *d, unpad_err *err)
{
    memset(d, 0, sizeof *d);
    char *text;
    int rc = unpad_read_file(path, &text, NULL, err);
    if (rc)
        return rc;
    int *len = NULL;
    size_t n = 0, cap = 0;
    char *cur = text, *line;
    int lineno = 0;
    while ((line = next_line(&cur, &lineno))) {
        if (blank_or_comment(line))
            continue;
        long v;
        if (unpad_parse_long(line, &v)) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno,
                            "bad number: expected one integer length per line");
            unpad_err_show_line(err, lineno, line);
            goto out;
        }
        if (v < 1 || v > DIST_MAX_LEN) {
            rc = unpad_fail(err, UNPAD_EINVAL, path, lineno, "length %ld out of range (expected 1..%d)",
                            v, DIST_MAX_LEN);
            unpad_err_show_line(err, lineno, line);
            goto out;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            int *nl = realloc(len, cap * sizeof *len);
            if (!nl) {
                rc = unpad_fail(err, UNPAD_ENOMEM, path, 0, "out of memory");
                goto out;
            }
            len = nl;
        }
        len[n++] = (int)v;
    }
    if (!n) {
        rc = unpad_fail(err, UNPAD_EINVAL, path, 0, "no lengths in the file");
        goto out;
    }
    rc = dist_from_lengths(len, (int)n, d, err);
    if (!rc)
        snprintf(d->source, sizeof d->source, "%s", path);
out:
    free(len);
    free(text);
    return rc;
}

int dist_load(const char *path, unpad_dist *d, unpad_err *err)
{
    char *text;
    int rc = unpad_read_file(path, &text, NULL, err);
    if (rc)
        return rc;
    int csv = 0;
    char *cur = text, *line;
    int lineno = 0;
    while ((line = next_line(&cur, &lineno))) {
        if (blank_or_comment(line))
            continue;
        csv = strchr(line, ',') != NULL;
        break;
    }
    free(text);
    return csv ? dist_load_csv(path, d, err) : dist_load_list(path, d, err);
}

int dist_from_lengths(const int *len, int n, unpad_dist *d, unpad_err *err)
{
    memset(d, 0, sizeof *d);
    if (n <= 0)
        return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "no lengths");
    int maxl = 0;
    for (int i = 0; i < n; i++) {
        if (len[i] < 1 || len[i] > DIST_MAX_LEN)
            return unpad_fail(err, UNPAD_EINVAL, NULL, 0, "length %d out of range (1..%d)", len[i],
                              DIST_MAX_LEN);
        if (len[i] > maxl)
            maxl = len[i];
    }
    int rc = dist_alloc(d, maxl, "lengths", err);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++)
        d->count[len[i]] += 1;
    d->total = n;
    return UNPAD_OK;
}

int dist_percentile(const unpad_dist *d, double q)
{
    double target = q * d->total, acc = 0;
    for (int l = 1; l <= d->max_len; l++) {
        acc += d->count[l];
        if (acc >= target - 1e-9 * d->total && d->count[l] > 0)
            return l;
    }
    return d->max_len;
}

double dist_padding_fraction(const unpad_dist *d, int pad_len)
{
    double tokens = 0, padded = 0;
    for (int l = 1; l <= d->max_len; l++) {
        tokens += d->count[l] * l;
        padded += d->count[l] * (l > pad_len ? l : pad_len);
    }
    return padded > 0 ? 1.0 - tokens / padded : 0.0;
}

void dist_compute_stats(const unpad_dist *d, dist_stats *s)
{
    memset(s, 0, sizeof *s);
    double sum = 0, sum2 = 0;
    s->min = 0;
    for (int l = 1; l <= d->max_len; l++) {
        if (d->count[l] > 0 && !s->min)
            s->min = l;
        if (d->count[l] > 0)
            s->max = l;
        sum += d->count[l] * l;
        sum2 += d->count[l] * (double)l * l;
    }
    s->count = d->total;
    s->mean = sum / d->total;
    s->sum_len2_mean = sum2 / d->total;
    double var = s->sum_len2_mean - s->mean * s->mean;
    s->stddev = var > 0 ? sqrt(var) : 0;
    s->p50 = dist_percentile(d, 0.50);
    s->p90 = dist_percentile(d, 0.90);
    s->p99 = dist_percentile(d, 0.99);
    s->share_at_max = d->count[d->max_len] / d->total;
}

struct dist_sampler {
    gsl_rng *rng;
    gsl_ran_discrete_t *table;
};

int dist_sampler_alloc(const unpad_dist *d, uint64_t seed, dist_sampler **out, unpad_err *err)
{
    unpad_gsl_quiet();
    dist_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
    s->rng = gsl_rng_alloc(gsl_rng_mt19937);
    /* count[0] is 0, so index == length. */
    s->table = s->rng ? gsl_ran_discrete_preproc((size_t)d->max_len + 1, d->count) : NULL;
    if (!s->rng || !s->table) {
        dist_sampler_free(s);
        return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "cannot set up the sampler");
    }
    gsl_rng_set(s->rng, (unsigned long)(seed ? seed : 1));
    *out = s;
    return UNPAD_OK;
}

void dist_sampler_free(dist_sampler *s)
{
    if (!s)
        return;
    if (s->table)
        gsl_ran_discrete_free(s->table);
    if (s->rng)
        gsl_rng_free(s->rng);
    free(s);
}

void dist_sample(dist_sampler *s, int *len, int n)
{
    for (int i = 0; i < n; i++)
        len[i] = (int)gsl_ran_discrete(s->rng, s->table);
}

void dist_sampler_seed(dist_sampler *s, uint64_t seed)
{
    gsl_rng_set(s->rng, (unsigned long)(seed ? seed : 1));
}
