/* check_validate.c — validation tables against a hand-computed 3-row example, the join, streams
 * that overlap, the CSV, and the committed synthetic traces end to end. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "synth.h"
#include "testutil.h"
#include "validate.h"

static trace_row row(int step, int rank, int op, int layer, double start, double dur)
{
    trace_row r;
    memset(&r, 0, sizeof r);
    strcpy(r.hw, "h200-sxm");
    strcpy(r.model, "bert-base");
    r.gpus = 2;
    r.rank = rank;
    r.step = step;
    r.op = op;
    r.layer = layer;
    r.group = r.stream = -1;
    r.seqs = 4;
    r.tokens = 400;
    r.sum_len2 = 40000;
    r.max_len = 100;
    r.start_us = start;
    r.dur_us = dur;
    return r;
}

START_TEST(test_three_rows_by_hand)
{
    /* measured                          predicted     error
     *   step 0 rank 0 qkv_fwd  [0, 100)    110         +10%
     *   step 0 rank 0 fmha_fwd [100, 150)   45         -10%
     *   step 0 rank 1 qkv_fwd  [0, 80)      80           0%
     * plus a predicted row no measurement has (step 1), which stays unmatched. */
    trace_set meas = {0}, pred = {0};
    trace_row m[3] = {row(0, 0, OP_QKV_FWD, 0, 0, 100), row(0, 0, OP_FMHA_FWD, 0, 100, 50),
                      row(0, 1, OP_QKV_FWD, 0, 0, 80)};
    double p[3] = {110, 45, 80};
    for (int i = 2; i >= 0; i--) { /* any order: the join sorts */
        trace_append(&meas, &m[i]);
        trace_row q = m[i];
        q.dur_us = p[i];
        trace_append(&pred, &q);
    }
    trace_row extra = row(1, 0, OP_QKV_FWD, 0, 0, 5);
    trace_append(&pred, &extra);
    validate_report rep;
    memset(&rep, 0, sizeof rep);
    unpad_err e = {0};
    ck_assert_int_eq(validate_add_run(&rep, "hand", &pred, &meas, NULL, &e), UNPAD_OK);
    ck_assert_int_eq(validate_finish(&rep, &e), UNPAD_OK);
    ck_assert_int_eq(rep.npairs, 3);
    ck_assert_int_eq(rep.unmatched_pred, 1);
    ck_assert_int_eq(rep.unmatched_meas, 0);
    /* per operator: qkv_fwd |e| = {10, 0}, fmha_fwd |e| = {10} */
    ck_assert_int_eq(rep.op[OP_QKV_FWD].n, 2);
    ck_assert_double_eq_tol(rep.op[OP_QKV_FWD].median_abs_pct, 5, 1e-9);
    ck_assert_double_eq_tol(rep.op[OP_QKV_FWD].max_abs_pct, 10, 1e-9);
    ck_assert_double_eq_tol(rep.op[OP_QKV_FWD].bias_pct, 5, 1e-9);
    ck_assert_int_eq(rep.op[OP_FMHA_FWD].n, 1);
    ck_assert_double_eq_tol(rep.op[OP_FMHA_FWD].median_abs_pct, 10, 1e-9);
    ck_assert_double_eq_tol(rep.op[OP_FMHA_FWD].bias_pct, -10, 1e-9);
    ck_assert_double_eq_tol(rep.all_rows.median_abs_pct, 10, 1e-9);
    ck_assert_double_eq_tol(rep.all_rows.max_abs_pct, 10, 1e-9);
    ck_assert_double_eq_tol(rep.all_rows.bias_pct, 0, 1e-9);
    /* per rank: loads 150 -> 155 (+3.33%) and 80 -> 80 (0%) */
    ck_assert_int_eq(rep.nrank, 2);
    ck_assert_double_eq_tol(rep.rank[0].median_abs_pct, 100.0 * 5 / 150, 1e-9);
    ck_assert_double_eq_tol(rep.rank[1].max_abs_pct, 0, 1e-9);
    ck_assert_double_eq_tol(rep.rank_load.median_abs_pct, 0.5 * 100.0 * 5 / 150, 1e-9);
    ck_assert_double_eq_tol(rep.rank_load.max_abs_pct, 100.0 * 5 / 150, 1e-9);
    /* per step: the slowest rank, 150 measured (span) against 155 predicted */
    ck_assert_int_eq(rep.nsteps, 1);
    ck_assert_double_eq_tol(rep.steps[0].meas_us, 150, 1e-9);
    ck_assert_double_eq_tol(rep.steps[0].pred_us, 155, 1e-9);
    ck_assert_double_eq_tol(rep.step_time.median_abs_pct, 100.0 * 5 / 150, 1e-9);
    /* imbalance: 150 / 115 measured, 155 / 117.5 predicted */
    ck_assert_double_eq_tol(rep.steps[0].meas_imb, 150 / 115.0, 1e-12);
    ck_assert_double_eq_tol(rep.steps[0].pred_imb, 155 / 117.5, 1e-12);
    ck_assert_double_eq_tol(rep.imb_max_diff, 155 / 117.5 - 150 / 115.0, 1e-12);
    ck_assert_int_eq(rep.imb_steps, 1);
    /* the CSV: a header, 3 op lines, 2 rank lines, 1 step line */
    char path[] = "/tmp/unpad-test-validate-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ck_assert_int_eq(validate_write_csv(path, &rep, NULL, &e), UNPAD_OK);
    char *text;
    size_t len;
    ck_assert_int_eq(unpad_read_file(path, &text, &len, &e), UNPAD_OK);
    int lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    ck_assert_int_eq(lines, 1 + 3 + 2 + 1);
    ck_assert_ptr_nonnull(strstr(text, "op,1,0,0,qkv_fwd,0,-1,-1,100.000,110.000,10.000\n"));
    ck_assert_ptr_nonnull(strstr(text, "step,1,0,-1,step,-1,-1,-1,150.000,155.000,3.333\n"));
    free(text);
    unlink(path);
    validate_report_free(&rep);
    trace_set_free(&meas);
    trace_set_free(&pred);
}
END_TEST

