/* check_fit.c — calibration: lengths rebuilt from a row, rows rebuilt exactly, coefficients
 * recovered from synthetic traces with known coefficients (noise, outliers), bad traces refused. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "synth.h"
#include "testutil.h"

static model_cfg base, large;
static hw_spec h200, a100;
static unpad_dist wiki;

static void setup(void)
{
    char p[512];
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-base.cfg"), &base, NULL), UNPAD_OK);
    ck_assert_int_eq(model_load(tu_path(p, sizeof p, "models/bert-large.cfg"), &large, NULL), UNPAD_OK);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/h200-sxm.cfg"), &h200, NULL), UNPAD_OK);
    ck_assert_int_eq(hw_load(tu_path(p, sizeof p, "models/hw/a100-sxm4-40g.cfg"), &a100, NULL), UNPAD_OK);
    ck_assert_int_eq(dist_load(tu_path(p, sizeof p, "models/dists/wiki512.csv"), &wiki, NULL), UNPAD_OK);
}

static void teardown(void) { dist_free(&wiki); }

static void synth_read(const model_cfg *m, const calib_coef *truth, const synth_opts *o,
                       trace_set *set)
{
    char path[] = "/tmp/unpad-test-synth-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    unpad_err e = {0};
    ck_assert_msg(synth_trace_write(f, m, &h200, truth, &wiki, o, &e) == UNPAD_OK, "%s", e.msg);
    fclose(f);
    ck_assert_msg(trace_read(path, set, &e) == UNPAD_OK, "%s", e.msg);
    unlink(path);
}

START_TEST(test_lengths_rebuilt)
{
    /* Rows from real batches: count, total and maximum exact, sum of squares within 3%. */
    dist_sampler *s;
    ck_assert_int_eq(dist_sampler_alloc(&wiki, 5, &s, NULL), UNPAD_OK);
    int ns[] = {1, 2, 3, 16, 56, 96};
    for (size_t t = 0; t < sizeof ns / sizeof *ns; t++) {
        int len[96], rb[96], n = ns[t];
        dist_sample(s, len, n);
        trace_row r = {.op = OP_FMHA_FWD, .seqs = n};
        for (int i = 0; i < n; i++) {
            r.tokens += len[i];
            r.sum_len2 += (double)len[i] * len[i];
            if (len[i] > r.max_len)
                r.max_len = len[i];
        }
        ck_assert_int_eq(fit_row_lengths(&r, 512, rb, NULL), UNPAD_OK);
        long sum = 0;
        double s2 = 0;
        int mx = 0;
        for (int i = 0; i < n; i++) {
            ck_assert_int_ge(rb[i], 1);
            ck_assert_int_le(rb[i], r.max_len);
            sum += rb[i];
            s2 += (double)rb[i] * rb[i];
            if (rb[i] > mx)
                mx = rb[i];
        }
        ck_assert_int_eq(sum, r.tokens);
        ck_assert_int_eq(mx, r.max_len);
        ck_assert_msg(fabs(s2 - r.sum_len2) <= 0.03 * r.sum_len2, "n=%d: sum_len2 %.0f rebuilt %.0f", n,
                      r.sum_len2, s2);
    }
    dist_sampler_free(s);
    /* Equal lengths come back equal. */
    trace_row eq = {.op = OP_FMHA_FWD, .seqs = 5, .tokens = 5 * 200, .sum_len2 = 5 * 200.0 * 200, .max_len = 200};
    int rb[5];
    ck_assert_int_eq(fit_row_lengths(&eq, 512, rb, NULL), UNPAD_OK);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(rb[i], 200);
    /* Impossible descriptions are refused with the row named. */
    unpad_err e = {0};
    trace_row bad = {.op = OP_FMHA_FWD, .step = 3, .seqs = 4, .tokens = 3, .sum_len2 = 3, .max_len = 1};
    ck_assert_int_eq(fit_row_lengths(&bad, 512, rb, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "fmha_fwd row (step 3, rank 0)") && strstr(e.msg, "cannot describe a batch"),
                  "%s", e.msg);
    trace_row longer = eq;
    longer.max_len = 600;
    ck_assert_int_eq(fit_row_lengths(&longer, 512, rb, &e), UNPAD_EINVAL);
}
END_TEST

