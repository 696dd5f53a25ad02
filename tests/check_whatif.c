/* check_whatif.c — Monte Carlo sweeps: reproducible and independent of threads and of the other
 * rows, consistent metrics, the fixed per-step part, typical batches, CSV output. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "memory.h"
#include "whatif.h"

static unpad_dist D;
static model_cfg M;
static hw_spec HW;
static calib_coef CAL;

static void setup(void)
{
    char p[512];
    unpad_err e = {0};
    ck_assert_int_eq(dist_load(tu_path(p, sizeof p, "models/dists/wiki512.csv"), &D, &e), 0);
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-large.cfg"), &M, &e), 0);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &HW, &e), 0);
    calib_default(&HW, &CAL);
}

static void teardown(void)
{
    dist_free(&D);
}

static whatif_setup setup_of(int steps, int threads)
{
    whatif_setup s;
    whatif_setup_default(&s);
    whatif_setup_inputs(&s, &D, &M, &HW, &CAL);
    s.steps = steps;
    s.threads = threads;
    s.attn_steps = 3;
    s.seed = 42;
    return s;
}

static void same_row(const whatif_row *a, const whatif_row *b)
{
    ck_assert_int_eq(a->gpus, b->gpus);
    ck_assert_int_eq(a->policy, b->policy);
    ck_assert_double_eq(a->step_us, b->step_us);
    ck_assert_double_eq(a->imbalance_mean, b->imbalance_mean);
    ck_assert_double_eq(a->imbalance_p99, b->imbalance_p99);
    ck_assert_double_eq(a->idle_mean, b->idle_mean);
    ck_assert_double_eq(a->attn_us, b->attn_us);
    ck_assert_double_eq(a->attn_grouped_us, b->attn_grouped_us);
    ck_assert_str_eq(a->bounds, b->bounds);
}

START_TEST(test_reproducible)
{
    unpad_err e = {0};
    whatif_row a[4] = {
        {.gpus = 8, .batch = 16, .policy = BAL_KK, .count = BAL_EQUAL},
        {.gpus = 8, .batch = 16, .policy = BAL_NONE, .count = BAL_EQUAL},
        {.gpus = 4, .batch = 8, .policy = BAL_LPT, .count = BAL_FREE},
        {.gpus = 16, .batch = 4, .policy = BAL_FFD_TOKENS, .count = BAL_FREE},
    };
    whatif_row b[4], one[1];
    memcpy(b, a, sizeof a);
    whatif_setup s1 = setup_of(200, 1), s3 = setup_of(200, 3);
    ck_assert_int_eq(whatif_run(&s1, a, 4, &e), UNPAD_OK);
    ck_assert_int_eq(whatif_run(&s3, b, 4, &e), UNPAD_OK);
    for (int i = 0; i < 4; i++)
        same_row(&a[i], &b[i]);
    /* A row alone gives what it gave among others. */
    one[0] = (whatif_row){.gpus = 4, .batch = 8, .policy = BAL_LPT, .count = BAL_FREE};
    ck_assert_int_eq(whatif_run(&s1, one, 1, &e), UNPAD_OK);
    same_row(&one[0], &a[2]);
    /* Another seed, other steps. */
    s1.seed = 43;
    ck_assert_int_eq(whatif_run(&s1, one, 1, &e), UNPAD_OK);
    ck_assert(one[0].step_us != a[2].step_us);
}
END_TEST