START_TEST(test_streams_overlap)
{
    /* Two FMHA groups of one layer on two streams, [0, 60) and [20, 70): the measured set time is
     * their union, 70; predicted (no context) their sum. */
    trace_set meas = {0}, pred = {0};
    trace_row a = row(0, 0, OP_FMHA_FWD, 0, 0, 60), b = row(0, 0, OP_FMHA_FWD, 0, 20, 50);
    a.gpus = b.gpus = 1;
    a.group = a.stream = 0;
    b.group = b.stream = 1;
    trace_append(&meas, &a);
    trace_append(&meas, &b);
    a.dur_us = 30;
    b.dur_us = 35;
    trace_append(&pred, &a);
    trace_append(&pred, &b);
    validate_report rep;
    memset(&rep, 0, sizeof rep);
    unpad_err e = {0};
    ck_assert_int_eq(validate_add_run(&rep, "streams", &pred, &meas, NULL, &e), UNPAD_OK);
    ck_assert_int_eq(validate_finish(&rep, &e), UNPAD_OK);
    ck_assert_int_eq(rep.nloads, 1);
    ck_assert_double_eq_tol(rep.loads[0].meas_load_us, 70, 1e-9);
    ck_assert_double_eq_tol(rep.loads[0].pred_load_us, 65, 1e-9);
    ck_assert_double_eq(rep.steps[0].meas_imb, 0); /* one GPU: no imbalance */
    validate_report_free(&rep);
    trace_set_free(&meas);
    trace_set_free(&pred);
}
END_TEST