START_TEST(test_row_cost_exact)
{
    /* Non-FMHA rows are linear in what the row carries: the rebuilt op_cost equals ops_step's. */
    int len[] = {17, 128, 300, 512, 45, 77};
    op_batch b = {.len = len, .n = 6, .fused = 1, .gpus = 4, .dropout = 1};
    op_cost ref[OP_COUNT];
    ck_assert_int_eq(ops_step(&large, &b, ref, NULL), UNPAD_OK);
    for (int op = 0; op < OP_COUNT; op++) {
        trace_row r = {.gpus = 4, .op = op, .seqs = 6, .tokens = ref[op].tokens,
                       .sum_len2 = ref[op].sum_len2, .max_len = ref[op].max_len,
                       .flops = ref[op].flops, .bytes = ref[op].bytes};
        op_cost oc;
        ck_assert_int_eq(fit_row_cost(&large, &r, &oc, NULL), UNPAD_OK);
        ck_assert_int_eq(oc.launches, ref[op].launches);
        ck_assert_double_eq_tol(oc.tensor_flops, ref[op].tensor_flops, 1e-9 * (ref[op].tensor_flops + 1));
        if (op_class_of((op_id)op) != OPC_ATTN)
            ck_assert_double_eq_tol(oc.rows, ref[op].rows, 1e-9 * (ref[op].rows + 1));
        ck_assert_double_eq_tol(oc.bytes, ref[op].bytes, 1e-9 * ref[op].bytes + 1e-9);
        /* and so is its predicted time, except the FMHA (rebuilt lengths, averaged orders) */
        if (op != OP_FMHA_FWD && op != OP_FMHA_BWD) {
            calib_coef c;
            calib_default(&h200, &c);
            double us;
            ck_assert_int_eq(fit_row_predict(&large, &h200, &c, &r, &us, NULL), UNPAD_OK);
            double want = op == OP_ALLREDUCE ? cost_allreduce_us(&h200, &c, ref[op].bytes, 4)
                                             : cost_op_us(&h200, &c, &ref[op]);
            ck_assert_double_eq_tol(us, want, 1e-9 * want + 1e-12);
        }
    }
    /* The unfused variant is recognised from the byte count (more launches). */
    b.fused = 0;
    op_cost unf[OP_COUNT];
    ck_assert_int_eq(ops_step(&large, &b, unf, NULL), UNPAD_OK);
    trace_row r = {.gpus = 4, .op = OP_ATTN_LN_FWD, .seqs = 6, .tokens = unf[0].tokens,
                   .sum_len2 = unf[0].sum_len2, .max_len = 512, .flops = unf[OP_ATTN_LN_FWD].flops,
                   .bytes = unf[OP_ATTN_LN_FWD].bytes};
    op_cost oc;
    ck_assert_int_eq(fit_row_cost(&large, &r, &oc, NULL), UNPAD_OK);
    ck_assert_int_eq(oc.launches, 3);
}
END_TEST

/* Recovered against true, with the tolerance each coefficient is held to. */
static void check_coef(const fit_result *res, fit_param_id p, double truth, double rel_tol)
{
    const fit_param *q = &res->param[p];
    ck_assert_msg(q->fitted, "%s not fitted", fit_param_name(p));
    ck_assert_msg(fabs(q->value - truth) <= rel_tol * truth, "%s = %.6g (true %.6g, tolerance %.1f%%)",
                  fit_param_name(p), q->value, truth, 100 * rel_tol);
    ck_assert_msg(q->se > 0 && q->se < 0.1 * truth, "%s standard error %.3g", fit_param_name(p), q->se);
}

/* Batches of 16..96 sequences of BERT-Base and 56 of BERT-Large, 1% noise, 2% of rows slowed 3x,
 * under truth with the width terms given; the fit into res. */
