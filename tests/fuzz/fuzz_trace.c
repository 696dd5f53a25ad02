/* fuzz_trace.c — trace CSVs (sim/trace.c): rows that load are inside the columns' ranges, and a
 * refused file leaves nothing half-read in the set. */
#include <math.h>

#include "fuzz.h"
#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    trace_set set = {0};
    unpad_err e = {0};
    int rc = trace_parse(FUZZ_NAME, (const char *)data, size, &set, &e);
    if (rc) {
        fuzz_check_refusal(rc, &e);
        FUZZ_CHECK(set.n == 0, "%zu rows kept after a refusal", set.n);
    }
    for (size_t i = 0; i < set.n; i++) {
        const trace_row *r = &set.rows[i];
        FUZZ_CHECK(r->gpus >= 1 && r->rank >= 0 && r->rank < r->gpus, "rank %d of %d", r->rank,
                   r->gpus);
        FUZZ_CHECK(r->step >= 0 && r->op >= 0 && r->op < OP_COUNT, "step %d op %d", r->step, r->op);
        FUZZ_CHECK(r->seqs >= 0 && r->tokens >= 0 && r->max_len >= 0, "negative count");
        FUZZ_CHECK(isfinite(r->dur_us) && r->dur_us >= 0 && r->dur_us <= 1e15, "dur %g", r->dur_us);
        FUZZ_CHECK(isfinite(r->flops) && isfinite(r->bytes) && isfinite(r->start_us), "not finite");
    }
    trace_set_free(&set);
    return 0;
}