START_TEST(test_committed_synthetic_traces)
{
    /* Calibrate on tests/data/synthetic-calib-*, validate on synthetic-heldout-*: generated from
     * known coefficients (1% noise), so the validation targets must be met with room. */
    char p[512];
    model_cfg base;
    hw_spec hw;
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-base.cfg"), &base, NULL), UNPAD_OK);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &hw, NULL), UNPAD_OK);
    trace_set cal = {0}, held = {0}, pred = {0};
    unpad_err e = {0};
    ck_assert_msg(trace_read(tu_path(p, sizeof p, "tests/data/synthetic-calib-bert-base.csv"), &cal, &e) == 0, "%s",
                  e.msg);
    ck_assert_int_eq(fit_check_trace(&cal, p, "h200-sxm", &e), UNPAD_OK);
    ck_assert_msg(trace_read(tu_path(p, sizeof p, "tests/data/synthetic-heldout-bert-base.csv"), &held, &e) == 0,
                  "%s", e.msg);
    calib_coef init;
    calib_default(&hw, &init);
    fit_result res;
    ck_assert_msg(fit_calibrate(&cal, 1, &base, 1, &hw, &init, &res, &e) == UNPAD_OK, "%s", e.msg);
    /* One batch size: the per-operator large-M efficiencies and the shared small-M term are not
     * separable, but the efficiency at the batch's M is what the rows pin down. */
    /* (The committed traces were made with an unscaled small-M term, 400 rows; the fit, whatever
     * its parametrization, must give that efficiency at the rows' M and width.) */
    double truth_eff = 0.62 * 8192 / (8192 + 400.0);
    for (int op = 0; op < OP_COUNT; op++)
        if (op_class_of((op_id)op) == OPC_GEMM && op_is_per_layer((op_id)op))
            ck_assert_double_eq_tol(cost_gemm_eff(&res.coef, (op_id)op, 8192, base.hidden), truth_eff,
                                    0.01 * truth_eff);
    ck_assert_int_eq(validate_predict_set(&held, &base, 1, &hw, &res.coef, &pred, &e), UNPAD_OK);
    ck_assert_int_eq(pred.n, held.n);
    validate_ctx ctx = {.models = &base, .n_models = 1, .hw = &hw, .calib = &res.coef};
    validate_report rep;
    memset(&rep, 0, sizeof rep);
    ck_assert_int_eq(validate_add_run(&rep, "held-out", &pred, &held, &ctx, &e), UNPAD_OK);
    ck_assert_int_eq(validate_finish(&rep, &e), UNPAD_OK);
    ck_assert_int_eq(rep.npairs, held.n);
    ck_assert_int_eq(rep.step_time.n, 3);
    ck_assert_double_lt(rep.step_time.median_abs_pct, 2);
    ck_assert_double_lt(rep.step_time.max_abs_pct, 5);
    ck_assert_double_lt(rep.rank_load.median_abs_pct, 3);
    ck_assert_int_eq(rep.imb_steps, 3);
    ck_assert_double_lt(rep.imb_max_diff, 0.02);
    ck_assert_double_lt(rep.op[OP_QKV_FWD].median_abs_pct, 1.5);
    validate_report_free(&rep);
    trace_set_free(&cal);
    trace_set_free(&held);
    trace_set_free(&pred);
}
END_TEST

START_TEST(test_true_coefficients_reproduce)
{
    /* A noise-free synthetic trace validated with the coefficients that made it: every row except
     * the FMHA (rebuilt lengths) is predicted to the rounding of the file, and the step time too
     * up to the FMHA's share. */
    char p[512];
    model_cfg base;
    hw_spec hw;
    unpad_dist d;
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-base.cfg"), &base, NULL), UNPAD_OK);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &hw, NULL), UNPAD_OK);
    ck_assert_int_eq(dist_load(tu_path(p, sizeof p, "models/dists/wiki512.csv"), &d, NULL), UNPAD_OK);
    calib_coef c;
    calib_default(&hw, &c);
    char path[] = "/tmp/unpad-test-validate-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    synth_opts o = {.gpus = 3, .steps = 2, .batch = 40, .seed = 9};
    unpad_err e = {0};
    ck_assert_int_eq(synth_trace_write(f, &base, &hw, &c, &d, &o, &e), UNPAD_OK);
    fclose(f);
    trace_set meas = {0}, pred = {0};
    ck_assert_int_eq(trace_read(path, &meas, &e), UNPAD_OK);
    ck_assert_int_eq(validate_predict_set(&meas, &base, 1, &hw, &c, &pred, &e), UNPAD_OK);
    validate_ctx ctx = {.models = &base, .n_models = 1, .hw = &hw, .calib = &c};
    validate_report rep;
    memset(&rep, 0, sizeof rep);
    ck_assert_int_eq(validate_add_run(&rep, path, &pred, &meas, &ctx, &e), UNPAD_OK);
    ck_assert_int_eq(validate_finish(&rep, &e), UNPAD_OK);
    for (int op = 0; op < OP_COUNT; op++) {
        if (!rep.op[op].n || op == OP_FMHA_FWD || op == OP_FMHA_BWD || op == OP_ALLREDUCE)
            continue;
        ck_assert_msg(rep.op[op].max_abs_pct < 0.01, "%s: max error %.4f%%", op_name((op_id)op),
                      rep.op[op].max_abs_pct);
    }
    ck_assert_double_lt(rep.op[OP_FMHA_FWD].median_abs_pct, 6);
    ck_assert_double_lt(rep.step_time.max_abs_pct, 2);
    validate_report_free(&rep);
    trace_set_free(&meas);
    trace_set_free(&pred);
    dist_free(&d);
    unlink(path);
}
END_TEST

