/* fuzz_plan.c — plan files (sim/plan.c): a plan that loads has a known policy and count, ascending
 * FMHA bounds and streams within range. */
#include "fuzz.h"
#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unpad_plan p;
    unpad_err e = {0};
    int rc = plan_parse(FUZZ_NAME, (const char *)data, size, &p, &e);
    if (rc) {
        fuzz_check_refusal(rc, &e);
        return 0;
    }
    FUZZ_CHECK((unsigned)p.policy < BAL_POLICY_COUNT && (unsigned)p.count < BAL_COUNT_COUNT,
               "policy %d count %d", (int)p.policy, (int)p.count);
    FUZZ_CHECK(p.gpus >= 1 && p.batch >= 1, "gpus %d batch %d", p.gpus, p.batch);
    FUZZ_CHECK(p.streams >= 1 && p.streams <= GROUP_MAX_STREAMS, "streams %d", p.streams);
    FUZZ_CHECK(p.fmha_nb >= -1 && p.fmha_nb <= GROUP_MAX, "groups %d", p.fmha_nb);
    for (int i = 1; i < p.fmha_nb; i++)
        FUZZ_CHECK(p.fmha_bounds[i] > p.fmha_bounds[i - 1], "bounds not ascending");
    FUZZ_CHECK(p.cost.c0 >= 0 && p.cost.c1 >= 0 && p.cost.c2 >= 0, "negative cost");
    return 0;
}
