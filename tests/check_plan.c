/* check_plan.c — the plan file: round trip, refused inputs (file, line, reason), and making a plan
 * from the what-if. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "cost.h"
#include "plan.h"
#include "testutil.h"

static unpad_plan sample_plan(void)
{
    unpad_plan p;
    plan_default(&p);
    p.policy = BAL_LPT;
    p.count = BAL_FREE;
    p.gpus = 64;
    p.batch = 32;
    p.fmha_nb = 3;
    p.fmha_bounds[0] = 128;
    p.fmha_bounds[1] = 256;
    p.fmha_bounds[2] = 384;
    p.fmha_granularity = 8;
    p.streams = 3;
    p.seed = 77;
    p.cost = (seq_cost){38.97315672, 2.593689742, 0.0006713124208};
    strcpy(p.model, "bert-large");
    strcpy(p.hw, "h200-sxm");
    strcpy(p.dist, "models/dists/wiki512.csv");
    p.steps = 1000;
    p.pred_step_us = 53305.70413;
    p.pred_samples_per_s = 38412.5;
    p.pred_imbalance = 1.000123;
    p.pred_imbalance_p99 = 1.0021;
    p.pred_idle = 0.000123;
    p.none_step_us = 64000.25;
    p.none_imbalance = 1.2;
    p.pred_attn_us = 5105.1;
    p.pred_attn_grouped_us = 4732.6;
    return p;
}

#define EQ_REL(a, b) ck_assert_double_eq_tol((a), (b), 1e-9 * fabs(b) + 1e-15)

START_TEST(test_round_trip)
{
    char path[512];
    unpad_err e = {0};
    unpad_plan p = sample_plan(), q;
    tu_write_tmp(path, sizeof path, ".cfg", "");
    /* what made the plan: comment lines above the keys, read over */
    snprintf(p.provenance, sizeof p.provenance, "# unpad: 0.1.0 (commit x)\n# calibration: fitted\n");
    ck_assert_int_eq(plan_write(path, &p, &e), UNPAD_OK);
    ck_assert_int_eq(plan_load(path, &q, &e), UNPAD_OK);
    char *text;
    ck_assert_int_eq(unpad_read_file(path, &text, NULL, &e), UNPAD_OK);
    ck_assert_ptr_nonnull(strstr(text, "predictions)\n# unpad: 0.1.0 (commit x)\n# calibration: fitted\npolicy = "));
    free(text);
    ck_assert_str_eq(q.provenance, "");
    ck_assert_int_eq(q.policy, BAL_LPT);
    ck_assert_int_eq(q.count, BAL_FREE);
    ck_assert_int_eq(q.weights_tokens, 0);
    ck_assert_int_eq(q.gpus, 64);
    ck_assert_int_eq(q.batch, 32);
    ck_assert_int_eq(q.fmha_nb, 3);
    ck_assert_int_eq(q.fmha_bounds[2], 384);
    ck_assert_int_eq(q.fmha_granularity, 8);
    ck_assert_int_eq(q.streams, 3);
    ck_assert_int_eq(q.seed, 77);
    EQ_REL(q.cost.c0, p.cost.c0);
    EQ_REL(q.cost.c1, p.cost.c1);
    EQ_REL(q.cost.c2, p.cost.c2);
    ck_assert_str_eq(q.model, "bert-large");
    ck_assert_str_eq(q.hw, "h200-sxm");
    ck_assert_str_eq(q.dist, "models/dists/wiki512.csv");
    ck_assert_int_eq(q.steps, 1000);
    EQ_REL(q.pred_step_us, p.pred_step_us);
    EQ_REL(q.pred_samples_per_s, p.pred_samples_per_s);
    EQ_REL(q.pred_imbalance, p.pred_imbalance);
    EQ_REL(q.pred_imbalance_p99, p.pred_imbalance_p99);
    EQ_REL(q.pred_idle, p.pred_idle);
    EQ_REL(q.none_step_us, p.none_step_us);
    EQ_REL(q.none_imbalance, p.none_imbalance);
    EQ_REL(q.pred_attn_us, p.pred_attn_us);
    EQ_REL(q.pred_attn_grouped_us, p.pred_attn_grouped_us);
    ck_assert_ptr_nonnull(plan_seq_cost(&q));
    /* auto, none and tokens survive too; the weights of a rewritten plan are the same integers. */
    p.fmha_nb = -1;
    p.weights_tokens = 1;
    ck_assert_int_eq(plan_write(path, &p, &e), UNPAD_OK);
    ck_assert_int_eq(plan_load(path, &q, &e), UNPAD_OK);
    ck_assert_int_eq(q.fmha_nb, -1);
    ck_assert_int_eq(q.weights_tokens, 1);
    ck_assert_ptr_null(plan_seq_cost(&q));
    p.fmha_nb = 0;
    ck_assert_int_eq(plan_write(path, &p, &e), UNPAD_OK);
    ck_assert_int_eq(plan_load(path, &q, &e), UNPAD_OK);
    ck_assert_int_eq(q.fmha_nb, 0);
    unlink(path);
}
END_TEST