static void recover_two_widths(double attn_narrow, double attn_bwd_narrow, double attn_load, double attn_bwd_load,
                               fit_result *res)
{
    calib_coef truth, init;
    synth_truth_default(&h200, &truth);
    truth.gemm_narrow = 0.2; /* BERT-Base's GEMMs and memory-bound kernels slower than BERT-Large's */
    truth.bw_narrow = 0.6;
    truth.attn_narrow = attn_narrow;
    truth.attn_bwd_narrow = attn_bwd_narrow;
    truth.attn_load = attn_load;
    truth.attn_bwd_load = attn_bwd_load;
    calib_default(&h200, &init);
    int batches[] = {16, 32, 56, 96};
    trace_set sets[5];
    memset(sets, 0, sizeof sets);
    for (int i = 0; i < 4; i++) {
        synth_opts o = {.gpus = 2, .steps = 3, .batch = batches[i], .seed = 100 + i, .noise = 0.01,
                            .outlier_frac = 0.02, .outlier_scale = 3, .overhead_jitter = 0.05};
        synth_read(&base, &truth, &o, &sets[i]);
    }
    synth_opts o = {.gpus = 2, .steps = 2, .batch = 56, .seed = 200, .noise = 0.01,
                        .outlier_frac = 0.02, .outlier_scale = 3, .overhead_jitter = 0.05};
    synth_read(&large, &truth, &o, &sets[4]);
    model_cfg models[2] = {base, large};
    unpad_err e = {0};
    ck_assert_msg(fit_calibrate(sets, 5, models, 2, &h200, &init, res, &e) == UNPAD_OK, "%s", e.msg);
    for (int i = 0; i < 5; i++)
        trace_set_free(&sets[i]);
}

START_TEST(test_recover_coefficients)
{
    /* A plain least-squares fit would move every efficiency by ~4% (2% of rows at +200%); the
     * bisquare fit must set them aside. */
    fit_result res;
    recover_two_widths(0, 0, 0, 0, &res);
    check_coef(&res, FIT_GEMM_EFF, 0.62, 0.01);
    check_coef(&res, FIT_GEMM_M_HALF, 400, 0.05);
    /* FMHA from rebuilt lengths (the rows carry counts, not lengths): each direction's
     * efficiency comes back within about 6% (the tile counts of the rebuilt batches differ) */
    check_coef(&res, FIT_ATTN_EFF, 0.38, 0.07);
    check_coef(&res, FIT_ATTN_CTA_US, 1.5, 0.25);
    check_coef(&res, FIT_ATTN_BWD_EFF, 0.30, 0.07);
    ck_assert_double_eq_tol(res.param[FIT_ATTN_BWD_CTA_US].value, 2.5, 0.25 * 2.5);
    check_coef(&res, FIT_BW_EFF, 0.71, 0.01);
    check_coef(&res, FIT_LAUNCH_US, 4, 0.03);
    check_coef(&res, FIT_OPTIM_BW_EFF, 0.75, 0.03);
    check_coef(&res, FIT_COMM_EFF, 0.85, 0.02);
    check_coef(&res, FIT_STEP_OVERHEAD_US, 150, 0.03);
    check_coef(&res, FIT_GEMM_NARROW, 0.2, 0.1);
    check_coef(&res, FIT_BW_NARROW, 0.6, 0.1);
    ck_assert(res.coef.fitted);
    ck_assert_str_eq(res.coef.hw, "h200-sxm");
    /* The injected outliers (2% of ~10k GEMM and memory rows) are the ones set aside. */
    long out = res.resid[OPC_GEMM].rejected + res.resid[OPC_NORM].rejected;
    long rows = res.resid[OPC_GEMM].rows + res.resid[OPC_NORM].rows;
    ck_assert_msg(out > 0.012 * rows && out < 0.03 * rows, "%ld outliers of %ld rows", out, rows);
    /* Kept rows: 1% noise gives a median |error| near 0.67%. */
    ck_assert_double_lt(res.resid[OPC_GEMM].median_abs_pct, 1.0);
    ck_assert_double_lt(res.resid[OPC_NORM].median_abs_pct, 1.0);
    ck_assert_double_lt(res.resid[OPC_ATTN].median_abs_pct, 3.0);
    /* no FMHA width or load term in the truth: none worth the name in the fit */
    ck_assert_double_eq_tol(res.param[FIT_ATTN_NARROW].value, 0, 0.2);
    ck_assert_double_eq_tol(res.param[FIT_ATTN_BWD_NARROW].value, 0, 0.2);
    ck_assert_msg(res.param[FIT_ATTN_LOAD].fitted && res.param[FIT_ATTN_BWD_LOAD].fitted, "attn_load");
    ck_assert_double_eq_tol(res.param[FIT_ATTN_LOAD].value, 0, 0.15);
    ck_assert_double_eq_tol(res.param[FIT_ATTN_BWD_LOAD].value, 0, 0.15);
}
END_TEST