START_TEST(test_streams_simulated_together)
{
    /* With a context, two FMHA groups of one layer on two streams are predicted as one tile
     * simulation over both groups' sequences: shorter than the two alone, one after the other. */
    char p[512];
    model_cfg base;
    hw_spec hw;
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-base.cfg"), &base, NULL), UNPAD_OK);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &hw, NULL), UNPAD_OK);
    calib_coef c;
    calib_default(&hw, &c);
    c.step_overhead_us = 0;
    trace_set meas = {0}, pred = {0};
    trace_row a = row(0, 0, OP_FMHA_FWD, 0, 0, 60), b = row(0, 0, OP_FMHA_FWD, 0, 20, 50);
    a.gpus = b.gpus = 1;
    a.group = a.stream = 0;
    b.group = b.stream = 1;
    a.seqs = 8, a.tokens = 8 * 64, a.sum_len2 = 8 * 64.0 * 64, a.max_len = 64;
    b.seqs = 2, b.tokens = 2 * 512, b.sum_len2 = 2 * 512.0 * 512, b.max_len = 512;
    trace_append(&meas, &a);
    trace_append(&meas, &b);
    unpad_err e = {0};
    ck_assert_int_eq(validate_predict_set(&meas, &base, 1, &hw, &c, &pred, &e), UNPAD_OK);
    double together;
    const trace_row *both[2] = {&meas.rows[0], &meas.rows[1]};
    ck_assert_int_eq(fit_rows_fmha_together(&base, &hw, &c, both, 2, &together, &e), UNPAD_OK);
    ck_assert_double_lt(together, pred.rows[0].dur_us + pred.rows[1].dur_us);
    validate_ctx ctx = {.models = &base, .n_models = 1, .hw = &hw, .calib = &c};
    validate_report rep;
    memset(&rep, 0, sizeof rep);
    ck_assert_int_eq(validate_add_run(&rep, "streams", &pred, &meas, &ctx, &e), UNPAD_OK);
    ck_assert_int_eq(validate_finish(&rep, &e), UNPAD_OK);
    ck_assert_double_eq_tol(rep.loads[0].pred_load_us, together, 1e-9);
    ck_assert_double_eq_tol(rep.loads[0].meas_load_us, 70, 1e-9);
    /* the operator statistics judge the launch as a whole: one pair, not the two groups */
    ck_assert_int_eq(rep.op[OP_FMHA_FWD].n, 1);
    ck_assert_int_eq((int)rep.npairs, 3);
    ck_assert_int_eq(rep.pairs[0].side_by_side + rep.pairs[1].side_by_side, 2);
    ck_assert_int_eq(rep.pairs[2].group, VALIDATE_GROUPED);
    ck_assert_double_eq_tol(rep.pairs[2].meas_us, 70, 1e-9);
    ck_assert_double_eq_tol(rep.pairs[2].pred_us, together, 1e-9);
    validate_report_free(&rep);
    trace_set_free(&meas);
    trace_set_free(&pred);
}
END_TEST

/* A run of one embed_fwd row on one GPU, measured meas and predicted pred us; seqs (when > 0)
 * and extra tokens change its batch. */
