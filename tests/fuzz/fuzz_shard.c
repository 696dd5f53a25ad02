/* fuzz_shard.c — binary shards (exec/shard.c) from arbitrary bytes: a shard that opens has every
 * sample readable within its header's limits, or refused with the file named. */
#include "fuzz.h"
#include "shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    shard *s = NULL;
    unpad_err e = {0};
    int rc = shard_open_mem(FUZZ_NAME, data, size, &s, &e);
    if (rc) {
        fuzz_check_refusal(rc, &e);
        return 0;
    }
    const shard_info *in = shard_get_info(s);
    long n = shard_count(s);
    FUZZ_CHECK(n >= 0 && (uint64_t)n == in->n_samples, "count %ld", n);
    shard_sample smp;
    FUZZ_CHECK(shard_sample_alloc(&smp, (int)in->max_len, (int)in->max_pred) == UNPAD_OK, "alloc");
    uint64_t tokens = 0;
    for (long i = 0; i < n; i++) {
        memset(&e, 0, sizeof e);
        rc = shard_read(s, i, &smp, &e);
        if (rc) {
            fuzz_check_refusal(rc, &e);
            continue;
        }
        FUZZ_CHECK(smp.len >= 1 && (uint32_t)smp.len <= in->max_len, "len %d", smp.len);
        FUZZ_CHECK(smp.n_pred >= 0 && smp.n_pred <= smp.len, "n_pred %d", smp.n_pred);
        for (int k = 0; k < smp.len; k++)
            FUZZ_CHECK((uint32_t)smp.tokens[k] < in->vocab_size, "token %d", smp.tokens[k]);
        tokens += (uint64_t)smp.len;
    }
    FUZZ_CHECK(tokens <= in->n_tokens, "tokens %llu", (unsigned long long)tokens);
    if (n > 0) {
        long idx[4] = {0, n - 1, n / 2, 0};
        shard_batch b;
        FUZZ_CHECK(shard_batch_alloc(&b, 4, 4L * in->max_len, 4L * in->max_pred) == UNPAD_OK, "batch");
        memset(&e, 0, sizeof e);
        rc = shard_pack_batch(s, idx, 4, &b, &e);
        if (rc)
            fuzz_check_refusal(rc, &e);
        else
            FUZZ_CHECK(b.cu_seqlens[4] == b.T, "cu_seqlens %d T %ld", b.cu_seqlens[4], b.T);
        shard_batch_free(&b);
    }
    shard_sample_free(&smp);
    shard_close(s);
    return 0;
}