/* Parses text; returns the message without the temporary file name, and the status in *code. */
static const char *parse_error(const char *text, int *code)
{
    static unpad_err e;
    unpad_plan p;
    memset(&e, 0, sizeof e);
    *code = plan_parse("plan.cfg", text, strlen(text), &p, &e);
    return e.msg;
}

static void expect_error(const char *text, const char *where, const char *why)
{
    int code;
    const char *msg = parse_error(text, &code);
    ck_assert_int_eq(code, UNPAD_EINVAL);
    ck_assert_msg(strstr(msg, where) != NULL, "expected '%s' in: %s", where, msg);
    ck_assert_msg(strstr(msg, why) != NULL, "expected '%s' in: %s", why, msg);
}

#define HEAD "count = equal\ngpus = 8\nbatch = 56\ncost_c0 = 1\ncost_c1 = 2\ncost_c2 = 0.001\n"

START_TEST(test_bad_input)
{
    int code;
    parse_error("policy = kk\n" HEAD, &code);
    ck_assert_int_eq(code, UNPAD_OK);
    /* Each refusal names the file, the line and what was expected, and shows the line. */
    expect_error("policy = greedy\n" HEAD, "plan.cfg:1: ", "unknown policy 'greedy'");
    expect_error("policy = greedy\n" HEAD, "1 | policy = greedy", "kk | ffd-tokens");
    expect_error("policy = pack\n" HEAD, "1 | policy = pack",
                 "'pack' is now 'ffd-tokens' (sequence packing is a layout: --layout packed)");
    expect_error("policy = kk\ncount = some\ngpus = 8\nbatch = 56\n", "plan.cfg:2: ",
                 "unknown count 'some' (expected equal or free)");
    expect_error("policy = kk\n" HEAD "weights = bytes\n", "plan.cfg:8: ", "expected cost or tokens");
    expect_error("policy = kk\n" HEAD "fmha_groups = 256,128\n", "plan.cfg:8: ", "ascend");
    expect_error("policy = kk\n" HEAD "fmha_groups = 128,x\n", "plan.cfg:8: ", "'x'");
    expect_error("policy = kk\n" HEAD "fmha_groups = 128,,384\n", "plan.cfg:8: ", "empty item");
    expect_error("policy = kk\ncount = equal\ngpus = 0\nbatch = 56\n", "plan.cfg:3: ",
                 "out of range");
    expect_error("policy = kk\n" HEAD "streams = 9\n", "plan.cfg:8: ", "streams = 9 is out of range");
    expect_error("policy = kk\n" HEAD "polcy = lpt\n", "plan.cfg:8: ", "unknown key 'polcy'");
    expect_error("policy = kk\n" HEAD "gpus = 4\n", "plan.cfg:8: ", "given twice");
    expect_error(HEAD, "plan.cfg: ", "missing required key 'policy'");
    expect_error("policy = kk\ncount = equal\ngpus = 8\nbatch = 56\ncost_c0 = 1\ncost_c2 = 0\n",
                 "plan.cfg: ", "missing key 'cost_c1'");
    expect_error("policy = kk\n" HEAD "cost_c1 = -3\n", "plan.cfg:", "");
    /* tokens need no cost */
    parse_error("policy = ffd-tokens\ncount = free\ngpus = 2\nbatch = 3\nweights = tokens\n", &code);
    ck_assert_int_eq(code, UNPAD_OK);
    unpad_plan p;
    unpad_err e = {0};
    ck_assert_int_eq(plan_load("/nonexistent/plan.cfg", &p, &e), UNPAD_EIO);
    ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/plan.cfg"));
}
END_TEST

