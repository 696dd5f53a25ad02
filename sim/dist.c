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

static int blank_or_comment(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return *s == '\0' || *s == '#';
}

/* Largest count of one length: more sequences than any corpus, and small enough that no sum
 * over 65536 bins (of count x length^2, or count x a padded length) can overflow. */
#define DIST_MAX_COUNT 1e15

/* Bins being filled by a parser: counts per length and the line each length came from. */
typedef struct {
    double *count; /* (cap) */
    int *line;     /* (cap) line of each length's row, 0 if none */
    int cap, maxl;
} dist_bins;

/* Makes room for length l (1..DIST_MAX_LEN) in the bins. */
static int bins_reserve(dist_bins *b, long l, const char *name, unpad_err *err)
{
    if (l < b->cap)
        return UNPAD_OK;
    int cap = b->cap ? b->cap : 1024;
    while (cap <= l)
        cap *= 2;
    double *c = realloc(b->count, (size_t)cap * sizeof *c);
    if (c)
        b->count = c;
    int *ln = c ? realloc(b->line, (size_t)cap * sizeof *ln) : NULL;
    if (!ln)
        return unpad_fail(err, UNPAD_ENOMEM, name, 0, "out of memory");
    b->line = ln;
    memset(b->count + b->cap, 0, (size_t)(cap - b->cap) * sizeof *b->count);
    memset(b->line + b->cap, 0, (size_t)(cap - b->cap) * sizeof *b->line);
    b->cap = cap;
    return UNPAD_OK;
}

static int bins_alloc(dist_bins *b, const char *name, unpad_err *err)
{
    memset(b, 0, sizeof *b);
    return bins_reserve(b, 1, name, err);
}

static void bins_free(dist_bins *b)
{
    free(b->count);
    free(b->line);
}

/* The distribution from filled bins: refuses an empty one and totals that do not stay finite;
 * keeps bins up to the largest non-empty one. */
static int bins_finish(dist_bins *b, const char *name, unpad_dist *d, unpad_err *err)
{
    double total = 0, sum2 = 0;
    for (int l = 1; l <= b->maxl; l++) {
        total += b->count[l];
        sum2 += b->count[l] * (double)l * l;
    }
    if (!isfinite(total) || !isfinite(sum2))
        return unpad_fail(err, UNPAD_EINVAL, name, 0,
                          "the counts are too large: their total overflows (%g)", total);
    if (total <= 0)
        return unpad_fail(err, UNPAD_EINVAL, name, 0, "all counts are zero");
    int last = b->maxl;
    while (last > 1 && b->count[last] == 0)
        last--;
    int rc = dist_alloc(d, last, name, err);
    if (rc)
        return rc;
    memcpy(d->count, b->count, ((size_t)last + 1) * sizeof *d->count);
    d->total = total;
    return UNPAD_OK;
}

/* Splits "a,b" at its one comma into two blank-trimmed fields; -1: no comma, -2: more than one. */
static int split2(char *s, char **a, char **b)
{
    char *c = strchr(s, ',');
    if (!c)
        return -1;
    if (strchr(c + 1, ','))
        return -2;
    *c = '\0';
    *a = s;
    *b = c + 1;
    for (char **f = a; f; f = f == a ? b : NULL) {
        while (isspace((unsigned char)**f))
            ++*f;
        size_t n = strlen(*f);
        while (n && isspace((unsigned char)(*f)[n - 1]))
            (*f)[--n] = '\0';
    }
    return 0;
}

#define ROW_FAIL(...)                                                                              \
    do {                                                                                           \
        rc = unpad_fail(err, UNPAD_EINVAL, name, it.lineno, __VA_ARGS__);                           \
        unpad_err_show_line(err, it.lineno, raw);                                                  \
        goto out;                                                                                  \
    } while (0)