START_TEST(test_metrics_consistent)
{
    unpad_err e = {0};
    whatif_row r[BAL_POLICY_COUNT];
    for (int p = 0; p < BAL_POLICY_COUNT; p++)
        r[p] = (whatif_row){.gpus = 8, .batch = 32, .policy = p, .count = BAL_EQUAL};
    whatif_setup s = setup_of(300, 0);
    ck_assert_int_eq(whatif_run(&s, r, BAL_POLICY_COUNT, &e), UNPAD_OK);
    for (int p = 0; p < BAL_POLICY_COUNT; p++) {
        ck_assert_int_eq(r[p].steps, 300);
        ck_assert(r[p].imbalance_mean >= 1.0);
        ck_assert(r[p].imbalance_p99 >= r[p].imbalance_mean - 1e-12);
        ck_assert(r[p].imbalance_max >= r[p].imbalance_p99);
        ck_assert(r[p].idle_mean >= 0 && r[p].idle_mean < 1);
        ck_assert_double_eq_tol(r[p].samples_per_s, 8 * 32 / (r[p].step_us * 1e-6),
                                1e-9 * r[p].samples_per_s);
        ck_assert(r[p].step_us > r[p].fixed_us);
        ck_assert(r[p].attn_us > 0 && r[p].attn_grouped_us > 0);
        ck_assert(r[p].groups >= 1 && r[p].streams >= 1);
    }
    /* Balancing beats loader order by a clear margin on the Wikipedia lengths at 8 x 32. */
    ck_assert(r[BAL_KK].imbalance_mean < 1.005); /* the balancers balance the per-sequence cost; the
                                                 * step model also sees waves and GEMM shapes */
    ck_assert(r[BAL_LPT].imbalance_mean < 1.01);
    ck_assert(r[BAL_NONE].imbalance_mean > 1.05);
    ck_assert(r[BAL_KK].step_us < r[BAL_NONE].step_us);
    /* The balancers pay the sample exchange, loader order does not. */
    ck_assert(r[BAL_KK].fixed_us > r[BAL_NONE].fixed_us);
    ck_assert_double_eq(r[BAL_KK].fixed_us, r[BAL_LPT].fixed_us);
}
END_TEST

START_TEST(test_fixed_and_typical)
{
    unpad_err e = {0};
    double f1, f8, f64, fk;
    ck_assert_int_eq(whatif_fixed_us(&M, &HW, &CAL, 255.8, 1, 56, BAL_NONE, &f1, &e), UNPAD_OK);
    ck_assert_int_eq(whatif_fixed_us(&M, &HW, &CAL, 255.8, 8, 56, BAL_NONE, &f8, &e), UNPAD_OK);
    ck_assert_int_eq(whatif_fixed_us(&M, &HW, &CAL, 255.8, 64, 56, BAL_NONE, &f64, &e), UNPAD_OK);
    ck_assert_int_eq(whatif_fixed_us(&M, &HW, &CAL, 255.8, 8, 56, BAL_KK, &fk, &e), UNPAD_OK);
    ck_assert(f1 > CAL.step_overhead_us); /* optimizer + overhead, no all-reduce on one GPU */
    ck_assert(f8 > f1);                   /* the all-reduce */
    ck_assert(f64 >= f8);
    ck_assert(fk > f8);                   /* the exchange */
    int len[10];
    whatif_typical_batch(&D, 10, len);
    for (int i = 1; i < 10; i++)
        ck_assert_int_ge(len[i], len[i - 1]);
    /* 23.4% of sequences are 512 long: quantiles 0.85 and 0.95 are 512, 0.75 is not. */
    ck_assert_int_eq(len[9], 512);
    ck_assert_int_eq(len[8], 512);
    ck_assert_int_lt(len[7], 512);
    ck_assert_int_eq(len[4], dist_percentile(&D, 0.45));
}
END_TEST