static void add_one_row_run(validate_report *rep, const char *name, double meas_us, double pred_us,
                            int seqs, int extra_tokens)
{
    trace_set meas = {0}, pred = {0};
    unpad_err e = {0};
    trace_row r = row(0, 0, OP_EMBED_FWD, -1, 0, meas_us);
    r.gpus = 1;
    if (seqs > 0)
        r.seqs = seqs;
    r.tokens += extra_tokens;
    trace_append(&meas, &r);
    r.dur_us = pred_us;
    trace_append(&pred, &r);
    ck_assert_int_eq(validate_add_run(rep, name, &pred, &meas, NULL, &e), UNPAD_OK);
    trace_set_free(&meas);
    trace_set_free(&pred);
}

START_TEST(test_fastest_run_agreement)
{
    /* Two runs of the same model, GPUs and batch (e.g. two grouping options): run "b" is faster
     * measured and predicted, run "c" (another batch) is not comparable. */
    validate_report rep;
    memset(&rep, 0, sizeof rep);
    unpad_err e = {0};
    double mdur[3] = {100, 90, 50}, pdur[3] = {104, 93, 40};
    const char *names[3] = {"a", "b", "traces/heldout-w-bert-base-b24-bimodal-long.csv"};
    for (int k = 0; k < 3; k++)
        add_one_row_run(&rep, names[k], mdur[k], pdur[k], k == 2 ? 9 : 0, 0);
    ck_assert_int_eq(validate_finish(&rep, &e), UNPAD_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    validate_print(f, &rep);
    fclose(f);
    ck_assert_msg(strstr(buf, "fastest of 2 comparable runs (bert-base, 1 GPUs, 4 seqs/rank): measured b, "
                              "predicted b: agree"), "%s", buf);
    ck_assert_msg(strstr(buf, "per-step time error   median 4.00% (<= 2%: NOT met), max 20.00% (<= 5%: NOT met)"),
                  "%s", buf);
    /* a name longer than the run column: its end, marked as cut (per run and per step) */
    const char *cut = "\n...-bert-base-b24-bimodal-long.csv    1 ";
    ck_assert_int_eq((int)strlen("...-bert-base-b24-bimodal-long.csv"), 34);
    ck_assert_msg(strstr(buf, cut), "%s", buf);
    ck_assert_msg(strstr(buf, "\n...-bert-base-b24-bimodal-long.csv     0 "), "%s", buf);
    free(buf);
    validate_report_free(&rep);
}
END_TEST

/* Runs of the very same batches (grouping options): the measured fastest agrees when its predicted
 * time is within 0.1% of the predicted fastest, and disagrees beyond; another batch stays out. */
START_TEST(test_same_batches_ranking)
{
    double pd_fast[2] = {93.05, 95.0};
    const char *want[2] = {"agree", "DISAGREE"};
    for (int t = 0; t < 2; t++) {
        validate_report rep;
        memset(&rep, 0, sizeof rep);
        unpad_err e = {0};
        double mdur[3] = {90, 85, 50}, pdur[3] = {93, pd_fast[t], 40};
        const char *names[3] = {"b", "d", "c"};
        for (int k = 0; k < 3; k++) /* c: same batch size, other sequences */
            add_one_row_run(&rep, names[k], mdur[k], pdur[k], 0, k == 2);
        ck_assert_int_eq(validate_finish(&rep, &e), UNPAD_OK);
        ck_assert(rep.runs[0].batches == rep.runs[1].batches);
        ck_assert(rep.runs[0].batches != rep.runs[2].batches);
        char *buf = NULL, line[256];
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        validate_print(f, &rep);
        fclose(f);
        snprintf(line, sizeof line, "fastest of 2 runs of the same batches (grouping options; bert-base, 1 GPUs): "
                                    "measured d, predicted b: %s", want[t]);
        ck_assert_msg(strstr(buf, line), "%s", buf);
        free(buf);
        validate_report_free(&rep);
    }
}
END_TEST

Suite *validate_suite(void)
{
    Suite *s = suite_create("validate");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_three_rows_by_hand);
    tcase_add_test(tc, test_streams_overlap);
    tcase_add_test(tc, test_streams_simulated_together);
    tcase_add_test(tc, test_fastest_run_agreement);
    tcase_add_test(tc, test_same_batches_ranking);
    tcase_add_test(tc, test_committed_synthetic_traces);
    tcase_add_test(tc, test_true_coefficients_reproduce);
    suite_add_tcase(s, tc);
    return s;
}
