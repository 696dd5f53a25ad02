/* check_workload.c — the measured-workload table: parsing and its messages, the trainer's batches
 * reproduced (predict) against a direct computation, the what-if and the memory beside them. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist.h"
#include "memory.h"
#include "step.h"
#include "testutil.h"
#include "workload.h"

#define HEAD "workload,model,batch,vranks,policy,dist,steps,step_ms_median,step_ms_mean,mem_gib,trace\n"

static void refused(const char *text, const char *want)
{
    char path[512];
    unpad_err e = {0};
    workload_row *w = NULL;
    int n = 0;
    tu_write_tmp(path, sizeof path, ".csv", text);
    ck_assert_int_eq(workload_load(path, &w, &n, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, want), "expected '%s' in: %s", want, e.msg);
    unlink(path);
}

START_TEST(test_parse)
{
    char path[512];
    unpad_err e = {0};
    workload_row *w = NULL;
    int n = 0;
    tu_write_tmp(path, sizeof path, ".csv",
                 HEAD "a,bert-base,24,1,none,short,12,7.3,9.5,6.28,a.csv\n"
                      "b,bert-large,32,4,kk,uniform,12,171.75,170.8,18.95,b.csv\n");
    ck_assert_int_eq(workload_load(path, &w, &n, &e), UNPAD_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(w[1].model, "bert-large");
    ck_assert_int_eq(w[1].vranks, 4);
    ck_assert_double_eq(w[1].meas_ms, 170.8); /* the mean; the median beside it */
    ck_assert_double_eq(w[1].meas_median_ms, 171.75);
    free(w);
    unlink(path);
    refused("workload,model\n", "expected the header");
    refused(HEAD "a,bert-base,24,1,none,short,12,7.3,9.5,6.28\n", ":2: expected 11 columns");
    refused(HEAD "a,bert-base,0,1,none,short,12,7.3,9.5,6.28,a.csv\n", ":2: expected batch 1..65536");
    refused(HEAD "a,../x,24,1,none,short,12,7.3,9.5,6.28,a.csv\n", "plain model");
    refused(HEAD "a,bert-base,24,1,none,short,12,-1,9.5,6.28,a.csv\n", "positive step_ms_median");
    refused(HEAD "a,bert-base,24,1,pack,short,12,7.3,9.5,6.28,a.csv\n", "'pack'");
    refused(HEAD, "no workloads");
}
END_TEST

START_TEST(test_predict)
{
    char path[512], home[512];
    unpad_err e = {0};
    workload_row *w = NULL;
    int n = 0;
    tu_write_tmp(path, sizeof path, ".csv", HEAD "a,bert-base,8,1,none,short,3,5,5,4,a.csv\n");
    ck_assert_int_eq(workload_load(path, &w, &n, &e), UNPAD_OK);
    unlink(path);
    hw_spec hw;
    calib_coef c;
    model_cfg m;
    unpad_dist d;
    ck_assert_int_eq(hw_load(tu_path(home, sizeof home, "models/hw/h200-sxm.cfg"), &hw, &e), 0);
    ck_assert_int_eq(model_load(tu_path(home, sizeof home, "models/bert-base.cfg"), &m, &e), 0);
    ck_assert_int_eq(dist_load(tu_path(home, sizeof home, "models/dists/short.csv"), &d, &e), 0);
    calib_default(&hw, &c);
    /* the trainer's steps 9, 10, 11 (21 x 1000003 + position + 1 seeds one draw each, clamped
     * to [8, longest]), timed directly: their mean */
    step_model sm;
    ck_assert_int_eq(step_model_init(&sm, &m, &hw, &c, 1, &e), 0);
    dist_sampler *ds;
    ck_assert_int_eq(dist_sampler_alloc(&d, 1, &ds, &e), 0);
    double t[3];
    int maxl = d.max_len < m.max_len ? d.max_len : m.max_len;
    for (int st = 9; st <= 11; st++) {
        int len[8];
        for (int k = 0; k < 8; k++) {
            uint64_t p = (uint64_t)(st - 1) * 8 + (uint64_t)k;
            dist_sampler_seed(ds, 21 * 1000003ull + p + 1);
            dist_sample(ds, &len[k], 1);
            len[k] = len[k] < 8 ? 8 : len[k] > maxl ? maxl : len[k];
        }
        step_batch b;
        ck_assert_int_eq(step_batch_of(&sm, len, 8, &b, &e), 0);
        t[st - 9] = (step_batch_us(&sm, &b) + sm.lamb_us + sm.overhead_us) / 1e3;
    }
    /* the trainer's log of those steps: 10% slower, 2% faster and a stall (1.5x) than predicted */
    char logs[512], logp[600];
    snprintf(logs, sizeof logs, "/tmp/unpad-test-logs-%d", (int)getpid());
    ck_assert_int_eq(mkdir(logs, 0700), 0);
    snprintf(logp, sizeof logp, "%s/a.log", logs);
    FILE *lf = fopen(logp, "w");
    ck_assert_ptr_nonnull(lf);
    const double slow[3] = {1.10, 0.98, 1.50};
    fprintf(lf, "step      8/11 | loss 11.1 | 100.0 samples/s | 1.0 ms/step | ETA 0s\n");
    for (int st = 9; st <= 11; st++)
        fprintf(lf, "step %6d/11 | loss 11.1 (mlm 10.4 nsp 0.7) | lr 1e-4 | 100.0 samples/s | "
                    "%.6f ms/step | grad norm 1 | ETA 0s\n", st, t[st - 9] * slow[st - 9]);
    fclose(lf);
    const char *h = getenv("UNPAD_HOME");
    workload_setup s = {.home = h && *h ? h : ".", .logs = logs, .hw = &hw, .calib = &c,
                        .seed = 21, .whatif_steps = 300};
    ck_assert_msg(workload_predict(&s, w, n, &e) == UNPAD_OK, "%s", e.msg);
    unlink(logp);
    rmdir(logs);
    /* per step: the median of (predicted - measured) / measured, and one stall */
    ck_assert_double_eq_tol(w[0].step_err, 1 / 1.10 - 1, 1e-5);
    ck_assert_int_eq(w[0].stalls, 1);
    /* the band brackets a mean of `steps` steps: ordered, about the what-if's mean */
    ck_assert(w[0].band_lo_ms <= w[0].band_hi_ms);
    ck_assert(w[0].band_lo_ms > 0.6 * w[0].whatif_ms && w[0].band_hi_ms < 1.4 * w[0].whatif_ms);
    double mean = (t[0] + t[1] + t[2]) / 3;
    ck_assert_double_eq_tol(w[0].predict_ms, mean, 1e-9);
    ck_assert_double_eq_tol(w[0].predict_err, (mean - 5) / 5, 1e-9);
    /* the what-if's mean is of the same order; the memory is memory.h's for 8 x the longest */
    ck_assert(w[0].whatif_ms > 0.7 * mean && w[0].whatif_ms < 1.3 * mean);
    memory_setup ms;
    memory_use mu;
    memory_trainer_setup(&m, 8, maxl, 8, 0, &ms);
    memory_predict(&m, &hw, &ms, &mu);
    ck_assert_double_eq_tol(w[0].mem_gib, mu.total_gib, 1e-12);
    dist_sampler_free(ds);
    dist_free(&d);
    step_model_free(&sm);
    free(w);
}
END_TEST

Suite *workload_suite(void)
{
    Suite *s = suite_create("workload");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_predict);
    suite_add_tcase(s, tc);
    return s;
}