START_TEST(test_csv_and_errors)
{
    unpad_err e = {0};
    whatif_row r[2] = {{.gpus = 2, .batch = 4, .policy = BAL_SORT_DEAL, .count = BAL_EQUAL},
                       {.gpus = 2, .batch = 4, .policy = BAL_FFD_TOKENS, .count = BAL_FREE}};
    whatif_setup s = setup_of(20, 1);
    ck_assert_int_eq(whatif_run(&s, r, 2, &e), UNPAD_OK);
    char path[512];
    tu_write_tmp(path, sizeof path, ".csv", "");
    ck_assert_int_eq(whatif_write_csv(path, r, 2, &e), UNPAD_OK);
    char *text;
    ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
    ck_assert(!strncmp(text, whatif_csv_header, strlen(whatif_csv_header)));
    ck_assert_ptr_nonnull(strstr(text, "\n2,4,1,sort-deal,equal,20,"));
    ck_assert_ptr_nonnull(strstr(text, "\n2,4,1,ffd-tokens,free,20,"));
    int lines = 0;
    for (char *p = text; *p; p++)
        lines += *p == '\n';
    ck_assert_int_eq(lines, 3);
    free(text);
    unlink(path);
    ck_assert_int_eq(whatif_write_csv("/nonexistent/x.csv", r, 2, &e), UNPAD_EIO);
    s.steps = 0;
    ck_assert_int_eq(whatif_run(&s, r, 2, &e), UNPAD_EINVAL);
    s.steps = 10;
    r[1].gpus = 0;
    ck_assert_int_eq(whatif_run(&s, r, 2, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "row 1"));
}
END_TEST


START_TEST(test_layouts_network_memory)
{
    unpad_err e = {0};
    layout lay[4];
    int nl;
    ck_assert_int_eq(layout_parse_list("--layout", "unpadded,padded,packed,buckets=128/256/384/512",
                                       lay, &nl, 4, &e), UNPAD_OK);
    whatif_setup s = setup_of(200, 0);
    s.layouts = lay;
    s.nlayouts = nl;
    whatif_row r[7];
    for (int l = 0; l < 4; l++)
        r[l] = (whatif_row){.gpus = 8, .batch = 32, .policy = BAL_KK, .count = BAL_EQUAL, .layout = l};
    r[4] = (whatif_row){.gpus = 64, .batch = 32, .policy = BAL_KK, .count = BAL_EQUAL};
    r[5] = (whatif_row){.gpus = 512, .batch = 32, .policy = BAL_KK, .count = BAL_EQUAL};
    r[6] = (whatif_row){.gpus = 8, .batch = 700, .policy = BAL_NONE, .count = BAL_EQUAL};
    ck_assert_int_eq(whatif_run(&s, r, 7, &e), UNPAD_OK);
    /* padded: every sequence at 512; its padding the distribution's (mean 255.8 of 512) */
    ck_assert_double_eq(r[1].tokens_per_gpu, 32 * 512);
    ck_assert_double_eq_tol(r[1].padding, 1 - r[0].tokens_per_gpu / (32 * 512.0), 1e-12);
    ck_assert_double_eq_tol(r[1].padding, 1 - 255.8 / 512, 0.02);
    ck_assert_double_eq(r[0].padding, 0);
    /* packed rows of 512 tokens: whole rows, less padding than padded, more time than unpadded */
    ck_assert_double_eq_tol(fmod(r[2].tokens_per_gpu * 200 * 8 + 0.5, 512), 0.5, 1e-6);
    ck_assert(r[2].padding > 0 && r[2].padding < r[1].padding);
    ck_assert(r[0].step_us < r[2].step_us && r[2].step_us < r[1].step_us);
    /* buckets: padding within the bucket only */
    ck_assert(r[3].padding > 0 && r[3].padding < r[1].padding);
    ck_assert_str_eq(r[3].layout_name, "buckets=128/256/384/512");
    /* the all-reduce: a ring in one node, hierarchical beyond, growing with the nodes */
    ck_assert_int_eq(r[0].net, NET_RING);
    ck_assert_int_eq(r[4].net, NET_HIER);
    ck_assert_int_eq(r[5].nodes, 64);
    ck_assert(r[0].allreduce_us < r[4].allreduce_us && r[4].allreduce_us < r[5].allreduce_us);
    /* memory: 8 x 32 fits an H200, 700 sequences a GPU do not */
    ck_assert_int_eq(r[0].mem_fits, 1);
    ck_assert_int_eq(r[6].mem_fits, 0);
    ck_assert(r[6].mem_gib > HW.memory_gib);
    ck_assert(r[0].mem_budget_gib < r[0].mem_gib); /* an arena for the tokens a GPU got */
    /* the trainer's activations: 32 x mean + 5 sqrt(32) x sd unpadded, 32 x 512 padded */
    ck_assert_int_eq(r[0].mem_tokens, memory_dist_tokens(32, 1, 512, &D));
    ck_assert(r[0].mem_tokens > 32 * 255 && r[0].mem_tokens < 32 * 512);
    ck_assert_int_eq(r[1].mem_tokens, 32 * 512);
    ck_assert(r[1].mem_gib > r[0].mem_gib);
    /* virtual ranks on one GPU: the step is the sum of their batches, no all-reduce */
    whatif_setup v = setup_of(200, 0);
    v.serial_ranks = 1;
    whatif_row one = {.gpus = 1, .batch = 32, .policy = BAL_NONE, .count = BAL_EQUAL};
    whatif_row four = {.gpus = 4, .batch = 32, .policy = BAL_NONE, .count = BAL_EQUAL};
    ck_assert_int_eq(whatif_run(&v, &one, 1, &e), UNPAD_OK);
    ck_assert_int_eq(whatif_run(&v, &four, 1, &e), UNPAD_OK);
    double fixed = one.fixed_us;
    ck_assert_double_eq(four.allreduce_us, 0);
    ck_assert_double_eq_tol((four.step_us - fixed) / (one.step_us - fixed), 4, 0.1);
    /* a cap: no sequence above it, fewer tokens */
    whatif_setup c = setup_of(200, 0);
    c.max_len = 128;
    whatif_row capped = {.gpus = 8, .batch = 32, .policy = BAL_KK, .count = BAL_EQUAL};
    ck_assert_int_eq(whatif_run(&c, &capped, 1, &e), UNPAD_OK);
    ck_assert(capped.tokens_per_gpu <= 32 * 128);
    ck_assert(capped.step_us < r[0].step_us);
    /* a bucket list that cannot hold the longest length is refused */
    ck_assert_int_eq(layout_parse_list("--layout", "buckets=128/256", lay, &nl, 4, &e), UNPAD_OK);
    s.nlayouts = nl;
    r[0].layout = 0;
    ck_assert_int_eq(whatif_run(&s, r, 1, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "the last bucket ends at 256"));
}
END_TEST