START_TEST(test_recover_fmha_width_term)
{
    /* BERT-Base's FMHA tiles faster than BERT-Large's (1/eff lower by 0.3 and 0.2 of about 2.6
     * and 3.3): the width terms come back (their efficiencies trade a few % against the tile cost
     * through the rebuilt lengths, as in test_recover_coefficients) and the FMHA rows of both
     * widths are predicted as well as without them */
    fit_result res;
    recover_two_widths(-0.9, -0.6, 0, 0, &res);
    ck_assert_msg(res.param[FIT_ATTN_NARROW].fitted && res.param[FIT_ATTN_BWD_NARROW].fitted, "not fitted");
    ck_assert_double_eq_tol(res.param[FIT_ATTN_NARROW].value, -0.9, 0.3);
    ck_assert_double_eq_tol(res.param[FIT_ATTN_BWD_NARROW].value, -0.6, 0.3);
    ck_assert_double_lt(res.resid[OPC_ATTN].median_abs_pct, 3.0);
    ck_assert_double_lt(fabs(res.resid[OPC_ATTN].bias_pct), 2.0);
}
END_TEST

START_TEST(test_recover_fmha_load_term)
{
    /* The FMHA's tiles slower in larger launches (1/eff up by 0.3 and 0.4 per unit of
     * ln(waves / 10), launches of 16 to 96 sequences) */
    fit_result res;
    recover_two_widths(-0.9, -0.6, 0.3, 0.4, &res);
    ck_assert_msg(res.param[FIT_ATTN_LOAD].fitted && res.param[FIT_ATTN_BWD_LOAD].fitted, "not fitted");
    ck_assert_double_eq_tol(res.param[FIT_ATTN_LOAD].value, 0.3, 0.15);
    ck_assert_double_eq_tol(res.param[FIT_ATTN_BWD_LOAD].value, 0.4, 0.15);
    ck_assert_double_eq_tol(res.param[FIT_ATTN_NARROW].value, -0.9, 0.3);
    ck_assert_double_eq_tol(res.param[FIT_ATTN_BWD_NARROW].value, -0.6, 0.3);
    ck_assert_double_lt(res.resid[OPC_ATTN].median_abs_pct, 3.0);
    ck_assert_double_lt(fabs(res.resid[OPC_ATTN].bias_pct), 2.0);
}
END_TEST

/* Two noiseless BERT-Base runs (4 GPUs x 20 and 48 sequences) under the default truth, with the
 * trainer's --fp8 on products or bf16's; fitted from the defaults (init). */
static void two_noiseless_runs(int fp8, trace_set sets[2], calib_coef *init, fit_result *res)
{
    calib_coef truth;
    synth_truth_default(&h200, &truth);
    truth.fp8 = fp8;
    calib_default(&h200, init);
    memset(sets, 0, 2 * sizeof *sets);
    for (int i = 0; i < 2; i++) {
        synth_opts o = {.gpus = 4, .steps = 2, .batch = i ? 48 : 20, .seed = 7 + i};
        synth_read(&base, &truth, &o, &sets[i]);
    }
    unpad_err e = {0};
    ck_assert_msg(fit_calibrate(sets, 2, &base, 1, &h200, init, res, &e) == UNPAD_OK, "%s", e.msg);
}