START_TEST(test_make)
{
    char path[512];
    unpad_err e = {0};
    unpad_dist d;
    model_cfg m;
    hw_spec hw;
    calib_coef c;
    ck_assert_int_eq(dist_load(tu_path(path, sizeof path, "models/dists/wiki512.csv"), &d, &e), 0);
    ck_assert_int_eq(model_load(tu_path(path, sizeof path, "models/bert-large.cfg"), &m, &e), 0);
    ck_assert_int_eq(hw_load(tu_path(path, sizeof path, "models/hw/h200-sxm.cfg"), &hw, &e), 0);
    calib_default(&hw, &c);
    whatif_setup s;
    whatif_setup_default(&s);
    whatif_setup_inputs(&s, &d, &m, &hw, &c);
    s.steps = 100;
    s.attn_steps = 4;
    unpad_plan p;
    whatif_row rows[BAL_POLICY_COUNT + 1];
    int n;
    ck_assert_int_eq(plan_make(&s, 8, 32, 1, -1, BAL_EQUAL, &p, rows, &n, &e), UNPAD_OK);
    ck_assert_int_eq(n, BAL_POLICY_COUNT);
    ck_assert_int_eq(rows[0].policy, BAL_NONE);
    /* auto picks the row with the lowest predicted step time */
    for (int i = 0; i < n; i++)
        ck_assert(p.pred_step_us <= rows[i].step_us);
    ck_assert(p.policy == BAL_KK || p.policy == BAL_LPT);
    ck_assert(p.pred_imbalance < p.none_imbalance);
    ck_assert(p.pred_step_us < p.none_step_us);
    ck_assert_int_eq(p.gpus, 8);
    ck_assert_int_eq(p.batch, 32);
    ck_assert(p.streams >= 1 && p.streams <= s.max_streams);
    ck_assert(p.pred_attn_grouped_us <= p.pred_attn_us * 1.0001);
    seq_cost sc;
    ck_assert_int_eq(cost_seq_model(&m, &hw, &c, &sc, &e), UNPAD_OK);
    ck_assert_double_eq(p.cost.c1, sc.c1);
    /* a given policy: the baseline and that one */
    ck_assert_int_eq(plan_make(&s, 4, 16, 1, BAL_SORT_DEAL, BAL_FREE, &p, rows, &n, &e), UNPAD_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(p.policy, BAL_SORT_DEAL);
    ck_assert_int_eq(p.count, BAL_FREE);
    ck_assert_double_eq(p.pred_step_us, rows[1].step_us);
    /* what does not fit the hardware's memory is refused, with needed against available */
    hw_spec a100;
    ck_assert_int_eq(hw_load(tu_path(path, sizeof path, "models/hw/a100-sxm4-40g.cfg"), &a100, &e), 0);
    calib_coef ca;
    calib_default(&a100, &ca);
    whatif_setup sa = s;
    sa.hw = &a100;
    sa.calib = &ca;
    unpad_plan pa;
    ck_assert_int_eq(plan_make(&sa, 8, 256, 1, BAL_KK, BAL_EQUAL, &pa, rows, &n, &e), UNPAD_ERANGE);
    ck_assert_msg(strstr(e.msg, "256 sequences per GPU do not fit") && strstr(e.msg, "needs 69.1") &&
                  strstr(e.msg, "of 39.6 GiB (a100-sxm4-40g)") && strstr(e.msg, "at most 125"),
                  "%s", e.msg);
    /* ... with the accumulation that trains about as many: 3 micro-batches of 86, which fit */
    ck_assert_msg(strstr(e.msg, "--batch 86 --accum 3 trains about as many (258)"), "%s", e.msg);
    sa.steps = 40;
    ck_assert_int_eq(plan_make(&sa, 8, 64, 4, BAL_KK, BAL_EQUAL, &pa, rows, &n, &e), UNPAD_OK);
    ck_assert_int_eq(rows[1].accum, 4);
    ck_assert_double_eq_tol(rows[1].samples_per_s, 8.0 * 4 * 64 / (rows[1].step_us * 1e-6),
                            1e-6 * rows[1].samples_per_s);
    /* the largest micro-batch that fits, and the ways to cut 512 a GPU into micro-batches that fit */
    ck_assert_int_eq(plan_batch_fits(&sa, 8, 1, BAL_EQUAL, 256, NULL, NULL, 0), 125);
    ck_assert_int_eq(plan_batch_fits(&sa, 8, 1, BAL_EQUAL, 64, NULL, NULL, 0), 64);
    whatif_row ways[4];
    int nw = 0;
    sa.steps = 20;
    ck_assert_int_eq(plan_split(&sa, 8, 512, -1, BAL_EQUAL, ways, 4, &nw, &e), UNPAD_OK);
    ck_assert_int_eq(nw, 4); /* 64 x 8, 32 x 16, 16 x 32, 8 x 64: 512 / 7 is no whole micro-batch */
    int seen = 0;
    for (int i = 0; i < nw; i++) {
        ck_assert_int_eq(ways[i].batch * ways[i].accum, 512);
        ck_assert_int_le(ways[i].batch, 125);
        ck_assert_int_eq(ways[i].policy, BAL_KK);
        ck_assert(ways[0].samples_per_s >= ways[i].samples_per_s); /* the fastest first */
        seen |= ways[i].accum == 8;
    }
    ck_assert(seen);
    /* nothing fits: one sequence is already too much for a spec with 1 GiB */
    hw_spec tiny = a100;
    tiny.memory_gib = 1;
    sa.hw = &tiny;
    ck_assert_int_eq(plan_split(&sa, 8, 64, -1, BAL_EQUAL, ways, 4, &nw, &e), UNPAD_ERANGE);
    ck_assert_msg(strstr(e.msg, "not even one sequence per GPU fits"), "%s", e.msg);
    sa.hw = &a100;
    /* written and read back, it loads */
    p.calib[0] = '\0';
    snprintf(p.calib, sizeof p.calib, "estimate (transferred from h200-sxm: a100.cfg)");
    tu_write_tmp(path, sizeof path, ".cfg", "");
    ck_assert_int_eq(plan_write(path, &p, &e), UNPAD_OK);
    unpad_plan q;
    ck_assert_int_eq(plan_load(path, &q, &e), UNPAD_OK);
    ck_assert_str_eq(q.calib, "estimate (transferred from h200-sxm: a100.cfg)");
    ck_assert_int_eq(q.fmha_nb, p.fmha_nb);
    unlink(path);
    dist_free(&d);
}
END_TEST

Suite *plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_make);
    suite_add_tcase(s, tc);
    return s;
}