START_TEST(test_time_to_train)
{
    double h, gh, cost;
    /* 3.6M samples at 1000/s on 8 GPUs: 1 hour, 8 GPU-hours, 20 at 2.5 */
    whatif_train(3.6e6, 1000, 8, 2.5, &h, &gh, &cost);
    ck_assert_double_eq_tol(h, 1, 1e-12);
    ck_assert_double_eq_tol(gh, 8, 1e-12);
    ck_assert_double_eq_tol(cost, 20, 1e-12);
    whatif_train(3.6e6, 1000, 8, 0, &h, &gh, &cost); /* no price: no cost */
    ck_assert(!isnan(h) && isnan(cost));
    whatif_train(0, 1000, 8, 2.5, &h, &gh, &cost); /* not asked */
    ck_assert(isnan(h) && isnan(gh) && isnan(cost));
    /* in a sweep: from the row's own throughput; virtual ranks hold one GPU */
    unpad_err e = {0};
    whatif_setup s = setup_of(100, 0);
    whatif_row r = {.gpus = 8, .batch = 32, .policy = BAL_KK, .count = BAL_EQUAL};
    ck_assert_int_eq(whatif_run(&s, &r, 1, &e), UNPAD_OK);
    ck_assert(isnan(r.train_hours) && isnan(r.cost));
    s.train_samples = 1e8;
    s.gpu_hour_price = 3;
    ck_assert_int_eq(whatif_run(&s, &r, 1, &e), UNPAD_OK);
    ck_assert_double_eq_tol(r.train_hours, 1e8 / r.samples_per_s / 3600, 1e-9);
    ck_assert_double_eq_tol(r.gpu_hours, 8 * r.train_hours, 1e-9);
    ck_assert_double_eq_tol(r.cost, 3 * r.gpu_hours, 1e-9);
    s.serial_ranks = 1;
    ck_assert_int_eq(whatif_run(&s, &r, 1, &e), UNPAD_OK);
    ck_assert_double_eq_tol(r.gpu_hours, r.train_hours, 1e-12);
}
END_TEST