START_TEST(test_recover_exact_without_noise)
{
    /* No noise, no outliers: every coefficient but the FMHA pair (rebuilt lengths) comes back to
     * rounding; the FMHA pair to its approximation. */
    calib_coef init;
    trace_set sets[2];
    fit_result res;
    two_noiseless_runs(0, sets, &init, &res);
    /* Durations are written with 3 decimals (ns): relative rounding ~1e-5 on the shortest rows. */
    ck_assert_double_eq_tol(res.param[FIT_GEMM_EFF].value, 0.62, 1e-4);
    ck_assert_double_eq_tol(res.param[FIT_GEMM_M_HALF].value, 400, 0.5);
    ck_assert_double_eq_tol(res.param[FIT_BW_EFF].value, 0.71, 1e-4);
    ck_assert_double_eq_tol(res.param[FIT_LAUNCH_US].value, 4, 1e-3);
    ck_assert_double_eq_tol(res.param[FIT_OPTIM_BW_EFF].value, 0.75, 1e-4);
    ck_assert_double_eq_tol(res.param[FIT_COMM_EFF].value, 0.85, 1e-4);
    ck_assert_double_eq_tol(res.param[FIT_STEP_OVERHEAD_US].value, 150, 0.1); /* 3-decimal starts */
    /* the FMHA pair comes from rebuilt lengths (fit_row_lengths): with 64-row tiles a row's tile
     * count, which the rebuild only approximates, weighs on attn_eff by about 4% here */
    ck_assert_double_eq_tol(res.param[FIT_ATTN_EFF].value, 0.38, 0.07 * 0.38);
    ck_assert_double_eq_tol(res.param[FIT_ATTN_BWD_EFF].value, 0.30, 0.12 * 0.30);
    /* (With no noise the robust scale is the rounding itself, so a few rows count as outliers.) */
    ck_assert_double_lt(res.resid[OPC_GEMM].max_abs_pct, 0.01);
    ck_assert_double_lt(res.resid[OPC_NORM].max_abs_pct, 0.01);
    for (int i = 0; i < 2; i++)
        trace_set_free(&sets[i]);
}
END_TEST

START_TEST(test_recover_fp8)
{
    /* Rows timed with the trainer's --fp8 on products (the encoder's Linear forwards and data
     * gradients at the FP8 peak): the traces say so, the fit takes it and returns the same
     * coefficients to rounding, and the calibration is marked fp8. Read as bf16 rows, the same
     * times would need GEMM efficiencies above the bf16 peak. */
    calib_coef init;
    trace_set sets[2];
    fit_result res;
    two_noiseless_runs(1, sets, &init, &res);
    ck_assert_int_eq(sets[0].products, TRACE_FP8);
    ck_assert_int_eq(res.coef.fp8, 1);
    ck_assert_double_eq_tol(res.param[FIT_GEMM_EFF].value, 0.62, 1e-4);
    ck_assert_double_eq_tol(res.param[FIT_GEMM_M_HALF].value, 400, 0.5);
    ck_assert_double_eq_tol(res.param[FIT_BW_EFF].value, 0.71, 1e-4);
    ck_assert_double_eq_tol(res.param[FIT_LAUNCH_US].value, 4, 1e-3);
    ck_assert_double_lt(res.resid[OPC_GEMM].max_abs_pct, 0.01);
    for (int i = 0; i < 2; i++)
        sets[i].products = TRACE_BF16;
    unpad_err e = {0};
    int rc = fit_calibrate(sets, 2, &base, 1, &h200, &init, &res, &e);
    ck_assert_msg(rc != UNPAD_OK || res.resid[OPC_GEMM].median_abs_pct > 1.0 ||
                      fabs(res.param[FIT_GEMM_EFF].value - 0.62) > 0.05,
                  "FP8 times fitted as bf16 came back as if bf16: gemm_eff %g", res.param[FIT_GEMM_EFF].value);
    ck_assert_int_eq(rc == UNPAD_OK ? res.coef.fp8 : 0, 0);
    for (int i = 0; i < 2; i++)
        trace_set_free(&sets[i]);
}
END_TEST

static const char *check_file(const char *text, const char *hw, int *rc)
{
    static unpad_err e;
    char p[512];
    tu_write_tmp(p, sizeof p, ".csv", text);
    trace_set set = {0};
    memset(&e, 0, sizeof e);
    *rc = trace_read(p, &set, &e);
    if (!*rc)
        *rc = fit_check_trace(&set, p, hw, &e);
    trace_set_free(&set);
    unlink(p);
    return e.msg;
}