int dist_parse_csv(const char *name, const char *text, size_t len, unpad_dist *d, unpad_err *err)
{
    memset(d, 0, sizeof *d);
    dist_bins b;
    int rc = bins_alloc(&b, name, err), header = 0, r, rows = 0;
    if (rc)
        return rc;
    unpad_lines it;
    char raw[UNPAD_LINE_MAX + 1];
    unpad_lines_init(&it, name, text, len);
    while ((r = unpad_lines_next(&it, err)) > 0) {
        if (blank_or_comment(it.line))
            continue;
        memcpy(raw, it.line, it.len + 1);
        char *x, *y;
        int parts = split2(it.line, &x, &y);
        if (!header) {
            if (parts != 0 || strcmp(x, "length") || strcmp(y, "count"))
                ROW_FAIL("expected the header 'length,count'");
            header = 1;
            continue;
        }
        if (parts == -1)
            ROW_FAIL("missing column: expected 'length,count'");
        if (parts == -2)
            ROW_FAIL("too many columns: expected 'length,count'");
        long l;
        double cnt;
        if (unpad_parse_long(x, &l))
            ROW_FAIL("bad number '%s' in column 'length' (expected an integer 1..%d)", x,
                     DIST_MAX_LEN);
        if (l < 1 || l > DIST_MAX_LEN)
            ROW_FAIL("length %ld out of range (expected 1..%d)", l, DIST_MAX_LEN);
        if (unpad_parse_double(y, &cnt))
            ROW_FAIL("bad number '%s' in column 'count' (expected a count in 0..%g)", y,
                     DIST_MAX_COUNT);
        if (cnt < 0)
            ROW_FAIL("negative count %g for length %ld (expected a count >= 0)", cnt, l);
        if (cnt > DIST_MAX_COUNT)
            ROW_FAIL("count %g for length %ld out of range (expected a count in 0..%g)", cnt, l,
                     DIST_MAX_COUNT);
        if ((rc = bins_reserve(&b, l, name, err)))
            goto out;
        if (b.line[l])
            ROW_FAIL("length %ld appears twice (first on line %d)", l, b.line[l]);
        b.line[l] = it.lineno;
        b.count[l] = cnt;
        b.maxl = (int)l > b.maxl ? (int)l : b.maxl;
        rows++;
    }
    if (r < 0)
        rc = err ? err->code : UNPAD_EINVAL;
    else if (!header)
        rc = unpad_fail(err, UNPAD_EINVAL, name, 0, "empty file: expected the header 'length,count'");
    else if (!rows)
        rc = unpad_fail(err, UNPAD_EINVAL, name, 0, "no data rows after the header");
    else
        rc = bins_finish(&b, name, d, err);
out:
    bins_free(&b);
    return rc;
}

int dist_parse_list(const char *name, const char *text, size_t len, unpad_dist *d, unpad_err *err)
{
    memset(d, 0, sizeof *d);
    dist_bins b;
    int rc = bins_alloc(&b, name, err), r, rows = 0;
    if (rc)
        return rc;
    unpad_lines it;
    const char *raw = it.line;
    unpad_lines_init(&it, name, text, len);
    while ((r = unpad_lines_next(&it, err)) > 0) {
        if (blank_or_comment(it.line))
            continue;
        long v;
        if (unpad_parse_long(it.line, &v))
            ROW_FAIL("bad number: expected one integer length per line");
        if (v < 1 || v > DIST_MAX_LEN)
            ROW_FAIL("length %ld out of range (expected 1..%d)", v, DIST_MAX_LEN);
        if ((rc = bins_reserve(&b, v, name, err)))
            goto out;
        b.count[v] += 1;
        b.maxl = (int)v > b.maxl ? (int)v : b.maxl;
        rows++;
    }
    if (r < 0)
        rc = err ? err->code : UNPAD_EINVAL;
    else if (!rows)
        rc = unpad_fail(err, UNPAD_EINVAL, name, 0, "no lengths in the file");
    else
        rc = bins_finish(&b, name, d, err);
out:
    bins_free(&b);
    return rc;
}
#undef ROW_FAIL

int dist_parse(const char *name, const char *text, size_t len, unpad_dist *d, unpad_err *err)
{
    memset(d, 0, sizeof *d);
    unpad_lines it;
    int r, csv = 0;
    unpad_lines_init(&it, name, text, len);
    while ((r = unpad_lines_next(&it, err)) > 0)
        if (!blank_or_comment(it.line)) {
            csv = strchr(it.line, ',') != NULL;
            break;
        }
    if (r < 0)
        return err ? err->code : UNPAD_EINVAL;
    return csv ? dist_parse_csv(name, text, len, d, err) : dist_parse_list(name, text, len, d, err);
}

typedef int (*dist_parser)(const char *, const char *, size_t, unpad_dist *, unpad_err *);

static int load_with(dist_parser parse, const char *path, unpad_dist *d, unpad_err *err)
{
    memset(d, 0, sizeof *d);
    char *text;
    size_t len;
    int rc = unpad_read_file(path, &text, &len, err);
    if (rc)
        return rc;
    rc = parse(path, text, len, d, err);
    free(text);
    return rc;
}

int dist_load_csv(const char *path, unpad_dist *d, unpad_err *err)
{
    return load_with(dist_parse_csv, path, d, err);
}

int dist_load_list(const char *path, unpad_dist *d, unpad_err *err)
{
    return load_with(dist_parse_list, path, d, err);
}

int dist_load(const char *path, unpad_dist *d, unpad_err *err)
{
    return load_with(dist_parse, path, d, err);
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
        s->fractional |= d->count[l] != floor(d->count[l]);
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

const char *dist_count_text(double count, char *buf, size_t n)
{
    snprintf(buf, n, count == floor(count) && fabs(count) < 1e17 ? "%.0f" : "%.15g", count);
    return buf;
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
        return unpad_fail(err, UNPAD_ENOMEM, d->source, 0, "out of memory");
    s->rng = gsl_rng_alloc(gsl_rng_mt19937);
    /* count[0] is 0, so index == length. */
    s->table = s->rng ? gsl_ran_discrete_preproc((size_t)d->max_len + 1, d->count) : NULL;
    if (!s->rng || !s->table) {
        dist_sampler_free(s);
        return unpad_fail(err, UNPAD_ENOMEM, d->source, 0,
                          "cannot set up the sampler (%d lengths, total %g)", d->max_len, d->total);
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