START_TEST(test_accumulation)
{
    unpad_err e = {0};
    whatif_setup s = setup_of(200, 0);
    /* 8 GPUs x 4 micro-batches of 16 against 8 GPUs x 16: four times the sequences a step, the
     * optimizer and the all-reduce once, so more than 3x the time and more samples/s */
    whatif_row r[3] = {{.gpus = 8, .batch = 16, .policy = BAL_KK, .count = BAL_EQUAL},
                       {.gpus = 8, .batch = 16, .accum = 4, .policy = BAL_KK, .count = BAL_EQUAL},
                       {.gpus = 8, .batch = 16, .accum = 4, .policy = BAL_NONE, .count = BAL_EQUAL}};
    ck_assert_int_eq(whatif_run(&s, r, 3, &e), UNPAD_OK);
    ck_assert_int_eq(r[0].accum, 1); /* 0 reads as 1 */
    ck_assert_double_eq_tol(r[1].samples_per_s, 8.0 * 4 * 16 / (r[1].step_us * 1e-6), 1e-9 * r[1].samples_per_s);
    double f0 = r[0].fixed_us, f1 = r[1].fixed_us;
    ck_assert_double_eq(r[0].allreduce_us, r[1].allreduce_us);
    ck_assert_double_eq_tol((r[1].step_us - f1) / (r[0].step_us - f0), 4, 0.15);
    ck_assert(r[1].samples_per_s > r[0].samples_per_s);
    ck_assert_double_eq_tol(r[1].tokens_per_gpu / r[0].tokens_per_gpu, 4, 0.15); /* a GPU's step: 4 micro-batches */
    /* the memory is one micro-batch's: the same arena */
    ck_assert_double_eq(r[1].mem_gib, r[0].mem_gib);
    ck_assert(r[1].mem_budget_gib <= r[0].mem_gib);
    /* loader order over 32 virtual ranks: a GPU sums 4 slices, so less imbalance than one slice, more
     * than the balanced */
    whatif_row one = {.gpus = 8, .batch = 16, .policy = BAL_NONE, .count = BAL_EQUAL};
    ck_assert_int_eq(whatif_run(&s, &one, 1, &e), UNPAD_OK);
    ck_assert(r[2].imbalance_mean < one.imbalance_mean && r[2].imbalance_mean > r[1].imbalance_mean);
    /* one GPU, K micro-batches: the sum of K batches, as --virtual-ranks K */
    whatif_row a = {.gpus = 1, .batch = 16, .accum = 4, .policy = BAL_NONE, .count = BAL_EQUAL};
    whatif_row v = {.gpus = 4, .batch = 16, .policy = BAL_NONE, .count = BAL_EQUAL};
    ck_assert_int_eq(whatif_run(&s, &a, 1, &e), UNPAD_OK);
    whatif_setup sv = s;
    sv.serial_ranks = 1;
    ck_assert_int_eq(whatif_run(&sv, &v, 1, &e), UNPAD_OK);
    ck_assert_double_eq_tol(a.step_us / v.step_us, 1, 0.03); /* other sampled steps, the same model */
    ck_assert_double_eq_tol(a.samples_per_s / v.samples_per_s, 1, 0.03);
    /* accumulation with virtual ranks, and more than the maximum, are refused */
    a.accum = 2;
    ck_assert_int_eq(whatif_run(&sv, &a, 1, &e), UNPAD_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "accumulation with virtual ranks"));
    a.accum = WHATIF_ACCUM_MAX + 1;
    ck_assert_int_eq(whatif_run(&s, &a, 1, &e), UNPAD_EINVAL);
}
END_TEST