START_TEST(test_bad_traces)
{
    int rc;
    const char *row_h200 = "h200-sxm,bert-base,1,0,0,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,12.5\n";
    const char *row_a100 = "a100-sxm4-40g,bert-base,1,0,0,qkv_fwd,0,-1,-1,2,400,100000,300,1e9,1e6,0,12.5\n";
    char text[2048];
    /* wrong header */
    const char *m = check_file("hw,model,gpus\nh200-sxm,bert-base,1\n", "h200-sxm", &rc);
    ck_assert_int_eq(rc, UNPAD_EINVAL);
    ck_assert_msg(strstr(m, ":1: not a trace: expected the header"), "%s", m);
    /* empty file, header only */
    m = check_file("", "h200-sxm", &rc);
    ck_assert_msg(rc && strstr(m, "empty file"), "%s", m);
    snprintf(text, sizeof text, "# synthetic\n%s\n", TRACE_HEADER);
    m = check_file(text, "h200-sxm", &rc);
    ck_assert_msg(rc == UNPAD_EINVAL && strstr(m, "no rows (only the header)"), "%s", m);
    /* mixed hardware */
    snprintf(text, sizeof text, "%s\n%s%s", TRACE_HEADER, row_h200, row_a100);
    m = check_file(text, NULL, &rc);
    ck_assert_msg(rc == UNPAD_EINVAL && strstr(m, "mixed hardware in one trace: rows of 'h200-sxm' and "
                                                 "'a100-sxm4-40g'"), "%s", m);
    /* other hardware than --hw */
    snprintf(text, sizeof text, "%s\n%s", TRACE_HEADER, row_a100);
    m = check_file(text, "h200-sxm", &rc);
    ck_assert_msg(rc == UNPAD_EINVAL && strstr(m, "measured on 'a100-sxm4-40g' but --hw is 'h200-sxm'"), "%s", m);
    snprintf(text, sizeof text, "%s\n%s", TRACE_HEADER, row_h200);
    m = check_file(text, "h200-sxm", &rc);
    ck_assert_int_eq(rc, UNPAD_OK);
    /* measured by the fp32 build: not operators the model describes; FP8 products are (an FP8
     * calibration, test_recover_fp8) */
    snprintf(text, sizeof text, "# unpad-train\n# products: fp8\n%s\n%s", TRACE_HEADER, row_h200);
    m = check_file(text, "h200-sxm", &rc);
    ck_assert_msg(rc == UNPAD_OK, "%s", m);
    snprintf(text, sizeof text, "# products: fp32\n%s\n%s", TRACE_HEADER, row_h200);
    m = check_file(text, "h200-sxm", &rc);
    ck_assert_msg(rc == UNPAD_EINVAL && strstr(m, ":1: measured with fp32 products (the fp32 build)"), "%s", m);
    snprintf(text, sizeof text, "# products: bf16\n%s\n%s", TRACE_HEADER, row_h200);
    m = check_file(text, "h200-sxm", &rc);
    ck_assert_msg(rc == UNPAD_OK, "%s", m);
    /* a model nobody configured */
    trace_set set = {0};
    trace_row r = {.hw = "h200-sxm", .model = "bert-huge", .gpus = 1, .op = OP_QKV_FWD, .seqs = 1,
                   .tokens = 10, .sum_len2 = 100, .max_len = 10, .flops = 1e6, .bytes = 1e3, .dur_us = 3};
    trace_append(&set, &r);
    calib_coef init;
    calib_default(&h200, &init);
    fit_result res;
    unpad_err e = {0};
    ck_assert_int_eq(fit_calibrate(&set, 1, &base, 1, &h200, &init, &res, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "model 'bert-huge'") && strstr(e.msg, "--model"), "%s", e.msg);
    /* traces of two kinds of products in one calibration are refused before any fit */
    trace_set two[2] = {set, set};
    two[1].products = TRACE_FP8;
    two[1].products_line = 1;
    ck_assert_int_eq(fit_calibrate(two, 2, &base, 1, &h200, &init, &res, &e), UNPAD_EINVAL);
    ck_assert_msg(strstr(e.msg, "trace 2 of 2") && strstr(e.msg, "fp8") && strstr(e.msg, "bf16"), "%s", e.msg);
    int n = 1;
    model_cfg ms[2] = {base};
    char dir[512];
    ck_assert_int_ne(fit_models_resolve(&set, 1, tu_path(dir, sizeof dir, "models"), ms, &n, 2, &e), UNPAD_OK);
    ck_assert_msg(strstr(e.msg, "bert-huge"), "%s", e.msg);
    strcpy(set.rows[0].model, "bert-large");
    ck_assert_int_eq(fit_models_resolve(&set, 1, dir, ms, &n, 2, &e), UNPAD_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(ms[1].name, "bert-large");
    /* too few rows to fit */
    strcpy(set.rows[0].model, "bert-base");
    ck_assert_int_eq(fit_calibrate(&set, 1, &base, 1, &h200, &init, &res, &e), UNPAD_ERANGE);
    ck_assert_msg(strstr(e.msg, "too few"), "%s", e.msg);
    trace_set_free(&set);
}
END_TEST

/* One measured run alone (BERT-Base, 16 Wikipedia-length sequences, four traced steps): its token
 * counts are too alike to separate the small-M term from the efficiencies, and its FMHA batches
 * the tile cost from the efficiency. Both fits once stopped with an efficiency above 1; now each
 * drops the term it cannot determine, says so, and the rest is fitted. */
START_TEST(test_one_measured_run)
{
    char p[512];
    trace_set set = {0};
    unpad_err e = {0};
    ck_assert_msg(trace_read(tu_path(p, sizeof p, "traces/calib-w-bert-base-b16-wiki512.csv"), &set, &e) == 0,
                  "%s", e.msg);
    calib_coef init;
    calib_default(&h200, &init);
    fit_result *res = calloc(1, sizeof *res);
    ck_assert_ptr_nonnull(res);
    ck_assert_msg(fit_calibrate(&set, 1, &base, 1, &h200, &init, res, &e) == UNPAD_OK, "%s", e.msg);
    ck_assert_double_eq(res->coef.gemm_m_half, 0);
    ck_assert_ptr_nonnull(strstr(res->notes, "gemm_m_half: the rows' sizes do not separate"));
    for (int op = 0; op < OP_COUNT; op++)
        if (res->op[op].fitted)
            ck_assert_msg(res->coef.op_eff[op] > 0 && res->coef.op_eff[op] <= 1, "%s %g", op_name((op_id)op),
                          res->coef.op_eff[op]);
    ck_assert(res->coef.attn_eff > 0 && res->coef.attn_eff <= 1);
    ck_assert(res->coef.attn_bwd_eff > 0 && res->coef.attn_bwd_eff <= 1);
    free(res);
    trace_set_free(&set);
}
END_TEST

START_TEST(test_transfer)
{
    calib_coef src, dst;
    synth_truth_default(&h200, &src);
    src.fitted = 1;
    fit_transfer(&src, &h200, &a100, &dst);
    ck_assert_str_eq(dst.hw, "a100-sxm4-40g");
    ck_assert_double_eq(dst.gemm_eff, 0.62);
    ck_assert_double_eq(dst.attn_eff, 0.38);
    ck_assert_double_eq(dst.bw_eff, 0.71);
    ck_assert_double_eq(dst.comm_eff, 0.85);
    ck_assert_double_eq_tol(dst.gemm_m_half, 400.0 * 108 / 132, 1e-9);
    ck_assert_double_eq_tol(dst.attn_cta_us, 1.5 * 1.98 / 1.41, 1e-9);
    ck_assert_double_eq_tol(dst.launch_us, 4 * 3.0 / 2.5, 1e-9);
    ck_assert_double_eq(dst.step_overhead_us, 150);
}
END_TEST

Suite *fit_suite(void)
{
    Suite *s = suite_create("fit");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_lengths_rebuilt);
    tcase_add_test(tc, test_row_cost_exact);
    tcase_add_test(tc, test_recover_coefficients);
    tcase_add_test(tc, test_recover_fmha_width_term);
    tcase_add_test(tc, test_recover_fmha_load_term);
    tcase_add_test(tc, test_recover_exact_without_noise);
    tcase_add_test(tc, test_recover_fp8);
    tcase_add_test(tc, test_bad_traces);
    tcase_add_test(tc, test_one_measured_run);
    tcase_add_test(tc, test_transfer);
    suite_add_tcase(s, tc);
    return s;
}
