/* fuzz_dist.c — length distributions (sim/dist.c) from arbitrary bytes: both forms and the
 * sniffing; a distribution that loads has finite statistics and can be sampled. */
#include <math.h>

#include "dist.h"
#include "fuzz.h"

static void check(int rc, unpad_dist *d, const unpad_err *e)
{
    if (rc) {
        fuzz_check_refusal(rc, e);
        return;
    }
    FUZZ_CHECK(d->max_len >= 1 && d->max_len <= 65536, "max_len %d", d->max_len);
    FUZZ_CHECK(isfinite(d->total) && d->total > 0, "total %g", d->total);
    dist_stats s;
    dist_compute_stats(d, &s);
    FUZZ_CHECK(isfinite(s.mean) && isfinite(s.stddev) && isfinite(s.sum_len2_mean), "mean %g", s.mean);
    FUZZ_CHECK(s.min >= 1 && s.min <= s.max && s.max <= d->max_len, "min %d max %d", s.min, s.max);
    FUZZ_CHECK(isfinite(dist_padding_fraction(d, d->max_len)), "padding");
    dist_sampler *smp;
    unpad_err e2 = {0};
    FUZZ_CHECK(dist_sampler_alloc(d, 7, &smp, &e2) == UNPAD_OK, "sampler: %s", e2.msg);
    int len[16];
    dist_sample(smp, len, 16);
    for (int i = 0; i < 16; i++)
        FUZZ_CHECK(len[i] >= 1 && len[i] <= d->max_len && d->count[len[i]] > 0, "sample %d", len[i]);
    dist_sampler_free(smp);
    dist_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    unpad_dist d;
    unpad_err e = {0};
    check(dist_parse(FUZZ_NAME, text, size, &d, &e), &d, &e);
    memset(&e, 0, sizeof e);
    check(dist_parse_csv(FUZZ_NAME, text, size, &d, &e), &d, &e);
    memset(&e, 0, sizeof e);
    check(dist_parse_list(FUZZ_NAME, text, size, &d, &e), &d, &e);
    return 0;
}