/* A sequence budget: a large configuration samples fewer steps (at least WHATIF_AUTO_MIN_STEPS),
 * the same first steps as --steps of that count, on any thread count; small ones sample all. */
START_TEST(test_sequence_budget)
{
    whatif_setup s = setup_of(1000, 0);
    s.seq_budget = WHATIF_AUTO_SEQS;
    ck_assert_int_eq(whatif_config_steps(&s, 448), 1000);
    ck_assert_int_eq(whatif_config_steps(&s, 8388), 1000);
    ck_assert_int_eq(whatif_config_steps(&s, 8389), 1000); /* ceil(8388608 / 8389) */
    ck_assert_int_eq(whatif_config_steps(&s, 8398), 1000 - 1);
    ck_assert_int_eq(whatif_config_steps(&s, 512 * 56), 293);
    ck_assert_int_eq(whatif_config_steps(&s, 4096 * 56), WHATIF_AUTO_MIN_STEPS);
    s.steps = 50; /* never more than asked */
    ck_assert_int_eq(whatif_config_steps(&s, 4096 * 56), 50);
    s.seq_budget = 0;
    s.steps = 1000;
    ck_assert_int_eq(whatif_config_steps(&s, 4096 * 56), 1000);
    ck_assert_int_eq(whatif_chunk_steps(448, 1000), WHATIF_CHUNK);
    ck_assert_int_eq(whatif_chunk_steps(4096 * 56, 100), 4);
    ck_assert_int_eq(whatif_chunk_steps(1L << 24, 100), 1);
    ck_assert_int_eq(whatif_chunk_steps(1L << 24, 10000000), 250); /* at most WHATIF_CHUNK_MAX chunks */

    unpad_err e = {0};
    s = setup_of(300, 1);
    s.seq_budget = 20000;
    whatif_row r[2] = {{.gpus = 2, .batch = 4, .policy = BAL_KK, .count = BAL_EQUAL},     /* 8 a step */
                       {.gpus = 512, .batch = 64, .policy = BAL_KK, .count = BAL_EQUAL}}; /* 32,768 */
    ck_assert_int_eq(whatif_run(&s, r, 2, &e), UNPAD_OK);
    ck_assert_int_eq(r[0].steps, 300);
    ck_assert_int_eq(r[1].steps, WHATIF_AUTO_MIN_STEPS);
    /* the large row: four chunks of 32 steps; the same on two threads and as --steps 100 */
    whatif_row two = r[1], exact = r[1];
    whatif_setup s2 = s, sx = setup_of(WHATIF_AUTO_MIN_STEPS, 1);
    s2.threads = 2;
    ck_assert_int_eq(whatif_run(&s2, &two, 1, &e), UNPAD_OK);
    ck_assert_int_eq(whatif_run(&sx, &exact, 1, &e), UNPAD_OK);
    same_row(&r[1], &two);
    same_row(&r[1], &exact);
    ck_assert_int_eq(exact.steps, WHATIF_AUTO_MIN_STEPS);
    ck_assert_double_eq(r[1].samples_per_s, exact.samples_per_s);
}
END_TEST

Suite *whatif_suite(void)
{
    Suite *s = suite_create("whatif");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_reproducible);
    tcase_add_test(tc, test_metrics_consistent);
    tcase_add_test(tc, test_fixed_and_typical);
    tcase_add_test(tc, test_csv_and_errors);
    tcase_add_test(tc, test_layouts_network_memory);
    tcase_add_test(tc, test_time_to_train);
    tcase_add_test(tc, test_accumulation);
    tcase_add_test(tc, test_sequence_budget);
    suite_add_tcase(s, tc);
    return s;
}
